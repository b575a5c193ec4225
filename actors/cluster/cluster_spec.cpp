#include "actors/cluster/cluster_spec.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.hpp"

namespace troupe {
namespace {

using nlohmann::json;

// What a job name may be: it appears in device names ("/job:ps/task:0/device:CPU:0").
bool valid_job_name(const std::string& name) {
  if (name.empty() || !std::isalpha(static_cast<unsigned char>(name[0]))) return false;
  for (char c : name)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  return true;
}

// A non-negative decimal integer that fits an int, or nullopt.
std::optional<int> parse_index(const std::string& text) {
  if (text.empty() || text.size() > 9) return std::nullopt;
  for (char c : text)
    if (c < '0' || c > '9') return std::nullopt;
  return std::stoi(text);
}

std::string kind_of(const json& v) { return v.type_name(); }

std::string resolve_path(const std::string& path, const std::string& base_dir) {
  if (path.empty() || path[0] == '/' || base_dir.empty()) return path;
  return base_dir + (base_dir.back() == '/' ? "" : "/") + path;
}

void check_keys(const json& object, std::initializer_list<const char*> known, const std::string& where) {
  for (auto& [key, value] : object.items()) {
    bool ok = false;
    std::string expected;
    for (const char* k : known) {
      ok = ok || key == k;
      expected += (expected.empty() ? "" : ", ") + std::string(k);
    }
    if (!ok) fail(ErrorCode::invalid_argument, "{}: unknown key '{}' (expected {})", where, key, expected);
  }
}

// "certificate" and "key" of one identity in the "tls" section, made absolute against base_dir.
std::pair<std::string, std::string> tls_identity(const nlohmann::json& entry, const std::string& at,
                                                 const std::string& base_dir) {
  if (!entry.is_object())
    fail(ErrorCode::invalid_argument, "{}: must be {{\"certificate\": file, \"key\": file}}, not {}", at, entry.dump());
  check_keys(entry, {"certificate", "key"}, at);
  for (const char* k : {"certificate", "key"})
    if (!entry.contains(k) || !entry[k].is_string() || entry[k].get<std::string>().empty())
      fail(ErrorCode::invalid_argument, "{}: \"{}\" must name a file", at, k);
  return {resolve_path(entry["certificate"].get<std::string>(), base_dir),
          resolve_path(entry["key"].get<std::string>(), base_dir)};
}

}  // namespace

std::string TaskAddress::to_string() const {
  return host.find(':') != std::string::npos ? fmt::format("[{}]:{}", host, port) : fmt::format("{}:{}", host, port);
}

TaskAddress parse_task_address(const std::string& text, const std::string& where) {
  std::string host, port;
  if (!text.empty() && text[0] == '[') {
    auto close = text.find(']');
    if (close == std::string::npos || close + 1 >= text.size() || text[close + 1] != ':')
      fail(ErrorCode::invalid_argument, "{}: address '{}' is not [ipv6]:port", where, text);
    host = text.substr(1, close - 1);
    port = text.substr(close + 2);
  } else {
    auto colon = text.rfind(':');
    if (colon == std::string::npos)
      fail(ErrorCode::invalid_argument, "{}: address '{}' has no port (host:port)", where, text);
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
    if (host.find(':') != std::string::npos)
      fail(ErrorCode::invalid_argument, "{}: address '{}': write an IPv6 host in brackets, [host]:port", where, text);
  }
  if (host.empty()) fail(ErrorCode::invalid_argument, "{}: address '{}' has no host", where, text);
  auto number = parse_index(port);
  if (!number || *number < 1 || *number > 65535)
    fail(ErrorCode::invalid_argument, "{}: address '{}': port '{}' is not a number from 1 to 65535", where, text,
         port);
  return {host, uint16_t(*number)};
}

std::string TaskId::to_string() const { return fmt::format("{}:{}", job, index); }

TaskId parse_task_id(const std::string& text) {
  std::string job, index;
  if (text.rfind("/job:", 0) == 0) {
    // TensorFlow's form: /job:J/task:T, also with /replica:0 between (its device names carry it).
    std::optional<std::string> replica, task;
    std::size_t start = 1;
    while (start <= text.size()) {
      std::size_t end = text.find('/', start);
      if (end == std::string::npos) end = text.size();
      const std::string part = text.substr(start, end - start);
      const auto colon = part.find(':');
      const std::string key = part.substr(0, colon), value = colon == std::string::npos ? "" : part.substr(colon + 1);
      if (key == "job" && job.empty()) job = value;
      else if (key == "replica" && !replica) replica = value;
      else if (key == "task" && !task) task = value;
      else
        fail(ErrorCode::invalid_argument, "task '{}': '{}' is not part of a task's name (/job:J/task:T or "
             "/job:J/replica:0/task:T)", text, part);
      start = end + 1;
    }
    if (!task) fail(ErrorCode::invalid_argument, "task '{}' is neither job:index nor /job:J/task:T", text);
    if (replica && parse_index(*replica) != 0)
      fail(ErrorCode::invalid_argument, "task '{}': replica '{}': each task of a Troupe cluster is one replica, "
           "replica:0", text, *replica);
    index = *task;
  } else {
    auto colon = text.find(':');
    if (colon == std::string::npos)
      fail(ErrorCode::invalid_argument, "task '{}' is neither job:index nor /job:J/task:T", text);
    job = text.substr(0, colon);
    index = text.substr(colon + 1);
  }
  if (!valid_job_name(job))
    fail(ErrorCode::invalid_argument, "task '{}': '{}' is not a job name (a letter, then letters, digits, _)", text,
         job);
  auto i = parse_index(index);
  if (!i) fail(ErrorCode::invalid_argument, "task '{}': index '{}' is not a non-negative number", text, index);
  return {job, *i};
}

namespace {

// The "cluster" section: every job's tasks by index, each address checked and none twice.
std::map<std::string, std::map<int, TaskAddress>> jobs_of(const json& cluster, const std::string& where) {
  std::map<std::string, std::map<int, TaskAddress>> jobs;
  std::map<std::string, std::string> seen;  // address -> the task that has it
  for (auto& [job, tasks] : cluster.items()) {
    const std::string at = fmt::format("{}: cluster.{}", where, job);
    if (!valid_job_name(job))
      fail(ErrorCode::invalid_argument, "{}: job name '{}' is not a letter followed by letters, digits and _", where, job);
    std::map<int, std::string> listed;
    if (tasks.is_array()) {
      for (std::size_t i = 0; i < tasks.size(); ++i) {
        if (!tasks[i].is_string())
          fail(ErrorCode::invalid_argument, "{}[{}]: an address is a \"host:port\" string, not {}", at, i, tasks[i].dump());
        listed[int(i)] = tasks[i].get<std::string>();
      }
    } else if (tasks.is_object()) {
      for (auto& [index, address] : tasks.items()) {
        auto i = parse_index(index);
        if (!i) fail(ErrorCode::invalid_argument, "{}: task index '{}' is not a non-negative number", at, index);
        if (!address.is_string())
          fail(ErrorCode::invalid_argument, "{}.{}: an address is a \"host:port\" string, not {}", at, index, address.dump());
        listed[*i] = address.get<std::string>();
      }
    } else {
      fail(ErrorCode::invalid_argument, "{}: a job's tasks are a list of \"host:port\" (or an object by index), not {}",
           at, tasks.dump());
    }
    if (listed.empty()) fail(ErrorCode::invalid_argument, "{}: job '{}' has no tasks", where, job);
    auto& addresses = jobs[job];
    for (auto& [index, text] : listed) {
      const std::string task = fmt::format("{}:{}", job, index);
      TaskAddress address = parse_task_address(text, fmt::format("{}: task {}", where, task));
      auto [it, fresh] = seen.emplace(address.to_string(), task);
      if (!fresh)
        fail(ErrorCode::invalid_argument, "{}: tasks {} and {} have the same address {}", where, it->second, task,
             address.to_string());
      addresses[index] = address;
    }
  }
  return jobs;
}

// The "task" section: this process's task.
TaskId task_of(const json& task, const std::string& where) {
  if (!task.is_object()) fail(ErrorCode::invalid_argument, "{}: \"task\" must be {{\"type\": job, \"index\": n}}, not {}", where, task.dump());
  check_keys(task, {"type", "index", "trial"}, where + ": task");
  if (!task.contains("type") || !task["type"].is_string())
    fail(ErrorCode::invalid_argument, "{}: task.type must name a job, got {}", where,
         task.contains("type") ? task["type"].dump() : "nothing");
  const json& index = task.contains("index") ? task["index"] : json(0);
  if (!index.is_number_integer() || index.get<int64_t>() < 0 || index.get<int64_t>() > INT32_MAX)
    fail(ErrorCode::invalid_argument, "{}: task.index must be a non-negative number, got {}", where, index.dump());
  return {task["type"].get<std::string>(), int(index.get<int64_t>())};
}

// The "tls" section: the CA, every task's certificate and key (each task of `spec` must have
// them), and the client's, if any.
struct TlsSection {
  std::string ca;
  std::map<TaskId, std::pair<std::string, std::string>> tasks;
  std::optional<std::pair<std::string, std::string>> client;
};
TlsSection tls_of(const json& tls, const ClusterSpec& spec, const std::string& where, const std::string& base_dir) {
  // An empty or partial section would leave connections unauthenticated (CAF falls back to
  // anonymous ciphers): every part is required.
  TlsSection out;
  const std::string at = where + ": tls";
  if (!tls.is_object())
    fail(ErrorCode::invalid_argument, "{}: must be {{\"ca\": file, \"tasks\": {{task: {{\"certificate\": file, \"key\": file}}}}}}, not {}",
         at, tls.dump());
  check_keys(tls, {"ca", "tasks", "client"}, at);
  if (!tls.contains("ca") || !tls["ca"].is_string() || tls["ca"].get<std::string>().empty())
    fail(ErrorCode::invalid_argument, "{}: \"ca\" must name the cluster CA's certificate file", at);
  out.ca = resolve_path(tls["ca"].get<std::string>(), base_dir);
  if (!tls.contains("tasks") || !tls["tasks"].is_object())
    fail(ErrorCode::invalid_argument, "{}: \"tasks\" must map every task to its certificate and key", at);
  for (auto& [name, entry] : tls["tasks"].items()) {
    TaskId task;
    try {
      task = parse_task_id(name);
    } catch (const Error& e) {
      fail(ErrorCode::invalid_argument, "{}.tasks: {}", at, e.what());
    }
    if (!spec.has(task)) fail(ErrorCode::invalid_argument, "{}.tasks: '{}' is no task of the cluster", at, name);
    out.tasks[task] = tls_identity(entry, at + ".tasks." + name, base_dir);
  }
  std::string missing;
  for (auto& task : spec.tasks())
    if (!out.tasks.count(task)) missing += (missing.empty() ? "" : ", ") + task.to_string();
  if (!missing.empty()) fail(ErrorCode::invalid_argument, "{}.tasks: no certificate for {}", at, missing);
  if (tls.contains("client")) out.client = tls_identity(tls["client"], at + ".client", base_dir);
  return out;
}

}  // namespace

ClusterSpec ClusterSpec::from_json(const std::string& text, const std::string& where, const std::string& base_dir) {
  json doc;
  try {
    doc = json::parse(text);
  } catch (const json::parse_error& e) {
    fail(ErrorCode::invalid_argument, "{}: not JSON: {}", where, e.what());
  }
  if (!doc.is_object()) fail(ErrorCode::invalid_argument, "{}: a cluster spec is a JSON object, not {}", where, kind_of(doc));
  check_keys(doc, {"cluster", "task", "environment", "rpc_layer", "tls"}, where);
  if (!doc.contains("cluster")) fail(ErrorCode::invalid_argument, "{}: no \"cluster\" (jobs and their tasks' addresses)", where);
  const json& cluster = doc["cluster"];
  if (!cluster.is_object() || cluster.empty())
    fail(ErrorCode::invalid_argument, "{}: \"cluster\" must map job names to lists of \"host:port\", got {}", where,
         cluster.dump());

  ClusterSpec spec;
  spec.where_ = where;
  spec.jobs_ = jobs_of(cluster, where);
  if (doc.contains("task")) spec.set_this_task(task_of(doc["task"], where));
  if (doc.contains("tls")) {
    TlsSection tls = tls_of(doc["tls"], spec, where, base_dir);
    spec.tls_ca_ = std::move(tls.ca);
    spec.tls_tasks_ = std::move(tls.tasks);
    spec.tls_client_ = std::move(tls.client);
  }
  return spec;
}

TlsFiles ClusterSpec::tls_for(const TaskId& task) const {
  if (!uses_tls()) return {};
  auto it = tls_tasks_.find(task);
  if (it == tls_tasks_.end()) {
    (void)address(task);  // throws naming what there is
    fail(ErrorCode::invalid_argument, "{}: tls has no certificate for task {}", where_, task.to_string());
  }
  return {tls_ca_, it->second.first, it->second.second};
}

TlsFiles ClusterSpec::tls_client() const {
  if (!uses_tls()) return {};
  if (!tls_client_)
    fail(ErrorCode::invalid_argument, "{}: tls has no \"client\" identity (for a process that is no task)", where_);
  return {tls_ca_, tls_client_->first, tls_client_->second};
}

ClusterSpec ClusterSpec::from_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) fail(ErrorCode::not_found, "cannot read cluster spec '{}': {}", path, std::strerror(errno));
  std::stringstream text;
  text << in.rdbuf();
  const auto slash = path.rfind('/');
  return from_json(text.str(), path, slash == std::string::npos ? "" : path.substr(0, slash + 1));
}

