// TensorBoard event files (core/summary/event_writer.hpp): a new file in the log directory named
// as TensorBoard looks for, its first record the file version, then one Event per scalar, read
// back as written; scalars reach the disk every flush_every of them.
#include <boost/test/unit_test.hpp>

#include <filesystem>

#include "core/summary/event_writer.hpp"
#include "core/tfrecord.hpp"
#include "test/support/expect_error.hpp"
#include "test/support/scratch_dir.hpp"

using namespace troupe;
using troupe::testing::contains;
using troupe::testing::error_of;

BOOST_AUTO_TEST_CASE(scalars_go_to_a_tensorboard_event_file_and_read_back_by_tag_and_step) {
  troupe::testing::ScratchDir dir;
  const std::string logdir = dir.file("logs/run1");
  std::string path;
  {
    EventWriter w(logdir, /*flush_every=*/4);
    path = w.path();
    BOOST_TEST(std::filesystem::path(path).parent_path() == logdir);
    BOOST_TEST(std::filesystem::path(path).filename().string().rfind("events.out.tfevents.", 0) == 0u, path);
    for (int step = 1; step <= 3; ++step) w.scalar("train/loss", 1.0 / step, step);
    BOOST_TEST(read_records(path).size() == 1u);  // only the version: three scalars wait for a flush
    w.scalar("train/accuracy", 0.5, 3);           // the 4th: flushed
    BOOST_TEST(read_records(path).size() == 5u);
    w.scalar("train/accuracy", 0.75, 6);  // written at the end
  }
  const EventFileContents c = read_event_file(path);
  BOOST_TEST(c.file_version == "brain.Event:2");
  BOOST_TEST_REQUIRE(c.scalars.count("train/loss") == 1u);
  const auto& loss = c.scalars.at("train/loss");
  BOOST_TEST_REQUIRE(loss.size() == 3u);
  BOOST_TEST(loss[1].first == 2);
  BOOST_TEST(loss[1].second == 0.5);
  const auto& accuracy = c.scalars.at("train/accuracy");
  BOOST_TEST_REQUIRE(accuracy.size() == 2u);
  BOOST_TEST(accuracy[1].first == 6);
  BOOST_TEST(accuracy[1].second == 0.75);
}

BOOST_AUTO_TEST_CASE(a_record_that_is_no_event_is_named) {
  troupe::testing::ScratchDir dir;
  {
    RecordWriter w(dir.file("events.out.tfevents.bad"));
    w.write(std::string("\xff\xff\xff", 3));
  }
  auto m = error_of([&] { read_event_file(dir.file("events.out.tfevents.bad")); }, ErrorCode::data_loss);
  BOOST_TEST(contains(m, "record 0 is not an Event"), m);
  m = error_of([&] { EventWriter(dir.file("events.out.tfevents.bad") + "/sub"); }, ErrorCode::unavailable);
  BOOST_TEST(contains(m, "cannot create the log directory"), m);
}
