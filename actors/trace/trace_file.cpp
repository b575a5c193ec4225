#include "actors/trace/trace_file.hpp"

#include <algorithm>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/files.hpp"
#include "core/trace.hpp"

namespace troupe {

int64_t TraceFile::base(int64_t first_start) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!have_base_) {
    have_base_ = true;
    base_ = first_start;
  }
  return base_;
}

void TraceFile::add_process(int pid, const std::string& name) {
  std::lock_guard<std::mutex> lock(mutex_);
  processes_[pid] = name;
}

void TraceFile::add_clock(const std::string& task, int64_t offset_ns, int64_t error_ns) {
  std::lock_guard<std::mutex> lock(mutex_);
  clocks_[task] = {offset_ns, error_ns};
}

void TraceFile::add_steps(const std::vector<uint64_t>& steps, std::vector<std::string> events) {
  std::lock_guard<std::mutex> lock(mutex_);
  steps_.insert(steps_.end(), steps.begin(), steps.end());
  for (auto& e : events) {
    if (events_.size() >= max_events_) {
      ++left_out_;
      continue;
    }
    events_.push_back(std::move(e));
  }
}

void TraceFile::add_note(const std::string& note) {
  std::lock_guard<std::mutex> lock(mutex_);
  notes_.push_back(note);
}

void TraceFile::write() {
  std::lock_guard<std::mutex> lock(mutex_);
  std::string text = "{\"traceEvents\":[\n";
  bool first = true;
  auto add = [&](const std::string& line) {
    if (!first) text += ",\n";
    first = false;
    text += line;
  };
  for (auto& [pid, name] : processes_) {
    add(fmt::format(R"({{"ph":"M","pid":{},"tid":0,"name":"process_name","args":{{"name":{}}}}})", pid,
                    nlohmann::json(name).dump()));
    add(fmt::format(R"({{"ph":"M","pid":{},"tid":0,"name":"process_sort_index","args":{{"sort_index":{}}}}})", pid, pid));
  }
  std::set<std::string> metadata;  // each row's name once, though every step names it
  for (auto& e : events_) {
    if (e.starts_with("{\"ph\":\"M\"") && !metadata.insert(e).second) continue;
    add(e);
  }
  nlohmann::json other;
  other["producer"] = "troupe";
  std::vector<uint64_t> steps = steps_;
  std::sort(steps.begin(), steps.end());
  other["steps"] = steps;
  nlohmann::json clocks = nlohmann::json::object();
  for (auto& [task, c] : clocks_)
    clocks[task] = {{"offset_us", double(c.first) / 1000.0}, {"uncertainty_us", c.second < 0 ? -1.0 : double(c.second) / 1000.0}};
  other["clock_offsets"] = clocks;
  other["events_left_out"] = left_out_ + trace::dropped();
  other["notes"] = notes_;
  text += "\n],\"displayTimeUnit\":\"ms\",\"otherData\":" + other.dump() + "}\n";

  write_file_durably(path_, text);
}

}  // namespace troupe