std::optional<ClusterSpec> ClusterSpec::from_environment() {
  const char* text = std::getenv("TF_CONFIG");
  if (!text || !*text) return std::nullopt;
  return from_json(text, "TF_CONFIG");
}

std::vector<TaskId> ClusterSpec::tasks() const {
  std::vector<TaskId> out;
  for (auto& [job, tasks] : jobs_)
    for (auto& [index, address] : tasks) out.push_back({job, index});
  return out;
}

bool ClusterSpec::has(const TaskId& task) const {
  auto job = jobs_.find(task.job);
  return job != jobs_.end() && job->second.count(task.index);
}

const TaskAddress& ClusterSpec::address(const TaskId& task) const {
  auto job = jobs_.find(task.job);
  if (job == jobs_.end()) {
    std::string names;
    for (auto& [name, tasks] : jobs_) names += (names.empty() ? "" : ", ") + name;
    fail(ErrorCode::invalid_argument, "{}: task {}: the cluster has no job '{}' (its jobs: {})", where_,
         task.to_string(), task.job, names);
  }
  auto it = job->second.find(task.index);
  if (it == job->second.end()) {
    std::string indexes;
    for (auto& [index, address] : job->second) indexes += (indexes.empty() ? "" : ", ") + std::to_string(index);
    fail(ErrorCode::invalid_argument, "{}: task {}: job '{}' has no task {} (its tasks: {})", where_,
         task.to_string(), task.job, task.index, indexes);
  }
  return it->second;
}

