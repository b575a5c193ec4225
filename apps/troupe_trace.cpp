// troupe-trace: what a Chrome trace written by a Troupe session (--trace, SessionOptions::trace)
// says, summed up (docs/observability.md).
//
//   troupe-trace summary trace.json [--top 15] [--json]
//
// Per op type and for the top nodes: count, total and mean time and share of the traced steps;
// the values that crossed per pair of tasks (count, bytes, send and recv time); each step's
// critical path. Exits 1 naming the file when it cannot be read or is no such trace.
#include <cstdio>

#include <CLI/CLI.hpp>

#include "apps/cli_checks.hpp"
#include "apps/trace_summary.hpp"

int main(int argc, char** argv) {
  CLI::App app{"troupe-trace: what a Troupe Chrome trace says"};
  app.require_subcommand(1);
  auto* summary = app.add_subcommand("summary", "time per op type and node, transfers per pair of tasks, critical paths");
  std::string file;
  int top = 15;
  bool json = false;
  summary->add_option("file", file, "the trace (JSON) a session wrote")->required()->check(CLI::ExistingFile);
  summary->add_option("--top", top, "how many op types and nodes to list")->check(troupe::cli::positive)->capture_default_str();
  summary->add_flag("--json", json, "print the summary as one JSON object");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    const auto s = troupe::app::summarize_trace_file(file);
    if (json) troupe::app::write_summary_json(s, stdout);
    else std::fputs(troupe::app::format_summary(s, top).c_str(), stdout);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "troupe-trace: %s\n", e.what());
    return 1;
  }
}
