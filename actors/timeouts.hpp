#pragma once
// Every wait for a reply in Troupe's actors and Session, in one table: what waits, how long,
// and why that bound. A request that CAF cannot deliver (its receiver is gone) or whose bound
// runs out gets an error instead of its reply, and the waiter turns it into an error naming
// itself and what it waited for: a node actor fails its step ("node 'v' (VariableV2) on ...:
// the parameter shard did not answer the read of variable 'v': ..."), a Session or Saver call
// throws.
//
// Waits that are unbounded by design (a dequeue on an empty queue, a step with no deadline, as
// in TensorFlow) say so here; a step's deadline bounds them: RunOptions::timeout, else
// SessionOptions::operation_timeout. When it passes, Session aborts the step, naming the nodes
// still waiting and for what, and every node withdraws what it still asks for (a queue request
// is cancelled at the queue). caf::infinite is written here and nowhere else.
#include <caf/duration.hpp>

#include <chrono>

namespace troupe::timeouts {

// A node actor's read, assign or optimizer step on its variable's parameter shard: unbounded.
// The shard lives in the node's own process (a variable's ops are placed beside it), answers
// every request while handling it, and a request to a shard that is gone is bounced at once
// (request_receiver_down); the step's deadline bounds the rest. A bound here would cost memory
// on every step: CAF 0.17 keeps a request's timeout in its clock until the timeout fires,
// answered or not, so a busy ps would hold its request rate times the bound in timeouts.
inline caf::duration shard_request() { return caf::infinite; }

// The Saver's snapshot and restore of a shard (once per checkpoint): a backstop far beyond the
// requests queued ahead, for a shard that will never answer.
inline caf::duration shard_checkpoint() { return caf::duration{std::chrono::minutes(5)}; }

// A node actor's enqueue, dequeue, close or size request to a queue actor. Unbounded by
// design: a dequeue waits for elements and an enqueue for room for as long as it takes another
// step (or a Prefetcher) to supply them, as TensorFlow's QueueDequeue blocks. The step's
// deadline bounds it, and the step's abort withdraws it from the queue. A queue that dies
// holding it never answers; the node monitors its queue and fails the step then (executor/queue_node.hpp).
inline caf::duration queue_request() { return caf::infinite; }

// A Prefetcher's enqueue of the next element. Unbounded by design: it waits for room until
// training dequeues; the Prefetcher's destructor closes the queue, cancelling pending
// enqueues, which answers it.
inline caf::duration prefetch_enqueue() { return caf::infinite; }

// A Prefetcher's close of its queue (at the end of its input, or when it is destroyed). The
// queue answers a close at once; the bound is a backstop for a queue that will never answer.
inline caf::duration queue_close() { return caf::duration{std::chrono::minutes(1)}; }

// Session::run's wait for its step: the step's deadline (RunOptions::timeout, else
// SessionOptions::operation_timeout), after which Session aborts the step naming the nodes
// still waiting. Without one (zero) a step runs as long as it takes, as in TensorFlow.
inline caf::duration step(std::chrono::milliseconds deadline) {
  return deadline.count() > 0 ? caf::duration{deadline} : caf::duration{caf::infinite};
}

// Questions about an actor's state for a report: what a node waits for
// (Session::waiting_nodes), a device's memory (Session::devices), a shard's variable names
// (Session::variable_names). An actor answers between two of its messages, so a node busy with
// a long kernel answers late; the bound keeps a report from hanging on it.
inline caf::duration state_query() { return caf::duration{std::chrono::seconds(10)}; }

// What the nodes of a step past its deadline still wait for, asked before the step is
// aborted: short, so that the deadline_exceeded error comes soon after the deadline; a node
// that answers late is left out of the report.
inline caf::duration late_step_report() { return caf::duration{std::chrono::seconds(2)}; }

// A synchronous replica's wait for the other replicas' votes on the global step's shard:
// SyncReplicasOptions::vote_timeout (ops/state/sync_replicas.hpp), five minutes by default,
// counted from the step's first vote, kept by a timer of the shard's own. Past it the waiting
// replicas' steps fail (deadline_exceeded) naming the replicas whose votes are missing. Not
// shard_request()'s bound: the shard names who is missing, which a request timeout cannot.

// A cluster member's wait for its share of a step (worker.hpp). Unbounded here by design: the
// master bounds it, aborting the step on every member when a member is lost (CAF's heartbeats
// and connection timeout see a dead or hung process within the connection timeout) or when the
// step's deadline passes.
inline caf::duration member_step() { return caf::infinite; }

// A master's or member's connection to a member and its first answer (who it is, its spec):
// a process that accepts the connection and never answers (a stopped one) is given up on then.
inline std::chrono::milliseconds member_connect(std::chrono::milliseconds connection_timeout) {
  return 2 * connection_timeout + std::chrono::milliseconds(500);
}

// A master's registration of a signature's partitions with a member: the member builds their
// actors and kernels (a reader op may load its files) before it answers. A member lost meanwhile
// ends the wait at once (the master watches it).
inline std::chrono::milliseconds member_register() { return std::chrono::minutes(2); }

}  // namespace troupe::timeouts
