#include "core/trace.hpp"

#include <pthread.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <fstream>
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

bool invariant_tsc() {
#if defined(__x86_64__)
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);)
    if (line.rfind("flags", 0) == 0)
      return line.find(" constant_tsc") != std::string::npos && line.find(" nonstop_tsc") != std::string::npos;
#endif
  return false;
}

// One reading of both clocks, taken together (the pair with the shortest gap of a few tries).
struct Reading {
  int64_t ticks, ns;
};
Reading read_both() {
  Reading best{now(), now_ns()};
  int64_t gap = -1;
  for (int i = 0; i < 5; ++i) {
    const int64_t a = now();
    const int64_t ns = now_ns();
    const int64_t b = now();
    if (gap < 0 || b - a < gap) gap = b - a, best = {a + (b - a) / 2, ns};
  }
  return best;
}

}  // namespace

namespace detail {
bool use_tsc = invariant_tsc();
}  // namespace detail

namespace {

const Reading first_reading = read_both();

// now() -> now_ns() by the line through the first reading and `later`.
struct TicksToNs {
  Reading later;
  double ns_per_tick;
  explicit TicksToNs(Reading r) : later(r) {
    ns_per_tick = !detail::use_tsc || r.ticks == first_reading.ticks
                      ? 1.0
                      : double(r.ns - first_reading.ns) / double(r.ticks - first_reading.ticks);
  }
  int64_t operator()(int64_t ticks) const {
    if (!detail::use_tsc) return ticks;
    return later.ns + int64_t(std::llround(double(ticks - later.ticks) * ns_per_tick));
  }
  int64_t duration(int64_t ticks) const { return detail::use_tsc ? int64_t(std::llround(double(ticks) * ns_per_tick)) : ticks; }
};

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
std::atomic<int> slots_used{0};  // no slot at or past this index is marked
std::mutex slots_mutex;          // begin and end

// ---- buffers ---------------------------------------------------------------------------

// A spin lock: taken by the owning thread for every event and by a take now and then, so nearly
// never contended; cheaper than a mutex on the path of every traced kernel.
class SpinLock {
 public:
  void lock() {
    while (flag_.test_and_set(std::memory_order_acquire)) {
    }
  }
  void unlock() { flag_.clear(std::memory_order_release); }

 private:
  std::atomic_flag flag_ = ATOMIC_FLAG_INIT;
};

// Events in chunks of 4096: growing moves nothing, and a chunk is one allocation.
class Events {
 public:
  static constexpr std::size_t kChunk = 4096;
  std::size_t size() const { return size_; }
  Event& operator[](std::size_t i) { return chunks_[i / kChunk][i % kChunk]; }
  void push_back(const Event& e) {
    if (size_ == chunks_.size() * kChunk) chunks_.push_back(std::make_unique<Event[]>(kChunk));
    (*this)[size_++] = e;
  }
  // Keeps the first n; frees the chunks past them.
  void resize_down(std::size_t n) {
    size_ = n;
    chunks_.resize((n + kChunk - 1) / kChunk);
  }

