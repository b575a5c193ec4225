#pragma once
// The process's actor system, shared by every Session alive in the process. Created by the
// first Session with its thread option; destroyed when the last Session that holds it goes.
#include <chrono>
#include <map>
#include <optional>
#include <memory>
#include <mutex>
#include <vector>

#include "actors/network.hpp"
#include "actors/messages.hpp"
#include "actors/state/queue_actor.hpp"
#include "ops/data/queue.hpp"

namespace troupe {

// TROUPE_CAF_OPTIONS="key=integer,..." sets integer CAF options for tuning experiments, e.g.
// work-stealing.aggressive-steal-interval=100 or middleman.workers=1; call it after the defaults.
// An item that is not key=integer is refused (invalid_argument) naming it.
void apply_caf_options_from_environment(caf::actor_system_config& config);

class Runtime {
 public:
  // cores: the threads that may compute at once (0: the hardware threads). inter_op: scheduler
  // threads, intra_op: threads per kernel team (devices/cpu_threads.hpp); 0 for either: cores.
  static std::shared_ptr<Runtime> get(int cores, int inter_op = 0, int intra_op = 0);
  // The process's runtime with the network layer: made with it if there is none yet; an
  // existing one made without it, or with other TLS files, is refused (failed_precondition),
  // since CAF cannot change it.
  static std::shared_ptr<Runtime> get_networked(int cores, const NetworkOptions& network);
  Runtime(int cores, int inter_op, int intra_op, std::optional<NetworkOptions> network = std::nullopt);
  bool networked() const { return networked_; }
  const TlsFiles& tls() const { return tls_; }
  ~Runtime();
  caf::actor_system& system() { return *system_; }
  // The device actors of this process, in DeviceRegistry order (CPU:0 first).
  const std::vector<caf::actor>& device_actors() const { return device_actors_; }
  int threads() const { return threads_; }
  // The queue actor of this name, spawned on first use; every step and Session of the process
  // shares it. A second, different spec under the same name is refused.
  QueueActor queue(const QueueSpec& spec);

 private:
  int threads_;
  bool networked_ = false;
  TlsFiles tls_;
  std::unique_ptr<caf::actor_system_config> config_;
  std::unique_ptr<caf::actor_system> system_;
  std::vector<caf::actor> device_actors_;
  // Guards queues_. queue() spawns a new queue actor while holding it (CAF may then take its
  // scheduler's locks); nothing ever takes this one while holding another, so the order is
  // always queues_mutex_ first.
  std::mutex queues_mutex_;
  std::map<std::string, std::pair<QueueSpec, QueueActor>> queues_;
};

}  // namespace troupe
