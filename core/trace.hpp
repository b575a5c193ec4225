#pragma once
// The process's step tracer: what a traced step did, recorded as Chrome trace events
// (docs/observability.md). A step is traced when its (key, step) pair is marked: `key` names
// the executable (a local session's) or the registration (a cluster member's), so two sessions
// of one process never see each other's steps. Code that records asks `traced(key, step)`
// first; with no step marked anywhere in the process that is one relaxed atomic load, which is
// what tracing costs when it is off.
//
// Events go to per-thread buffers (no lock shared between threads while recording), at most
// `limit()` of them in the whole process; past that they are counted as dropped, not kept.
// `take` removes a step's events, formatted as the JSON objects of Chrome's trace format, for
// the caller to write (actors/trace/trace_file.hpp).
#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#if defined(__x86_64__)
#include <x86intrin.h>
#endif

namespace troupe::trace {

// Nanoseconds on this process's steady clock: what traces show, and what processes compare.
int64_t now_ns();

namespace detail {
extern bool use_tsc;  // the CPU's time-stamp counter runs at a constant rate (constant_tsc, nonstop_tsc)
}  // namespace detail

// The time events are recorded in: the time-stamp counter where it is invariant (cheaper to
// read than the steady clock, and on the path of every traced kernel), else now_ns().
// take() turns it into now_ns() time, by the line through two readings of both clocks.
inline int64_t now() {
#if defined(__x86_64__)
  if (detail::use_tsc) return int64_t(__rdtsc());
#endif
  return now_ns();
}

// A time on both clocks: now() for an event, now_ns() for take()'s window.
struct Moment {
  int64_t ticks = 0, ns = 0;
};
inline Moment moment() { return {now(), now_ns()}; }

// A small id for a string (op, node, row and counter names, shapes), the same for equal
// strings; kept for the life of the process.
uint32_t intern(std::string_view text);

namespace detail {
extern std::atomic<int> marked;  // how many (key, step) pairs are marked now
bool is_marked(uint64_t key, uint64_t step);
}  // namespace detail

// Whether any step is traced in this process now.
inline bool on() { return detail::marked.load(std::memory_order_relaxed) > 0; }
// Whether step `step` of `key` is traced.
inline bool traced(uint64_t key, uint64_t step) { return on() && detail::is_marked(key, step); }

// Marks a step traced until `end`. At most 256 steps are traced at once; a further one is not
// (begin returns false).
bool begin(uint64_t key, uint64_t step);
void end(uint64_t key, uint64_t step);

enum class Phase : char {
  slice = 'X',        // ts..ts+dur on a row
  flow_start = 's',   // an arrow from the enclosing slice at ts ...
  flow_end = 'f',     // ... to the enclosing slice at ts (matched by id)
  async_begin = 'b',  // a wait that may overlap others: begin and end matched by id
  async_end = 'e',
  counter = 'C',      // `value` of counter `name` from ts on
};

// What an event is of (its "cat" in the trace).
enum class Category : uint8_t { kernel, variable, transfer, wait, memory, step, input_pipeline };
const char* name_of(Category c);

// One event: a cache line, written on the path of every traced kernel.
struct Event {
  uint64_t key = 0;
  uint64_t step = 0;
  int64_t ts = 0;   // now()
  int64_t dur = 0;  // slices, in now()'s units
  // A kernel's or variable op's frame and iteration; else a counter's value or a transfer's bytes,
  // and the id of a flow, an async wait or a transfer.
  uint64_t frame = 0;
  int64_t iteration = 0;
  int64_t& value() { return iteration; }
  uint64_t& id() { return frame; }
  int64_t value() const { return iteration; }
  uint64_t id() const { return frame; }
  uint32_t name = 0;    // interned: the op type, "send", a counter's name
  uint32_t node = 0;    // interned node name, or 0
  uint32_t detail = 0;  // interned: input shapes of a kernel, the peer of a transfer, or 0
  uint16_t row = 0;     // thread_row() or named_row()
  Category cat = Category::kernel;
  Phase phase = Phase::slice;
};
static_assert(sizeof(Event) == 64);

// The row of the calling thread ("caf.worker 3": its OS name and a number).
uint16_t thread_row();
// A row by name ("device:GPU:0", "send to worker:1"), the same for equal names.
uint16_t named_row(std::string_view name);
// A row named `base` (plus " #2", " #3", ...) on which a slice from `start` to `end` overlaps
// no other slice given a row so: rows of transfers, which overlap.
uint16_t lane_row(std::string_view base, int64_t start, int64_t end);

void record(const Event& event);
// A wait from `start` to `end` (a queue's answer, room in a queue for the input pipeline): an
// async slice named `what`, which may overlap others. `key` 0: of no step.
void record_wait(uint64_t key, uint64_t step, std::string_view what, int64_t start, int64_t end);
// A value that crossed between processes, seen by one side: a slice from `start` to `end` on a
// row "send to PEER" or "recv from PEER" (lanes where they overlap) with `bytes`, and the start
// (sending) or end (receiving) of a flow arrow; `id` is the transfer's, the same on both sides.
void record_transfer(bool sending, uint64_t key, uint64_t step, std::string_view peer, int64_t bytes, uint64_t id,
                     int64_t start, int64_t end);

// The most events kept at once in the process (default 1,000,000, about 100 MB); those recorded
// beyond are dropped and counted.
void set_limit(std::size_t events);
std::size_t limit();
std::size_t dropped();

// A traced step: the key it was marked with (begin) and its number.
struct StepId {
  uint64_t key = 0, step = 0;
  friend auto operator<=>(const StepId&, const StepId&) = default;
};

// Removes and returns, as Chrome trace event objects (one JSON object per string), the events
// of `steps`, and the events of no step (key 0: the input pipeline's) recorded between `from_ns`
// and `to_ns` (now_ns() times); then the metadata naming the rows they use. One pass over the
// buffers however many steps. Times are now_ns() times shifted: ts_json = (ts - shift_ns) / 1000
// (microseconds); pid is `pid`.
std::vector<std::string> take(const std::vector<StepId>& steps, int64_t from_ns, int64_t to_ns, int64_t shift_ns,
                              int pid);

// Drops every recorded event (tests).
void clear();

}  // namespace troupe::trace