 private:
  std::vector<std::unique_ptr<Event[]>> chunks_;
  std::size_t size_ = 0;
};

struct Buffer {
  SpinLock mutex;
  Events events;
  std::size_t uncounted = 0;  // recorded here and not yet added to Registry::kept
  bool full = false;          // the process's limit was reached when last counted
  std::size_t dropped_here = 0;
};
constexpr std::size_t kCountEvery = 64;

struct Registry {
  std::mutex mutex;
  std::vector<std::shared_ptr<Buffer>> buffers;
  std::atomic<std::size_t> kept{0};
  std::atomic<std::size_t> limit{1'000'000};
  std::atomic<std::size_t> dropped{0};
  // Rows: id -> name; names of thread rows are made once per thread.
  std::vector<std::string> rows{""};
  std::map<std::string, uint16_t, std::less<>> row_ids;
  // lane_row: per base name, per lane, the end of its last slice.
  std::map<std::string, std::vector<int64_t>, std::less<>> lanes;
};

Registry& registry() {
  static auto* r = new Registry;
  return *r;
}

// The thread's buffer, made at its first event and kept by the registry (past the thread's end:
// its events wait to be taken). Thread-locals of the initial-exec model, zero-initialised: no
// call through __tls_get_addr and no guard on the path of every event.
Buffer* make_thread_buffer() {
  auto b = std::make_shared<Buffer>();
  auto& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.buffers.push_back(b);
  return b.get();
}

Buffer& this_thread_buffer() {
  static thread_local Buffer* mine [[gnu::tls_model("initial-exec")]] = nullptr;
  if (!mine) [[unlikely]]
    mine = make_thread_buffer();
  return *mine;
}

uint16_t row_named(Registry& r, const std::string& name) {  // r.mutex held
  auto it = r.row_ids.find(name);
  if (it != r.row_ids.end()) return it->second;
  if (r.rows.size() > 0xfff0) return 0xffff;  // more rows than a trace shows: one for the rest
  const uint16_t id = uint16_t(r.rows.size());
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
  std::string out = fmt::format(R"({{"ph":"{}","pid":{},"tid":{},"ts":{},"name":{},"cat":"{}")", char(e.phase), pid,
                                e.row, micros(e.ts - shift_ns), quoted(t(e.name)), name_of(e.cat));
  const bool op = e.cat == Category::kernel || e.cat == Category::variable;
  switch (e.phase) {
    case Phase::slice: {
      out += fmt::format(R"(,"dur":{},"args":{{"step":{})", micros(e.dur), e.step);
      if (e.node) out += ",\"node\":" + quoted(t(e.node)) + ",\"op\":" + quoted(t(e.name));
      if (op && (e.frame || e.iteration)) out += fmt::format(R"(,"frame":"{:#x}","iteration":{})", e.frame, e.iteration);
      if (e.detail)
        out += std::string(op ? ",\"inputs\":" : e.cat == Category::transfer ? ",\"peer\":" : ",\"what\":") + quoted(t(e.detail));
      if (e.cat == Category::transfer) out += fmt::format(R"(,"bytes":{},"transfer":"{:#x}")", e.value(), e.id());
      out += "}}";
      break;
    }
    case Phase::flow_start:
    case Phase::flow_end:
      out += fmt::format(R"(,"id":"{:#x}")", e.id());
      if (e.phase == Phase::flow_end) out += R"(,"bp":"e")";
      out += "}";
      break;
    case Phase::async_begin:
    case Phase::async_end:
      out += fmt::format(R"(,"id":"{:#x}","args":{{"step":{})", e.id(), e.step);
      if (e.detail) out += ",\"what\":" + quoted(t(e.detail));
      out += "}}";
      break;
    case Phase::counter:
      out += fmt::format(R"(,"args":{{"bytes":{}}}}})", e.value());
      break;
  }
  return out;
}

}  // namespace

const char* name_of(Category c) {
  switch (c) {
    case Category::kernel: return "kernel";
    case Category::variable: return "variable";
    case Category::transfer: return "transfer";
    case Category::wait: return "wait";
    case Category::memory: return "memory";
    case Category::step: return "step";
    case Category::input_pipeline: return "input pipeline";
  }
  return "?";
}

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
  const int used = slots_used.load(std::memory_order_acquire);
  for (int i = 0; i < used; ++i) {
    const Slot& s = slots[std::size_t(i)];
    if (s.step.load(std::memory_order_acquire) == step && s.key.load(std::memory_order_relaxed) == key && step != 0)
      return true;
  }
  return false;
}
}  // namespace detail

bool begin(uint64_t key, uint64_t step) {
  if (step == 0) return false;
  std::lock_guard<std::mutex> lock(slots_mutex);
  for (int i = 0; i < kSlots; ++i) {
    Slot& s = slots[std::size_t(i)];
    if (s.step.load(std::memory_order_relaxed) == 0) {
      s.key.store(key, std::memory_order_relaxed);
      s.step.store(step, std::memory_order_release);
      if (i >= slots_used.load(std::memory_order_relaxed)) slots_used.store(i + 1, std::memory_order_release);
      detail::marked.fetch_add(1, std::memory_order_relaxed);
      return true;
    }
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
      int used = slots_used.load(std::memory_order_relaxed);
      while (used > 0 && slots[std::size_t(used - 1)].step.load(std::memory_order_relaxed) == 0) --used;
      slots_used.store(used, std::memory_order_release);
      detail::marked.fetch_sub(1, std::memory_order_relaxed);
      return;
    }
}

uint16_t thread_row() {
  static thread_local uint16_t row [[gnu::tls_model("initial-exec")]] = 0;  // 0: not yet (row 0 is no thread's)
  if (!row) [[unlikely]] {
    char name[32] = "thread";
    pthread_getname_np(pthread_self(), name, sizeof name);
    auto& r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    // Numbered among the threads that recorded: rows of one name stay apart.
    static int threads = 0;
    row = row_named(r, fmt::format("{} {}", name, ++threads));
  }
  return row;
}

uint16_t named_row(std::string_view name) {
  auto& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  return row_named(r, std::string(name));
}

uint16_t lane_row(std::string_view base, int64_t start, int64_t end) {
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
  auto& b = this_thread_buffer();
  auto& r = registry();
  std::lock_guard<SpinLock> lock(b.mutex);
  if (b.full) {
    // Past the limit: dropped, and every kCountEvery drops a look whether there is room again.
    if (++b.dropped_here % kCountEvery != 0 ||
        r.kept.load(std::memory_order_relaxed) + kCountEvery > r.limit.load(std::memory_order_relaxed)) {
      r.dropped.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    b.full = false;
  }
  b.events.push_back(event);
  // The process's count is shared by every thread: each adds to it once every kCountEvery events
  // (so the limit may be passed by that many per thread).
  if (++b.uncounted == kCountEvery) {
    b.uncounted = 0;
    b.full = r.kept.fetch_add(kCountEvery, std::memory_order_relaxed) + kCountEvery >= r.limit.load(std::memory_order_relaxed);
  }
}

namespace {
// Events left the buffers: the process's count goes down by as many (not below 0: those not yet
// counted leave too).
void forget(std::size_t events) {
  auto& kept = registry().kept;
  std::size_t now = kept.load(std::memory_order_relaxed);
  while (!kept.compare_exchange_weak(now, now > events ? now - events : 0, std::memory_order_relaxed)) {
  }
}
}  // namespace

void record_transfer(bool sending, uint64_t key, uint64_t step, std::string_view peer, int64_t bytes, uint64_t id,
                     int64_t start, int64_t end) {
  static const uint32_t send = intern("send"), recv = intern("recv");
  Event e;
  e.key = key;
  e.step = step;
  e.ts = start;
  e.dur = std::max<int64_t>(end - start, 1);
  e.value() = bytes;
  e.name = sending ? send : recv;
  e.cat = Category::transfer;
  e.detail = intern(peer);
  e.id() = id;
  e.row = lane_row(fmt::format("{} {}", sending ? "send to" : "recv from", peer), start, start + e.dur);
  record(e);
  e.phase = sending ? Phase::flow_start : Phase::flow_end;
  e.dur = 0;
  record(e);
}

void record_wait(uint64_t key, uint64_t step, std::string_view what, int64_t start, int64_t end) {
  static std::atomic<uint64_t> next_id{1};
  Event e;
  e.key = key;
  e.step = step;
  e.ts = start;
  e.name = intern(what);
  e.cat = Category::wait;
  e.row = thread_row();
  e.id() = next_id.fetch_add(1, std::memory_order_relaxed);
  e.phase = Phase::async_begin;
  record(e);
  e.ts = end;
  e.phase = Phase::async_end;
  record(e);
}

void set_limit(std::size_t events) { registry().limit.store(events, std::memory_order_relaxed); }
std::size_t limit() { return registry().limit.load(std::memory_order_relaxed); }
std::size_t dropped() { return registry().dropped.load(std::memory_order_relaxed); }

std::vector<std::string> take(const std::vector<StepId>& steps, int64_t from_ns, int64_t to_ns, int64_t shift_ns,
                              int pid) {
  std::vector<StepId> wanted = steps;
  std::sort(wanted.begin(), wanted.end());
  auto& r = registry();
  std::vector<std::shared_ptr<Buffer>> buffers;
  {
    std::lock_guard<std::mutex> lock(r.mutex);
    buffers = r.buffers;
  }
  const TicksToNs to_time(read_both());
  std::vector<Event> mine;
  for (auto& b : buffers) {
    std::lock_guard<SpinLock> lock(b->mutex);
    auto& ev = b->events;
    std::size_t kept = 0;
    for (std::size_t i = 0; i < ev.size(); ++i) {
      const Event& e = ev[i];
      const bool ours = e.key != 0 && std::binary_search(wanted.begin(), wanted.end(), StepId{e.key, e.step});
      const bool unowned = e.key == 0;  // of no step: taken if in the window, dropped if older
      if (ours || (unowned && to_time(e.ts) <= to_ns)) {
        if (ours || to_time(e.ts + e.dur) >= from_ns) mine.push_back(e);
        continue;
      }
      if (kept != i) ev[kept] = ev[i];
      ++kept;
    }
    forget(ev.size() - kept);
    ev.resize_down(kept);
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
    e.dur = to_time.duration(e.dur);
    e.ts = to_time(e.ts);
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
    std::lock_guard<SpinLock> l(b->mutex);
    forget(b->events.size());
    b->events.resize_down(0);
  }
}

}  // namespace troupe::trace
