#pragma once
// Device names: "/job:J/task:T/device:TYPE:INDEX". A requested device may be partial
// ("/device:GPU:0", "/cpu:0", "") and matches every full name that agrees on what it states.
#include <optional>
#include <string>

namespace troupe {

struct DeviceSpec {
  std::optional<std::string> job;
  std::optional<int> task;
  std::optional<std::string> type;  // "CPU" or "GPU", upper case
  std::optional<int> index;

  static DeviceSpec parse(const std::string& name);  // throws invalid_argument
  bool matches(const DeviceSpec& full) const;
  bool empty() const { return !job && !task && !type && !index; }
  std::string to_string() const;
};

std::string full_device_name(const std::string& job, int task, const std::string& type, int index);

}  // namespace troupe
