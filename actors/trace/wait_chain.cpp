#include "actors/trace/wait_chain.hpp"

#include <fmt/format.h>

#include <map>
#include <optional>
#include <set>

#include "core/device_name.hpp"

namespace troupe {

std::string describe_wait(const WaitReport& w) {
  std::string s = w.received < w.expected
                      ? fmt::format("node '{}' has {} of {} inputs, waits for", w.node, w.received, w.expected)
                      : fmt::format("node '{}' waits for", w.node);
  for (std::size_t i = 0; i < w.missing.size(); ++i) s += (i ? ", " : " ") + w.missing[i];
  return s;
}

namespace {

using Key = std::pair<std::size_t, std::string>;  // (index of the task, node)

// What a report says after "node 'n' ".
std::string tail_of(const WaitReport& w) {
  std::string s = describe_wait(w);
  const std::string prefix = fmt::format("node '{}' ", w.node);
  return s.compare(0, prefix.size(), prefix) == 0 ? s.substr(prefix.size()) : s;
}

struct Chains {
  const std::vector<TaskWaits>& tasks;
  std::map<Key, const WaitReport*> report;  // the first report of every waiting node
  std::map<std::string, std::size_t> task_index;

  explicit Chains(const std::vector<TaskWaits>& t) : tasks(t) {
    for (std::size_t i = 0; i < tasks.size(); ++i) {
      task_index.emplace(tasks[i].task, i);
      for (auto& w : tasks[i].waits) report.emplace(Key{i, w.node}, &w);
    }
  }

  // "ps:0" of "/job:ps/task:0/device:CPU:0"; the device itself when it names no task.
  static std::string task_name(const WaitSource& s) {
    try {
      DeviceSpec d = DeviceSpec::parse(s.device);
      if (d.job && d.task) return *d.job + ":" + std::to_string(*d.task);
    } catch (const Error&) {
    }
    return s.device;
  }
  // The task a source's device belongs to; nullopt for one of no task listed here.
  std::optional<std::size_t> task_of(std::size_t here, const WaitSource& s) const {
    if (s.device.empty() || tasks.size() == 1) return here;
    auto it = task_index.find(task_name(s));
    if (it == task_index.end()) return std::nullopt;
    return it->second;
  }

  // The sources of `k`'s report that are themselves waiting, in order.
  std::vector<std::pair<Key, const WaitSource*>> waited_for(const Key& k) const {
    std::vector<std::pair<Key, const WaitSource*>> out;
    for (auto& s : report.at(k)->sources)
      if (auto t = task_of(k.first, s)) {
        Key to{*t, s.node};
        if (to != k && report.count(to)) out.push_back({to, &s});
      }
    return out;
  }
};

struct Link {
  Key at;
  const WaitSource* via = nullptr;  // the source followed to the next link
};

std::string sentence(const Chains& c, const std::vector<Link>& path) {
  auto task_label = [&](std::size_t t) { return c.tasks[t].task.empty() ? std::string() : c.tasks[t].task + " "; };
  std::string s = task_label(path.front().at.first);
  std::size_t entry = 0;  // the first link of the task the sentence is in
  auto open = [&](std::size_t last) {
    // "'entry'" or "'entry' waits on 'last', which"
    return path[entry].at == path[last].at
               ? fmt::format("'{}'", path[entry].at.second)
               : fmt::format("'{}' waits on '{}', which", path[entry].at.second, path[last].at.second);
  };
  for (std::size_t i = 0; i + 1 < path.size(); ++i) {
    if (path[i + 1].at.first == path[i].at.first) continue;
    s += fmt::format("{} waits for '{}' from {}, where ", open(i), path[i].via->tensor, c.tasks[path[i + 1].at.first].task);
    entry = i + 1;
  }
  const Link& end = path.back();
  const WaitReport& w = *c.report.at(end.at);
  // A _Recv whose sender waits for nothing here: say where the value should come from.
  for (auto& src : w.sources) {
    if (src.device.empty()) continue;
    auto t = c.task_of(end.at.first, src);
    if (t && *t == end.at.first) continue;
    std::string why = !t ? fmt::format("{}, which is not running this step or did not say what it waits for", c.task_name(src))
                      : !c.tasks[*t].answered
                          ? fmt::format("{}, which did not say what it waits for", c.tasks[*t].task)
                          : fmt::format("{}, where '{}' waits for no input (its kernel runs, or its value is on the way)",
                                        c.tasks[*t].task, src.node);
    return s + fmt::format("{} waits for '{}' from {}", open(path.size() - 1), src.tensor, why);
  }
  return s + open(path.size() - 1) + " " + tail_of(w);
}

}  // namespace

std::string explain_waits(const std::vector<TaskWaits>& tasks, const std::vector<std::string>& labels) {
  std::string lines;
  for (std::size_t t = 0; t < tasks.size(); ++t)
    for (auto& w : tasks[t].waits)
      if (!w.inferred) lines += "\n  " + (t < labels.size() ? labels[t] : std::string()) + describe_wait(w);
  if (lines.empty()) return {};
  std::string stuck;
  for (auto& sentence : follow_waits(tasks)) stuck += (stuck.empty() ? "" : "; ") + sentence;
  return fmt::format("stuck: {}; nodes still waiting:{}", stuck, lines);
}

std::vector<std::string> follow_waits(const std::vector<TaskWaits>& tasks) {
  Chains c(tasks);
  std::set<Key> waited_on;
  for (auto& [k, r] : c.report)
    for (auto& [to, source] : c.waited_for(k)) waited_on.insert(to);

  // Walk from every node nothing waits on (and then from any node left, for waits in a circle).
  std::vector<std::vector<Link>> paths;
  std::set<Key> walked;
  auto walk = [&](const Key& from) {
    std::vector<Link> path{{from, nullptr}};
    std::set<Key> seen{from};
    walked.insert(from);
    for (auto next = c.waited_for(from); !next.empty(); next = c.waited_for(path.back().at)) {
      const auto& [to, source] = next.front();  // the first link is followed
      if (seen.count(to)) break;
      path.back().via = source;
      path.push_back({to, nullptr});
      seen.insert(to);
      walked.insert(to);
    }
    paths.push_back(std::move(path));
  };
  // (An inferred report is a link between waits, never where a chain begins.)
  for (std::size_t t = 0; t < tasks.size(); ++t)
    for (auto& w : tasks[t].waits)
      if (!w.inferred && !waited_on.count(Key{t, w.node}) && !walked.count(Key{t, w.node})) walk(Key{t, w.node});
  for (std::size_t t = 0; t < tasks.size(); ++t)
    for (auto& w : tasks[t].waits)
      if (!w.inferred && !walked.count(Key{t, w.node})) walk(Key{t, w.node});

  // Per stuck node, the path crossing the most tasks (then the longest).
  auto crossings = [](const std::vector<Link>& p) {
    std::size_t n = 0;
    for (std::size_t i = 0; i + 1 < p.size(); ++i) n += p[i].at.first != p[i + 1].at.first;
    return n;
  };
  std::vector<Key> ends;
  std::map<Key, const std::vector<Link>*> best;
  for (auto& p : paths) {
    const Key& end = p.back().at;
    auto it = best.find(end);
    if (it == best.end()) {
      ends.push_back(end);
      best.emplace(end, &p);
    } else if (std::pair{crossings(p), p.size()} > std::pair{crossings(*it->second), it->second->size()}) {
      it->second = &p;
    }
  }
  std::vector<std::string> out;
  for (auto& e : ends) out.push_back(sentence(c, *best.at(e)));
  return out;
}

}  // namespace troupe
