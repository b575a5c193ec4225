// Prints what the TensorBoard event files of a log directory hold (read_event_file), for the
// shell tests: "version brain.Event:2", then per file and tag "TAG POINTS LAST_STEP LAST_VALUE".
// Exit 1 when the directory holds no event file or one cannot be read.
#include <cstdio>
#include <filesystem>

#include "core/error.hpp"
#include "core/summary/event_writer.hpp"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: event_file_dump LOGDIR\n");
    return 2;
  }
  int files = 0;
  try {
    for (auto& entry : std::filesystem::directory_iterator(argv[1])) {
      if (entry.path().filename().string().rfind("events.out.tfevents.", 0) != 0) continue;
      ++files;
      const troupe::EventFileContents c = troupe::read_event_file(entry.path().string());
      std::printf("version %s\n", c.file_version.c_str());
      for (auto& [tag, points] : c.scalars)
        std::printf("%s %zu %lld %g\n", tag.c_str(), points.size(), (long long)points.back().first, points.back().second);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "event_file_dump: %s\n", e.what());
    return 1;
  }
  if (files == 0) std::fprintf(stderr, "event_file_dump: no event file in %s\n", argv[1]);
  return files == 0 ? 1 : 0;
}
