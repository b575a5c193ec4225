// Input pipelines: shard, shuffle, map, batch, repeat, prefetch over tensors and streamed IDX
// and CSV files, and a Prefetcher feeding a queue that a graph dequeues from.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <numeric>
#include <thread>

#include "actors/prefetch.hpp"
#include "ops/all.hpp"
#include "ops/data/dataset.hpp"
#include "ops/data/idx.hpp"
#include "ops/data/pipeline.hpp"
#include "test/data/idx_files.hpp"
#include "test/support/expect_error.hpp"

using namespace troupe;
using troupe::testing::contains;
using troupe::testing::error_of;

namespace {

data::Pipeline numbers(int n) {
  std::vector<int32_t> v(static_cast<std::size_t>(n));
  std::iota(v.begin(), v.end(), 0);
  return data::Pipeline::from_tensors({Tensor::from_vector<int32_t>(v)});
}

// Every element's first component, as ints, flattened in order.
std::vector<int32_t> drain(data::Iterator& it) {
  std::vector<int32_t> out;
  while (auto e = it.next()) out.insert(out.end(), (*e)[0].data<int32_t>(), (*e)[0].data<int32_t>() + (*e)[0].num_elements());
  return out;
}

std::vector<int32_t> drain(const data::Pipeline& p, std::vector<int64_t>* sizes = nullptr) {
  std::vector<int32_t> out;
  auto it = p.begin();
  while (auto e = it->next()) {
    const Tensor& t = (*e)[0];
    if (sizes) sizes->push_back(t.num_elements());
    out.insert(out.end(), t.data<int32_t>(), t.data<int32_t>() + t.num_elements());
  }
  return out;
}

// What next() gives, one string each, `count` times: the first component's values, an error's
// code and message, or "end".
std::vector<std::string> outcomes(data::Iterator& it, int count) {
  std::vector<std::string> out;
  for (int i = 0; i < count; ++i) {
    try {
      auto e = it.next();
      if (!e) {
        out.push_back("end");
        continue;
      }
      const Tensor& t = (*e)[0];
      std::string values;
      for (int64_t j = 0; j < t.num_elements(); ++j) values += std::to_string(t.data<int32_t>()[j]) + " ";
      out.push_back(values);
    } catch (const Error& e) {
      out.push_back(std::string("error ") + to_string(e.code()) + ": " + e.what());
    }
  }
  return out;
}

std::string write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  if (!out) throw std::runtime_error("cannot write " + path);
  return path;
}

}  // namespace

BOOST_AUTO_TEST_CASE(shard_takes_every_nth_element_and_batch_keeps_or_drops_the_rest) {
  std::vector<int64_t> sizes;
  auto got = drain(numbers(10).shard(2, 1).batch(2), &sizes);
  BOOST_TEST(got == (std::vector<int32_t>{1, 3, 5, 7, 9}), boost::test_tools::per_element());
  BOOST_TEST(sizes == (std::vector<int64_t>{2, 2, 1}), boost::test_tools::per_element());
  sizes.clear();
  drain(numbers(10).shard(2, 1).batch(2, true), &sizes);
  BOOST_TEST(sizes == (std::vector<int64_t>{2, 2}), boost::test_tools::per_element());
  error_of([] { numbers(10).shard(2, 2); }, ErrorCode::invalid_argument);
}

BOOST_AUTO_TEST_CASE(shuffle_permutes_by_seed_and_each_epoch_differently) {
  auto two_epochs = drain(numbers(100).shuffle(30, 5).repeat(2));
  BOOST_REQUIRE(two_epochs.size() == 200u);
  std::vector<int32_t> first(two_epochs.begin(), two_epochs.begin() + 100), second(two_epochs.begin() + 100, two_epochs.end());
  std::vector<int32_t> all(100);
  std::iota(all.begin(), all.end(), 0);
  auto sorted = [](std::vector<int32_t> v) { return std::sort(v.begin(), v.end()), v; };
  BOOST_TEST(sorted(first) == all, boost::test_tools::per_element());
  BOOST_TEST(sorted(second) == all, boost::test_tools::per_element());
  BOOST_TEST((first != all), "shuffled");
  BOOST_TEST((first != second), "each epoch its own order");
  BOOST_TEST((drain(numbers(100).shuffle(30, 5).repeat(2)) == two_epochs), "the same seed, the same orders");
}

