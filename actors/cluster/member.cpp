#include "actors/cluster/member.hpp"

#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <caf/io/all.hpp>
#include <caf/openssl/publish.hpp>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <sstream>

#include "actors/cluster/cluster_messages.hpp"
#include "actors/cluster/tls_watch.hpp"
#include "actors/cluster/worker.hpp"
#include "actors/state/param_shard.hpp"
#include "actors/runtime.hpp"
#include "actors/timeouts.hpp"
#include "actors/trace/trace_file.hpp"
#include "actors/trace/wait_chain.hpp"
#include "core/trace.hpp"
#include "core/error.hpp"
#include "devices/device.hpp"

namespace troupe {
namespace {

// `holder`: who the TLS files are, in their errors.
NetworkOptions network_of(const MemberOptions& o, const std::string& holder = "this process") {
  return {o.heartbeat, o.connection_timeout, o.tls, holder};
}

// The process listening on TCP `port` (any local address), as "pid 1234 (its command line)",
// read from /proc: the sockets in LISTEN state on the port, then the process holding one.
std::string who_listens_on(uint16_t port) {
  std::set<std::string> inodes;
  for (const char* table : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    std::ifstream in(table);
    std::string line;
    std::getline(in, line);  // the header
    while (std::getline(in, line)) {
      std::istringstream fields(line);
      std::string slot, local, remote, state, queues, timer, retransmits, uid, timeout, inode;
      fields >> slot >> local >> remote >> state >> queues >> timer >> retransmits >> uid >> timeout >> inode;
      const auto colon = local.rfind(':');
      if (state != "0A" || colon == std::string::npos) continue;  // 0A: LISTEN
      if (std::strtoul(local.c_str() + colon + 1, nullptr, 16) == port) inodes.insert("socket:[" + inode + "]");
    }
  }
  if (inodes.empty()) return {};
  std::error_code ec;
  for (const auto& proc : std::filesystem::directory_iterator("/proc", ec)) {
    const std::string pid = proc.path().filename().string();
    if (pid.find_first_not_of("0123456789") != std::string::npos) continue;
    std::error_code fd_ec;
    for (const auto& fd : std::filesystem::directory_iterator(proc.path() / "fd", fd_ec)) {
      std::error_code link_ec;
      if (!inodes.count(std::filesystem::read_symlink(fd.path(), link_ec).string())) continue;
      std::ifstream cmdline(proc.path() / "cmdline");
      std::string args((std::istreambuf_iterator<char>(cmdline)), std::istreambuf_iterator<char>());
      std::replace(args.begin(), args.end(), '\0', ' ');
      while (!args.empty() && args.back() == ' ') args.pop_back();
      if (args.size() > 200) args = args.substr(0, 200) + "...";
      return fmt::format("pid {} ({})", pid, args);
    }
  }
  return "a process this one cannot see";
}

// Why `address` cannot be listened on, in words, when a bind of this process's own can tell
// (CAF says only "tcp socket creation failed"); empty when it can be bound now.
std::string why_cannot_listen(const TaskAddress& address) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string port = std::to_string(address.port);
  const char* host = address.host == "0.0.0.0" ? nullptr : address.host.c_str();
  if (const int error = ::getaddrinfo(host, port.c_str(), &hints, &found); error != 0)
    return fmt::format("its host name does not resolve ({})", ::gai_strerror(error));
  std::string why;
  for (addrinfo* a = found; a && why.empty(); a = a->ai_next) {
    const int fd = ::socket(a->ai_family, a->ai_socktype, a->ai_protocol);
    if (fd < 0) continue;
    const int on = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
    if (::bind(fd, a->ai_addr, a->ai_addrlen) != 0) {
      const int error = errno;
      if (error == EADDRINUSE) {
        const std::string who = who_listens_on(address.port);
        why = "the address is in use" + (who.empty() ? std::string() : ", by " + who);
      } else if (error == EADDRNOTAVAIL) {
        why = "no network interface of this host has that address (is the task meant for another host?)";
      } else if (error == EACCES) {
        why = "ports below 1024 need privileges this process lacks";
      } else {
        why = std::strerror(error);
      }
    }
    ::close(fd);
  }
  ::freeaddrinfo(found);
  return why;
}

uint64_t fresh_incarnation() {
  std::random_device entropy;
  uint64_t id = (uint64_t(entropy()) << 32) ^ entropy();
  return id == 0 ? 1 : id;
}

}  // namespace

