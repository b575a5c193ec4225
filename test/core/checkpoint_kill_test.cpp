// A process killed with SIGKILL while saving checkpoints in a loop (at random moments after its
// first save began, 25 times) leaves the latest published checkpoint intact and restorable, with the values of its
// step; the next begin_save removes the temporary directories of the killed saves.
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <random>
#include <string>
#include <thread>

#include <boost/test/unit_test.hpp>

#include "core/checkpoint.hpp"
#include "test/core/checkpoint_saver_values.hpp"
#include "test/support/scratch_dir.hpp"

using namespace troupe;
namespace ck = troupe::checkpoint;
namespace fs = std::filesystem;

namespace {

// test/core/checkpoint_saver_child.cpp, started on `dir`; killed and reaped by pid when this
// goes out of scope, also when the test fails.
class SaverChild {
 public:
  explicit SaverChild(const std::string& dir) {
    int fds[2];
    BOOST_TEST_REQUIRE(::pipe(fds) == 0);
    pid_ = ::fork();
    BOOST_TEST_REQUIRE(pid_ >= 0);
    if (pid_ == 0) {
      ::dup2(fds[1], STDOUT_FILENO);
      ::close(fds[0]);
      ::close(fds[1]);
      ::execl(TROUPE_CHECKPOINT_SAVER_CHILD, TROUPE_CHECKPOINT_SAVER_CHILD, dir.c_str(), nullptr);
      ::_exit(127);
    }
    ::close(fds[1]);
    said_ = fds[0];
  }
  ~SaverChild() {
    kill();
    ::close(said_);
  }

  // Waits at most `bound` for the child to say its first save has begun (a sanitized or busy
  // child may take a while to start); false if it did not.
  bool wait_until_saving(std::chrono::milliseconds bound) {
    pollfd p{said_, POLLIN, 0};
    if (::poll(&p, 1, int(bound.count())) != 1) return false;
    char line[16] = {};
    return ::read(said_, line, sizeof line - 1) > 0 && std::string(line).rfind("saving", 0) == 0;
  }
  SaverChild(const SaverChild&) = delete;
  SaverChild& operator=(const SaverChild&) = delete;

  // SIGKILL and waitpid; returns the wait status.
  int kill() {
    if (pid_ <= 0) return status_;
    ::kill(pid_, SIGKILL);
    while (::waitpid(pid_, &status_, 0) < 0 && errno == EINTR) {
    }
    pid_ = -1;
    return status_;
  }

 private:
  pid_t pid_ = -1;
  int status_ = 0;
  int said_ = -1;  // the child's standard output
};

int count_temporaries(const std::string& dir) {
  int n = 0;
  for (const auto& e : fs::directory_iterator(dir))
    n += e.path().filename().string().rfind(".tmp-", 0) == 0;
  return n;
}

bool equal(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && std::memcmp(a.raw_data(), b.raw_data(), a.byte_size()) == 0;
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_save_killed_at_random_moments_leaves_the_latest_checkpoint_restorable) {
  testing::ScratchDir dir;
  unsigned seed = std::random_device{}();
  BOOST_TEST_MESSAGE("kill test seed " << seed);
  std::mt19937 rng(seed);
  int kills_during_a_save = 0, published = 0;
  int64_t last_step = 0;
  for (int round = 0; round < 25; ++round) {
    SaverChild child(dir.path());
    BOOST_TEST_REQUIRE(child.wait_until_saving(std::chrono::seconds(60)),
                       "round " << round << ": the saver said nothing in 60 s");
    std::this_thread::sleep_for(std::chrono::milliseconds(rng() % 201));
    int status = child.kill();
    BOOST_TEST_REQUIRE(WIFSIGNALED(status), "the saver exited by itself with status " << status);
    kills_during_a_save += count_temporaries(dir.path()) > 0;

    auto latest = ck::latest_checkpoint(dir.path());
    if (!latest) continue;
    ck::Index index = ck::read_index(*latest);
    int64_t step = index.global_step;
    BOOST_TEST(*latest == dir.path() + "/ckpt-" + std::to_string(step));
    BOOST_TEST(step >= last_step);
    auto a = testing::saver_a(step), b = testing::saver_b(step);
    auto back = ck::read(*latest, {{"a", a.dtype(), a.shape()}, {"b", b.dtype(), b.shape()}});
    BOOST_TEST(equal(back[0], a), "round " << round << ": 'a' of " << *latest);
    BOOST_TEST(equal(back[1], b), "round " << round << ": 'b' of " << *latest);
    last_step = step;
    ++published;
  }
  BOOST_TEST_MESSAGE(published << " rounds found a checkpoint, the last of step " << last_step
                               << "; " << kills_during_a_save << " kills left a save unfinished");
  BOOST_TEST(published > 0);
  BOOST_TEST(kills_during_a_save > 0);

  std::string temp = ck::begin_save(dir.path(), last_step + 1);
  BOOST_TEST(count_temporaries(dir.path()) == 1);
  ck::abandon(temp);
  BOOST_TEST(count_temporaries(dir.path()) == 0);
}
