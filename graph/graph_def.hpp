#pragma once
// GraphDef I/O: a Graph to and from its Cap'n Proto form (core/wire/graph.capnp), as bytes or
// as a file. Import re-runs every op's shape function, so an imported graph is checked as if
// built with the Scope API, and it runs to the same results as the graph exported.
#include <memory>
#include <string>
#include <vector>

#include "graph/graph.hpp"

namespace troupe {

std::vector<unsigned char> graph_to_bytes(const Graph& graph);
// `where` names the source in errors (a file name, "message from worker 3").
std::shared_ptr<Graph> graph_from_bytes(const unsigned char* data, std::size_t size,
                                        const std::string& where = "GraphDef");

void write_graph_file(const Graph& graph, const std::string& path);
std::shared_ptr<Graph> read_graph_file(const std::string& path);

}  // namespace troupe
