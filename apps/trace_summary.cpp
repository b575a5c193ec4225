#include "apps/trace_summary.hpp"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>

#include "core/error.hpp"

namespace troupe::app {

namespace {

// The strings of a trace's slices, each kept once: a long run's trace names the same few
// thousand ops, nodes and tasks millions of times (a slice holding its own copies would take
// several times the trace's size in memory).
class Names {
 public:
  const std::string* intern(std::string&& s) { return &*names_.insert(std::move(s)).first; }

 private:
  std::unordered_set<std::string> names_;  // its elements stay where they are as it grows
};

enum class Cat : uint8_t { other, step, kernel, variable, transfer };

Cat cat_of(const std::string& cat) {
  return cat == "step"       ? Cat::step
         : cat == "kernel"   ? Cat::kernel
         : cat == "variable" ? Cat::variable
         : cat == "transfer" ? Cat::transfer
                             : Cat::other;
}

struct Slice {
  int pid = 0;
  Cat cat = Cat::other;
  double ts = 0, dur = 0;
  double end() const { return ts + dur; }
  const std::string *name, *node, *peer, *transfer;  // interned (Names)
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
  if (s.cat == Cat::kernel) return fmt::format("{} '{}'", *s.name, *s.node);
  if (s.cat == Cat::variable) return fmt::format("{} '{}' (its parameter shard's answer)", *s.name, *s.node);
  return fmt::format("{} {} {}", *s.name, *s.name == "send" ? "to" : "from", *s.peer);
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
  std::unordered_map<const std::string*, const Slice*> send_of;  // per transfer, its (last) send
  for (auto* s : slices) {
    by_process[s->pid].push_back(s);
    if (*s->name == "send") send_of[s->transfer] = s;
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
    if (at->cat == Cat::transfer && *at->name == "recv")
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

struct Counter {
  int pid;
  std::string name;
  double ts;
  int64_t bytes;
};

// What the summary reads of a trace, read straight from the file (EventReader): a long run's
// trace is hundreds of MB, and a parsed document of it ten times that in memory.
struct Events {
  bool has_events = false;  // a traceEvents array at the top
  bool troupe = false;      // otherData.producer is "troupe"
  int64_t events_left_out = 0;
  std::map<int, std::string> task_of;
  Names names;  // what the slices' strings point to
  std::vector<Slice> slices;
  std::vector<Counter> counters;
};

// The fields of one traceEvents entry that the summary reads, in whatever order they come.
struct Event {
  std::string ph, name, cat;
  int pid = 0;
  double ts = 0, dur = 0;
  bool has_args = false;
  std::string arg_name, node, peer, transfer;  // args.name (a process's), args.node, ...
  uint64_t step = 0;
  int64_t bytes = 0;

  void into(Events& out) && {
    if (ph == "M" && name == "process_name") out.task_of[pid] = task_of_process(arg_name);
    if (ph == "C" && cat == "memory" && has_args) out.counters.push_back({pid, std::move(name), ts, bytes});
    if (ph != "X") return;
    out.slices.push_back({.pid = pid, .cat = cat_of(cat), .ts = ts, .dur = dur, .name = out.names.intern(std::move(name)),
                          .node = out.names.intern(std::move(node)), .peer = out.names.intern(std::move(peer)),
                          .transfer = out.names.intern(std::move(transfer)), .step = step, .bytes = bytes});
  }
};

// Reads the events from a file as it is parsed, keeping only what the summary reads.
class EventReader final : public nlohmann::json_sax<nlohmann::json> {
 public:
  explicit EventReader(Events& out) : out_(out) {}

  bool null() override { return scalar(); }
  bool boolean(bool) override { return scalar(); }
  bool number_integer(number_integer_t v) override { return number(double(v), v, uint64_t(v)); }
  bool number_unsigned(number_unsigned_t v) override { return number(double(v), int64_t(v), v); }
  bool number_float(number_float_t v, const string_t&) override {
    // Converted within the integers' ranges (a value beyond them is no pid, step or byte count).
    const double i = std::clamp(v, -0x1p63, 0x1p63 - 1024), u = std::clamp(v, 0.0, 0x1p64 - 2048);
    return number(v, int64_t(i), uint64_t(u));
  }
  bool binary(binary_t&) override { return scalar(); }
  bool string(string_t& v) override {
    std::string* field = nullptr;
    switch (at()) {
      case In::event:
        field = key_ == "ph" ? &event_.ph : key_ == "name" ? &event_.name : key_ == "cat" ? &event_.cat : nullptr;
        break;
      case In::args:
        field = key_ == "name"       ? &event_.arg_name
                : key_ == "node"     ? &event_.node
                : key_ == "peer"     ? &event_.peer
                : key_ == "transfer" ? &event_.transfer
                                     : nullptr;
        break;
      case In::other_data:
        if (key_ == "producer") out_.troupe = v == "troupe";
        return true;
      default:
        return true;
    }
    if (field) *field = std::move(v);
    else if (numeric_key()) wrong("a string");
    return true;
  }
  bool start_object(std::size_t) override {
    In next = In::ignored;
    if (stack_.empty()) next = In::root;
    else if (at() == In::root && key_ == "otherData") next = In::other_data;
    else if (at() == In::trace_events) next = In::event;
    else if (at() == In::event && key_ == "args") next = In::args;
    if (next == In::event) event_ = Event{};
    if (next == In::args) event_.has_args = true;
    stack_.push_back(next);
    return true;
  }
  bool key(string_t& k) override {
    key_ = std::move(k);
    return true;
  }
  bool end_object() override {
    const In done = at();
    stack_.pop_back();
    if (done == In::event) {
      std::move(event_).into(out_);
      ++index_;
    }
    return true;
  }
  bool start_array(std::size_t) override {
    const bool events = !stack_.empty() && at() == In::root && key_ == "traceEvents";
    if (events) out_.has_events = true;
    stack_.push_back(events ? In::trace_events : In::ignored);
    return true;
  }
  bool end_array() override {
    stack_.pop_back();
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) override { throw e; }

 private:
  enum class In { root, trace_events, event, args, other_data, ignored };
  In at() const { return stack_.empty() ? In::ignored : stack_.back(); }

  bool numeric_key() const {
    if (at() == In::event) return key_ == "pid" || key_ == "ts" || key_ == "dur";
    if (at() == In::args) return key_ == "step" || key_ == "bytes";
    return at() == In::other_data && key_ == "events_left_out";
  }
  // A field of the summary's given a value of another kind: the trace is not one it can read.
  [[noreturn]] void wrong(const char* what) const {
    fail(ErrorCode::invalid_argument, "traceEvents[{}]: '{}' is {}, not what a Troupe trace holds there", index_, key_, what);
  }
  bool scalar() {
    if (numeric_key()) wrong("not a number");
    return true;
  }
  bool number(double d, int64_t i, uint64_t u) {
    if (at() == In::event) {
      if (key_ == "pid") event_.pid = int(i);
      else if (key_ == "ts") event_.ts = d;
      else if (key_ == "dur") event_.dur = d;
    } else if (at() == In::args) {
      if (key_ == "step") event_.step = u;
      else if (key_ == "bytes") event_.bytes = i;
    } else if (at() == In::other_data && key_ == "events_left_out") {
      out_.events_left_out = i;
    }
    return true;
  }

  Events& out_;
  std::vector<In> stack_;
  std::string key_;
  Event event_;
  std::size_t index_ = 0;  // of the event being read
};

TraceSummary summarize(Events&& events) {
  if (!events.has_events) fail(ErrorCode::invalid_argument, "not a Chrome trace: no traceEvents array");
  if (!events.troupe)
    fail(ErrorCode::invalid_argument, "not a trace a Troupe session wrote (otherData.producer is not \"troupe\")");
  TraceSummary out;
  out.events_left_out = events.events_left_out;
  const std::map<int, std::string>& task_of = events.task_of;
  const std::vector<Slice>& slices = events.slices;
  std::vector<Counter>& counters = events.counters;
  std::map<std::pair<std::string, std::string>, TraceSummary::Transfer> transfers;
  std::map<uint64_t, std::vector<const Slice*>> by_step;
  auto task = [&](int pid) {
    auto it = task_of.find(pid);
    return it == task_of.end() ? std::to_string(pid) : it->second;
  };
  // Summed per interned name (op) and per (node, op, task), each slice added in the trace's
  // order; named once per distinct key after.
  std::unordered_map<const std::string*, TraceSummary::Stat> ops;
  struct NodeKey {
    const std::string *node, *op, *task;
    bool operator==(const NodeKey&) const = default;
  };
  struct NodeKeyHash {
    std::size_t operator()(const NodeKey& k) const {
      const std::hash<const void*> h;
      return h(k.node) ^ (h(k.op) * 31) ^ (h(k.task) * 1031);
    }
  };
  std::unordered_map<NodeKey, TraceSummary::Stat, NodeKeyHash> nodes;
  std::unordered_map<int, const std::string*> task_name;  // per pid, interned
  auto task_of_pid = [&](int pid) {
    auto [it, fresh] = task_name.try_emplace(pid, nullptr);
    if (fresh) it->second = events.names.intern(task(pid));
    return it->second;
  };
  for (auto& s : slices) {
    if (s.cat == Cat::step) {
      out.steps.push_back(s.step);
      out.step_us += s.dur;
    } else if (s.cat == Cat::kernel || s.cat == Cat::variable) {
      if (s.cat == Cat::kernel) out.kernel_us += s.dur;
      auto& op = ops[s.name];
      ++op.count, op.total_us += s.dur;
      auto& n = nodes[NodeKey{s.node, s.name, task_of_pid(s.pid)}];
      ++n.count, n.total_us += s.dur;
      by_step[s.step].push_back(&s);
    } else if (s.cat == Cat::transfer) {
      const bool send = *s.name == "send";
      const std::string &peer = *s.peer, &mine = *task_of_pid(s.pid);
      auto& t = transfers[send ? std::pair{mine, peer} : std::pair{peer, mine}];
      t.from = send ? mine : peer;
      t.to = send ? peer : mine;
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
  std::map<std::string, TraceSummary::Stat> op_stats, node_stats;
  for (auto& [name, op] : ops) {
    op.name = *name;
    op_stats.emplace(op.name, op);
  }
  for (auto& [key, n] : nodes) {
    n.name = fmt::format("{} ({}) on {}", *key.node, *key.op, *key.task);
    // Two keys of one name (a node name holding " (" and " on "): one row, as the name says.
    if (auto [it, fresh] = node_stats.emplace(n.name, n); !fresh)
      it->second.count += n.count, it->second.total_us += n.total_us;
  }
  out.op_types = sorted(op_stats);
  out.nodes = sorted(node_stats);
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

}  // namespace

TraceSummary summarize_trace_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) fail(ErrorCode::not_found, "cannot open the trace file {}", path);
  Events events;
  try {
    EventReader reader(events);
    nlohmann::json::sax_parse(in, &reader);
  } catch (const Error& e) {
    fail(e.code(), "{}: {}", path, e.what());
  } catch (const std::exception& e) {
    fail(ErrorCode::invalid_argument, "the trace file {} is not JSON: {}", path, e.what());
  }
  try {
    return summarize(std::move(events));
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

void write_summary_json(const TraceSummary& s, std::FILE* out) {
  using nlohmann::json;
  auto stats = [](const std::vector<TraceSummary::Stat>& v) {
    json a = json::array();
    for (auto& st : v) a.push_back({{"name", st.name}, {"count", st.count}, {"total_us", st.total_us}, {"mean_us", st.mean_us()}});
    return a;
  };
  // Everything but the critical paths, as one document.
  json rest;
  rest["steps"] = s.steps;
  rest["step_us"] = s.step_us;
  rest["kernel_us"] = s.kernel_us;
  rest["op_types"] = stats(s.op_types);
  rest["nodes"] = stats(s.nodes);
  json t = json::array();
  for (auto& x : s.transfers)
    t.push_back({{"from", x.from}, {"to", x.to}, {"values", x.count}, {"bytes", x.bytes}, {"send_us", x.send_us},
                 {"recv_us", x.recv_us}});
  rest["transfers"] = t;
  json memory = json::array();
  for (auto& m : s.memory)
    memory.push_back({{"device", m.device}, {"peak_bytes", m.peak_bytes}, {"last_bytes", m.last_bytes}});
  rest["memory"] = memory;
  rest["events_left_out"] = s.events_left_out;
  // The critical paths (a long loop's step has hundreds of thousands of links) written a link at
  // a time, laid out as nlohmann-json's dump(1) of the whole would lay them out: object keys in
  // their order as strings, "critical_path" first among the top level's, one space of indent a
  // level.
  auto put = [&](const std::string& text) { std::fwrite(text.data(), 1, text.size(), out); };
  // A value dumped on its own, at `depth` levels down.
  auto nested = [](const json& value, int depth) {
    std::string text = value.dump(1), indented;
    for (char c : text) {
      indented += c;
      if (c == '\n') indented.append(std::size_t(depth), ' ');
    }
    return indented;
  };
  std::vector<std::pair<std::string, const std::vector<TraceSummary::Link>*>> paths;
  for (auto& [step, path] : s.critical_path) paths.emplace_back(std::to_string(step), &path);
  std::sort(paths.begin(), paths.end(), [](auto& a, auto& b) { return a.first < b.first; });
  put("{\n \"critical_path\": ");
  if (paths.empty()) put("{}");
  else {
    put("{\n");
    for (std::size_t i = 0; i < paths.size(); ++i) {
      put("  " + json(paths[i].first).dump() + ": ");
      const auto& path = *paths[i].second;
      if (path.empty()) put("[]");
      else {
        put("[\n");
        for (std::size_t k = 0; k < path.size(); ++k) {
          const auto& l = path[k];
          put("   " + nested({{"what", l.what}, {"where", l.where}, {"start_us", l.start_us}, {"dur_us", l.dur_us},
                               {"gap_us", l.gap_us}},
                              3));
          put(k + 1 < path.size() ? ",\n" : "\n");
        }
        put("  ]");
      }
      put(i + 1 < paths.size() ? ",\n" : "\n");
    }
    put(" }");
  }
  // The rest's members after it: its dump without the opening brace.
  put(",\n" + rest.dump(1).substr(2) + "\n");
}

}  // namespace troupe::app
