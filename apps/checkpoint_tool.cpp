// troupe-checkpoint: lists or verifies a checkpoint.
//   troupe-checkpoint ls DIR|CKPT       the checkpoint's path, global step, creation time and
//                                       one line per variable: name, dtype, full shape, slices
//                                       (rows and data file), bytes
//   troupe-checkpoint verify DIR|CKPT   reads every byte and checks every crc32c
// DIR is a checkpoint directory (its pointer file names the latest checkpoint); CKPT one
// checkpoint (a directory with an index). Exits 0 on success, 1 with the error on stderr on
// failure, 2 on a usage error.
#include <sys/stat.h>

#include <cstdio>
#include <ctime>
#include <map>
#include <string>

#include "core/checkpoint.hpp"

using namespace troupe;
namespace ck = troupe::checkpoint;

namespace {

void usage(FILE* out = stderr) {
  std::fprintf(out,
               "usage: troupe-checkpoint ls DIR|CKPT\n"
               "       troupe-checkpoint verify DIR|CKPT\n"
               "DIR: a checkpoint directory (its latest checkpoint); CKPT: one checkpoint\n");
}

// The checkpoint `arg` names: itself when it holds an index, else the latest in it.
std::string resolve(const std::string& arg) {
  struct stat st;
  if (::stat((arg + "/" + ck::kIndexFileName).c_str(), &st) == 0) return arg;
  auto latest = ck::latest_checkpoint(arg);
  if (!latest)
    fail(ErrorCode::not_found, "{}: no checkpoint there (neither an {} file nor a '{}' pointer)",
         arg, ck::kIndexFileName, ck::kPointerFileName);
  return *latest;
}

std::string utc_time(int64_t unix_ms) {
  std::time_t seconds = std::time_t(unix_ms / 1000);
  std::tm tm{};
  gmtime_r(&seconds, &tm);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%S", &tm);
  return fmt::format("{}.{:03}Z", text, unix_ms % 1000);
}

// One line per variable, its slices in row order (the index's entries are sorted so).
void list(const std::string& path, const ck::Index& index) {
  std::printf("checkpoint %s\nglobal step %lld\ncreated %s\n", path.c_str(),
              (long long)index.global_step, utc_time(index.created_unix_ms).c_str());
  std::map<std::string, std::vector<const ck::IndexEntry*>> variables;
  uint64_t total = 0;
  for (const auto& e : index.entries) {
    variables[e.name].push_back(&e);
    total += e.length;
  }
  std::printf("%zu variables, %llu bytes\n", variables.size(), (unsigned long long)total);
  for (const auto& [name, slices] : variables) {
    const ck::IndexEntry& first = *slices.front();
    uint64_t bytes = 0;
    std::string where;
    for (const auto* e : slices) {
      bytes += e->length;
      if (!where.empty()) where += ", ";
      where += slices.size() == 1 ? "whole in " + e->file
                                  : fmt::format("rows [{},{}) in {}", e->row_begin,
                                                e->row_begin + e->rows, e->file);
    }
    std::printf("  %s  %s  %s  %s  %llu bytes\n", name.c_str(), name_of(first.dtype),
                first.full_shape.to_string().c_str(), where.c_str(), (unsigned long long)bytes);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 2 && (std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h")) {
    usage(stdout);
    return 0;
  }
  if (argc != 3) {
    usage();
    return 2;
  }
  std::string command = argv[1];
  if (command != "ls" && command != "verify") {
    std::fprintf(stderr, "troupe-checkpoint: unknown command '%s'\n", command.c_str());
    usage();
    return 2;
  }
  try {
    std::string path = resolve(argv[2]);
    if (command == "ls") {
      list(path, ck::read_index(path));
    } else {
      ck::Index index = ck::verify(path);
      uint64_t bytes = 0;
      for (const auto& e : index.entries) bytes += e.length;
      std::printf("ok: %s, global step %lld: %zu saved tensors, %llu bytes, every crc32c matches\n",
                  path.c_str(), (long long)index.global_step, index.entries.size(),
                  (unsigned long long)bytes);
    }
  } catch (const Error& e) {
    std::fprintf(stderr, "troupe-checkpoint: %s\n", e.what());
    return 1;
  }
  return 0;
}
