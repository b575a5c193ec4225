#include "actors/executor/spawn_node.hpp"

#include "actors/executor/enter_node.hpp"
#include "actors/executor/exit_node.hpp"
#include "actors/executor/kernel_node.hpp"
#include "actors/executor/loop_invariant_node.hpp"
#include "actors/executor/loop_merge_node.hpp"
#include "actors/executor/merge_node.hpp"
#include "actors/executor/next_iteration_node.hpp"
#include "actors/executor/queue_node.hpp"
#include "actors/executor/recv_node.hpp"
#include "actors/executor/send_node.hpp"
#include "actors/executor/stack_pop_node.hpp"
#include "actors/executor/stack_push_node.hpp"
#include "actors/executor/variable_node.hpp"

namespace troupe {
namespace {

// An actor of class C, spawned lazily without the logger's bookkeeping (spawn_quietly): the
// threads that spawn a large graph's slices at once (executable.cpp) would otherwise meet at
// the logger's lock for every actor.
template <class C, class... Ts>
SpawnedNode spawn_lazily(caf::actor_system& system, Ts&&... xs) {
  caf::actor actor = spawn_quietly<C>(system, std::forward<Ts>(xs)...);
  auto* node = static_cast<C*>(caf::actor_cast<caf::abstract_actor*>(actor));
  return {std::move(actor), node};
}

}  // namespace

SpawnedNode spawn_node(caf::actor_system& system, std::shared_ptr<const ExecPlan> plan, int index,
                       std::unique_ptr<OpKernel> kernel, int replica) {
  const NodePlan& node = plan->nodes[std::size_t(index)];
  if (node.kind == NodeKind::kernel && !kernel)
    fail(ErrorCode::internal, "{}: a kernel node without a kernel", node.where());
  if (node.kind != NodeKind::kernel && kernel)
    fail(ErrorCode::internal, "{}: a kernel for a node that runs none", node.where());
  if (replica != 0 && node.kind != NodeKind::kernel)
    fail(ErrorCode::internal, "{}: a replica of a node that runs no kernel", node.where());
  switch (node.kind) {
    case NodeKind::kernel: return spawn_lazily<KernelNode>(system, std::move(plan), index, std::move(kernel), replica);
    case NodeKind::variable: return spawn_lazily<VariableNode>(system, std::move(plan), index);
    case NodeKind::queue: return spawn_lazily<QueueNode>(system, std::move(plan), index);
    case NodeKind::merge: return spawn_lazily<MergeNode>(system, std::move(plan), index);
    case NodeKind::loop_merge: return spawn_lazily<LoopMergeNode>(system, std::move(plan), index);
    case NodeKind::enter: return spawn_lazily<EnterNode>(system, std::move(plan), index);
    case NodeKind::loop_invariant: return spawn_lazily<LoopInvariantNode>(system, std::move(plan), index);
    case NodeKind::exit: return spawn_lazily<ExitNode>(system, std::move(plan), index);
    case NodeKind::next_iteration: return spawn_lazily<NextIterationNode>(system, std::move(plan), index);
    case NodeKind::stack_push: return spawn_lazily<StackPushNode>(system, std::move(plan), index);
    case NodeKind::stack_pop: return spawn_lazily<StackPopNode>(system, std::move(plan), index);
    case NodeKind::send: return spawn_lazily<SendNode>(system, std::move(plan), index);
    case NodeKind::recv: return spawn_lazily<RecvNode>(system, std::move(plan), index);
  }
  fail(ErrorCode::internal, "{}: no actor for its kind", node.where());
}

}  // namespace troupe
