#include "core/trace.hpp"

#include <pthread.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <unordered_map>

#include <fmt/format.h>

namespace troupe::trace {

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

namespace {

// ---- interned strings ------------------------------------------------------------------

struct Strings {
  std::mutex mutex;
  std::unordered_map<std::string, uint32_t> ids;
  std::vector<const std::string*> texts{nullptr};  // id 0: none
};

Strings& strings() {
  static auto* s = new Strings;  // lives past static destruction: threads may record late
  return *s;
}

// ---- marked steps ----------------------------------------------------------------------

constexpr int kSlots = 256;
struct Slot {
  std::atomic<uint64_t> key{0};
  std::atomic<uint64_t> step{0};
};
std::array<Slot, kSlots> slots;
std::mutex slots_mutex;  // begin and end

// ---- buffers ---------------------------------------------------------------------------

struct Buffer {
  std::mutex mutex;
  std::vector<Event> events;
};

struct Registry {
  std::mutex mutex;
  std::vector<std::shared_ptr<Buffer>> buffers;
  std::atomic<std::size_t> kept{0};
  std::atomic<std::size_t> limit{1'000'000};
  std::atomic<std::size_t> dropped{0};
  // Rows: id -> name; names of thread rows are made once per thread.
  std::vector<std::string> rows{""};
  std::map<std::string, uint32_t, std::less<>> row_ids;
  // lane_row: per base name, per lane, the end of its last slice.
  std::map<std::string, std::vector<int64_t>, std::less<>> lanes;
};

Registry& registry() {
  static auto* r = new Registry;
  return *r;
}

Buffer& this_thread_buffer() {
  thread_local std::shared_ptr<Buffer> mine = [] {
    auto b = std::make_shared<Buffer>();
    auto& r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    r.buffers.push_back(b);
    return b;
  }();
  return *mine;
}

uint32_t row_named(Registry& r, const std::string& name) {  // r.mutex held
  auto it = r.row_ids.find(name);
  if (it != r.row_ids.end()) return it->second;
  const uint32_t id = uint32_t(r.rows.size());
  r.rows.push_back(name);
  r.row_ids.emplace(name, id);
  return id;
}

// ---- JSON ------------------------------------------------------------------------------

void append_escaped(std::string& out, std::string_view s) {
  for (char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) out += fmt::format("\\u{:04x}", int(c));
        else out += c;
    }
  }
}

std::string quoted(std::string_view s) {
  std::string out = "\"";
  append_escaped(out, s);
  out += '"';
  return out;
}

std::string micros(int64_t ns) { return fmt::format("{:.3f}", double(ns) / 1000.0); }

