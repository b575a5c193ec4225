// Where this process is (train/cluster_config.hpp): --cluster and --task, a spec's own task,
// TF_CONFIG, or alone; and each way of getting it wrong refused by name.
#include <boost/test/unit_test.hpp>

#include <cstdlib>
#include <fstream>

#include "test/support/expect_error.hpp"
#include "test/support/scratch_dir.hpp"
#include "train/cluster_config.hpp"

using namespace troupe;
using troupe::testing::contains;
using troupe::testing::error_of;

namespace {

const char* kSpec = R"({"cluster": {"worker": ["127.0.0.1:2221", "127.0.0.1:2222"], "ps": ["127.0.0.1:2223"]}})";

// TF_CONFIG set (or unset, for nullptr) for the scope of one test.
struct TfConfig {
  explicit TfConfig(const char* value) {
    if (const char* was = std::getenv("TF_CONFIG")) saved_ = was;
    if (value) ::setenv("TF_CONFIG", value, 1);
    else ::unsetenv("TF_CONFIG");
  }
  ~TfConfig() {
    if (saved_) ::setenv("TF_CONFIG", saved_->c_str(), 1);
    else ::unsetenv("TF_CONFIG");
  }
  std::optional<std::string> saved_;
};

}  // namespace

BOOST_AUTO_TEST_CASE(neither_flags_nor_tf_config_mean_one_process_alone) {
  TfConfig none(nullptr);
  const auto where = train::where_am_i();
  BOOST_TEST(where.local());
  BOOST_TEST(where.is_chief());
  BOOST_TEST(where.num_workers() == 1);
  BOOST_TEST(where.task_name() == "local");
  BOOST_TEST(contains(error_of([&] { where.spec(); }, ErrorCode::invalid_argument), "runs alone"));
}

BOOST_AUTO_TEST_CASE(a_spec_file_and_a_task_place_the_process_and_count_the_jobs) {
  TfConfig none(nullptr);
  troupe::testing::ScratchDir dir;
  std::ofstream(dir.file("spec.json")) << kSpec;
  const auto where = train::where_am_i(dir.file("spec.json"), "worker:1");
  BOOST_TEST(!where.local());
  BOOST_TEST(where.task_name() == "worker:1");
  BOOST_TEST(where.worker_index() == 1);
  BOOST_TEST(!where.is_chief());
  BOOST_TEST(where.num_workers() == 2);
  BOOST_TEST(where.num_ps() == 1);
  BOOST_TEST(where.spec().this_task()->to_string() == "worker:1");
  BOOST_TEST(where.source() == "--cluster " + dir.file("spec.json"));
  BOOST_TEST(train::where_am_i(dir.file("spec.json"), "/job:worker/replica:0/task:0").is_chief());
}

BOOST_AUTO_TEST_CASE(tf_config_gives_the_cluster_and_the_task_and_a_task_flag_overrides_its_task) {
  TfConfig config(R"({"cluster": {"worker": ["127.0.0.1:2221", "127.0.0.1:2222"], "ps": ["127.0.0.1:2223"]},
                      "task": {"type": "worker", "index": 1}})");
  const auto where = train::where_am_i();
  BOOST_TEST(where.task_name() == "worker:1");
  BOOST_TEST(where.source() == "TF_CONFIG");
  BOOST_TEST(train::where_am_i("", "ps:0").task_name() == "ps:0");
}

BOOST_AUTO_TEST_CASE(a_half_given_pair_a_task_the_spec_lacks_and_a_malformed_spec_are_refused_by_name) {
  TfConfig none(nullptr);
  troupe::testing::ScratchDir dir;
  std::ofstream(dir.file("spec.json")) << kSpec;
  auto no_spec = error_of([] { train::where_am_i("", "worker:0"); }, ErrorCode::invalid_argument);
  BOOST_TEST(contains(no_spec, "--task worker:0: there is no cluster spec"), no_spec);
  auto no_task = error_of([&] { train::where_am_i(dir.file("spec.json"), ""); }, ErrorCode::invalid_argument);
  BOOST_TEST(contains(no_task, "which task is this process?"), no_task);
  auto absent = error_of([&] { train::where_am_i(dir.file("spec.json"), "worker:5"); }, ErrorCode::invalid_argument);
  BOOST_TEST(contains(absent, "--cluster " + dir.file("spec.json")), absent);
  BOOST_TEST(contains(absent, "worker:5"), absent);
  std::ofstream(dir.file("bad.json")) << R"({"cluster": {"worker": ["127.0.0.1:99999"]}})";
  auto bad = error_of([&] { train::where_am_i(dir.file("bad.json"), "worker:0"); }, ErrorCode::invalid_argument);
  BOOST_TEST(contains(bad, "99999"), bad);
  TfConfig broken("{not json");
  auto env = error_of([] { train::where_am_i(); }, ErrorCode::invalid_argument);
  BOOST_TEST(contains(env, "TF_CONFIG"), env);
}

BOOST_AUTO_TEST_CASE(tensorflows_chief_and_evaluator_jobs_are_refused_at_start_saying_that_worker_0_is_the_chief) {
  TfConfig chief(R"({"cluster": {"chief": ["127.0.0.1:1"], "worker": ["127.0.0.1:2"], "ps": ["127.0.0.1:3"]},
                     "task": {"type": "ps", "index": 0}})");
  auto e = error_of([] { train::where_am_i(); }, ErrorCode::invalid_argument);
  BOOST_TEST(contains(e, "TF_CONFIG has a job 'chief', which Troupe does not run: worker:0 is the chief"), e);
  troupe::testing::ScratchDir dir;
  std::ofstream(dir.file("spec.json"))
      << R"({"cluster": {"worker": ["127.0.0.1:2"], "ps": ["127.0.0.1:3"], "evaluator": ["127.0.0.1:4"]}})";
  e = error_of([&] { train::where_am_i(dir.file("spec.json"), "worker:0"); }, ErrorCode::invalid_argument);
  BOOST_TEST(contains(e, "--cluster " + dir.file("spec.json") + " has a job 'evaluator'"), e);
  BOOST_TEST(contains(e, "the chief evaluates"), e);
}
