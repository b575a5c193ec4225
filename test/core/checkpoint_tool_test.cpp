// troupe-checkpoint (apps/checkpoint_tool.cpp): `ls` lists a checkpoint's variables, `verify`
// passes an intact one and fails, naming the file and the variable, on a flipped bit.
#include <stdio.h>
#include <sys/wait.h>

#include <fstream>

#include <boost/test/unit_test.hpp>

#include "core/checkpoint.hpp"
#include "test/support/expect_error.hpp"
#include "test/support/scratch_dir.hpp"

using namespace troupe;
using troupe::testing::contains;
namespace ck = troupe::checkpoint;

namespace {

struct Run {
  int status = -1;
  std::string output;  // stdout and stderr
};

Run run_tool(const std::string& args) {
  Run r;
  std::string command = std::string(TROUPE_CHECKPOINT_TOOL) + " " + args + " 2>&1";
  FILE* pipe = ::popen(command.c_str(), "r");
  BOOST_TEST_REQUIRE(pipe != nullptr);
  char buf[4096];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, pipe)) > 0) r.output.append(buf, n);
  int status = ::pclose(pipe);
  r.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

}  // namespace

BOOST_AUTO_TEST_CASE(the_checkpoint_tool_lists_and_verifies_and_names_a_corrupt_variable) {
  testing::ScratchDir dir;
  std::vector<float> values(12, 1.5f);
  Tensor w = Tensor::from_vector(values, Shape{6, 2});
  std::string temp = ck::begin_save(dir.path(), 31);
  auto entries = ck::write_data_file(temp, "shard-00000-of-00002.data",
                                     {{"w", w.slice(0, 2), w.shape(), 0}, {"step", Tensor::scalar<int64_t>(31), {}, 0}});
  auto second = ck::write_data_file(temp, "shard-00001-of-00002.data", {{"w", w.slice(2, 6), w.shape(), 2}});
  entries.insert(entries.end(), second.begin(), second.end());
  std::string path = ck::publish(dir.path(), temp, 31, entries, 1);

  Run ls = run_tool("ls " + dir.path());
  BOOST_TEST(ls.status == 0, ls.output);
  BOOST_TEST(contains(ls.output, "checkpoint " + path + "\nglobal step 31\ncreated 20"), ls.output);
  BOOST_TEST(contains(ls.output, "  step  int64  []  whole in shard-00000-of-00002.data  8 bytes"), ls.output);
  BOOST_TEST(contains(ls.output, "  w  float32  [6,2]  rows [0,2) in shard-00000-of-00002.data, rows [2,6) in "
                                 "shard-00001-of-00002.data  48 bytes"), ls.output);

  Run ok = run_tool("verify " + path);
  BOOST_TEST(ok.status == 0, ok.output);
  BOOST_TEST(contains(ok.output, "every crc32c matches"), ok.output);

  std::fstream f(path + "/shard-00001-of-00002.data", std::ios::in | std::ios::out | std::ios::binary);
  f.seekp(5);
  f.put('\x7f');
  f.close();
  Run bad = run_tool("verify " + dir.path());
  BOOST_TEST(bad.status == 1, bad.output);
  BOOST_TEST(contains(bad.output, path + "/shard-00001-of-00002.data: variable 'w' rows [2, 6)"), bad.output);

  Run none = run_tool("ls " + dir.path() + "/nothing");
  BOOST_TEST(none.status == 1, none.output);
  Run usage = run_tool("frobnicate " + dir.path());
  BOOST_TEST(usage.status == 2, usage.output);
}
