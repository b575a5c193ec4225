// Tensor: storage for every dtype, sharing (copies, slices, reshapes) versus deep copies, the
// storage of released tensors reused without touching live ones, and the errors that misuse gets.
#include <cstring>
#include <thread>
#include <tuple>
#include <vector>

#include <boost/test/unit_test.hpp>

#include "core/tensor.hpp"
#include "test/support/expect_error.hpp"

using namespace troupe;
using troupe::testing::contains;
using troupe::testing::error_of;

namespace {

using AllTypes = std::tuple<float, half, double, int32_t, int64_t, uint8_t, bool>;

// n distinct-looking values of T (bools alternate), exactly representable.
template <class T>
std::vector<T> sample_values(int n) {
  std::vector<T> v;
  for (int i = 0; i < n; ++i) {
    if constexpr (std::is_same_v<T, bool>) v.push_back(i % 3 == 1);
    else if constexpr (std::is_same_v<T, half>) v.push_back(half(0.5f * float(i) - 3.0f));
    else if constexpr (std::is_same_v<T, uint8_t>) v.push_back(uint8_t(200 + i));
    else v.push_back(T(3 * i - 7));
  }
  return v;
}

template <class T>
bool same_values(const std::vector<T>& a, const std::vector<T>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (!(a[i] == b[i])) return false;
  return true;
}

Tensor iota_matrix(int64_t rows, int64_t cols) {
  std::vector<float> v(std::size_t(rows * cols));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = float(i);
  return Tensor::from_vector<float>(v, Shape{rows, cols});
}

}  // namespace

BOOST_AUTO_TEST_CASE_TEMPLATE(a_tensor_of_every_dtype_holds_the_values_it_was_made_from, T, AllTypes) {
  auto values = sample_values<T>(12);
  Tensor t = Tensor::from_vector<T>(values, Shape{3, 4});
  BOOST_TEST(t.is_initialized());
  BOOST_TEST(int(t.dtype()) == int(dtype_v<T>));
  BOOST_TEST((t.shape() == Shape{3, 4}));
  BOOST_TEST(t.num_elements() == 12);
  BOOST_TEST(t.byte_size() == 12 * sizeof(T));
  BOOST_TEST(t.byte_size() == 12 * size_of(dtype_v<T>));
  BOOST_TEST(same_values(t.template to_vector<T>(), values));
  BOOST_TEST(t.host_accessible());
  BOOST_TEST(t.device_name() == host_allocator().device_name());
}

BOOST_AUTO_TEST_CASE_TEMPLATE(a_scalar_of_every_dtype_has_rank_zero_and_one_value, T, AllTypes) {
  T value = sample_values<T>(2)[1];
  Tensor t = Tensor::scalar<T>(value);
  BOOST_TEST(t.shape().is_scalar());
  BOOST_TEST(t.num_elements() == 1);
  BOOST_TEST((t.template scalar_value<T>() == value));
}

BOOST_AUTO_TEST_CASE_TEMPLATE(zeros_of_every_dtype_are_all_zero_bytes, T, AllTypes) {
  Tensor t = Tensor::zeros(dtype_v<T>, Shape{5, 7});
  auto values = t.template to_vector<T>();
  BOOST_TEST(values.size() == 35u);
  for (auto v : values) BOOST_TEST((v == T(0)));
}

BOOST_AUTO_TEST_CASE(a_vector_that_does_not_fill_the_shape_is_refused_naming_both) {
  auto m = error_of([] { Tensor::from_vector<float>({1, 2, 3}, Shape{2, 2}); },
                    ErrorCode::invalid_argument);
  BOOST_TEST(contains(m, "3 values"), m);
  BOOST_TEST(contains(m, "[2,2]"), m);
}

BOOST_AUTO_TEST_CASE(a_tensor_of_invalid_dtype_cannot_be_allocated) {
  error_of([] { Tensor(DType::invalid, Shape{2}); }, ErrorCode::invalid_argument);
}

