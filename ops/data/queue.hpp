#pragma once
// Queues (whitepaper §4.6): FIFOQueue, PaddingFIFOQueue and RandomShuffleQueue decouple the
// steps that produce elements from those that consume them. A queue is an actor of the
// process's runtime, found by its shared name, so every step and every Session of the process
// that names it uses the same queue. An element is a tuple of tensors, one per component.
//
//   auto q = ops::Queue::fifo(root, {DType::float32, DType::int32}, {Shape{784}, Shape{}},
//                             {.capacity = 256, .shared_name = "examples"});
//   auto put = q.enqueue_many(root, {images, labels});        // a target
//   auto batch = q.dequeue_many(root, ops::constant(root, 32)); // {images [32,784], labels [32]}
//
// A dequeue from an empty queue waits (as a message to the queue actor, holding no thread)
// until an element arrives or the queue is closed; an enqueue into a full queue waits for
// room. Closing wakes the waiting dequeues that can no longer be served with an out_of_range
// error "queue 'examples' is closed ..."; with cancel_pending_enqueues the waiting enqueues
// fail with "cancelled" instead of being kept. dequeue_many(n) of a closed queue holding fewer
// than n elements fails, unless allow_smaller_final_batch is set: then it returns what is left.
#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor.hpp"
#include "graph/scope.hpp"

namespace troupe {

enum class QueueKind { fifo, padding_fifo, random_shuffle };

// What a queue is; every queue op carries it in its attributes, and the runtime refuses two
// different specs under one name.
struct QueueSpec {
  std::string name;
  QueueKind kind = QueueKind::fifo;
  std::vector<DType> types;
  std::vector<PartialShape> shapes;  // per component; empty: any shape (not for padding_fifo)
  int64_t capacity = -1;             // -1: unbounded
  int64_t min_after_dequeue = 0;     // random_shuffle: elements kept back until closed
  int64_t seed = 0;                  // random_shuffle
  AttrMap attrs() const;
  static QueueSpec from(const AttrMap& attrs, const std::string& owner);
  bool operator==(const QueueSpec& o) const;
  std::string describe() const;  // "FIFOQueue 'examples' (float32 [784], int32 [], capacity 256)"
};

namespace queue_elements {
// Checks an element (one tensor per component) against the spec; throws invalid_argument
// naming the queue and the component.
void check(const QueueSpec& spec, const std::vector<Tensor>& element);
// enqueue_many's input: components sharing a first dimension n, cut into n elements.
std::vector<std::vector<Tensor>> split(const QueueSpec& spec, const std::vector<Tensor>& components);
// dequeue_many's output: per component, the elements stacked along a new first dimension
// (padding_fifo: each padded with zeros to the largest in the batch).
std::vector<Tensor> stack(const QueueSpec& spec, const std::vector<std::vector<Tensor>>& elements);
}  // namespace queue_elements

namespace ops {

struct QueueOptions {
  int64_t capacity = -1;  // -1: unbounded
  std::string shared_name;  // default: the node name of the queue's first op
  int64_t min_after_dequeue = 0;  // random_shuffle
  int64_t seed = 0;               // random_shuffle; 0: a fixed default
};

class Queue {
 public:
  static Queue fifo(const Scope& scope, std::vector<DType> types, std::vector<PartialShape> shapes = {},
                    QueueOptions options = {});
  static Queue padding_fifo(const Scope& scope, std::vector<DType> types, std::vector<PartialShape> shapes,
                            QueueOptions options = {});
  static Queue random_shuffle(const Scope& scope, std::vector<DType> types, std::vector<PartialShape> shapes = {},
                              QueueOptions options = {});

  Node* enqueue(const Scope& scope, const std::vector<Output>& element) const;
  Node* enqueue_many(const Scope& scope, const std::vector<Output>& components) const;
  std::vector<Output> dequeue(const Scope& scope) const;
  std::vector<Output> dequeue_many(const Scope& scope, Output n, bool allow_smaller_final_batch = false) const;
  Node* close(const Scope& scope, bool cancel_pending_enqueues = false) const;
  Output size(const Scope& scope) const;
  const QueueSpec& spec() const { return spec_; }

 private:
  Queue(const Scope& scope, QueueKind kind, std::vector<DType> types, std::vector<PartialShape> shapes,
        const QueueOptions& options);
  QueueSpec spec_;
};

}  // namespace ops
}  // namespace troupe
