// Shape: dimensions, element counts, printing, limits; broadcast_shapes against numpy's rules.
#include <boost/test/unit_test.hpp>

#include "core/shape.hpp"
#include "test/support/expect_error.hpp"

using namespace troupe;
using troupe::testing::contains;
using troupe::testing::error_of;

BOOST_AUTO_TEST_CASE(a_default_shape_is_a_scalar_of_one_element) {
  Shape s;
  BOOST_TEST(s.rank() == 0);
  BOOST_TEST(s.is_scalar());
  BOOST_TEST(s.num_elements() == 1);
  BOOST_TEST(s.to_string() == "[]");
  BOOST_TEST(s.dims().empty());
  BOOST_TEST((s == Shape{}));
}

BOOST_AUTO_TEST_CASE(a_shape_knows_its_dimensions_and_element_count) {
  Shape s{2, 3, 4};
  BOOST_TEST(s.rank() == 3);
  BOOST_TEST(!s.is_scalar());
  BOOST_TEST(s.dim(1) == 3);
  BOOST_TEST(s[2] == 4);
  BOOST_TEST(s.num_elements() == 24);
  BOOST_TEST(s.to_string() == "[2,3,4]");
  BOOST_TEST((s.dims() == std::vector<int64_t>{2, 3, 4}));
  std::vector<int64_t> walked(s.begin(), s.end());
  BOOST_TEST((walked == std::vector<int64_t>{2, 3, 4}));
  BOOST_TEST((Shape(std::vector<int64_t>{2, 3, 4}) == s));
}

BOOST_AUTO_TEST_CASE(a_zero_dimension_makes_an_empty_shape) {
  Shape s{3, 0, 5};
  BOOST_TEST(s.num_elements() == 0);
  BOOST_TEST(s.to_string() == "[3,0,5]");
}

BOOST_AUTO_TEST_CASE(shapes_are_equal_only_with_the_same_rank_and_dimensions) {
  BOOST_TEST((Shape{2, 3} == Shape{2, 3}));
  BOOST_TEST((Shape{2, 3} != Shape{3, 2}));
  BOOST_TEST((Shape{6} != Shape{6, 1}));
  BOOST_TEST((Shape{1} != Shape{}));
}

BOOST_AUTO_TEST_CASE(push_back_and_set_dim_change_a_shape_in_place) {
  Shape s;
  s.push_back(4);
  s.push_back(5);
  BOOST_TEST((s == Shape{4, 5}));
  s.set_dim(0, 7);
  BOOST_TEST((s == Shape{7, 5}));
}

BOOST_AUTO_TEST_CASE(a_negative_dimension_is_refused) {
  auto m = error_of([] { (void)Shape{2, -3}; }, ErrorCode::invalid_argument);
  BOOST_TEST(contains(m, "-3"), m);
}

BOOST_AUTO_TEST_CASE(a_rank_above_the_maximum_is_refused_naming_it) {
  Shape s{1, 1, 1, 1, 1, 1, 1, 1};
  BOOST_TEST(s.rank() == Shape::kMaxRank);
  auto m = error_of([&] { s.push_back(1); }, ErrorCode::invalid_argument);
  BOOST_TEST(contains(m, "8"), m);
  error_of([] { (void)Shape(std::vector<int64_t>(9, 1)); }, ErrorCode::invalid_argument);
}

BOOST_AUTO_TEST_CASE(equal_shapes_broadcast_to_themselves) {
  BOOST_TEST((broadcast_shapes(Shape{2, 3}, Shape{2, 3}) == Shape{2, 3}));
  BOOST_TEST((broadcast_shapes(Shape{}, Shape{}) == Shape{}));
}

BOOST_AUTO_TEST_CASE(a_scalar_broadcasts_against_anything_in_either_order) {
  BOOST_TEST((broadcast_shapes(Shape{}, Shape{3, 4}) == Shape{3, 4}));
  BOOST_TEST((broadcast_shapes(Shape{3, 4}, Shape{}) == Shape{3, 4}));
  BOOST_TEST((broadcast_shapes(Shape{}, Shape{0, 4}) == Shape{0, 4}));
}

BOOST_AUTO_TEST_CASE(dimensions_of_one_stretch_and_missing_leading_dimensions_count_as_one) {
  BOOST_TEST((broadcast_shapes(Shape{3, 1}, Shape{1, 4}) == Shape{3, 4}));
  BOOST_TEST((broadcast_shapes(Shape{1, 4}, Shape{3, 1}) == Shape{3, 4}));
  BOOST_TEST((broadcast_shapes(Shape{2, 3, 4}, Shape{4}) == Shape{2, 3, 4}));
  BOOST_TEST((broadcast_shapes(Shape{4}, Shape{2, 3, 4}) == Shape{2, 3, 4}));
  BOOST_TEST((broadcast_shapes(Shape{5, 1, 3}, Shape{4, 1}) == Shape{5, 4, 3}));
  BOOST_TEST((broadcast_shapes(Shape{1}, Shape{2, 1, 1}) == Shape{2, 1, 1}));
  // A dimension of 0 meets a 1 and stays 0, as in numpy.
  BOOST_TEST((broadcast_shapes(Shape{0, 3}, Shape{1, 3}) == Shape{0, 3}));
}

BOOST_AUTO_TEST_CASE(incompatible_shapes_are_refused_naming_both) {
  auto m = error_of([] { broadcast_shapes(Shape{2, 3}, Shape{4}); }, ErrorCode::invalid_argument);
  BOOST_TEST(contains(m, "[2,3]"), m);
  BOOST_TEST(contains(m, "[4]"), m);
  m = error_of([] { broadcast_shapes(Shape{3, 2}, Shape{2, 3}); }, ErrorCode::invalid_argument);
  BOOST_TEST(contains(m, "[3,2]"), m);
  BOOST_TEST(contains(m, "[2,3]"), m);
  // 0 does not stretch to 2.
  error_of([] { broadcast_shapes(Shape{0}, Shape{2}); }, ErrorCode::invalid_argument);
}
