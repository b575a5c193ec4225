#include "apps/trace_summary.hpp"

#include <algorithm>
#include <fstream>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>

#include "core/error.hpp"

namespace troupe::app {

namespace {

struct Slice {
  int pid = 0;
  double ts = 0, dur = 0;
  double end() const { return ts + dur; }
  std::string cat, name, node, peer, transfer;
  uint64_t step = 0;
  int64_t bytes = 0;
};

// "ps:0 at 127.0.0.1:4001" -> "ps:0"; "local (pid 7 on h)" -> "local".
std::string task_of_process(const std::string& name) {
  const auto cut = name.find(' ');
  return cut == std::string::npos ? name : name.substr(0, cut);
}

std::vector<TraceSummary::Stat> sorted(std::map<std::string, TraceSummary::Stat>& by_name) {
  std::vector<TraceSummary::Stat> out;
  for (auto& [name, s] : by_name) out.push_back(s);
  std::sort(out.begin(), out.end(), [](auto& a, auto& b) { return a.total_us > b.total_us || (a.total_us == b.total_us && a.name < b.name); });
  return out;
}

std::string describe(const Slice& s) {
  if (s.cat == "kernel") return fmt::format("{} '{}'", s.name, s.node);
  if (s.cat == "variable") return fmt::format("{} '{}' (its parameter shard's answer)", s.name, s.node);
  return fmt::format("{} {} {}", s.name, s.name == "send" ? "to" : "from", s.peer);
}

// Walking back from the slice that ends last: each link's predecessor is, for a recv, its send
// (the same transfer), else the slice of the same process that ended last before it started.
// Each look-up is a binary search over the process's slices by end (a step of a long loop has
// hundreds of thousands of slices, and its path nearly as many links).
std::vector<TraceSummary::Link> critical_path(const std::vector<const Slice*>& slices,
                                              const std::map<int, std::string>& task_of) {
  std::vector<TraceSummary::Link> path;
  if (slices.empty()) return path;
  std::map<int, std::vector<const Slice*>> by_process;  // each sorted by end
  std::unordered_map<std::string, const Slice*> send_of;  // per transfer, its (last) send
  for (auto* s : slices) {
    by_process[s->pid].push_back(s);
    if (s->name == "send") send_of[s->transfer] = s;
  }
  for (auto& [pid, mine] : by_process)
    std::stable_sort(mine.begin(), mine.end(), [](auto* a, auto* b) { return a->end() < b->end(); });
  const Slice* at = *std::max_element(slices.begin(), slices.end(), [](auto* a, auto* b) { return a->end() < b->end(); });
  constexpr double kSlack = 0.002;  // microseconds: times are written to the nanosecond
  std::unordered_set<const Slice*> seen;
  while (at && seen.insert(at).second) {
    auto where = task_of.find(at->pid);
    path.push_back({describe(*at), where == task_of.end() ? std::to_string(at->pid) : where->second, at->ts, at->dur, 0});
    const Slice* before = nullptr;
    if (at->cat == "transfer" && at->name == "recv")
      if (auto it = send_of.find(at->transfer); it != send_of.end()) before = it->second;
    if (!before) {
      // The latest end at or before at->ts (with the slack) of a slice that started before it.
      const auto& mine = by_process[at->pid];
      auto it = std::upper_bound(mine.begin(), mine.end(), at->ts + kSlack, [](double t, auto* s) { return t < s->end(); });
      while (it != mine.begin()) {
        const Slice* s = *--it;
        if (s == at || s->ts >= at->ts) continue;
        // Of those that end together, the first of the trace.
        if (before && s->end() != before->end()) break;
        before = s;
      }
    }
    if (before) path.back().gap_us = std::max(0.0, at->ts - before->end());
    at = before;
  }
  std::reverse(path.begin(), path.end());
  return path;
}

}  // namespace

TraceSummary summarize_trace(const nlohmann::json& trace) {
  if (!trace.is_object() || !trace.contains("traceEvents") || !trace["traceEvents"].is_array())
    fail(ErrorCode::invalid_argument, "not a Chrome trace: no traceEvents array");
  if (!trace.contains("otherData") || trace["otherData"].value("producer", "") != "troupe")
    fail(ErrorCode::invalid_argument, "not a trace a Troupe session wrote (otherData.producer is not \"troupe\")");
  TraceSummary out;
  out.events_left_out = trace["otherData"].value("events_left_out", int64_t(0));
  std::map<int, std::string> task_of;
  std::vector<Slice> slices;
  struct Counter {
    int pid;
    std::string name;
    double ts;
    int64_t bytes;
  };
  std::vector<Counter> counters;
  for (auto& e : trace["traceEvents"]) {
    const std::string ph = e.value("ph", "");
    if (ph == "M" && e.value("name", "") == "process_name")
      task_of[e.value("pid", 0)] = task_of_process(e["args"].value("name", ""));
    if (ph == "C" && e.value("cat", "") == "memory" && e.contains("args"))
      counters.push_back({e.value("pid", 0), e.value("name", ""), e.value("ts", 0.0), e["args"].value("bytes", int64_t(0))});
    if (ph != "X") continue;
    Slice s;
    s.pid = e.value("pid", 0);
    s.ts = e.value("ts", 0.0);
    s.dur = e.value("dur", 0.0);
    s.cat = e.value("cat", "");
    s.name = e.value("name", "");
    if (e.contains("args")) {
      const auto& a = e["args"];
      s.step = a.value("step", uint64_t(0));
      s.node = a.value("node", "");
      s.peer = a.value("peer", "");
      s.transfer = a.value("transfer", "");
      s.bytes = a.value("bytes", int64_t(0));
    }
    slices.push_back(std::move(s));
  }
  std::map<std::string, TraceSummary::Stat> ops, nodes;
  std::map<std::pair<std::string, std::string>, TraceSummary::Transfer> transfers;
  std::map<uint64_t, std::vector<const Slice*>> by_step;
  auto task = [&](int pid) {
    auto it = task_of.find(pid);
    return it == task_of.end() ? std::to_string(pid) : it->second;
  };
  for (auto& s : slices) {
    if (s.cat == "step") {
      out.steps.push_back(s.step);
      out.step_us += s.dur;
    } else if (s.cat == "kernel" || s.cat == "variable") {
      if (s.cat == "kernel") out.kernel_us += s.dur;
      auto& op = ops[s.name];
      op.name = s.name, ++op.count, op.total_us += s.dur;
      const std::string node_name = fmt::format("{} ({}) on {}", s.node, s.name, task(s.pid));
      auto& n = nodes[node_name];
      n.name = node_name, ++n.count, n.total_us += s.dur;
      by_step[s.step].push_back(&s);
    } else if (s.cat == "transfer") {
      const bool send = s.name == "send";
      auto& t = transfers[send ? std::pair{task(s.pid), s.peer} : std::pair{s.peer, task(s.pid)}];
      t.from = send ? task(s.pid) : s.peer;
      t.to = send ? s.peer : task(s.pid);
      if (send) {
        ++t.count;
        t.bytes += s.bytes;
        t.send_us += s.dur;
      } else {
        t.recv_us += s.dur;
      }
      by_step[s.step].push_back(&s);
    }
  }
  std::sort(out.steps.begin(), out.steps.end());
  out.op_types = sorted(ops);
  out.nodes = sorted(nodes);
  for (auto& [k, t] : transfers) out.transfers.push_back(t);
  for (auto& [step, mine] : by_step) out.critical_path[step] = critical_path(mine, task_of);
  std::sort(counters.begin(), counters.end(), [](auto& a, auto& b) { return a.ts < b.ts; });
  std::map<std::string, TraceSummary::Memory> memory;
  for (auto& c : counters) {
    const std::string prefix = "memory in use, ";
    const std::string device = task(c.pid) + " " + (c.name.starts_with(prefix) ? c.name.substr(prefix.size()) : c.name);
    auto& m = memory[device];
    m.device = device;
    m.peak_bytes = std::max(m.peak_bytes, c.bytes);
    m.last_bytes = c.bytes;
  }
  for (auto& [name, m] : memory) out.memory.push_back(m);
  return out;
}

TraceSummary summarize_trace_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) fail(ErrorCode::not_found, "cannot open the trace file {}", path);
  nlohmann::json trace;
  try {
    trace = nlohmann::json::parse(in);
  } catch (const std::exception& e) {
    fail(ErrorCode::invalid_argument, "the trace file {} is not JSON: {}", path, e.what());
  }
  try {
    return summarize_trace(trace);
  } catch (const Error& e) {
    fail(e.code(), "{}: {}", path, e.what());
  }
}