struct ClusterMember::Impl {
  TaskId task;
  TaskAddress address;
  uint64_t incarnation = 0;
  std::string devices;
  std::shared_ptr<Runtime> runtime;
  std::shared_ptr<MemberContext> context;
  WorkerActor worker;
  uint16_t port = 0;
  bool tls = false;
};

ClusterMember::ClusterMember(const ClusterSpec& spec, const TaskId& task, const MemberOptions& options)
    : impl_(new Impl) {
  impl_->task = task;
  impl_->address = spec.address(task);  // throws naming what the spec has
  impl_->incarnation = fresh_incarnation();
  // This process's devices under the task's name: /job:worker/task:0/device:CPU:0.
  for (const auto& d : DeviceRegistry::instance().devices()) {
    const std::string& local = d->name();
    impl_->devices += (impl_->devices.empty() ? "" : ",") +
                      fmt::format("/job:{}/task:{}{}", task.job, task.index, local.substr(local.find("/device:")));
  }
  impl_->runtime = Runtime::get_networked(options.threads, network_of(options, "task " + task.to_string()));
  auto& system = impl_->runtime->system();
  auto context = std::make_shared<MemberContext>();
  context->task = task;
  context->incarnation = impl_->incarnation;
  context->devices = impl_->devices;
  for (auto& t : spec.tasks()) context->cluster.push_back({t, spec.address(t)});
  context->agreement = spec.agreement();
  context->runtime = impl_->runtime;
  auto memory = options.variable_memory_bytes > 0
                    ? std::make_shared<VariableMemory>(options.variable_memory_bytes, "task " + task.to_string())
                    : nullptr;
  context->shards =
      std::make_shared<ParamShards>(system, std::make_shared<Graph>(), std::max(1, options.param_shards), memory);
  context->log = options.log ? options.log : [](const std::string&) {};
  context->connect_timeout = timeouts::member_connect(options.connection_timeout);
  if (!options.tls.empty()) context->data_tls = std::make_shared<DataTls>(options.tls, "task " + task.to_string());
  context->listen_host = impl_->address.host;
  if (!options.trace.file.empty()) {
    TROUPE_CHECK_ARG(options.trace.first_step >= 1 && options.trace.first_step <= options.trace.last_step,
                     "task {}: trace steps {}-{} are not a range from 1", task.to_string(), options.trace.first_step,
                     options.trace.last_step);
    context->trace = std::make_shared<TraceFile>(options.trace.file, options.trace.max_events);
    context->trace->add_process(1, fmt::format("{} at {} (pid {})", task.to_string(), impl_->address.to_string(), getpid()));
    context->trace_first = options.trace.first_step;
    context->trace_last = options.trace.last_step;
    trace::set_limit(options.trace.max_events);
  }
  impl_->context = context;
  impl_->worker = system.spawn<caf::detached>(worker_actor, context);
  const std::string& host = impl_->address.host;
  // SO_REUSEADDR: a task restarted at once binds its port although connections of the process
  // before it linger in TIME_WAIT; Linux still refuses a port another process listens on.
  const char* bind_to = host == "0.0.0.0" ? nullptr : host.c_str();
  impl_->tls = !options.tls.empty();
  if (impl_->tls) set_tls_event_log(context->log);  // refused peers go to the member's log
  auto port = impl_->tls ? caf::openssl::publish(impl_->worker, impl_->address.port, bind_to, true)
                         : system.middleman().publish(impl_->worker, impl_->address.port, bind_to, true);
  if (!port) {
    caf::anon_send_exit(impl_->worker, caf::exit_reason::user_shutdown);
    const std::string why = why_cannot_listen(impl_->address);
    fail(ErrorCode::unavailable, "task {} cannot listen on {}: {}", task.to_string(), impl_->address.to_string(),
         why.empty() ? system.render(port.error()) : fmt::format("{} ({})", why, system.render(port.error())));
  }
  impl_->port = *port;
}

ClusterMember::~ClusterMember() {
  auto& system = impl_->runtime->system();
  // Both kinds of listener belong to the same BASP broker (caf::openssl::unpublish does not
  // compile in CAF 0.17.6: it sends unpublish_atom without the actor).
  system.middleman().unpublish(impl_->worker, impl_->port);
  if (impl_->tls) set_tls_event_log({});
  caf::anon_send_exit(impl_->worker, caf::exit_reason::user_shutdown);
  // The registered graphs' actors, then the shards, go before the runtime.
  std::unordered_map<uint64_t, std::shared_ptr<Registration>> registrations;
  {
    std::lock_guard<std::mutex> lock(impl_->context->mutex);
    registrations.swap(impl_->context->registrations);
  }
  registrations.clear();
}