BOOST_AUTO_TEST_CASE(a_default_tensor_is_empty_and_has_no_data) {
  Tensor t;
  BOOST_TEST(!t.is_initialized());
  BOOST_TEST(t.buffer_use_count() == 0);
  auto m = error_of([&] { t.raw_data(); }, ErrorCode::failed_precondition);
  BOOST_TEST(contains(m, "empty tensor"), m);
  BOOST_TEST(!t.copy().is_initialized());
}

BOOST_AUTO_TEST_CASE(reading_a_float_tensor_as_double_is_refused_naming_both_dtypes) {
  Tensor t = Tensor::from_vector<float>({1, 2});
  auto m = error_of([&] { t.data<double>(); }, ErrorCode::invalid_argument);
  BOOST_TEST(contains(m, "float32"), m);
  BOOST_TEST(contains(m, "float64"), m);
  error_of([&] { t.scalar_value<int32_t>(); }, ErrorCode::invalid_argument);
  error_of([&] { t.to_vector<bool>(); }, ErrorCode::invalid_argument);
  error_of([&] { Tensor::scalar<half>(half(1.0f)).data<uint8_t>(); }, ErrorCode::invalid_argument);
}

BOOST_AUTO_TEST_CASE(scalar_value_of_a_tensor_with_several_elements_is_refused) {
  auto m = error_of([] { Tensor::from_vector<float>({1, 2}).scalar_value<float>(); },
                    ErrorCode::invalid_argument);
  BOOST_TEST(contains(m, "float32[2]"), m);
  // One element in any shape is fine.
  BOOST_TEST(Tensor::from_vector<float>({4}, Shape{1, 1}).scalar_value<float>() == 4.0f);
}

BOOST_AUTO_TEST_CASE(copying_a_tensor_shares_its_buffer_and_counts_references) {
  Tensor a = iota_matrix(4, 3);
  BOOST_TEST(a.buffer_use_count() == 1);
  {
    Tensor b = a;
    BOOST_TEST(b.shares_buffer_with(a));
    BOOST_TEST(a.buffer_use_count() == 2);
    b.data<float>()[0] = 42;
    BOOST_TEST(a.data<float>()[0] == 42.0f);
    Tensor c;
    c = b;
    BOOST_TEST(a.buffer_use_count() == 3);
  }
  BOOST_TEST(a.buffer_use_count() == 1);
  Tensor moved = std::move(a);
  BOOST_TEST(moved.buffer_use_count() == 1);
  BOOST_TEST(!a.is_initialized());  // NOLINT(bugprone-use-after-move): moved-from is empty
}

BOOST_AUTO_TEST_CASE(a_large_buffer_is_returned_to_the_allocator_when_the_last_reference_goes) {
  std::size_t before = host_allocator().bytes_in_use();
  {
    Tensor t(DType::float64, Shape{1000});
    BOOST_TEST(host_allocator().bytes_in_use() == before + 8000);
    Tensor shared = t.slice(10, 20);
    t = Tensor();
    BOOST_TEST(host_allocator().bytes_in_use() == before + 8000);  // the slice keeps it alive
  }
  BOOST_TEST(host_allocator().bytes_in_use() == before);
}

