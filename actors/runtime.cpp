#include "actors/runtime.hpp"

#include "actors/device_actor.hpp"
#include "actors/state/queue_actor.hpp"
#include "actors/scheduler.hpp"
#include "devices/cpu_threads.hpp"

#include <cstdlib>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>

namespace troupe {

void apply_caf_options_from_environment(caf::actor_system_config& config) {
  const char* opts = std::getenv("TROUPE_CAF_OPTIONS");
  if (!opts) return;
  std::stringstream in(opts);
  for (std::string item; std::getline(in, item, ',');) {
    auto eq = item.find('=');
    char* end = nullptr;
    const long long value = eq == std::string::npos ? 0 : std::strtoll(item.c_str() + eq + 1, &end, 10);
    if (eq == std::string::npos || eq == 0 || end == item.c_str() + eq + 1 || *end != '\0')
      fail(ErrorCode::invalid_argument, "TROUPE_CAF_OPTIONS: '{}' is not key=integer", item);
    config.set(item.substr(0, eq), int64_t(value));
  }
}

Runtime::Runtime(int cores, int inter_op, int intra_op, std::optional<NetworkOptions> network) {
  if (cores <= 0) cores = usable_cores();
  threads_ = inter_op > 0 ? inter_op : cores;
  set_intra_op_threads(intra_op > 0 ? intra_op : cores, cores);
  config_ = std::make_unique<caf::actor_system_config>();
  config_->set("scheduler.max-threads", threads_);
  config_->set("logger.verbosity", caf::atom("quiet"));
  // CAF's own work stealing locks both ends of a victim's queue for every steal attempt;
  // with thousands of tiny node actors ready at once the owner and the thief convoy on those
  // locks. TROUPE_SCHEDULER=caf keeps CAF's scheduler, for comparison.
  const char* which = std::getenv("TROUPE_SCHEDULER");
  if (!which || std::string(which) != "caf") {
    config_->module_factories.push_back(make_scheduler);
  } else {
    config_->set("work-stealing.aggressive-steal-interval", 1000);
    config_->set("work-stealing.moderate-steal-interval", 1000);
  }
  if (network) {
    configure_network(*config_, *network);
    networked_ = true;
    tls_ = network->tls;
  }
  apply_caf_options_from_environment(*config_);
  threads_ = int(caf::get_or(*config_, "scheduler.max-threads", int64_t(threads_)));  // TROUPE_CAF_OPTIONS may set it
  system_ = std::make_unique<caf::actor_system>(*config_);
  for (auto& device : DeviceRegistry::instance().devices())
    device_actors_.push_back(system_->spawn(device_actor, device.get()));
}

QueueActor Runtime::queue(const QueueSpec& spec) {
  std::lock_guard<std::mutex> lock(queues_mutex_);
  auto it = queues_.find(spec.name);
  if (it != queues_.end()) {
    if (!(it->second.first == spec))
      fail(ErrorCode::invalid_argument, "queue '{}' exists as {}; asked for as {}", spec.name,
           it->second.first.describe(), spec.describe());
    return it->second.second;
  }
  auto actor = spawn_queue(*system_, spec);
  queues_.emplace(spec.name, std::make_pair(spec, actor));
  return actor;
}

Runtime::~Runtime() {
  for (auto& [name, q] : queues_) caf::anon_send_exit(q.second, caf::exit_reason::user_shutdown);
  queues_.clear();
  for (auto& a : device_actors_) caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
  device_actors_.clear();
  system_.reset();
}

namespace {

std::mutex current_mutex;  // guards current_runtime; held while a Runtime is made (its actor system starts)
std::weak_ptr<Runtime> current_runtime;

}  // namespace

std::shared_ptr<Runtime> Runtime::get(int cores, int inter_op, int intra_op) {
  std::lock_guard<std::mutex> lock(current_mutex);
  if (auto rt = current_runtime.lock()) return rt;
  auto rt = std::make_shared<Runtime>(cores, inter_op, intra_op);
  current_runtime = rt;
  return rt;
}

std::shared_ptr<Runtime> Runtime::get_networked(int cores, const NetworkOptions& network) {
  std::lock_guard<std::mutex> lock(current_mutex);
  if (auto rt = current_runtime.lock()) {
    if (!rt->networked())
      fail(ErrorCode::failed_precondition,
           "this process's runtime was started without the network layer (a Session made before the cluster "
           "member); start the cluster member first");
    if (!(rt->tls() == network.tls))
      fail(ErrorCode::failed_precondition,
           "this process's network layer was started {} (certificate '{}'); asked for {} (certificate '{}'): one "
           "process has one TLS identity",
           rt->tls().empty() ? "without TLS" : "with TLS", rt->tls().certificate,
           network.tls.empty() ? "none" : "TLS", network.tls.certificate);
    return rt;
  }
  auto rt = std::make_shared<Runtime>(cores, 0, 0, network);
  current_runtime = rt;
  return rt;
}

}  // namespace troupe
