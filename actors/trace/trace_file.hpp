#pragma once
// A Chrome trace file (the JSON chrome://tracing and Perfetto open) from the events of traced
// steps (core/trace.hpp): what a Session writes for SessionOptions::trace. Internal to actors/.
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace troupe {

// The events of one session's traced steps, gathered as they end, and written on demand.
class TraceFile {
 public:
  TraceFile(std::string path, std::size_t max_events) : path_(std::move(path)), max_events_(max_events) {}

  // The time every event's is taken from (the first traced step's start), set by the first call.
  int64_t base(int64_t first_start);
  // A process row: `pid` named `name`.
  void add_process(int pid, const std::string& name);
  // What another process's clock was taken to be off by, and how far that estimate can be wrong.
  void add_clock(const std::string& task, int64_t offset_ns, int64_t error_ns);
  // Steps' events (JSON objects); beyond max_events they are counted, not kept.
  void add_steps(const std::vector<uint64_t>& steps, std::vector<std::string> events);
  // Something that could not be traced (a task that did not answer), said in the file.
  void add_note(const std::string& note);
  // Writes the file (a temporary file, fsynced, renamed over `path`); throws naming it.
  void write();

 private:
  std::string path_;
  std::size_t max_events_;
  mutable std::mutex mutex_;
  bool have_base_ = false;
  int64_t base_ = 0;
  std::map<int, std::string> processes_;
  std::map<std::string, std::pair<int64_t, int64_t>> clocks_;
  std::vector<uint64_t> steps_;
  std::vector<std::string> events_;
  std::vector<std::string> notes_;
  std::size_t left_out_ = 0;
};

}  // namespace troupe
