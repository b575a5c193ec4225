// usable_cores (devices/cpu_threads.hpp): thread counts default to the cores this process may
// use, its affinity mask and its cgroup's CPU quota, not the machine's hardware threads.
#include <boost/test/unit_test.hpp>

#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <string>
#include <thread>

#include "devices/cpu_threads.hpp"
#include "test/support/skip.hpp"

using namespace troupe;

BOOST_AUTO_TEST_CASE(a_cgroup_cpu_max_line_gives_its_cores_rounded_up) {
  BOOST_TEST(cores_from_cpu_max("max 100000").has_value() == false);
  BOOST_TEST(cores_from_cpu_max("50000 100000").value_or(0) == 1);
  BOOST_TEST(cores_from_cpu_max("150000 100000").value_or(0) == 2);
  BOOST_TEST(cores_from_cpu_max("200000 100000").value_or(0) == 2);
  BOOST_TEST(cores_from_cpu_max("").has_value() == false);
  BOOST_TEST(cores_from_cpu_max("garbage here").has_value() == false);
}

BOOST_AUTO_TEST_CASE(a_process_pinned_to_one_cpu_uses_one_core) {
  const int all = usable_cores();
  BOOST_TEST(all >= 1);
  BOOST_TEST(all <= int(std::max(1u, std::thread::hardware_concurrency())));
  // A child pinned to one CPU of ours reports 1 (as its exit code); the parent is unchanged.
  cpu_set_t mine;
  CPU_ZERO(&mine);
  BOOST_REQUIRE(sched_getaffinity(0, sizeof mine, &mine) == 0);
  int first = 0;
  while (!CPU_ISSET(first, &mine)) ++first;
  pid_t pid = fork();
  BOOST_REQUIRE(pid >= 0);
  if (pid == 0) {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(first, &one);
    if (sched_setaffinity(0, sizeof one, &one) != 0) _exit(100);
    _exit(usable_cores());
  }
  int status = 0;
  BOOST_REQUIRE(waitpid(pid, &status, 0) == pid);
  BOOST_TEST_REQUIRE(WIFEXITED(status));
  BOOST_TEST(WEXITSTATUS(status) == 1);
  BOOST_TEST(usable_cores() == all);
}

namespace {

// Why no cgroup v1 cpu group with a quota can be made here ("" when one can): one is made, given
// a quota and removed.
std::string why_no_cpu_quota() {
  char name[] = "/sys/fs/cgroup/cpu/troupe-probe-XXXXXX";
  if (!mkdtemp(name)) return "no cgroup v1 cpu controller to make a group in (or no permission)";
  const std::string dir = name;
  std::ofstream period(dir + "/cpu.cfs_period_us");
  period << "100000";
  period.flush();
  std::ofstream quota(dir + "/cpu.cfs_quota_us");
  quota << "50000";
  quota.flush();
  const bool set = bool(period) && bool(quota);
  period.close();
  quota.close();
  rmdir(dir.c_str());
  return set ? "" : "a cgroup v1 cpu group takes no quota here";
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_process_in_a_cgroup_with_half_a_cpu_of_quota_uses_one_core,
                     *troupe::testing::runs_here(why_no_cpu_quota)) {
  // A cgroup v1 cpu group of our own (made and removed here) with a quota of 50 ms per 100 ms.
  char name[] = "/sys/fs/cgroup/cpu/troupe-test-XXXXXX";
  BOOST_TEST_REQUIRE(mkdtemp(name) != nullptr);
  const std::string dir = name;
  auto write = [&](const std::string& file, const std::string& value) {
    std::ofstream out(dir + "/" + file);
    out << value;
    out.flush();
    return bool(out);
  };
  int go[2];
  BOOST_REQUIRE(pipe(go) == 0);
  pid_t pid = fork();
  BOOST_REQUIRE(pid >= 0);
  if (pid == 0) {
    char c;
    close(go[1]);
    if (read(go[0], &c, 1) != 1) _exit(101);
    _exit(usable_cores());
  }
  close(go[0]);
  const bool moved = write("cpu.cfs_period_us", "100000") && write("cpu.cfs_quota_us", "50000") &&
                     write("cgroup.procs", std::to_string(pid));
  BOOST_REQUIRE(::write(go[1], "g", 1) == 1);
  close(go[1]);
  int status = 0;
  BOOST_REQUIRE(waitpid(pid, &status, 0) == pid);
  rmdir(dir.c_str());
  BOOST_TEST_REQUIRE(moved, "could not set a quota on " << dir << " and move the child into it");
  BOOST_TEST_REQUIRE(WIFEXITED(status));
  BOOST_TEST(WEXITSTATUS(status) == 1);
}