BOOST_AUTO_TEST_CASE(a_shuffle_buffer_that_holds_the_whole_pass_follows_the_datasets_permutation) {
  auto two_epochs = drain(numbers(50).shuffle(50, 7).repeat(2));
  BOOST_REQUIRE(two_epochs.size() == 100u);
  for (int64_t epoch = 0; epoch < 2; ++epoch) {
    auto order = data::permutation(50, 7, epoch);
    std::vector<int32_t> expected(order.begin(), order.end());
    std::vector<int32_t> got(two_epochs.begin() + 50 * epoch, two_epochs.begin() + 50 * (epoch + 1));
    BOOST_TEST(got == expected, boost::test_tools::per_element());
  }
  BOOST_TEST((drain(numbers(50).shuffle(1000, 7)) == drain(numbers(50).shuffle(50, 7))), "any buffer that holds it");
}

// A resumed run reads from (epoch e, element n) on: exactly what an uninterrupted run yields
// from there, for every kind of stage (a partial shuffle draws its buffer as before).
BOOST_AUTO_TEST_CASE(a_pipeline_begun_at_an_epoch_and_element_yields_what_a_full_run_yields_from_there) {
  const std::vector<data::Pipeline> pipelines = {
      numbers(37).shuffle(10, 3).batch(4).repeat(3),  // a buffer shorter than the pass
      numbers(37).shuffle(37, 3).batch(4).repeat(3),  // the whole pass
      numbers(37).shard(3, 1).shuffle(5, 9).batch(2, true).repeat(3),
      numbers(37).batch(5).repeat(-1)};
  for (std::size_t k = 0; k < pipelines.size(); ++k) {
    const data::Pipeline& p = pipelines[k];
    std::vector<std::vector<int32_t>> full;  // the elements of a run from the start, one per element
    auto it = p.begin();
    for (int i = 0; i < 40; ++i) {
      auto e = it->next();
      if (!e) break;
      full.emplace_back((*e)[0].data<int32_t>(), (*e)[0].data<int32_t>() + (*e)[0].num_elements());
    }
    const int64_t per_epoch = k == 2 ? 6 : k == 3 ? 8 : 10;
    for (int64_t epoch : {0, 1, 2})
      for (int64_t skip : {int64_t(0), int64_t(1), per_epoch - 1}) {
        const std::size_t from = std::size_t(epoch * per_epoch + skip);
        if (from >= full.size()) continue;
        auto resumed = p.begin({.epoch = epoch, .elements = skip});
        for (std::size_t i = from; i < full.size() && i < from + 12; ++i) {
          auto e = resumed->next();
          BOOST_REQUIRE_MESSAGE(e, "pipeline " << k << " from (" << epoch << ", " << skip << ") ended at " << i);
          std::vector<int32_t> got((*e)[0].data<int32_t>(), (*e)[0].data<int32_t>() + (*e)[0].num_elements());
          BOOST_TEST(got == full[i], "pipeline " << k << " from (" << epoch << ", " << skip << "), element " << i);
        }
      }
  }
  auto m = error_of([] { numbers(10).batch(4).begin({.epoch = 0, .elements = 4}); }, ErrorCode::out_of_range);
  BOOST_TEST(contains(m, "epoch 0 ends after 3 elements, before the 4 to skip"), m);
}