BOOST_AUTO_TEST_CASE(a_released_tensors_storage_serves_the_threads_next_and_no_live_value_is_overwritten) {
  {
    Tensor a = Tensor::scalar(1.0f);
    const void* storage = a.raw_data();
    a = Tensor();
    Tensor b = Tensor::scalar(2.0f);
    BOOST_TEST(b.raw_data() == storage);  // kept by this thread for its next tensor
    BOOST_TEST(b.scalar_value<float>() == 2.0f);
  }
  // Values made here and released on another thread (which keeps what it can of their storage
  // and makes its own values from it), while others stay alive here; then that thread ends.
  std::vector<Tensor> alive, handed;
  for (int i = 0; i < 100; ++i) alive.push_back(Tensor::scalar(int32_t(i)));
  for (int i = 0; i < 5000; ++i)
    handed.push_back(i % 10 ? Tensor::scalar(int32_t(1000 + i)) : Tensor::from_vector<float>({float(i), 1.0f, 2.0f}));
  int wrong = 0;
  std::thread other([&] {
    for (int i = 0; i < 5000; ++i) {
      const bool scalar = i % 10 != 0;
      if (scalar ? handed[i].scalar_value<int32_t>() != 1000 + i : handed[i].to_vector<float>()[0] != float(i)) ++wrong;
      handed[i] = Tensor();
    }
    std::vector<Tensor> own;
    for (int i = 0; i < 5000; ++i) own.push_back(Tensor::scalar(int64_t(-i)));
    for (int i = 0; i < 5000; ++i)
      if (own[i].scalar_value<int64_t>() != -i) ++wrong;
  });
  other.join();
  BOOST_TEST(wrong == 0);
  std::vector<Tensor> more;
  for (int i = 0; i < 5000; ++i) more.push_back(Tensor::scalar(double(i)));
  for (int i = 0; i < 5000; ++i) BOOST_TEST_REQUIRE(more[i].scalar_value<double>() == double(i));
  for (int i = 0; i < 100; ++i) BOOST_TEST_REQUIRE(alive[i].scalar_value<int32_t>() == i);
}

BOOST_AUTO_TEST_CASE(a_slice_shares_the_buffer_and_starts_at_its_first_row) {
  Tensor t = iota_matrix(5, 3);
  Tensor s = t.slice(1, 4);
  BOOST_TEST(s.shares_buffer_with(t));
  BOOST_TEST((s.shape() == Shape{3, 3}));
  BOOST_TEST(int(s.dtype()) == int(DType::float32));
  BOOST_TEST(static_cast<char*>(s.raw_data()) - static_cast<char*>(t.raw_data()) == 3 * 4);
  BOOST_TEST((s.to_vector<float>() == std::vector<float>{3, 4, 5, 6, 7, 8, 9, 10, 11}));
  s.data<float>()[0] = -1;  // writes through the view are visible in the original
  BOOST_TEST(t.data<float>()[3] == -1.0f);
}

BOOST_AUTO_TEST_CASE(a_slice_of_a_slice_adds_the_offsets) {
  Tensor t = iota_matrix(6, 2);
  Tensor s = t.slice(2, 6).slice(1, 3);  // rows 3 and 4 of t
  BOOST_TEST(s.shares_buffer_with(t));
  BOOST_TEST(static_cast<char*>(s.raw_data()) - static_cast<char*>(t.raw_data()) == 3 * 2 * 4);
  BOOST_TEST((s.to_vector<float>() == std::vector<float>{6, 7, 8, 9}));
}

BOOST_AUTO_TEST_CASE(slices_of_every_rank_and_dtype_address_whole_rows) {
  Tensor v = Tensor::from_vector<int64_t>({10, 11, 12, 13});
  BOOST_TEST((v.slice(2, 4).to_vector<int64_t>() == std::vector<int64_t>{12, 13}));
  std::vector<uint8_t> bytes(2 * 3 * 4);
  for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = uint8_t(i);
  Tensor cube = Tensor::from_vector<uint8_t>(bytes, Shape{2, 3, 4});
  Tensor second = cube.slice(1, 2);
  BOOST_TEST((second.shape() == Shape{1, 3, 4}));
  BOOST_TEST(int(second.data<uint8_t>()[0]) == 12);
}

BOOST_AUTO_TEST_CASE(an_empty_slice_has_zero_rows) {
  Tensor t = iota_matrix(4, 3);
  Tensor s = t.slice(2, 2);
  BOOST_TEST((s.shape() == Shape{0, 3}));
  BOOST_TEST(s.num_elements() == 0);
  BOOST_TEST((t.slice(0, 4).shape() == t.shape()));
}