std::string format_summary(const TraceSummary& s, int top) {
  std::string out;
  const double step_ms = s.step_us / 1000.0;
  out += fmt::format("{} traced step(s), {:.3f} ms of steps in all; kernels ran {:.3f} ms (on every thread together)\n",
                     s.steps.size(), step_ms, s.kernel_us / 1000.0);
  if (s.events_left_out > 0)
    out += fmt::format("note: {} event(s) were left out of the trace (TraceOptions::max_events): totals are short\n",
                       s.events_left_out);
  auto table = [&](const char* title, const std::vector<TraceSummary::Stat>& stats) {
    out += fmt::format("\n{}\n{:>8} {:>12} {:>11} {:>8}  {}\n", title, "count", "total ms", "mean us", "of step", "name");
    int shown = 0;
    for (auto& st : stats) {
      if (shown++ == top) {
        out += fmt::format("  ... {} more\n", stats.size() - std::size_t(top));
        break;
      }
      out += fmt::format("{:>8} {:>12.3f} {:>11.1f} {:>7.1f}%  {}\n", st.count, st.total_us / 1000.0, st.mean_us(),
                         s.step_us > 0 ? 100.0 * st.total_us / s.step_us : 0.0, st.name);
    }
  };
  table("per op type", s.op_types);
  table("top nodes", s.nodes);
  if (!s.transfers.empty()) {
    out += fmt::format("\nvalues that crossed between tasks\n{:>8} {:>12} {:>12} {:>12}  {}\n", "values", "bytes",
                       "send ms", "recv ms", "from -> to");
    for (auto& t : s.transfers)
      out += fmt::format("{:>8} {:>12} {:>12.3f} {:>12.3f}  {} -> {}\n", t.count, t.bytes, t.send_us / 1000.0,
                         t.recv_us / 1000.0, t.from, t.to);
  }
  if (!s.memory.empty()) {
    out += fmt::format("\nmemory in use per device (sampled as traced kernels ended)\n{:>12} {:>12}  {}\n", "peak MiB",
                       "last MiB", "device");
    for (auto& m : s.memory)
      out += fmt::format("{:>12.1f} {:>12.1f}  {}\n", double(m.peak_bytes) / (1 << 20), double(m.last_bytes) / (1 << 20),
                         m.device);
  }
  for (auto& [step, path] : s.critical_path) {
    double busy = 0, idle = 0;
    for (auto& l : path) busy += l.dur_us, idle += l.gap_us;
    out += fmt::format("\ncritical path of step {}: {} link(s), {:.3f} ms running, {:.3f} ms between them\n", step,
                       path.size(), busy / 1000.0, idle / 1000.0);
    for (auto& l : path)
      out += fmt::format("  {:>10.1f} us  +{:<9.1f} {} on {}{}\n", l.start_us, l.dur_us, l.what, l.where,
                         l.gap_us > 0.05 ? fmt::format(" (after {:.1f} us)", l.gap_us) : "");
  }
  return out;
}