void ClusterSpec::set_this_task(const TaskId& task) {
  (void)address(task);  // throws naming what there is
  this_task_ = task;
}

std::vector<uint16_t> free_loopback_ports(int count) {
  std::vector<int> fds;
  std::vector<uint16_t> ports;
  auto close_all = [&] {
    for (int fd : fds) ::close(fd);
  };
  for (int i = 0; i < count; ++i) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    if (fd >= 0) fds.push_back(fd);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
      const int error = errno;
      close_all();
      fail(ErrorCode::unavailable, "cannot find a free port on 127.0.0.1: {}", std::strerror(error));
    }
    ports.push_back(ntohs(a.sin_port));
  }
  close_all();
  return ports;
}

std::string local_cluster_json(const std::vector<std::pair<std::string, int>>& jobs) {
  int total = 0;
  for (auto& [job, tasks] : jobs) total += tasks;
  const auto ports = free_loopback_ports(total);
  nlohmann::json cluster = nlohmann::json::object();
  std::size_t next = 0;
  for (auto& [job, tasks] : jobs) {
    auto& list = cluster[job] = nlohmann::json::array();
    for (int k = 0; k < tasks; ++k) list.push_back(fmt::format("127.0.0.1:{}", ports[next++]));
  }
  return nlohmann::json{{"cluster", cluster}}.dump();
}