BOOST_AUTO_TEST_CASE(a_slice_out_of_range_is_refused_naming_the_range_and_tensor) {
  Tensor t = iota_matrix(4, 3);
  auto m = error_of([&] { t.slice(3, 5); }, ErrorCode::invalid_argument);
  BOOST_TEST(contains(m, "[3, 5)"), m);
  BOOST_TEST(contains(m, "float32[4,3]"), m);
  error_of([&] { t.slice(-1, 2); }, ErrorCode::invalid_argument);
  error_of([&] { t.slice(3, 2); }, ErrorCode::invalid_argument);
  m = error_of([] { Tensor::scalar(1.0f).slice(0, 1); }, ErrorCode::invalid_argument);
  BOOST_TEST(contains(m, "scalar"), m);
}

BOOST_AUTO_TEST_CASE(a_reshaped_tensor_shares_the_buffer_under_the_new_shape) {
  Tensor t = iota_matrix(4, 3);
  Tensor r = t.reshaped(Shape{2, 6});
  BOOST_TEST(r.shares_buffer_with(t));
  BOOST_TEST((r.shape() == Shape{2, 6}));
  BOOST_TEST(r.raw_data() == t.raw_data());
  BOOST_TEST((r.to_vector<float>() == t.to_vector<float>()));
  BOOST_TEST((t.shape() == Shape{4, 3}));  // the original keeps its shape
  // A reshaped slice keeps the slice's offset.
  Tensor rs = t.slice(2, 4).reshaped(Shape{6});
  BOOST_TEST((rs.to_vector<float>() == std::vector<float>{6, 7, 8, 9, 10, 11}));
  BOOST_TEST(t.reshaped(Shape{12}).reshaped(Shape{1, 12, 1}).shares_buffer_with(t));
}

BOOST_AUTO_TEST_CASE(reshaping_to_another_element_count_is_refused_naming_both_shapes) {
  Tensor t = iota_matrix(4, 3);
  auto m = error_of([&] { t.reshaped(Shape{5, 2}); }, ErrorCode::invalid_argument);
  BOOST_TEST(contains(m, "[4,3]"), m);
  BOOST_TEST(contains(m, "[5,2]"), m);
  BOOST_TEST(contains(m, "12"), m);
  BOOST_TEST(contains(m, "10"), m);
}

BOOST_AUTO_TEST_CASE(copy_makes_a_deep_copy_with_the_same_values) {
  Tensor t = iota_matrix(3, 3);
  Tensor c = t.copy();
  BOOST_TEST(!c.shares_buffer_with(t));
  BOOST_TEST(c.buffer_use_count() == 1);
  BOOST_TEST((c.shape() == t.shape()));
  BOOST_TEST((c.to_vector<float>() == t.to_vector<float>()));
  c.data<float>()[0] = 99;
  BOOST_TEST(t.data<float>()[0] == 0.0f);
  BOOST_TEST(c.device_name() == t.device_name());
}

BOOST_AUTO_TEST_CASE(the_copy_of_a_slice_holds_only_the_slice) {
  Tensor t = iota_matrix(5, 2);
  Tensor c = t.slice(3, 5).copy();
  BOOST_TEST(!c.shares_buffer_with(t));
  BOOST_TEST((c.shape() == Shape{2, 2}));
  BOOST_TEST((c.to_vector<float>() == std::vector<float>{6, 7, 8, 9}));
}

BOOST_AUTO_TEST_CASE(to_string_prints_dtype_shape_and_values_eliding_long_tensors) {
  Tensor t = Tensor::from_vector<float>({1, 2.5f, 3, 4, 5, 6}, Shape{2, 3});
  BOOST_TEST(t.describe() == "float32[2,3]");
  BOOST_TEST(t.to_string() == "float32[2,3] {1, 2.5, 3, 4, 5, 6}");
  BOOST_TEST(t.to_string(2) == "float32[2,3] {1, 2.5, ...}");
  BOOST_TEST(Tensor::from_vector<uint8_t>({7, 255}).to_string() == "uint8[2] {7, 255}");
  BOOST_TEST(Tensor::scalar(half(0.5f)).to_string() == "float16[] {0.5}");
  BOOST_TEST(Tensor::from_vector<bool>({true, false}).to_string() == "bool[2] {true, false}");
  BOOST_TEST(Tensor().to_string() == "invalid[]");
}