BOOST_AUTO_TEST_CASE(skipping_runs_no_map_on_the_skipped_elements) {
  int calls = 0;
  auto counted = numbers(20).map([&calls](data::Element e) {
    ++calls;
    return e;
  });
  auto it = counted.batch(4).begin({.epoch = 0, .elements = 3});
  BOOST_TEST(calls == 0);
  BOOST_TEST(drain(*it) == (std::vector<int32_t>{12, 13, 14, 15, 16, 17, 18, 19}), boost::test_tools::per_element());
  BOOST_TEST(calls == 8);
}

BOOST_AUTO_TEST_CASE(a_prefetcher_started_part_way_feeds_the_rest_of_the_input) {
  auto root = Scope::root();
  auto q = ops::Queue::fifo(root, {DType::int32}, {PartialShape{-1}}, {.capacity = 2, .shared_name = "resumed"});
  auto batch = q.dequeue(root)[0];
  Session s(root);
  Prefetcher prefetch(s, q, numbers(5).batch(2).repeat(2), {.epoch = 1, .elements = 1});
  std::vector<int32_t> got;
  for (int i = 0; i < 2; ++i) {
    auto t = s.run({batch})[0];
    got.insert(got.end(), t.data<int32_t>(), t.data<int32_t>() + t.num_elements());
  }
  BOOST_TEST(got == (std::vector<int32_t>{2, 3, 4}), boost::test_tools::per_element());
  error_of([&] { s.run({batch}); }, ErrorCode::out_of_range);
  prefetch.join();
}

