#pragma once
// Prefetcher: runs an input pipeline (ops/data/pipeline.hpp) on a thread of its own and
// enqueues each element into a queue (ops/data/queue.hpp) of the session's runtime, so reading
// and preprocessing overlap the steps that dequeue; the queue's capacity bounds how far ahead
// it reads. Elements go to the queue actor directly, as one message each (no step runs for
// them). When the pipeline ends the queue is closed, so a dequeue past the last element fails
// with out_of_range ("... is closed ..."), the end of the input.
//
//   auto q = ops::Queue::fifo(root, {DType::float32, DType::int32}, {PartialShape{-1, 1, 28, 28},
//                             PartialShape{-1}}, {.capacity = 8, .shared_name = "train"});
//   auto batch = q.dequeue(root);                    // the model's input
//   Session session(root);
//   Prefetcher prefetch(session, q, pipeline);       // starts reading
//   ... session.run(...) ...
//   prefetch.join();                                 // rethrows the pipeline's error, if any
#include <atomic>
#include <exception>
#include <thread>

#include "actors/session.hpp"
#include "ops/data/pipeline.hpp"
#include "ops/data/queue.hpp"

namespace troupe {

class Prefetcher {
 public:
  // Reads the pipeline from `from` on (Pipeline::begin(Position)): a resumed run starts where
  // the interrupted one stopped.
  Prefetcher(Session& session, const ops::Queue& queue, data::Pipeline pipeline, data::Position from = {});
  // Stops early if still running: closes the queue (cancelling a waiting enqueue) and joins.
  ~Prefetcher();
  Prefetcher(const Prefetcher&) = delete;
  Prefetcher& operator=(const Prefetcher&) = delete;
  // Waits until the pipeline has been read to its end; rethrows what it threw.
  void join();
  int64_t elements() const { return elements_; }  // enqueued so far

 private:
  struct Impl;
  void run(data::Pipeline pipeline, data::Position from);
  std::unique_ptr<Impl> impl_;
  std::atomic<bool> stop_{false};
  std::atomic<int64_t> elements_{0};
  std::exception_ptr error_;
  std::thread thread_;
};

}  // namespace troupe
