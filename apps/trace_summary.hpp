#pragma once
// What the traced steps of a Chrome trace written by a Session (SessionOptions::trace) did:
// time per op type and per node, values that crossed per pair of tasks, and each step's critical
// path. troupe-trace prints it; troupe-fashion-mnist's report.html shows the op types.
#include <cstdint>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace troupe::app {

struct TraceSummary {
  struct Stat {
    std::string name;  // an op type, or "node (Op) on task"
    int64_t count = 0;
    double total_us = 0;
    double mean_us() const { return count ? total_us / double(count) : 0; }
  };
  struct Transfer {
    std::string from, to;  // tasks
    int64_t count = 0, bytes = 0;
    double send_us = 0, recv_us = 0;  // summed durations of the send and the recv slices
  };
  // One link of a step's critical path: a kernel, a send or a recv, where it ran, and the gap
  // before it (time no event of the path ran: scheduling, a wait).
  struct Link {
    std::string what;   // "MatMul 'dense/matmul'", "send to worker:1", "recv from ps:0"
    std::string where;  // the task (process) it ran in
    double start_us = 0, dur_us = 0, gap_us = 0;
  };
  std::vector<uint64_t> steps;
  double step_us = 0;             // the traced steps' wall time, summed
  double kernel_us = 0;           // every kernel slice's time, summed
  // By total time, largest first: kernels' run time, and for variable ops (which their parameter
  // shard runs) the time from the request to the shard's answer.
  std::vector<Stat> op_types;
  std::vector<Stat> nodes;        // the same per node
  std::vector<Transfer> transfers;  // per (from, to)
  std::map<uint64_t, std::vector<Link>> critical_path;  // per step, first link first
  // Per device of each task ("ps:0 device:CPU:0"): the most bytes in use the traced steps'
  // memory counters saw, and the last.
  struct Memory {
    std::string device;
    int64_t peak_bytes = 0, last_bytes = 0;
  };
  std::vector<Memory> memory;
  int64_t events_left_out = 0;
};

// Reads and summarizes the file; errors name it, and what is missing or wrong when it is not a
// trace a Session wrote (troupe::Error, invalid_argument).
TraceSummary summarize_trace_file(const std::string& path);

// The summary as text, the `top` largest op types and nodes.
std::string format_summary(const TraceSummary& s, int top);
// The summary as one JSON object (nlohmann-json's dump(1) layout), then a newline, written to
// `out` as it goes: the critical paths of a long trace's steps are never one document in memory.
void write_summary_json(const TraceSummary& s, std::FILE* out);

}  // namespace troupe::app