const TaskId& ClusterMember::task() const { return impl_->task; }
const TaskAddress& ClusterMember::address() const { return impl_->address; }
uint64_t ClusterMember::incarnation() const { return impl_->incarnation; }
std::string ClusterMember::devices() const { return impl_->devices; }
const std::shared_ptr<MemberContext>& ClusterMember::context() const { return impl_->context; }

MemberIdentity identify_member(const TaskAddress& address, std::chrono::milliseconds timeout,
                               const MemberOptions& options) {
  auto runtime = Runtime::get_networked(options.threads, network_of(options));
  auto& system = runtime->system();
  WorkerActor worker = connect_member(system, address, timeout);
  MemberIdentity out;
  caf::scoped_actor self{system};
  self->request(worker, timeout, identify_atom::value)
      .receive([&](std::string& task, uint64_t incarnation, std::string& devices) {
                 out = {std::move(task), incarnation, std::move(devices)};
               },
               [&](caf::error& e) {
                 fail(ErrorCode::unavailable, "the cluster member at {} did not say who it is within {} ms: {}",
                      address.to_string(), timeout.count(), system.render(e));
               });
  return out;
}

ClusterStatus cluster_status(const TaskAddress& address, std::chrono::milliseconds timeout,
                             const MemberOptions& options) {
  auto runtime = Runtime::get_networked(options.threads, network_of(options));
  auto& system = runtime->system();
  caf::scoped_actor self{system};
  std::vector<std::string> tasks, addresses;
  self->request(connect_member(system, address, timeout), timeout, spec_atom::value)
      .receive([&](std::vector<std::string>& t, std::vector<std::string>& a) { tasks = std::move(t), addresses = std::move(a); },
               [&](caf::error& e) {
                 fail(ErrorCode::unavailable, "the cluster member at {} did not send its cluster spec within {} ms: {}",
                      address.to_string(), timeout.count(), system.render(e));
               });
  ClusterStatus out;
  using Handle = decltype(self->request(WorkerActor{}, timeout, status_atom::value));
  std::vector<std::optional<Handle>> asked;
  for (std::size_t i = 0; i < tasks.size() && i < addresses.size(); ++i) {
    out.tasks.push_back(TaskStatus{tasks[i], addresses[i], {}, {}});
    asked.emplace_back();
    try {
      const TaskAddress at = parse_task_address(addresses[i], "the cluster spec of " + address.to_string());
      asked.back() = self->request(connect_member(system, at, timeout), timeout, status_atom::value);
    } catch (const Error& e) {
      out.tasks.back().error = e.what();
    }
  }
  // Per step (its graph's handle and number, the same on every task), each task's waits.
  std::map<std::pair<uint64_t, uint64_t>, std::pair<std::string, std::vector<TaskWaits>>> steps;
  for (std::size_t i = 0; i < asked.size(); ++i) {
    if (!asked[i]) continue;
    TaskStatus& status = out.tasks[i];
    asked[i]->receive(
        [&](std::vector<StepStatus>& running) {
          for (auto& step : running) {
            status.lines.push_back(fmt::format("step {} of graph {:#x} from {}, running for {:.1f} s", step.step,
                                               step.handle, step.owner, step.seconds));
            std::size_t shown = 0;
            for (auto& w : step.waits)
              if (!w.inferred) status.lines.push_back("  " + describe_wait(w)), ++shown;
            if (!shown) status.lines.push_back(std::string("  ") + kKernelsRunning);
            auto& [title, waits] = steps[{step.handle, step.step}];
            title = fmt::format("step {} of graph {:#x} from {}", step.step, step.handle, step.owner);
            waits.push_back(TaskWaits{status.task, std::move(step.waits), true});
          }
        },
        [&](caf::error& e) {
          status.error = fmt::format("did not answer within {} ms: {}", timeout.count(), system.render(e));
        });
  }
  for (auto& [key, step] : steps) {
    auto& [title, waits] = step;
    for (auto& t : out.tasks)  // a task that did not answer may hold the step too
      if (!t.error.empty()) waits.push_back(TaskWaits{t.task, {}, false});
    for (auto& sentence : follow_waits(waits)) out.stuck.push_back(title + ": " + sentence);
  }
  return out;
}

}  // namespace troupe
