// Cluster specs (actors/cluster/cluster_spec.hpp): TensorFlow's TF_CONFIG form, and an error
// naming the bad entry for every kind of mistake.
#include <boost/test/unit_test.hpp>

#include <cstdlib>
#include <fstream>
#include <set>

#include "actors/cluster/cluster_spec.hpp"
#include "actors/cluster/tls.hpp"
#include "test/support/expect_error.hpp"
#include "test/support/scratch_dir.hpp"

using namespace troupe;
using troupe::testing::contains;
using troupe::testing::error_of;

namespace {

const char* kSpec = R"({
  "cluster": {"chief": ["localhost:2220"], "worker": ["localhost:2221", "127.0.0.1:2222"],
              "ps": ["[::1]:2223"]},
  "task": {"type": "worker", "index": 1}
})";

std::string bad(const std::string& json) {
  return error_of([&] { ClusterSpec::from_json(json, "spec.json"); }, ErrorCode::invalid_argument);
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_tf_config_spec_gives_jobs_addresses_and_this_task) {
  auto spec = ClusterSpec::from_json(kSpec, "spec.json");
  BOOST_TEST(spec.jobs().size() == 3u);
  BOOST_TEST(spec.address({"worker", 1}).host == "127.0.0.1");
  BOOST_TEST(spec.address({"worker", 1}).port == 2222);
  BOOST_TEST(spec.address({"ps", 0}).host == "::1");
  BOOST_TEST(spec.address({"ps", 0}).to_string() == "[::1]:2223");
  BOOST_TEST_REQUIRE(spec.this_task().has_value());
  BOOST_TEST(spec.this_task()->to_string() == "worker:1");
  std::vector<std::string> tasks;
  for (auto& t : spec.tasks()) tasks.push_back(t.to_string());
  BOOST_TEST(tasks == (std::vector<std::string>{"chief:0", "ps:0", "worker:0", "worker:1"}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(a_job_may_list_its_tasks_by_index) {
  auto spec = ClusterSpec::from_json(R"({"cluster": {"worker": {"0": "a:1", "3": "b:2"}}})", "s");
  BOOST_TEST(spec.has({"worker", 3}));
  BOOST_TEST(!spec.has({"worker", 1}));
  BOOST_TEST(!spec.this_task().has_value());
  auto m = error_of([&] { spec.address({"worker", 1}); }, ErrorCode::invalid_argument);
  BOOST_TEST(contains(m, "job 'worker' has no task 1 (its tasks: 0, 3)"), m);
}

BOOST_AUTO_TEST_CASE(each_mistake_in_a_spec_is_named) {
  BOOST_TEST(contains(bad("{\"cluster\": "), "spec.json: not JSON"));
  BOOST_TEST(contains(bad("[1]"), "a cluster spec is a JSON object, not array"));
  BOOST_TEST(contains(bad(R"({"task": {"type": "worker"}})"), "no \"cluster\""));
  auto typo = bad(R"({"cluster": {"worker": ["a:1"]}, "tsak": {"type": "worker"}})");
  BOOST_TEST(contains(typo, "unknown key 'tsak' (expected cluster, task, environment, rpc_layer, tls)"), typo);
  auto dup = bad(R"({"cluster": {"worker": ["h:1", "h:2"], "ps": ["h:2"]}})");
  BOOST_TEST(contains(dup, "tasks ps:0 and worker:1 have the same address h:2"), dup);
  auto port = bad(R"({"cluster": {"worker": ["h:22x2"]}})");
  BOOST_TEST(contains(port, "task worker:0: address 'h:22x2': port '22x2' is not a number from 1 to 65535"), port);
  BOOST_TEST(contains(bad(R"({"cluster": {"worker": ["h:70000"]}})"), "port '70000' is not a number from 1 to 65535"));
  BOOST_TEST(contains(bad(R"({"cluster": {"worker": ["h"]}})"), "address 'h' has no port"));
  BOOST_TEST(contains(bad(R"({"cluster": {"worker": [":1"]}})"), "address ':1' has no host"));
  BOOST_TEST(contains(bad(R"({"cluster": {"worker": ["::1:5"]}})"), "write an IPv6 host in brackets"));
  BOOST_TEST(contains(bad(R"({"cluster": {"worker": [7]}})"), "cluster.worker[0]: an address is a \"host:port\" string"));
  BOOST_TEST(contains(bad(R"({"cluster": {"worker": []}})"), "job 'worker' has no tasks"));
  BOOST_TEST(contains(bad(R"({"cluster": {"work-er": ["h:1"]}})"), "job name 'work-er' is not a letter"));
  auto job = bad(R"({"cluster": {"worker": ["h:1"]}, "task": {"type": "ps", "index": 0}})");
  BOOST_TEST(contains(job, "task ps:0: the cluster has no job 'ps' (its jobs: worker)"), job);
  auto index = bad(R"({"cluster": {"worker": ["h:1", "h:2"]}, "task": {"type": "worker", "index": 2}})");
  BOOST_TEST(contains(index, "task worker:2: job 'worker' has no task 2 (its tasks: 0, 1)"), index);
  BOOST_TEST(contains(bad(R"({"cluster": {"worker": ["h:1"]}, "task": {"type": "worker", "index": -1}})"),
                      "task.index must be a non-negative number, got -1"));
  BOOST_TEST(contains(bad(R"({"cluster": {"worker": ["h:1"]}, "task": {"type": "worker", "idx": 0}})"),
                      "task: unknown key 'idx'"));
}

BOOST_AUTO_TEST_CASE(task_ids_parse_in_both_forms_and_with_tensorflows_replica) {
  BOOST_TEST(parse_task_id("worker:3").to_string() == "worker:3");
  BOOST_TEST(parse_task_id("/job:ps/task:1").to_string() == "ps:1");
  BOOST_TEST(parse_task_id("/job:worker/replica:0/task:2").to_string() == "worker:2");
  BOOST_TEST(contains(error_of([] { parse_task_id("/job:worker/replica:1/task:2"); }, ErrorCode::invalid_argument),
                      "replica '1': each task of a Troupe cluster is one replica, replica:0"));
  BOOST_TEST(contains(error_of([] { parse_task_id("/job:worker/device:CPU:0/task:2"); }, ErrorCode::invalid_argument),
                      "'device:CPU:0' is not part of a task's name"));
  BOOST_TEST(contains(error_of([] { parse_task_id("worker"); }, ErrorCode::invalid_argument), "neither job:index"));
  BOOST_TEST(contains(error_of([] { parse_task_id("worker:x"); }, ErrorCode::invalid_argument),
                      "index 'x' is not a non-negative number"));
}

BOOST_AUTO_TEST_CASE(a_spec_comes_from_a_file_or_tf_config) {
  troupe::testing::ScratchDir dir;
  const std::string path = dir.file("spec.json");
  std::ofstream(path) << kSpec;
  BOOST_TEST(ClusterSpec::from_file(path).address({"chief", 0}).port == 2220);
  auto missing = error_of([&] { ClusterSpec::from_file(dir.path() + "/none.json"); }, ErrorCode::not_found);
  BOOST_TEST(contains(missing, "none.json"), missing);

  BOOST_REQUIRE(setenv("TF_CONFIG", R"({"cluster": {"worker": ["h:1"]}, "task": {"type": "worker"}})", 1) == 0);
  auto spec = ClusterSpec::from_environment();
  BOOST_TEST_REQUIRE(spec.has_value());
  BOOST_TEST(spec->this_task()->to_string() == "worker:0");
  BOOST_REQUIRE(setenv("TF_CONFIG", R"({"cluster": {"worker": ["h:0"]}})", 1) == 0);
  auto m = error_of([] { ClusterSpec::from_environment(); }, ErrorCode::invalid_argument);
  BOOST_TEST(contains(m, "TF_CONFIG: task worker:0: address 'h:0'"), m);
  BOOST_REQUIRE(unsetenv("TF_CONFIG") == 0);
  BOOST_TEST(!ClusterSpec::from_environment().has_value());
}

BOOST_AUTO_TEST_CASE(a_local_cluster_spec_puts_every_task_on_its_own_free_loopback_port) {
  const ClusterSpec spec = ClusterSpec::from_json(local_cluster_json({{"worker", 3}, {"ps", 2}}), "local");
  BOOST_TEST(spec.tasks().size() == 5u);
  std::set<uint16_t> ports;
  for (const TaskId& t : spec.tasks()) {
    BOOST_TEST(spec.address(t).host == "127.0.0.1");
    ports.insert(spec.address(t).port);
  }
  BOOST_TEST(ports.size() == 5u);  // distinct (a duplicate would also have been refused by the spec)
  BOOST_TEST(spec.has(TaskId{"ps", 1}));
  BOOST_TEST(!spec.has(TaskId{"ps", 2}));
}

BOOST_AUTO_TEST_CASE(a_tls_section_names_every_tasks_files_relative_to_the_spec) {
  troupe::testing::ScratchDir dir;
  std::ofstream(dir.file("spec.json")) << R"({"cluster": {"ps": ["127.0.0.1:2223"], "worker": ["127.0.0.1:2224"]},
    "tls": {"ca": "certs/ca.pem", "client": {"certificate": "c.pem", "key": "/keys/c.key"},
            "tasks": {"ps:0": {"certificate": "ps.pem", "key": "ps.key"},
                      "/job:worker/task:0": {"certificate": "w.pem", "key": "w.key"}}}})";
  auto spec = ClusterSpec::from_file(dir.file("spec.json"));
  BOOST_TEST(spec.uses_tls());
  const TlsFiles ps = spec.tls_for({"ps", 0});
  BOOST_TEST(ps.ca == dir.file("certs/ca.pem"));
  BOOST_TEST(ps.certificate == dir.file("ps.pem"));
  BOOST_TEST(spec.tls_for({"worker", 0}).key == dir.file("w.key"));
  BOOST_TEST(spec.tls_client().key == "/keys/c.key");  // absolute stays
  // Without the section: plain TCP, every identity empty.
  auto plain = ClusterSpec::from_json(kSpec, "spec.json");
  BOOST_TEST(!plain.uses_tls());
  BOOST_TEST(plain.tls_for({"ps", 0}).empty());
  BOOST_TEST(plain.tls_client().empty());
}

BOOST_AUTO_TEST_CASE(each_mistake_in_a_tls_section_is_named) {
  const std::string cluster = R"("cluster": {"ps": ["127.0.0.1:2223"], "worker": ["127.0.0.1:2224"]})";
  auto with_tls = [&](const std::string& tls) { return bad("{" + cluster + ", \"tls\": " + tls + "}"); };
  const std::string ps = R"("ps:0": {"certificate": "p.pem", "key": "p.key"})";
  const std::string worker = R"("worker:0": {"certificate": "w.pem", "key": "w.key"})";
  // An empty section would mean anonymous TLS: refused.
  std::string m = with_tls("{}");
  BOOST_TEST(contains(m, "spec.json: tls: \"ca\" must name the cluster CA's certificate file"), m);
  m = with_tls(R"({"ca": "ca.pem", "tasks": {)" + ps + "}}");
  BOOST_TEST(contains(m, "spec.json: tls.tasks: no certificate for worker:0"), m);
  m = with_tls(R"({"ca": "ca.pem", "tasks": {)" + ps + ", " + worker + R"(, "ps:1": {"certificate": "x", "key": "y"}}})");
  BOOST_TEST(contains(m, "spec.json: tls.tasks: 'ps:1' is no task of the cluster"), m);
  m = with_tls(R"({"ca": "ca.pem", "tasks": {)" + ps + ", " + worker + R"(}, "clients": {}})");
  BOOST_TEST(contains(m, "spec.json: tls: unknown key 'clients' (expected ca, tasks, client)"), m);
  m = with_tls(R"({"ca": "ca.pem", "tasks": {"ps:0": {"certificate": "p.pem"}, )" + worker + "}}");
  BOOST_TEST(contains(m, "spec.json: tls.tasks.ps:0: \"key\" must name a file"), m);
  // No client identity: only a process that is no task needs one, and is told.
  auto spec = ClusterSpec::from_json("{" + cluster + R"(, "tls": {"ca": "ca.pem", "tasks": {)" + ps + ", " + worker + "}}}",
                                     "spec.json");
  m = error_of([&] { spec.tls_client(); }, ErrorCode::invalid_argument);
  BOOST_TEST(contains(m, "spec.json: tls has no \"client\" identity"), m);
}

BOOST_AUTO_TEST_CASE(made_certificates_check_out_and_a_wrong_file_is_named_with_what_is_wrong) {
  troupe::testing::ScratchDir dir;
  std::ofstream(dir.file("spec.json")) << R"({"cluster": {"ps": ["127.0.0.1:2223"], "worker": ["127.0.0.1:2224"]}})";
  const std::string path = make_cluster_certificates(dir.file("spec.json"), dir.file("certs"));
  BOOST_TEST(path == dir.file("certs/cluster.json"));
  auto spec = ClusterSpec::from_file(path);
  for (auto& task : spec.tasks()) check_tls_files(spec.tls_for(task), "task " + task.to_string());
  check_tls_files(spec.tls_client(), "client");
  // A second CA in the same place would lock the first one's tasks out.
  auto m = error_of([&] { make_cluster_certificates(dir.file("spec.json"), dir.file("certs")); }, ErrorCode::already_exists);
  BOOST_TEST(contains(m, "holds a cluster CA already"), m);

  TlsFiles ps = spec.tls_for({"ps", 0});
  TlsFiles wrong_key = ps;
  wrong_key.key = spec.tls_for({"worker", 0}).key;
  m = error_of([&] { check_tls_files(wrong_key, "task ps:0"); }, ErrorCode::invalid_argument);
  BOOST_TEST(contains(m, "task ps:0: TLS key " + wrong_key.key + " does not belong to certificate " + ps.certificate), m);

  auto other = ClusterSpec::from_file(make_cluster_certificates(dir.file("spec.json"), dir.file("other")));
  TlsFiles foreign = other.tls_for({"ps", 0});
  foreign.ca = ps.ca;
  m = error_of([&] { check_tls_files(foreign, "task ps:0"); }, ErrorCode::invalid_argument);
  BOOST_TEST(contains(m, "task ps:0: TLS certificate " + foreign.certificate + " does not verify against the cluster CA " +
                             ps.ca + " (unable to get local issuer certificate)"),
             m);

  TlsFiles missing = ps;
  missing.certificate = dir.file("none.pem");
  m = error_of([&] { check_tls_files(missing, "task ps:0"); }, ErrorCode::invalid_argument);
  BOOST_TEST(contains(m, "task ps:0: cannot read TLS certificate " + missing.certificate), m);
  TlsFiles garbage = ps;
  garbage.key = dir.file("spec.json");
  m = error_of([&] { check_tls_files(garbage, "task ps:0"); }, ErrorCode::invalid_argument);
  BOOST_TEST(contains(m, "task ps:0: TLS key " + garbage.key + " is not an unencrypted PEM private key"), m);
  m = error_of([&] { check_tls_files({ps.ca, ps.certificate, ""}, "task ps:0"); }, ErrorCode::invalid_argument);
  BOOST_TEST(contains(m, "task ps:0: TLS needs the cluster CA, a certificate and a key"), m);
}
