#pragma once
// AllReduceGroup: ring all-reduce among the tasks of one job of a cluster (Baidu's ring, as
// Horovod runs it), for data-parallel training without a parameter server. Each process of the
// job makes one group on its ClusterMember; all_reduce(tensors) then sums every tensor element by
// element over the processes, in place, and every process ends with bitwise the same sums.
//
//   ClusterMember member(spec, parse_task_id("worker:1"));
//   AllReduceGroup group(member);                 // waits for its ring neighbours (bounded)
//   std::vector<Tensor> grads = ...;              // the same dtypes and shapes on every worker
//   group.all_reduce(grads);                      // grads[i] = the sum of every worker's grads[i]
//
// How: the ring is the job's tasks in index order, each sending to the next. The tensors are
// fused into buffers of at most `fusion_bytes` (consecutive tensors of one dtype, copied into
// one flat buffer: Horovod's tensor fusion; a tensor as large alone is reduced where it lies).
// Each buffer is cut into N segments (sizes differ by at most one element when N does not divide
// it), and each segment into chunks of `chunk_bytes`; a reduce-scatter of N-1 steps leaves each
// process with the sum of one segment, an all-gather of N-1 steps hands every sum around. A
// chunk goes on to the next step as soon as it has come and been added: chunks are pipelined
// around the ring, so a large buffer keeps every link busy. Sums accumulate in the tensors' own
// dtype (float32, float64, int32, int64; integers exactly). With `float16` a float32 chunk
// crosses as float16 (core/wire/float16.hpp: half the bytes, ~3 significant digits), and each
// segment's owner rounds its own copy the same way before handing it on, so every process still
// holds the same bits. Chunks cross over the data connection to the next process (data_path.hpp:
// written from the buffer, read into a tensor by the next process's data listener), or over
// CAF's network layer as raw chunks
// (tensor_transfer.hpp) when the next process offers no data listener or its data connection
// cannot be made (logged); under TLS the data connection is TLS too. The
// process's actor for it is one detached actor, which each peer finds through the member's
// worker (collective_atom, which also names the worker's data listener).
//
// Making a group connects the lower-indexed of each pair of ring neighbours to the higher one
// (never both at once: CAF drops both connections then), within `timeout`. A neighbour that is
// lost, a buffer whose data does not come within `timeout`, or tensors that differ between the
// processes fail all_reduce with an Error naming the task; the group cannot be used after that.
// Destroying a group waits (at most 6 s) until the next process has received every chunk this
// one sent (or, over a data connection, until the kernel has them all), so a process may exit
// right after its last all_reduce. A data connection that breaks fails the group naming it.
#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "actors/cluster/member.hpp"
#include "core/tensor.hpp"

namespace troupe {

struct AllReduceOptions {
  std::size_t chunk_bytes = std::size_t(1) << 20;    // the pipelining unit on the wire
  std::size_t fusion_bytes = std::size_t(64) << 20;  // the largest fused buffer
  bool float16 = false;                              // float32 as float16 on the wire
  std::chrono::milliseconds timeout{60000};          // making the ring; each buffer's data
};

struct MemberContext;
struct ReceivedValue;

class AllReduceGroup {
 public:
  // The group of `job`'s tasks, which must include the member's. Throws invalid_argument for a
  // member of another job, unavailable naming the neighbour that did not join within the timeout.
  AllReduceGroup(ClusterMember& member, std::string job = "worker", AllReduceOptions options = {});
  ~AllReduceGroup();
  AllReduceGroup(const AllReduceGroup&) = delete;
  AllReduceGroup& operator=(const AllReduceGroup&) = delete;

  // Sums each tensor over the group's processes, in place (a Tensor sharing a buffer with one
  // of them sees the sum too). Every process calls it with the same dtypes and shapes in the
  // same order.
  void all_reduce(std::vector<Tensor>& tensors);

  int size() const;
  int rank() const;  // this process's place in the ring (its task index among the job's)

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Hands a chunk that came over a data connection (data_path.hpp) to the member's all-reduce
// actor; dropped when the member has no group. Called by the member's data listener.
void deliver_ring_chunk(MemberContext& context, ReceivedValue&& value);

}  // namespace troupe