std::vector<std::string> ClusterSpec::agreement() const {
  std::vector<std::string> out;
  for (auto& t : tasks()) out.push_back(t.to_string() + " " + address(t).to_string());
  out.push_back(uses_tls() ? "tls on" : "tls off");
  std::sort(out.begin(), out.end());
  return out;
}

std::string first_difference(const std::vector<std::string>& a, const std::string& whose_a,
                             const std::vector<std::string>& b, const std::string& whose_b) {
  // Lines "<task> <address>" (or "tls on|off"), sorted: by task name, the first disagreement.
  auto split = [](const std::vector<std::string>& lines) {
    std::map<std::string, std::string> out;
    for (auto& line : lines) {
      const auto space = line.find(' ');
      out[line.substr(0, space)] = space == std::string::npos ? "" : line.substr(space + 1);
    }
    return out;
  };
  const auto x = split(a), y = split(b);
  std::set<std::string> keys;
  for (auto& [k, v] : x) keys.insert(k);
  for (auto& [k, v] : y) keys.insert(k);
  for (auto& k : keys) {
    auto i = x.find(k), j = y.find(k);
    if (i != x.end() && j != y.end() && i->second == j->second) continue;
    if (k == "tls")
      return fmt::format("TLS is {} in {} spec and {} in {}", i == x.end() ? "?" : i->second, whose_a,
                         j == y.end() ? "?" : j->second, whose_b);
    if (j == y.end()) return fmt::format("{} at {} is only in {} spec", k, i->second, whose_a);
    if (i == x.end()) return fmt::format("{} at {} is only in {} spec", k, j->second, whose_b);
    return fmt::format("{} is at {} in {} spec and at {} in {}", k, i->second, whose_a, j->second, whose_b);
  }
  return {};
}

}  // namespace troupe
