#include "core/summary/event_writer.hpp"

#include <unistd.h>

#include <chrono>
#include <filesystem>

#include <fmt/format.h>

#include "core/error.hpp"
#include "core/summary/event.pb.h"
#include "core/tfrecord.hpp"

namespace troupe {
namespace {

double wall_time() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

EventWriter::EventWriter(const std::string& logdir, int flush_every) : flush_every_(std::max(1, flush_every)) {
  std::error_code ec;
  std::filesystem::create_directories(logdir, ec);
  if (ec) fail(ErrorCode::unavailable, "cannot create the log directory '{}': {}", logdir, ec.message());
  char host[256] = "localhost";
  ::gethostname(host, sizeof host - 1);
  const double now = wall_time();
  // TensorBoard orders a directory's files by name: seconds, then host, then (ours) the pid.
  records_ = std::make_unique<RecordWriter>(
      fmt::format("{}/events.out.tfevents.{:010d}.{}.{}", logdir, int64_t(now), host, ::getpid()));
  summary::Event first;
  first.set_wall_time(now);
  first.set_file_version("brain.Event:2");
  records_->write(first.SerializeAsString());
  records_->flush();
}

EventWriter::~EventWriter() {
  try {
    flush();
  } catch (const Error&) {
  }
}

void EventWriter::scalar(const std::string& tag, double value, int64_t step) {
  summary::Event event;
  event.set_wall_time(wall_time());
  event.set_step(step);
  auto* v = event.mutable_summary()->add_value();
  v->set_tag(tag);
  v->set_simple_value(float(value));
  records_->write(event.SerializeAsString());
  if (++pending_ >= flush_every_) flush();
}

void EventWriter::flush() {
  records_->flush();
  pending_ = 0;
}

const std::string& EventWriter::path() const { return records_->path(); }

EventFileContents read_event_file(const std::string& path) {
  EventFileContents out;
  std::size_t index = 0;
  for (const std::string& record : read_records(path, /*allow_partial_tail=*/true)) {
    summary::Event event;
    if (!event.ParseFromString(record))
      fail(ErrorCode::data_loss, "event file '{}': record {} is not an Event", path, index);
    ++index;
    if (event.has_file_version()) out.file_version = event.file_version();
    if (event.has_summary())
      for (auto& v : event.summary().value())
        if (v.has_simple_value()) out.scalars[v.tag()].push_back({event.step(), double(v.simple_value())});
  }
  return out;
}

}  // namespace troupe
