// troupe-cluster-demo: runs one graph on a cluster and in this process, and checks that both give
// the same values (docs/cluster.md).
//   troupe-cluster-demo --target troupe://HOST:PORT [--steps N] [--float16]
// The cluster must have tasks worker:0, worker:1 and ps:0. The graph: a variable W on ps:0; a
// matmul with it on worker:0, another on worker:1; a while loop whose body runs on both workers; a
// cond whose branches run on worker:0 and ps:0; a loss on worker:1, and plain gradient descent
// on W (its gradient flows back through the cond and the loop, and the update runs on ps:0).
// Each step fetches the loss and trains; at the end W is fetched. Exit codes: 0 the cluster's
// values match the local session's (to 1e-4 relative; with --float16, values crossing between
// tasks are rounded to float16 and the bound is 2e-2), 1 they differ or a step failed, 2 a bad
// command line.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "actors/session.hpp"
#include "apps/cli_checks.hpp"
#include "ops/all.hpp"

using namespace troupe;

namespace {

constexpr int64_t kBatch = 8, kWidth = 32;

std::vector<float> random_values(std::size_t n, unsigned seed, float scale) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = normal(rng);
  return v;
}

struct Model {
  Scope root = Scope::root();
  Output x, w, loss;
  Node* init = nullptr;
  Node* train = nullptr;
};

Model build() {
  Model m;
  auto ps = m.root.with_device("/job:ps/task:0");
  auto w0 = m.root.with_device("/job:worker/task:0");
  auto w1 = m.root.with_device("/job:worker/task:1");
  m.w = ops::variable(ps.with_op_name("W"), {kWidth, kWidth}, DType::float32);
  m.init = ops::group(m.root.with_op_name("init"),
                      {ops::assign(ps, m.w, ops::constant<float>(ps, random_values(kWidth * kWidth, 1, 0.2f),
                                                                 {kWidth, kWidth}))});
  m.x = ops::placeholder(w0.with_op_name("x"), DType::float32, {kBatch, kWidth});
  auto v = ops::constant<float>(w1, random_values(kWidth * kWidth, 2, 0.2f), {kWidth, kWidth});
  auto u = ops::constant<float>(w0, random_values(kWidth * kWidth, 3, 0.2f), {kWidth, kWidth});
  auto h = ops::relu(w0, ops::matmul(w0, m.x, m.w));  // W crosses from ps:0
  auto h2 = ops::matmul(w1, h, v);                     // h crosses to worker:1
  // A loop whose body spans both workers.
  auto looped = ops::while_loop(
      w0, [](const Scope& s, const std::vector<Output>& vars) { return ops::less(s, vars[0], ops::constant(s, 3)); },
      [&](const Scope& s, const std::vector<Output>& vars) -> std::vector<Output> {
        auto next = ops::tanh(s.with_device("/job:worker/task:0"), ops::matmul(s.with_device("/job:worker/task:0"), vars[1], u));
        auto scaled = ops::mul(s.with_device("/job:worker/task:1"), next, ops::constant(s.with_device("/job:worker/task:1"), 1.5f));
        return {ops::add(s, vars[0], ops::constant(s, 1)), scaled};
      },
      {ops::constant(w0, 0), h2});
  // A cond whose branches run on different tasks.
  auto pred = ops::greater(w1, ops::sum(w1, looped[1]), ops::constant(w1, 0.0f));
  auto chosen = ops::cond(
      w1, pred, {looped[1]},
      [](const Scope& s, const std::vector<Output>& in) -> std::vector<Output> {
        return {ops::mul(s.with_device("/job:worker/task:0"), in[0], ops::constant(s.with_device("/job:worker/task:0"), 2.0f))};
      },
      [](const Scope& s, const std::vector<Output>& in) -> std::vector<Output> {
        return {ops::sub(s.with_device("/job:ps/task:0"), in[0], ops::constant(s.with_device("/job:ps/task:0"), 1.0f))};
      });
  m.loss = ops::mean(w1.with_op_name("loss"), ops::square(w1, chosen[0]));
  m.train = Optimizer::sgd(0.05).minimize(w0, m.loss, {m.w});
  return m;
}

// The losses of `steps` training steps, then W's values.
std::vector<float> run(const std::string& target, int steps, bool float16) {
  Model m = build();
  SessionOptions options;
  options.target = target;
  options.float16_transfer = float16;
  Session session(m.root, options);
  session.run({}, {}, {m.init});
  const FeedList feeds = {{m.x, Tensor::from_vector<float>(random_values(kBatch * kWidth, 4, 1.0f), {kBatch, kWidth})}};
  std::vector<float> out;
  for (int step = 0; step < steps; ++step) {
    out.push_back(session.run(feeds, {m.loss})[0].scalar_value<float>());
    session.run(feeds, {}, {m.train});
  }
  auto w = session.run({m.w})[0].to_vector<float>();
  out.insert(out.end(), w.begin(), w.end());
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"troupe-cluster-demo: one graph over worker:0, worker:1 and ps:0, checked against a local session"};
  std::string target;
  int steps = 3;
  bool float16 = false;
  app.add_option("--target", target, "a member of the cluster, troupe://host:port")->required();
  app.add_option("--steps", steps, "training steps")->check(troupe::cli::positive);
  app.add_flag("--float16", float16, "values between tasks cross as float16");
  CLI11_PARSE(app, argc, argv);
  try {
    const std::vector<float> local = run("", steps, false);
    const std::vector<float> cluster = run(target, steps, float16);
    const double bound = float16 ? 2e-2 : 1e-4;
    double worst = 0;
    for (std::size_t i = 0; i < local.size(); ++i)
      worst = std::max(worst, std::abs(double(local[i]) - cluster[i]) / std::max(1.0, std::abs(double(local[i]))));
    for (int step = 0; step < steps; ++step)
      std::printf("step %d: loss %.6f locally, %.6f on the cluster\n", step, local[std::size_t(step)],
                  cluster[std::size_t(step)]);
    if (worst > bound) {
      std::printf("FAILED: the cluster's values differ from the local session's by %.3g (relative), more than %.0e\n",
                  worst, bound);
      return 1;
    }
    std::printf("the cluster at %s and the local session agree (largest relative difference %.3g)\n", target.c_str(),
                worst);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "troupe-cluster-demo: %s\n", e.what());
    return 1;
  }
}
