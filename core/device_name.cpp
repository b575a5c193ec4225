#include "core/device_name.hpp"

#include <algorithm>
#include <cctype>
#include <sstream>
#include <vector>

#include "core/error.hpp"

namespace troupe {
namespace {

std::string upper(std::string s) {
  for (auto& c : s) c = char(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

int parse_index(const std::string& text, const std::string& name) {
  if (text == "*") return -1;
  if (text.empty() || !std::all_of(text.begin(), text.end(), ::isdigit))
    fail(ErrorCode::invalid_argument, "device name '{}': '{}' is not an index", name, text);
  return std::stoi(text);
}

}  // namespace

DeviceSpec DeviceSpec::parse(const std::string& name) {
  DeviceSpec spec;
  std::vector<std::string> parts;
  std::stringstream in(name);
  for (std::string part; std::getline(in, part, '/');)
    if (!part.empty()) parts.push_back(part);
  for (const auto& part : parts) {
    auto colon = part.find(':');
    std::string key = part.substr(0, colon);
    std::string rest = colon == std::string::npos ? "" : part.substr(colon + 1);
    std::string lkey = key;
    for (auto& c : lkey) c = char(std::tolower(static_cast<unsigned char>(c)));
    if (lkey == "job") {
      spec.job = rest;
    } else if (lkey == "task" || lkey == "replica") {
      if (lkey == "task") spec.task = parse_index(rest, name);
    } else if (lkey == "device") {
      auto c2 = rest.find(':');
      spec.type = upper(rest.substr(0, c2));
      if (c2 != std::string::npos) {
        int index = parse_index(rest.substr(c2 + 1), name);
        if (index >= 0) spec.index = index;
      }
    } else if (lkey == "cpu" || lkey == "gpu") {
      spec.type = upper(lkey);
      if (colon != std::string::npos) {
        int index = parse_index(rest, name);
        if (index >= 0) spec.index = index;
      }
    } else {
      fail(ErrorCode::invalid_argument,
           "device name '{}': unknown part '{}' (expected /job:J/task:T/device:TYPE:INDEX)", name,
           part);
    }
  }
  if (spec.type && *spec.type != "CPU" && *spec.type != "GPU")
    fail(ErrorCode::invalid_argument, "device name '{}': unknown device type '{}'", name,
         *spec.type);
  return spec;
}

bool DeviceSpec::matches(const DeviceSpec& full) const {
  return (!job || job == full.job) && (!task || task == full.task) &&
         (!type || type == full.type) && (!index || index == full.index);
}

std::string DeviceSpec::to_string() const {
  std::string s;
  if (job) s += "/job:" + *job;
  if (task) s += "/task:" + std::to_string(*task);
  if (type) s += "/device:" + *type + ":" + (index ? std::to_string(*index) : "*");
  return s;
}

std::string full_device_name(const std::string& job, int task, const std::string& type, int index) {
  return "/job:" + job + "/task:" + std::to_string(task) + "/device:" + type + ":" +
         std::to_string(index);
}

}  // namespace troupe
