#pragma once
// Following a hung step's waits from node to node and from task to task, to the nodes that are
// actually stuck: what a deadline's error, `troupe-node --status`, Session::describe_waiting and
// the slow-step report print first, before the per-task lines.
//
// Every node still waiting in a step says, per input it lacks, which node of its own partition
// produces it, and a _Recv which node of which device sends its value (WaitSource). Linking a
// wait to the report of that node, on the task the device belongs to, gives a graph of waits;
// from each node nothing else waits on, the first link is followed to a node whose waits lead
// to no node still waiting: that node is stuck on something else (a queue, a shard, a feed, a
// kernel still running, a value lost on the way). One sentence per stuck node, told from the
// waiter that crosses the most tasks to reach it:
//   worker:0 'loss' waits for 'next:0' from ps:0, where 'next' has 0 of 1 inputs, waits for
//   queue 'stuck' to answer (...)
#include <string>
#include <vector>

#include "actors/messages.hpp"

namespace troupe {

// The nodes of one task still waiting in one step.
struct TaskWaits {
  std::string task;  // "worker:0"; "" in a local session (then every device is this task's)
  std::vector<WaitReport> waits;
  bool answered = true;  // false: the task did not say in time (its waits are unknown)
};

// One sentence per node found stuck, in the order the tasks and their reports come.
std::vector<std::string> follow_waits(const std::vector<TaskWaits>& tasks);

// The report of one step: "stuck: <sentences>; nodes still waiting:\n  <label>node ..." (each
// waiting node a line, its task's label before it); empty when no node waits.
std::string explain_waits(const std::vector<TaskWaits>& tasks, const std::vector<std::string>& labels = {});

// What a report says of a step none of whose nodes waits for an input.
inline constexpr const char* kKernelsRunning = "no node waits for an input (its kernels are running)";

// "node 'n' has 1 of 2 inputs, waits for a:0, b:0"; "node 'v' waits for ..." when its inputs
// are in and it waits for something else (a shard's or a queue's answer).
std::string describe_wait(const WaitReport& wait);

}  // namespace troupe
