// Saver: checkpoints of a session's variables and optimizer slots, saved while training goes
// on, restored all or nothing, into the same or another split of the variables.
#include <boost/test/unit_test.hpp>

#include <fcntl.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "actors/state/saver.hpp"
#include "core/checkpoint.hpp"
#include "ops/all.hpp"
#include "test/support/expect_error.hpp"
#include "test/support/scratch_dir.hpp"
#include "test/support/skip.hpp"

using namespace troupe;
using troupe::testing::contains;
using troupe::testing::error_of;
using troupe::testing::ScratchDir;
namespace fs = std::filesystem;

namespace {

// An flock of a directory, released at the latest when it goes.
class DirectoryLock {
 public:
  explicit DirectoryLock(const std::string& path) : fd_(::open(path.c_str(), O_RDONLY | O_DIRECTORY)) {
    if (fd_ < 0 || ::flock(fd_, LOCK_EX) != 0) throw std::runtime_error("cannot lock " + path);
  }
  DirectoryLock(const DirectoryLock&) = delete;
  DirectoryLock& operator=(const DirectoryLock&) = delete;
  ~DirectoryLock() { release(); }
  void release() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_;
};

// A tmpfs of the given size mounted on `dir` for the test's duration (where the test may mount).
class SmallDisk {
 public:
  SmallDisk(const std::string& dir, const char* options) : dir_(dir) {
    fs::create_directories(dir);
    mounted_ = ::mount("tmpfs", dir.c_str(), "tmpfs", 0, options) == 0;
  }
  SmallDisk(const SmallDisk&) = delete;
  SmallDisk& operator=(const SmallDisk&) = delete;
  ~SmallDisk() {
    if (mounted_) ::umount2(dir_.c_str(), MNT_DETACH);
  }
  bool mounted() const { return mounted_; }

 private:
  std::string dir_;
  bool mounted_ = false;
};

std::vector<float> values_of(const Tensor& t) { return {t.data<float>(), t.data<float>() + t.num_elements()}; }

// A linear model y = x w + b fitted by `optimizer`, w [6,2] whole or split into `parts` parts.
struct Model {
  Scope root = Scope::root();
  Output w;  // the whole weights
  std::vector<Output> w_parts;
  Output b;
  ops::GlobalStep step = ops::global_step(root);
  Output loss;
  Node* train = nullptr;
  Node* init = nullptr;

  Model(const Optimizer& optimizer, int parts = 0) {
    std::vector<float> xs(24), ws(12);
    for (int i = 0; i < 24; ++i) xs[std::size_t(i)] = float(i % 7) * 0.25f - 0.5f;
    for (int i = 0; i < 12; ++i) ws[std::size_t(i)] = float(i % 5) * 0.1f - 0.2f;
    auto x = ops::constant(root, xs, Shape{4, 6});
    auto y = ops::constant(root, std::vector<float>{1, -1, 0.5f, 2, -0.5f, 0, 1.5f, -2}, Shape{4, 2});
    auto w0 = ops::constant(root, ws, Shape{6, 2});
    if (parts == 0) {
      w = ops::variable(root.with_op_name("w"), w0);
    } else {
      auto p = ops::partitioned_variable(root, "w", w0, parts);
      w = p.value;
      w_parts = p.parts;
    }
    b = ops::variable(root.with_op_name("b"), ops::constant(root, std::vector<float>{0.1f, -0.2f}, Shape{2}));
    auto error = ops::sub(root, ops::add(root, ops::matmul(root, x, w), b), y);
    loss = ops::mean(root, ops::square(root, error));
    train = optimizer.minimize(root, loss, {}, step.value);
    init = ops::global_variables_initializer(root);
  }