nlohmann::json summary_to_json(const TraceSummary& s) {
  using nlohmann::json;
  auto stats = [](const std::vector<TraceSummary::Stat>& v) {
    json a = json::array();
    for (auto& st : v) a.push_back({{"name", st.name}, {"count", st.count}, {"total_us", st.total_us}, {"mean_us", st.mean_us()}});
    return a;
  };
  json out;
  out["steps"] = s.steps;
  out["step_us"] = s.step_us;
  out["kernel_us"] = s.kernel_us;
  out["op_types"] = stats(s.op_types);
  out["nodes"] = stats(s.nodes);
  json t = json::array();
  for (auto& x : s.transfers)
    t.push_back({{"from", x.from}, {"to", x.to}, {"values", x.count}, {"bytes", x.bytes}, {"send_us", x.send_us},
                 {"recv_us", x.recv_us}});
  out["transfers"] = t;
  json paths = json::object();
  for (auto& [step, path] : s.critical_path) {
    json p = json::array();
    for (auto& l : path)
      p.push_back({{"what", l.what}, {"where", l.where}, {"start_us", l.start_us}, {"dur_us", l.dur_us}, {"gap_us", l.gap_us}});
    paths[std::to_string(step)] = p;
  }
  out["critical_path"] = paths;
  json memory = json::array();
  for (auto& m : s.memory)
    memory.push_back({{"device", m.device}, {"peak_bytes", m.peak_bytes}, {"last_bytes", m.last_bytes}});
  out["memory"] = memory;
  out["events_left_out"] = s.events_left_out;
  return out;
}

}  // namespace troupe::app
