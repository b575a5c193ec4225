#pragma once
// Prefetcher: runs an input pipeline (ops/data/pipeline.hpp) on a thread of its own and
// enqueues each element into a queue (ops/data/queue.hpp) through a Session, so reading and
// preprocessing overlap the steps that dequeue; the queue's capacity bounds how far ahead it
// reads. When the pipeline ends the queue is closed, so a dequeue past the last element fails
// with out_of_range ("... is closed ..."), the end of the input.
//
//   auto q = ops::Queue::fifo(root, {DType::float32, DType::int32}, {PartialShape{-1, 1, 28, 28},
//                             PartialShape{-1}}, {.capacity = 8, .shared_name = "train"});
//   auto feed = queue_feed(root, q);                 // before the Session runs the graph
//   auto batch = q.dequeue(root);                    // the model's input
//   Session session(root);
//   Prefetcher prefetch(session, feed, pipeline);    // starts reading
//   ... session.run(...) ...
//   prefetch.join();                                 // rethrows the pipeline's error, if any
#include <atomic>
#include <exception>
#include <thread>

#include "actors/session.hpp"
#include "ops/data/pipeline.hpp"
#include "ops/data/queue.hpp"

namespace troupe {

// The ops a Prefetcher runs: a placeholder per component, an enqueue of them, and closes.
struct QueueFeed {
  std::vector<Output> placeholders;
  Node* enqueue = nullptr;
  Node* close = nullptr;         // at the end of the pipeline
  Node* close_cancel = nullptr;  // when stopped early: also drops an enqueue waiting for room
};
QueueFeed queue_feed(const Scope& scope, const ops::Queue& queue);

class Prefetcher {
 public:
  Prefetcher(Session& session, QueueFeed feed, data::Pipeline pipeline);
  // Stops early if still running: closes the queue (cancelling a waiting enqueue) and joins.
  ~Prefetcher();
  Prefetcher(const Prefetcher&) = delete;
  Prefetcher& operator=(const Prefetcher&) = delete;
  // Waits until the pipeline has been read to its end; rethrows what it threw.
  void join();
  int64_t elements() const { return elements_; }  // enqueued so far

 private:
  void run(data::Pipeline pipeline);
  Session* session_;
  QueueFeed feed_;
  std::atomic<bool> stop_{false};
  std::atomic<int64_t> elements_{0};
  std::exception_ptr error_;
  std::thread thread_;
};

}  // namespace troupe
