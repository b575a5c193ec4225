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

caf::actor spawn_node(caf::actor_system& system, std::shared_ptr<const ExecPlan> plan, int index,
                      std::unique_ptr<OpKernel> kernel, int replica) {
  const NodePlan& node = plan->nodes[std::size_t(index)];
  if (node.kind == NodeKind::kernel && !kernel)
    fail(ErrorCode::internal, "{}: a kernel node without a kernel", node.where());
  if (node.kind != NodeKind::kernel && kernel)
    fail(ErrorCode::internal, "{}: a kernel for a node that runs none", node.where());
  if (replica != 0 && node.kind != NodeKind::kernel)
    fail(ErrorCode::internal, "{}: a replica of a node that runs no kernel", node.where());
  switch (node.kind) {
    case NodeKind::kernel: return system.spawn<KernelNode, caf::lazy_init>(std::move(plan), index, std::move(kernel), replica);
    case NodeKind::variable: return system.spawn<VariableNode, caf::lazy_init>(std::move(plan), index);
    case NodeKind::queue: return system.spawn<QueueNode, caf::lazy_init>(std::move(plan), index);
    case NodeKind::merge: return system.spawn<MergeNode, caf::lazy_init>(std::move(plan), index);
    case NodeKind::loop_merge: return system.spawn<LoopMergeNode, caf::lazy_init>(std::move(plan), index);
    case NodeKind::enter: return system.spawn<EnterNode, caf::lazy_init>(std::move(plan), index);
    case NodeKind::loop_invariant: return system.spawn<LoopInvariantNode, caf::lazy_init>(std::move(plan), index);
    case NodeKind::exit: return system.spawn<ExitNode, caf::lazy_init>(std::move(plan), index);
    case NodeKind::next_iteration: return system.spawn<NextIterationNode, caf::lazy_init>(std::move(plan), index);
    case NodeKind::stack_push: return system.spawn<StackPushNode, caf::lazy_init>(std::move(plan), index);
    case NodeKind::stack_pop: return system.spawn<StackPopNode, caf::lazy_init>(std::move(plan), index);
    case NodeKind::send: return system.spawn<SendNode, caf::lazy_init>(std::move(plan), index);
    case NodeKind::recv: return system.spawn<RecvNode, caf::lazy_init>(std::move(plan), index);
  }
  fail(ErrorCode::internal, "{}: no actor for its kind", node.where());
}

}  // namespace troupe
