#pragma once
// Graph passes that prepare a run: pruning to what the fetches and targets need, with feeds
// replacing any tensor (partial execution, whitepaper §4.2), and common-subexpression
// elimination. Each pass reads a graph and builds a new one; the user's graph is never changed.
#include <memory>
#include <vector>

#include "graph/graph.hpp"

namespace troupe {

// A graph prepared for one run signature. Fed tensors are replaced by "_Arg" nodes (attr
// "index" = position in the feed list) that the executor fills at the start of each step.
struct Subgraph {
  std::shared_ptr<Graph> graph;
  std::vector<Endpoint> fetches;  // in `graph`, one per requested fetch
  std::vector<int> targets;       // in `graph`, one per requested target
  std::vector<int> args;          // in `graph`, the _Arg node of each feed
};

// Which nodes of `graph` are needed to compute `fetches` and run `targets` when the tensors
// `feeds` are given. Throws failed_precondition when something needed cannot be computed
// (a Placeholder that is not fed), naming the fetch and the placeholder.
std::vector<bool> needed_nodes(const Graph& graph, const std::vector<Endpoint>& feeds,
                               const std::vector<Endpoint>& fetches,
                               const std::vector<int>& targets);

// The pruned copy of `graph` with feeds replaced by _Arg nodes.
Subgraph extract_subgraph(const Graph& graph, const std::vector<Endpoint>& feeds,
                          const std::vector<Endpoint>& fetches, const std::vector<int>& targets);

// Merges nodes that compute the same thing: same op, attributes, requested device, inputs
// (after merging) and control inputs. Stateful ops are never merged.
Subgraph eliminate_common_subexpressions(const Subgraph& in);

// Both in one copy: eliminate_common_subexpressions(extract_subgraph(...)) without the
// intermediate graph (what an executable is built from).
Subgraph prune_and_merge(const Graph& graph, const std::vector<Endpoint>& feeds, const std::vector<Endpoint>& fetches,
                         const std::vector<int>& targets);

}  // namespace troupe
