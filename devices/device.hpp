#pragma once
// Device: a named place where kernels run and tensors live (this process's CPU, or a GPU found
// through the CUDA module). The registry lists the devices of this process; it is built once,
// on first use, and is read-only afterwards, so any thread may read it.
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "core/allocator.hpp"
#include "core/device_name.hpp"

namespace troupe {

enum class DeviceType { cpu, gpu };
const char* name_of(DeviceType type);
inline std::ostream& operator<<(std::ostream& out, DeviceType t) { return out << name_of(t); }

class Device {
 public:
  Device(std::string name, DeviceType type, int index, Allocator& allocator, std::string description)
      : name_(std::move(name)), type_(type), index_(index), allocator_(&allocator),
        description_(std::move(description)), spec_(DeviceSpec::parse(name_)) {}
  const std::string& name() const { return name_; }
  DeviceType type() const { return type_; }
  int index() const { return index_; }
  Allocator& allocator() const { return *allocator_; }
  const std::string& description() const { return description_; }
  const DeviceSpec& spec() const { return spec_; }

 private:
  std::string name_;
  DeviceType type_;
  int index_;
  Allocator* allocator_;
  std::string description_;
  DeviceSpec spec_;
};

class DeviceRegistry {
 public:
  static const DeviceRegistry& instance();

  const std::vector<std::unique_ptr<Device>>& devices() const { return devices_; }
  Device& cpu() const { return *devices_.front(); }
  const Device* find(const std::string& full_name) const;
  // The devices a (possibly partial) requested name matches, in registry order.
  std::vector<const Device*> matching(const DeviceSpec& spec) const;
  int gpu_count() const;
  // Why there is no GPU, when there is none ("CUDA module not built", "no CUDA driver", ...).
  const std::string& gpu_status() const { return gpu_status_; }

 private:
  DeviceRegistry();
  std::vector<std::unique_ptr<Device>> devices_;
  std::string gpu_status_;
};

}  // namespace troupe