  float train_step(Session& s) const { return s.run({}, {loss}, {train})[0].scalar_value<float>(); }
  std::vector<float> weights(Session& s) const { return values_of(s.run({w})[0]); }
  std::vector<float> bias(Session& s) const { return values_of(s.run({b})[0]); }
};

// Trains 3 steps, saves (in the background, training on at once), trains 3 more; a fresh
// session restored from the checkpoint must make the same 3 steps, loss for loss.
void check_resumes_exactly(const Optimizer& optimizer, int parts_before, int parts_after) {
  ScratchDir dir;
  Model original(optimizer, parts_before);
  Session s(original.root, {.num_param_shards = std::max(parts_before, 1)});
  s.run({}, {}, {original.init});
  for (int i = 0; i < 3; ++i) original.train_step(s);
  Saver saver(s);
  auto saving = saver.save_async(dir.file("ckpt"), original.step.value);
  std::vector<float> expected;
  for (int i = 0; i < 3; ++i) expected.push_back(original.train_step(s));
  const std::string path = saving.get();
  BOOST_TEST(path == dir.file("ckpt/ckpt-3"));

  Model resumed(optimizer, parts_after);
  Session r(resumed.root, {.num_param_shards = std::max(parts_after, 1)});
  RestoreReport report = Saver(r).restore(path);
  BOOST_TEST(report.global_step == 3);
  BOOST_TEST(report.extra.empty());
  BOOST_TEST(r.run({resumed.step.value})[0].scalar_value<int64_t>() == 3);
  for (int i = 0; i < 3; ++i) BOOST_TEST(resumed.train_step(r) == expected[std::size_t(i)], "step " << 4 + i);
  BOOST_TEST(resumed.weights(r) == original.weights(s), boost::test_tools::per_element());
}

// Flips one byte of the saved bytes of `name` in its data file.
void corrupt(const std::string& checkpoint_path, const std::string& name) {
  for (auto& e : checkpoint::read_index(checkpoint_path).entries) {
    if (e.name != name) continue;
    std::fstream f(checkpoint_path + "/" + e.file, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(std::streamoff(e.offset + e.length / 2));
    char c = 0;
    f.read(&c, 1);
    c = char(c ^ 0x10);
    f.seekp(std::streamoff(e.offset + e.length / 2));
    f.write(&c, 1);
    return;
  }
  BOOST_FAIL("no entry '" << name << "' in " << checkpoint_path);
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_model_trained_with_momentum_resumes_from_its_checkpoint_exactly) {
  check_resumes_exactly(Optimizer::momentum(0.05, 0.9), 0, 0);
}

BOOST_AUTO_TEST_CASE(a_model_trained_with_adam_resumes_from_its_checkpoint_exactly) {
  check_resumes_exactly(Optimizer::adam(0.01), 0, 0);
}

BOOST_AUTO_TEST_CASE(a_partitioned_model_resumes_exactly_in_another_split_slots_included) {
  check_resumes_exactly(Optimizer::adam(0.01), 2, 3);
  check_resumes_exactly(Optimizer::momentum(0.05, 0.9), 3, 0);
  check_resumes_exactly(Optimizer::momentum(0.05, 0.9), 0, 3);
}

BOOST_AUTO_TEST_CASE(a_checkpoint_names_the_optimizer_slots_and_step_counts) {
  ScratchDir dir;
  Model m(Optimizer::adam(0.01), 2);
  Session s(m.root, {.num_param_shards = 2});
  s.run({}, {}, {m.init});
  m.train_step(s);
  const std::string path = Saver(s).save(dir.file("ckpt"), m.step.value);
  std::set<std::string> names;
  for (auto& e : checkpoint::read_index(path).entries) names.insert(e.name);
  const std::set<std::string> expected{"w", "w/adam/m", "w/adam/v", "w/adam/step", "b", "b/adam/m",
                                       "b/adam/v", "b/adam/step", "global_step"};
  BOOST_TEST(names == expected, boost::test_tools::per_element());
  auto step = checkpoint::read(path, {{"w/adam/step", DType::int64, Shape{}, 0, -1}});
  BOOST_TEST(step[0].scalar_value<int64_t>() == 1);
}

BOOST_AUTO_TEST_CASE(a_corrupt_tensor_fails_the_restore_naming_the_file_and_changes_no_variable) {
  ScratchDir dir;
  Model m(Optimizer::momentum(0.05, 0.9));
  Session s(m.root);
  s.run({}, {}, {m.init});
  m.train_step(s);
  const std::string path = Saver(s).save(dir.file("ckpt"), 1);
  m.train_step(s);
  const auto w = m.weights(s), b = m.bias(s);
  corrupt(path, "w/momentum/accumulator");

  auto message = error_of([&] { Saver(s).restore(path); }, ErrorCode::data_loss);
  BOOST_TEST_MESSAGE(message);
  BOOST_TEST(contains(message, path), message);
  BOOST_TEST(contains(message, "w/momentum/accumulator"), message);
  BOOST_TEST(m.weights(s) == w, boost::test_tools::per_element());
  BOOST_TEST(m.bias(s) == b, boost::test_tools::per_element());
  BOOST_TEST(s.run({m.step.value})[0].scalar_value<int64_t>() == 2);
}

BOOST_AUTO_TEST_CASE(a_damaged_checkpoint_names_the_newest_intact_one_before_it) {
  ScratchDir dir;
  Model m(Optimizer::momentum(0.05, 0.9));
  Session s(m.root);
  s.run({}, {}, {m.init});
  Saver saver(s);
  const std::string older = saver.save(dir.file("ckpt"), 1);
  const std::string newer = saver.save(dir.file("ckpt"), 2);
  corrupt(newer, "w");
  try {
    saver.restore(newer);
    BOOST_ERROR("a damaged checkpoint was restored");
  } catch (const DamagedCheckpoint& e) {
    BOOST_TEST(int(e.code()) == int(ErrorCode::data_loss));
    BOOST_TEST(e.intact().value_or("") == older);
    BOOST_TEST(contains(e.what(), "the newest intact checkpoint before it is " + older), e.what());
  }
  corrupt(older, "w");
  try {
    saver.restore(newer);
    BOOST_ERROR("a damaged checkpoint was restored");
  } catch (const DamagedCheckpoint& e) {
    BOOST_TEST(!e.intact().has_value());
    BOOST_TEST(contains(e.what(), "none (no older checkpoint there verifies)"), e.what());
  }
}

BOOST_AUTO_TEST_CASE(a_dtype_mismatch_fails_the_restore_naming_the_variable_and_changes_no_variable) {
  ScratchDir dir;
  std::string path;
  {
    auto root = Scope::root();
    ops::variable(root.with_op_name("w"), ops::constant(root, std::vector<float>(12, 1.0f), Shape{6, 2}));
    ops::variable(root.with_op_name("b"), ops::constant(root, std::vector<double>{1, 2}, Shape{2}));
    Session s(root);
    s.run({}, {}, {ops::global_variables_initializer(root)});
    path = Saver(s).save(dir.file("ckpt"), 7);
  }
  auto root = Scope::root();
  auto w = ops::variable(root.with_op_name("w"), ops::constant(root, std::vector<float>(12, 5.0f), Shape{6, 2}));
  auto b = ops::variable(root.with_op_name("b"), ops::constant(root, std::vector<float>{3, 4}, Shape{2}));
  Session s(root);
  s.run({}, {}, {ops::global_variables_initializer(root)});
  auto message = error_of([&] { Saver(s).restore(path); }, ErrorCode::invalid_argument);
  BOOST_TEST_MESSAGE(message);
  BOOST_TEST(contains(message, path), message);
  BOOST_TEST(contains(message, "'b'"), message);
  BOOST_TEST(values_of(s.run({w})[0]) == std::vector<float>(12, 5.0f), boost::test_tools::per_element());
  BOOST_TEST(values_of(s.run({b})[0]) == (std::vector<float>{3, 4}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(a_variable_missing_from_the_checkpoint_is_refused_naming_it) {
  ScratchDir dir;
  std::string path;
  {
    auto root = Scope::root();
    ops::variable(root.with_op_name("w"), ops::constant(root, 1.0f));
    Session s(root);
    s.run({}, {}, {ops::global_variables_initializer(root)});
    path = Saver(s).save(dir.file("ckpt"), 1);
  }
  auto root = Scope::root();
  auto w = ops::variable(root.with_op_name("w"), ops::constant(root, 2.0f));
  ops::variable(root.with_op_name("c"), ops::constant(root, 3.0f));
  Session s(root);
  s.run({}, {}, {ops::global_variables_initializer(root)});
  auto message = error_of([&] { Saver(s).restore(path); }, ErrorCode::not_found);
  BOOST_TEST_MESSAGE(message);
  BOOST_TEST(contains(message, path), message);
  BOOST_TEST(contains(message, "'c'"), message);
  BOOST_TEST(s.run({w})[0].scalar_value<float>() == 2.0f);
}

BOOST_AUTO_TEST_CASE(a_model_that_does_not_match_names_the_shape_that_differs_first_and_counts_the_missing) {
  ScratchDir dir;
  std::string path;
  {
    auto root = Scope::root();
    ops::variable(root.with_op_name("dense/kernel"), ops::constant(root, std::vector<float>(8, 1.0f), Shape{4, 2}));
    Session s(root);
    s.run({}, {}, {ops::global_variables_initializer(root)});
    path = Saver(s).save(dir.file("ckpt"), 1);
  }
  auto root = Scope::root();
  ops::variable(root.with_op_name("dense/kernel"), ops::constant(root, std::vector<float>(12, 1.0f), Shape{4, 3}));
  for (int i = 0; i < 30; ++i) ops::variable(root.with_op_name(fmt::format("extra_{}", i)), ops::constant(root, 1.0f));
  Session s(root);
  s.run({}, {}, {ops::global_variables_initializer(root)});
  auto message = error_of([&] { Saver(s).restore(path); }, ErrorCode::invalid_argument);
  BOOST_TEST_MESSAGE(message);
  const auto shape = message.find("'dense/kernel' is float32[4,3] in the graph, float32[4,2] in the checkpoint");
  BOOST_TEST(shape != std::string::npos, message);
  BOOST_TEST(contains(message, "30 variables of the session's graph are not in the checkpoint"), message);
  BOOST_TEST(shape < message.find("not in the checkpoint"), message);
  BOOST_TEST(contains(message, "and 24 more"), message);
  BOOST_TEST(!contains(message, "'extra_29'"), message);  // counted, not listed
  BOOST_TEST(s.run({"dense/kernel"})[0].shape() == (Shape{4, 3}));
}

BOOST_AUTO_TEST_CASE(variables_only_the_checkpoint_has_are_reported_as_extra) {
  ScratchDir dir;
  std::string path;
  {
    auto root = Scope::root();
    ops::variable(root.with_op_name("w"), ops::constant(root, 1.0f));
    ops::variable(root.with_op_name("old"), ops::constant(root, 3.0f));
    Session s(root);
    s.run({}, {}, {ops::global_variables_initializer(root)});
    path = Saver(s).save(dir.file("ckpt"), 1);
  }
  auto root = Scope::root();
  auto w = ops::variable(root.with_op_name("w"), ops::constant(root, 2.0f));
  Session s(root);
  RestoreReport report = Saver(s).restore(path);
  BOOST_TEST(report.extra == std::vector<std::string>{"old"}, boost::test_tools::per_element());
  BOOST_TEST(report.restored == std::vector<std::string>{"w"}, boost::test_tools::per_element());
  BOOST_TEST(s.run({w})[0].scalar_value<float>() == 1.0f);
}

BOOST_AUTO_TEST_CASE(a_variable_saved_whole_restores_into_three_parts_and_three_parts_into_a_whole_one) {
  ScratchDir dir;
  std::vector<float> rows(12);
  for (int i = 0; i < 12; ++i) rows[std::size_t(i)] = float(i);
  std::string whole_path, parts_path;
  {
    auto root = Scope::root();
    ops::variable(root.with_op_name("emb"), ops::constant(root, rows, Shape{6, 2}));
    Session s(root);
    s.run({}, {}, {ops::global_variables_initializer(root)});
    whole_path = Saver(s).save(dir.file("whole"), 1);
  }
  {
    auto root = Scope::root();
    auto emb = ops::partitioned_variable(root, "emb", ops::constant(root, std::vector<float>(12, 0.0f), Shape{6, 2}), 3);
    Session s(root, {.num_param_shards = 3});
    Saver(s).restore(whole_path);
    for (int k = 0; k < 3; ++k)
      BOOST_TEST(values_of(s.run({emb.parts[std::size_t(k)]})[0]) ==
                     std::vector<float>(rows.begin() + 4 * k, rows.begin() + 4 * (k + 1)),
                 boost::test_tools::per_element());
    BOOST_TEST(values_of(s.run({emb.value})[0]) == rows, boost::test_tools::per_element());
    s.run({}, {}, {ops::assign_add(root, emb.parts[1], ops::constant(root, std::vector<float>(4, 100.0f), Shape{2, 2}))});
    parts_path = Saver(s).save(dir.file("parts"), 2);
  }
  auto root = Scope::root();
  auto emb = ops::variable(root.with_op_name("emb"), ops::constant(root, std::vector<float>(12, 0.0f), Shape{6, 2}));
  Session s(root);
  Saver(s).restore(parts_path);
  auto expected = rows;
  for (int i = 4; i < 8; ++i) expected[std::size_t(i)] += 100.0f;
  BOOST_TEST(values_of(s.run({emb})[0]) == expected, boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(two_parts_restore_into_three) {
  ScratchDir dir;
  std::vector<float> rows(12);
  for (int i = 0; i < 12; ++i) rows[std::size_t(i)] = float(i) * 1.5f;
  std::string path;
  {
    auto root = Scope::root();
    ops::partitioned_variable(root, "emb", ops::constant(root, rows, Shape{6, 2}), 2);
    Session s(root, {.num_param_shards = 2});
    s.run({}, {}, {ops::global_variables_initializer(root)});
    path = Saver(s).save(dir.file("ckpt"), 1);
  }
  auto root = Scope::root();
  auto emb = ops::partitioned_variable(root, "emb", ops::constant(root, std::vector<float>(12, 0.0f), Shape{6, 2}), 3);
  Session s(root, {.num_param_shards = 2});
  Saver(s).restore(path);
  // Part 1 of 3 (rows 2 and 3) straddles the two saved parts (rows 0-2 and 3-5).
  BOOST_TEST(values_of(s.run({emb.parts[1]})[0]) == std::vector<float>(rows.begin() + 4, rows.begin() + 8),
             boost::test_tools::per_element());
  BOOST_TEST(values_of(s.run({emb.value})[0]) == rows, boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(three_parameter_shards_write_three_data_files) {
  ScratchDir dir;
  auto root = Scope::root();
  std::vector<Output> vars;
  for (int i = 0; i < 5; ++i)
    vars.push_back(ops::variable(root.with_op_name("v" + std::to_string(i)), ops::constant(root, float(i))));
  Session s(root, {.num_param_shards = 3});
  s.run({}, {}, {ops::global_variables_initializer(root)});
  const std::string path = Saver(s).save(dir.file("ckpt"), 1);
  std::set<std::string> data_files, written;
  for (auto& entry : fs::directory_iterator(path))
    if (entry.path().extension() == ".data") data_files.insert(entry.path().filename().string());
  for (auto& e : checkpoint::read_index(path).entries) written.insert(e.file);
  BOOST_TEST(data_files.size() == 3u);
  BOOST_TEST(written == data_files, boost::test_tools::per_element());

  auto again = Scope::root();
  std::vector<Output> restored;
  for (int i = 0; i < 5; ++i)
    restored.push_back(ops::variable(again.with_op_name("v" + std::to_string(i)), ops::constant(again, -1.0f)));
  Session r(again);
  Saver(r).restore(path);
  for (int i = 0; i < 5; ++i) BOOST_TEST(r.run({restored[std::size_t(i)]})[0].scalar_value<float>() == float(i));
}

BOOST_AUTO_TEST_CASE(training_goes_on_while_a_save_writes_and_the_checkpoint_holds_the_snapshot) {
  ScratchDir dir;
  auto root = Scope::root();
  const int64_t n = int64_t(1) << 20;
  auto big = ops::variable(root.with_op_name("big"), ops::fill(root, Shape{n}, ops::constant(root, 1.0f)));
  auto bump = ops::assign_add(root, big, ops::fill(root, Shape{n}, ops::constant(root, 1.0f)));
  auto first = ops::read_variable(root.with_op_name("first"), big);
  Session s(root, {.num_param_shards = 2});
  s.run({}, {}, {ops::global_variables_initializer(root)});
  Saver saver(s);
  // Publishing takes an flock of the checkpoint directory (core/checkpoint.hpp): holding it
  // here keeps the save from finishing until the steps below have.
  fs::create_directories(dir.file("ckpt"));
  DirectoryLock held(dir.file("ckpt"));
  auto saving = saver.save_async(dir.file("ckpt"), 1);
  for (int i = 0; i < 3; ++i) s.run({}, {}, {bump});  // update the variable being written
  BOOST_TEST((saving.wait_for(std::chrono::seconds(0)) == std::future_status::timeout),
             "the steps finished while the save was in flight");
  held.release();
  const std::string path = saving.get();
  auto saved = checkpoint::read(path, {{"big", DType::float32, Shape{n}, 0, -1}});
  BOOST_TEST(saved[0].data<float>()[0] == 1.0f);
  BOOST_TEST(saved[0].data<float>()[n - 1] == 1.0f);
  auto now = s.run({first})[0];
  BOOST_TEST(now.data<float>()[0] == 4.0f);
  BOOST_TEST(now.data<float>()[n - 1] == 4.0f);
}

BOOST_AUTO_TEST_CASE(a_save_into_an_unwritable_place_fails_clearly_and_training_goes_on) {
  ScratchDir dir;
  Model m(Optimizer::momentum(0.05, 0.9));
  Session s(m.root);
  s.run({}, {}, {m.init});
  m.train_step(s);
  Saver saver(s);
  const std::string good = saver.save(dir.file("ckpt"), 1);
  { std::ofstream(dir.file("file")) << "not a directory"; }
  const std::string bad = dir.file("file/ckpt");
  try {
    saver.save(bad, 2);
    BOOST_ERROR("a save under a regular file succeeded");
  } catch (const Error& e) {
    BOOST_TEST_MESSAGE(e.what());
    BOOST_TEST(contains(e.what(), dir.file("file")), e.what());
  }
  m.train_step(s);
  BOOST_TEST(s.run({m.step.value})[0].scalar_value<int64_t>() == 2);
  BOOST_TEST(latest_checkpoint(dir.file("ckpt")).value_or("") == good);
  BOOST_TEST(saver.save(dir.file("ckpt"), 3) == dir.file("ckpt/ckpt-3"));
}

BOOST_AUTO_TEST_CASE(a_full_disk_fails_the_save_keeps_the_previous_checkpoint_and_training_goes_on,
                     *troupe::testing::runs_here([] {
                       ScratchDir probe;
                       return SmallDisk(probe.file("probe"), "size=64k").mounted()
                                  ? std::string()
                                  : "cannot mount a tmpfs here (it needs root or CAP_SYS_ADMIN)";
                     })) {
  ScratchDir dir;
  SmallDisk disk(dir.file("small"), "size=1m");
  BOOST_TEST_REQUIRE(disk.mounted());
  auto root = Scope::root();
  const int64_t n = int64_t(1) << 17;  // 512 KiB: one checkpoint fits, two do not
  auto big = ops::variable(root.with_op_name("big"), ops::fill(root, Shape{n}, ops::constant(root, 1.0f)));
  auto bump = ops::assign_add(root, big, ops::fill(root, Shape{n}, ops::constant(root, 1.0f)));
  Session s(root);
  s.run({}, {}, {ops::global_variables_initializer(root)});
  Saver saver(s);
  const std::string first = saver.save(dir.file("small"), 1);
  s.run({}, {}, {bump});
  auto message = error_of([&] { saver.save(dir.file("small"), 2); }, ErrorCode::resource_exhausted);
  BOOST_TEST_MESSAGE(message);
  BOOST_TEST(contains(message, "ENOSPC"), message);
  BOOST_TEST(contains(message, dir.file("small")), message);
  BOOST_TEST(latest_checkpoint(dir.file("small")).value_or("") == first);
  s.run({}, {}, {bump});
  BOOST_TEST(s.run({big})[0].data<float>()[0] == 3.0f);
  saver.restore(first);
  BOOST_TEST(s.run({big})[0].data<float>()[n - 1] == 1.0f);
}

BOOST_AUTO_TEST_CASE(a_save_is_refused_while_a_variable_is_not_initialised) {
  ScratchDir dir;
  Model m(Optimizer::momentum(0.05, 0.9));
  Session s(m.root);
  s.run({}, {}, {ops::variables_initializer(m.root.sub("only_b"), {m.b})});
  auto message = error_of([&] { Saver(s).save(dir.file("ckpt"), 1); }, ErrorCode::failed_precondition);
  BOOST_TEST_MESSAGE(message);
  BOOST_TEST(contains(message, "'w'"), message);
  BOOST_TEST(contains(message, "'global_step'"), message);
  BOOST_TEST(!fs::exists(dir.file("ckpt/ckpt-1")));
}

BOOST_AUTO_TEST_CASE(checkpoints_beyond_max_to_keep_are_removed) {
  ScratchDir dir;
  Model m(Optimizer::sgd(0.05));
  Session s(m.root);
  s.run({}, {}, {m.init});
  Saver saver(s, {.max_to_keep = 2});
  for (int i = 0; i < 3; ++i) {
    m.train_step(s);
    saver.save(dir.file("ckpt"), m.step.value);
  }
  BOOST_TEST(!fs::exists(dir.file("ckpt/ckpt-1")));
  BOOST_TEST(fs::exists(dir.file("ckpt/ckpt-2")));
  BOOST_TEST(latest_checkpoint(dir.file("ckpt")).value_or("") == dir.file("ckpt/ckpt-3"));
}

BOOST_AUTO_TEST_CASE(a_variable_of_open_shape_restores_the_saved_shape_if_it_fits) {
  ScratchDir dir;
  std::string path;
  {
    auto root = Scope::root();
    auto v = ops::variable(root.with_op_name("v"), PartialShape{-1, 2}, DType::float32);
    Session s(root);
    s.run({}, {}, {ops::assign(root, v, ops::constant(root, std::vector<float>{1, 2, 3, 4, 5, 6}, Shape{3, 2}))});
    path = Saver(s).save(dir.file("ckpt"), 1);
  }
  {
    auto root = Scope::root();
    auto v = ops::variable(root.with_op_name("v"), PartialShape{-1, 2}, DType::float32);
    Session s(root);
    Saver(s).restore(path);
    auto value = s.run({v})[0];
    BOOST_TEST(value.shape() == (Shape{3, 2}));
    BOOST_TEST(values_of(value) == (std::vector<float>{1, 2, 3, 4, 5, 6}), boost::test_tools::per_element());
  }
  auto root = Scope::root();
  ops::variable(root.with_op_name("v"), PartialShape{-1, 3}, DType::float32);
  Session s(root);
  auto message = error_of([&] { Saver(s).restore(path); }, ErrorCode::invalid_argument);
  BOOST_TEST(contains(message, "'v' is float32"), message);
  BOOST_TEST(contains(message, "float32[3,2] in the checkpoint"), message);
  BOOST_TEST(contains(message, path), message);
  BOOST_TEST(s.variable_names().empty());
}
