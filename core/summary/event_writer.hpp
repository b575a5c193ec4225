#pragma once
// TensorBoard event files: scalars (loss, accuracy, examples/s, ...) per step, in the files
// TensorBoard reads from a log directory: DIR/events.out.tfevents.<seconds>.<host>, TFRecord
// framing (core/tfrecord.hpp) of protobuf Event messages, the first of which says the file's
// version ("brain.Event:2"). Scalars are buffered and flushed (written and fsynced) at flush(),
// every `flush_every` scalars, and at the end.
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace troupe {

class RecordWriter;

class EventWriter {
 public:
  // Creates `logdir` (and its parents) and a new event file in it; throws unavailable naming
  // the path when it cannot.
  explicit EventWriter(const std::string& logdir, int flush_every = 100);
  ~EventWriter();
  EventWriter(const EventWriter&) = delete;
  EventWriter& operator=(const EventWriter&) = delete;

  // One scalar of `step`; the wall time is now. `tag` is TensorBoard's name for the curve
  // ("train/loss").
  void scalar(const std::string& tag, double value, int64_t step);
  void flush();
  const std::string& path() const;

 private:
  std::unique_ptr<RecordWriter> records_;
  int flush_every_;
  int pending_ = 0;
};

// What an event file holds, read back: each scalar's points by tag, (step, value) in file order,
// and the file's version. Throws data_loss naming the file for a record that is not an Event.
struct EventFileContents {
  std::string file_version;
  std::map<std::string, std::vector<std::pair<int64_t, double>>> scalars;
};
EventFileContents read_event_file(const std::string& path);

}  // namespace troupe
