// A process that saves checkpoints into DIR in a loop, forever, for the kill test
// (checkpoint_kill_test.cpp): global steps continue from the latest checkpoint; each step's
// values come from test/core/checkpoint_saver_values.hpp. Prints "saving" once its first save
// has begun. Two data files, as two parameter
// shards would write them: "a" whole in the first, "b" split by rows over both.
#include <cstdio>
#include <exception>

#include "core/checkpoint.hpp"
#include "test/core/checkpoint_saver_values.hpp"

using namespace troupe;
namespace ck = troupe::checkpoint;

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: checkpoint_saver_child DIR\n");
    return 2;
  }
  std::string dir = argv[1];
  try {
    int64_t step = 1;
    if (auto latest = ck::latest_checkpoint(dir)) step = ck::read_index(*latest).global_step + 1;
    for (bool said = false;; ++step) {
      Tensor a = testing::saver_a(step), b = testing::saver_b(step);
      std::string temp = ck::begin_save(dir, step);
      if (!said) {  // the test kills this process at random moments from here on
        std::printf("saving\n");
        std::fflush(stdout);
        said = true;
      }
      auto entries = ck::write_data_file(temp, "shard-00000-of-00002.data",
                                         {{"a", a, {}, 0}, {"b", b.slice(0, 256), b.shape(), 0}});
      auto second = ck::write_data_file(temp, "shard-00001-of-00002.data",
                                        {{"b", b.slice(256, 512), b.shape(), 256}});
      entries.insert(entries.end(), second.begin(), second.end());
      ck::publish(dir, temp, step, entries, 3);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "checkpoint_saver_child: %s\n", e.what());
    return 1;
  }
}