std::string to_json(const Event& e, const std::vector<std::string>& text, int64_t shift_ns, int pid) {
  auto t = [&](uint32_t id) -> const std::string& { return text[id]; };
  std::string out = fmt::format(R"({{"ph":"{}","pid":{},"tid":{},"ts":{},"name":{},"cat":{})", char(e.phase), pid,
                                e.row, micros(e.ts - shift_ns), quoted(t(e.name)), quoted(t(e.cat)));
  switch (e.phase) {
    case Phase::slice: {
      out += fmt::format(R"(,"dur":{},"args":{{"step":{})", micros(e.dur), e.step);
      if (e.node) out += ",\"node\":" + quoted(t(e.node)) + ",\"op\":" + quoted(t(e.name));
      if (e.frame || e.iteration) out += fmt::format(R"(,"frame":"{:#x}","iteration":{})", e.frame, e.iteration);
      if (e.detail)
        out += std::string(e.node ? ",\"inputs\":" : t(e.cat) == "transfer" ? ",\"peer\":" : ",\"what\":") + quoted(t(e.detail));
      if (e.value) out += fmt::format(R"(,"bytes":{})", e.value);
      if (e.id) out += fmt::format(R"(,"transfer":"{:#x}")", e.id);
      out += "}}";
      break;
    }
    case Phase::flow_start:
    case Phase::flow_end:
      out += fmt::format(R"(,"id":"{:#x}")", e.id);
      if (e.phase == Phase::flow_end) out += R"(,"bp":"e")";
      out += "}";
      break;
    case Phase::async_begin:
    case Phase::async_end:
      out += fmt::format(R"(,"id":"{:#x}","args":{{"step":{})", e.id, e.step);
      if (e.detail) out += ",\"what\":" + quoted(t(e.detail));
      out += "}}";
      break;
    case Phase::counter:
      out += fmt::format(R"(,"args":{{"bytes":{}}}}})", e.value);
      break;
  }
  return out;
}

}  // namespace

uint32_t intern(std::string_view text) {
  auto& s = strings();
  std::lock_guard<std::mutex> lock(s.mutex);
  auto it = s.ids.find(std::string(text));
  if (it != s.ids.end()) return it->second;
  const uint32_t id = uint32_t(s.texts.size());
  auto inserted = s.ids.emplace(std::string(text), id).first;
  s.texts.push_back(&inserted->first);
  return id;
}

namespace detail {
std::atomic<int> marked{0};

bool is_marked(uint64_t key, uint64_t step) {
  for (auto& s : slots)
    if (s.step.load(std::memory_order_acquire) == step && s.key.load(std::memory_order_relaxed) == key && step != 0)
      return true;
  return false;
}
}  // namespace detail

bool begin(uint64_t key, uint64_t step) {
  if (step == 0) return false;
  std::lock_guard<std::mutex> lock(slots_mutex);
  for (auto& s : slots)
    if (s.step.load(std::memory_order_relaxed) == 0) {
      s.key.store(key, std::memory_order_relaxed);
      s.step.store(step, std::memory_order_release);
      detail::marked.fetch_add(1, std::memory_order_relaxed);
      return true;
    }
  return false;
}

void end(uint64_t key, uint64_t step) {
  if (!on()) return;
  std::lock_guard<std::mutex> lock(slots_mutex);
  for (auto& s : slots)
    if (s.step.load(std::memory_order_relaxed) == step && s.key.load(std::memory_order_relaxed) == key && step != 0) {
      s.step.store(0, std::memory_order_release);
      s.key.store(0, std::memory_order_relaxed);
      detail::marked.fetch_sub(1, std::memory_order_relaxed);
      return;
    }
}

uint32_t thread_row() {
  thread_local uint32_t row = [] {
    char name[32] = "thread";
    pthread_getname_np(pthread_self(), name, sizeof name);
    auto& r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    // Numbered among the threads that recorded: rows of one name stay apart.
    static int threads = 0;
    return row_named(r, fmt::format("{} {}", name, ++threads));
  }();
  return row;
}

uint32_t named_row(std::string_view name) {
  auto& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  return row_named(r, std::string(name));
}

uint32_t lane_row(std::string_view base, int64_t start, int64_t end) {
  auto& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  auto it = r.lanes.find(base);
  if (it == r.lanes.end()) it = r.lanes.emplace(std::string(base), std::vector<int64_t>{}).first;
  auto& ends = it->second;
  std::size_t lane = 0;
  while (lane < ends.size() && ends[lane] > start) ++lane;
  if (lane == ends.size()) ends.push_back(end);
  else ends[lane] = end;
  return row_named(r, lane == 0 ? std::string(base) : fmt::format("{} #{}", base, lane + 1));
}

void record(const Event& event) {
  auto& r = registry();
  if (r.kept.fetch_add(1, std::memory_order_relaxed) >= r.limit.load(std::memory_order_relaxed)) {
    r.kept.fetch_sub(1, std::memory_order_relaxed);
    r.dropped.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  auto& b = this_thread_buffer();
  std::lock_guard<std::mutex> lock(b.mutex);
  b.events.push_back(event);
}

void record_transfer(bool sending, uint64_t key, uint64_t step, std::string_view peer, int64_t bytes, uint64_t id,
                     int64_t start, int64_t end) {
  static const uint32_t cat = intern("transfer"), send = intern("send"), recv = intern("recv");
  Event e;
  e.key = key;
  e.step = step;
  e.ts = start;
  e.dur = std::max<int64_t>(end - start, 1);
  e.value = bytes;
  e.name = sending ? send : recv;
  e.cat = cat;
  e.detail = intern(peer);
  e.id = id;
  e.row = lane_row(fmt::format("{} {}", sending ? "send to" : "recv from", peer), start, start + e.dur);
  record(e);
  e.phase = sending ? Phase::flow_start : Phase::flow_end;
  e.id = id;
  e.dur = 0;
  record(e);
}

void record_wait(uint64_t key, uint64_t step, std::string_view what, int64_t start, int64_t end) {
  static const uint32_t cat = intern("wait");
  static std::atomic<uint64_t> next_id{1};
  Event e;
  e.key = key;
  e.step = step;
  e.ts = start;
  e.name = intern(what);
  e.cat = cat;
  e.row = thread_row();
  e.id = next_id.fetch_add(1, std::memory_order_relaxed);
  e.phase = Phase::async_begin;
  record(e);
  e.ts = end;
  e.phase = Phase::async_end;
  record(e);
}

void set_limit(std::size_t events) { registry().limit.store(events, std::memory_order_relaxed); }
std::size_t limit() { return registry().limit.load(std::memory_order_relaxed); }
std::size_t dropped() { return registry().dropped.load(std::memory_order_relaxed); }

std::vector<std::string> take(uint64_t key, uint64_t step, int64_t from_ns, int64_t to_ns, int64_t shift_ns, int pid) {
  auto& r = registry();
  std::vector<std::shared_ptr<Buffer>> buffers;
  {
    std::lock_guard<std::mutex> lock(r.mutex);
    buffers = r.buffers;
  }
  std::vector<Event> mine;
  for (auto& b : buffers) {
    std::lock_guard<std::mutex> lock(b->mutex);
    auto& ev = b->events;
    std::size_t kept = 0;
    for (std::size_t i = 0; i < ev.size(); ++i) {
      const Event& e = ev[i];
      const bool ours = e.key == key && e.step == step;
      const bool unowned = e.key == 0;  // of no step: taken if in the window, dropped if older
      if (ours || (unowned && e.ts <= to_ns)) {
        if (ours || e.ts + e.dur >= from_ns) mine.push_back(e);
        continue;
      }
      if (kept != i) ev[kept] = ev[i];
      ++kept;
    }
    r.kept.fetch_sub(ev.size() - kept, std::memory_order_relaxed);
    ev.resize(kept);
  }
  // Every string the events name, read once.
  std::vector<std::string> text;
  {
    auto& s = strings();
    std::lock_guard<std::mutex> lock(s.mutex);
    text.reserve(s.texts.size());
    for (auto* t : s.texts) text.push_back(t ? *t : std::string());
  }
  std::vector<std::string> out;
  out.reserve(mine.size() + 8);
  std::set<uint32_t> rows;
  for (auto& e : mine) {
    out.push_back(to_json(e, text, shift_ns, pid));
    rows.insert(e.row);
  }
  std::lock_guard<std::mutex> lock(r.mutex);
  for (uint32_t row : rows)
    out.push_back(fmt::format(R"({{"ph":"M","pid":{},"tid":{},"name":"thread_name","args":{{"name":{}}}}})", pid, row,
                              quoted(row < r.rows.size() ? r.rows[row] : std::string("?"))));
  return out;
}

void clear() {
  auto& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  for (auto& b : r.buffers) {
    std::lock_guard<std::mutex> l(b->mutex);
    r.kept.fetch_sub(b->events.size(), std::memory_order_relaxed);
    b->events.clear();
  }
}

}  // namespace troupe::trace