BOOST_AUTO_TEST_CASE(map_transforms_each_element) {
  auto doubled = numbers(4).map([](data::Element e) {
    Tensor t(DType::int32, Shape{});
    t.data<int32_t>()[0] = e[0].scalar_value<int32_t>() * 2;
    return data::Element{t};
  });
  BOOST_TEST(drain(doubled) == (std::vector<int32_t>{0, 2, 4, 6}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(from_idx_streams_scaled_images_and_labels_and_refuses_a_short_file) {
  testing::ScratchDir dir;
  auto images = testing::write_gz(dir.file("images.gz"), testing::idx_bytes(data::kIdxImagesMagic, {3, 2, 2},
                                                                          testing::iota_bytes(12, 250)));
  auto labels = testing::write_plain(dir.file("labels"), testing::idx_bytes(data::kIdxLabelsMagic, {3}, {7, 8, 9}));
  auto it = data::Pipeline::from_idx(images, labels).repeat(2).begin();
  std::vector<int32_t> seen;
  while (auto e = it->next()) {
    BOOST_TEST((*e)[0].shape() == Shape({1, 2, 2}));
    seen.push_back((*e)[1].scalar_value<int32_t>());
  }
  BOOST_TEST(seen == (std::vector<int32_t>{7, 8, 9, 7, 8, 9}), boost::test_tools::per_element());
  auto first = data::Pipeline::from_idx(images, labels).begin()->next();
  BOOST_TEST((*first)[0].data<float>()[0] == 250.0f / 255.0f);
  auto third = data::Pipeline::from_idx(images, labels).begin({.epoch = 0, .elements = 2})->next();
  BOOST_TEST((*third)[1].scalar_value<int32_t>() == 9, "skipped to the third example");
  BOOST_TEST((*third)[0].data<float>()[0] == 2.0f / 255.0f, "its first pixel, byte 8 of 250, 251, ... (mod 256)");
  auto short_images = testing::write_plain(dir.file("short"), testing::idx_bytes(data::kIdxImagesMagic, {3, 2, 2},
                                                                                testing::iota_bytes(10)));
  auto bad = data::Pipeline::from_idx(short_images, labels).begin();
  bad->next();
  bad->next();
  auto m = error_of([&] { bad->next(); }, ErrorCode::data_loss);
  BOOST_TEST(contains(m, "ends inside image 2 of 3"), m);
}

BOOST_AUTO_TEST_CASE(a_prefetcher_feeds_a_queue_that_the_graph_dequeues_to_the_end) {
  auto root = Scope::root();
  auto q = ops::Queue::fifo(root, {DType::int32}, {PartialShape{-1}}, {.capacity = 2, .shared_name = "prefetched"});
  auto batch = q.dequeue(root)[0];
  Session s(root);
  Prefetcher prefetch(s, q, numbers(7).batch(3));
  std::vector<int32_t> got;
  for (int i = 0; i < 3; ++i) {
    auto t = s.run({batch})[0];
    got.insert(got.end(), t.data<int32_t>(), t.data<int32_t>() + t.num_elements());
  }
  BOOST_TEST(got == (std::vector<int32_t>{0, 1, 2, 3, 4, 5, 6}), boost::test_tools::per_element());
  auto m = error_of([&] { s.run({batch}); }, ErrorCode::out_of_range);
  BOOST_TEST(contains(m, "queue 'prefetched' is closed"), "the end of the input: " << m);
  prefetch.join();
  BOOST_TEST(prefetch.elements() == 3);
}

BOOST_AUTO_TEST_CASE(a_failing_pipeline_fails_the_step_that_dequeues_past_it_with_its_error) {
  auto root = Scope::root();
  auto q = ops::Queue::fifo(root, {DType::int32}, {PartialShape{}}, {.shared_name = "failing"});
  auto next = q.dequeue(root)[0];
  Session s(root);
  auto broken = numbers(5).map([](data::Element e) {
    if (e[0].scalar_value<int32_t>() == 2) fail(ErrorCode::data_loss, "element 2 is corrupt");
    return e;
  });
  Prefetcher prefetch(s, q, broken);
  BOOST_TEST(s.run({next})[0].scalar_value<int32_t>() == 0);
  BOOST_TEST(s.run({next})[0].scalar_value<int32_t>() == 1);
  auto step = error_of([&] { s.run({next}); }, ErrorCode::data_loss);
  BOOST_TEST(contains(step, "the input pipeline feeding queue 'failing' failed: element 2 is corrupt"), step);
  auto again = error_of([&] { s.run({next}); }, ErrorCode::data_loss);  // not the end of the input
  BOOST_TEST(contains(again, "element 2 is corrupt"), again);
  auto m = error_of([&] { prefetch.join(); }, ErrorCode::data_loss);
  BOOST_TEST(contains(m, "element 2 is corrupt"), m);
}

BOOST_AUTO_TEST_CASE(a_pipeline_element_the_queue_does_not_take_fails_the_prefetcher) {
  auto root = Scope::root();
  auto q = ops::Queue::fifo(root, {DType::float32}, {PartialShape{}}, {.shared_name = "mismatch"});
  auto next = q.dequeue(root)[0];
  Session s(root);
  Prefetcher prefetch(s, q, numbers(3));
  auto step = error_of([&] { s.run({next}); }, ErrorCode::invalid_argument);
  BOOST_TEST(contains(step, "component 0 is int32, the queue takes float32"), step);
  auto m = error_of([&] { prefetch.join(); }, ErrorCode::invalid_argument);
  BOOST_TEST(contains(m, "component 0 is int32, the queue takes float32"), m);
}

BOOST_AUTO_TEST_CASE(a_prefetched_pipeline_yields_what_the_pipeline_yields_and_its_errors_in_place) {
  const auto plain = numbers(37).shuffle(10, 3).batch(4).repeat(3);
  const std::vector<data::Pipeline> prefetched = {
      plain.prefetch(1), plain.prefetch(3), plain.prefetch(1000),
      numbers(37).prefetch(2).shuffle(10, 3).batch(4).repeat(3),  // its skip is the batch's and shuffle's
      numbers(37).shuffle(10, 3).prefetch(5).batch(4).prefetch(1).repeat(3)};
  const auto all = drain(plain);
  BOOST_REQUIRE(all.size() == 3 * 37u);
  for (std::size_t k = 0; k < prefetched.size(); ++k) {
    BOOST_TEST((drain(prefetched[k]) == all), "pipeline " << k);
    for (data::Position from : {data::Position{0, 0}, data::Position{0, 3}, data::Position{1, 0}, data::Position{1, 9},
                                data::Position{2, 5}}) {
      auto expected = plain.begin(from), got = prefetched[k].begin(from);
      BOOST_TEST(outcomes(*got, 35) == outcomes(*expected, 35), boost::test_tools::per_element());
    }
    auto m = error_of([&] { prefetched[k].begin({.epoch = 2, .elements = 11}); }, ErrorCode::out_of_range);
    BOOST_TEST(contains(m, "epoch 2 ends after 10 elements, before the 11 to skip"), m);
  }

  // Skipping before the first next() is the stages' own: no map runs on a skipped element.
  auto calls = std::make_shared<std::atomic<int>>(0);
  auto counted = numbers(20).map([calls](data::Element e) {
    ++*calls;
    return e;
  });
  auto resumed = counted.prefetch(2).batch(4).begin({.epoch = 0, .elements = 3});
  BOOST_TEST(*calls == 0);
  BOOST_TEST(drain(*resumed) == (std::vector<int32_t>{12, 13, 14, 15, 16, 17, 18, 19}),
             boost::test_tools::per_element());
  BOOST_TEST(*calls == 8);

  // Skipping once it reads ahead passes over the elements next() would give.
  auto expected = plain.begin(), got = plain.prefetch(4).begin();
  BOOST_TEST(outcomes(*got, 2) == outcomes(*expected, 2), boost::test_tools::per_element());
  BOOST_TEST(got->skip(7) == 7);
  BOOST_TEST(expected->skip(7) == 7);
  BOOST_TEST(outcomes(*got, 30) == outcomes(*expected, 30), boost::test_tools::per_element());

  // An error comes out where it occurs, and the elements after it follow, as without prefetch.
  auto broken = numbers(6).map([](data::Element e) {
    if (e[0].scalar_value<int32_t>() == 3) fail(ErrorCode::data_loss, "element 3 is corrupt");
    return e;
  });
  auto plain_outcomes = outcomes(*broken.begin(), 8);
  BOOST_TEST(plain_outcomes[3] == "error data loss: element 3 is corrupt");
  BOOST_TEST(plain_outcomes[4] == "4 ");
  BOOST_TEST(plain_outcomes[7] == "end");
  for (int64_t n : {1, 2, 10})
    BOOST_TEST(outcomes(*broken.prefetch(n).begin(), 8) == plain_outcomes, boost::test_tools::per_element());
  BOOST_TEST(outcomes(*broken.prefetch(2).begin({.epoch = 0, .elements = 4}), 3) ==
                 (std::vector<std::string>{"4 ", "5 ", "end"}),
             boost::test_tools::per_element());

  auto n = error_of([] { numbers(3).prefetch(0); }, ErrorCode::invalid_argument);
  BOOST_TEST(contains(n, "prefetch: it must read at least one element ahead, got 0"), n);
}

BOOST_AUTO_TEST_CASE(a_prefetched_iterator_reads_at_most_n_ahead_and_its_destruction_stops_a_reader_waiting_for_room) {
  auto read = std::make_shared<std::atomic<int>>(0);
  auto counted = numbers(10).repeat(-1).map([read](data::Element e) {
    ++*read;
    return e;
  });
  auto it = counted.prefetch(2).begin();
  BOOST_TEST(it->next()->at(0).scalar_value<int32_t>() == 0);
  // The consumer took one; the reader fills its two places and then waits for room, for good.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (*read < 3 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  BOOST_TEST(*read == 3, "one taken and two read ahead");

  auto seconds_to_destroy = [](std::unique_ptr<data::Iterator>& i) {
    const auto start = std::chrono::steady_clock::now();
    i.reset();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  BOOST_TEST(seconds_to_destroy(it) < 1.0);
  BOOST_TEST(*read == 3, "and read nothing more");

  // Also when it is destroyed while the reader is inside a slow element: after that element.
  auto slow = numbers(100).map([](data::Element e) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    return e;
  });
  auto reading = slow.prefetch(50).begin();
  reading->next();
  BOOST_TEST(seconds_to_destroy(reading) < 1.0);
}

BOOST_AUTO_TEST_CASE(from_csv_reads_rows_as_their_components_and_names_the_file_line_and_column_of_a_bad_field) {
  testing::ScratchDir dir;
  // A header, another delimiter, spaces around a field, a blank line, a CRLF line end and an
  // unnamed last column.
  auto file = write_text(dir.file("rows.csv"),
                         "x0;x1;x2;label;big;note\n"
                         "2;4;6;7;5000000000;a\n"
                         "\n"
                         " 1.5 ;-3e1;0;8;-1;b\r\n"
                         "10;11;12;9;2;c\n");
  const data::CsvOptions options{.components = {{.first = 0, .count = 3, .scale = 0.5},
                                                {.first = 3, .dtype = DType::int32},
                                                {.first = 4, .dtype = DType::int64},
                                                {.first = 0, .count = 2, .dtype = DType::float64}},
                                 .header = true,
                                 .delimiter = ';'};
  auto it = data::Pipeline::from_csv(file, options).repeat(2).begin();
  std::vector<int32_t> labels;
  std::vector<float> features;
  while (auto e = it->next()) {
    BOOST_REQUIRE(e->size() == 4u);
    BOOST_TEST((*e)[0].dtype() == DType::float32);
    BOOST_TEST((*e)[0].shape() == Shape({3}));
    BOOST_TEST((*e)[1].dtype() == DType::int32);
    BOOST_TEST((*e)[1].shape() == Shape({}));
    BOOST_TEST((*e)[2].dtype() == DType::int64);
    BOOST_TEST((*e)[3].dtype() == DType::float64);
    BOOST_TEST((*e)[3].shape() == Shape({2}));
    labels.push_back((*e)[1].scalar_value<int32_t>());
    if (labels.size() <= 3) features.insert(features.end(), (*e)[0].data<float>(), (*e)[0].data<float>() + 3);
  }
  BOOST_TEST(labels == (std::vector<int32_t>{7, 8, 9, 7, 8, 9}), boost::test_tools::per_element());
  BOOST_TEST(features == (std::vector<float>{1, 2, 3, 0.75f, -15, 0, 5, 5.5f, 6}), boost::test_tools::per_element());
  auto first = data::Pipeline::from_csv(file, options).begin()->next();
  BOOST_TEST((*first)[2].scalar_value<int64_t>() == 5000000000);
  BOOST_TEST((*first)[3].data<double>()[1] == 4.0);
  auto third = data::Pipeline::from_csv(file, options).begin({.epoch = 0, .elements = 2})->next();
  BOOST_TEST((*third)[1].scalar_value<int32_t>() == 9, "skipped to the third row");
  const data::CsvOptions no_header{.components = {{.first = 0, .count = 3}}, .delimiter = ';'};
  auto header = error_of([&] { data::Pipeline::from_csv(file, no_header).begin()->next(); }, ErrorCode::data_loss);
  BOOST_TEST(contains(header, "CSV file '" + file + "', line 1, column 0: 'x0' is not a number of type float32"),
             header);

  // The rows before a bad one come out first; then its error, naming the file, line and column.
  auto bad = write_text(dir.file("bad.csv"), "1,2,3\n4,x,6\n7,8\n9,10,300\n11,12.5,13\n");
  const data::CsvOptions three{.components = {{.first = 0, .count = 2}, {.first = 2, .dtype = DType::uint8}}};
  auto rows = data::Pipeline::from_csv(bad, three).begin();
  BOOST_TEST(rows->next()->at(1).scalar_value<uint8_t>() == 3);
  auto m = error_of([&] { rows->next(); }, ErrorCode::data_loss);
  BOOST_TEST(contains(m, "CSV file '" + bad + "', line 2, column 1: 'x' is not a number of type float32"), m);
  m = error_of([&] { rows->next(); }, ErrorCode::data_loss);
  BOOST_TEST(contains(m, "CSV file '" + bad + "', line 3, column 2: the row ends after 2 fields"), m);
  m = error_of([&] { rows->next(); }, ErrorCode::data_loss);
  BOOST_TEST(contains(m, "line 4, column 2: '300' is out of range for uint8"), m);
  BOOST_TEST(rows->next()->at(0).data<float>()[1] == 12.5f);
  BOOST_TEST(!rows->next(), "the end");
  auto ints = data::Pipeline::from_csv(bad, {.components = {{.first = 1, .dtype = DType::int32}}}).begin();
  BOOST_TEST(ints->next()->at(0).scalar_value<int32_t>() == 2);
  error_of([&] { ints->next(); }, ErrorCode::data_loss);
  BOOST_TEST(ints->next()->at(0).scalar_value<int32_t>() == 8, "the row after a bad one");
  BOOST_TEST(ints->next()->at(0).scalar_value<int32_t>() == 10);
  m = error_of([&] { ints->next(); }, ErrorCode::data_loss);
  BOOST_TEST(contains(m, "line 5, column 1: '12.5' is not a number of type int32"), m);

  m = error_of([&] { data::Pipeline::from_csv(dir.file("none.csv"), three).begin(); }, ErrorCode::not_found);
  BOOST_TEST(contains(m, "cannot open CSV file '" + dir.file("none.csv") + "'"), m);
  m = error_of([&] { data::Pipeline::from_csv(bad, {.components = {{.dtype = DType::int32, .scale = 2}}}); },
               ErrorCode::invalid_argument);
  BOOST_TEST(contains(m, "component 0 is int32, which is not scaled (by 2)"), m);
  error_of([&] { data::Pipeline::from_csv(bad, {}); }, ErrorCode::invalid_argument);
  error_of([&] { data::Pipeline::from_csv(bad, {.components = {{.dtype = DType::boolean}}}); },
           ErrorCode::invalid_argument);
}

BOOST_AUTO_TEST_CASE(from_csv_composes_with_shuffle_batch_and_prefetch) {
  testing::ScratchDir dir;
  std::string text;
  for (int i = 0; i < 50; ++i) text += std::to_string(i) + "," + std::to_string(2 * i) + "\n";
  auto file = write_text(dir.file("pairs.csv"), text);
  const data::CsvOptions options{.components = {{.first = 0, .dtype = DType::int32}, {.first = 1}}};
  auto batches = data::Pipeline::from_csv(file, options).shuffle(50, 7).batch(8).prefetch(2).repeat(2);
  std::vector<int64_t> sizes;
  std::vector<int32_t> firsts;
  auto it = batches.begin();
  while (auto e = it->next()) {
    const Tensor& a = (*e)[0];
    const Tensor& b = (*e)[1];
    BOOST_TEST(b.dtype() == DType::float32);
    BOOST_TEST(b.shape() == a.shape());
    sizes.push_back(a.num_elements());
    for (int64_t j = 0; j < a.num_elements(); ++j) {
      BOOST_TEST(b.data<float>()[j] == 2.0f * float(a.data<int32_t>()[j]));
      firsts.push_back(a.data<int32_t>()[j]);
    }
  }
  BOOST_TEST(sizes == (std::vector<int64_t>{8, 8, 8, 8, 8, 8, 2, 8, 8, 8, 8, 8, 8, 2}),
             boost::test_tools::per_element());
  BOOST_TEST(firsts == drain(numbers(50).shuffle(50, 7).repeat(2)), boost::test_tools::per_element());
  auto resumed = batches.begin({.epoch = 1, .elements = 6});
  auto last = resumed->next();
  BOOST_TEST(std::vector<int32_t>(last->at(0).data<int32_t>(), last->at(0).data<int32_t>() + 2) ==
                 std::vector<int32_t>(firsts.end() - 2, firsts.end()),
             boost::test_tools::per_element());
  BOOST_TEST(!resumed->next());
}
