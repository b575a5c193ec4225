// regression: linear regression with Troupe, the smallest complete training program.
//
// It makes 256 noisy examples of y = x . [2, -3, 0.5] + 1 (x drawn from a normal
// distribution on the host), builds the model y' = x w + b with two variables, a mean squared
// error loss and an Optimizer (plain gradient descent) that minimizes it, then trains for 200
// steps, feeding the same examples to each, and prints the loss as it falls. It exits with 1
// unless w and b end within 0.05 of the true weights.
//
// Build and run against an installed Troupe (cmake --install build --prefix ~/troupe):
//   cmake -S examples/regression -B /tmp/regression -DCMAKE_PREFIX_PATH=$HOME/troupe
//   cmake --build /tmp/regression && /tmp/regression/regression
#include <cmath>
#include <cstdio>
#include <exception>
#include <random>
#include <vector>

#include "actors/session.hpp"
#include "ops/all.hpp"

using namespace troupe;

int main() {
  try {
    const std::vector<float> true_w = {2.0f, -3.0f, 0.5f};
    const float true_b = 1.0f;
    const int64_t examples = 256, features = int64_t(true_w.size());

    std::mt19937 rng(7);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> xs(examples * features), ys(examples);
    for (int64_t i = 0; i < examples; ++i) {
      ys[i] = true_b + 0.01f * normal(rng);
      for (int64_t j = 0; j < features; ++j) {
        xs[i * features + j] = normal(rng);
        ys[i] += true_w[j] * xs[i * features + j];
      }
    }

    auto root = Scope::root();
    auto x = ops::placeholder(root.with_op_name("x"), DType::float32, {-1, features});
    auto y = ops::placeholder(root.with_op_name("y"), DType::float32, {-1, 1});
    auto w = ops::variable(root.with_op_name("w"), {features, 1}, DType::float32);
    auto b = ops::variable(root.with_op_name("b"), {1}, DType::float32);
    auto init = ops::group(root.with_op_name("init"),
                           {ops::assign(root, w, ops::fill(root, {features, 1}, ops::constant(root, 0.0f))),
                            ops::assign(root, b, ops::constant<float>(root, {0.0f}, {1}))});
    auto prediction = ops::add(root, ops::matmul(root, x, w), b);
    auto loss = ops::mean(root.with_op_name("loss"), ops::square(root, ops::sub(root, prediction, y)));
    Node* train = Optimizer::sgd(0.05).minimize(root, loss);

    Session session(root);
    session.run({}, {}, {init});
    const FeedList feeds = {{x, Tensor::from_vector<float>(xs, {examples, features})},
                            {y, Tensor::from_vector<float>(ys, {examples, 1})}};
    for (int step = 0; step <= 200; ++step) {
      if (step % 20 == 0)
        std::printf("step %3d: loss %.6f\n", step, session.run(feeds, {loss})[0].scalar_value<float>());
      if (step < 200) session.run(feeds, {}, {train});
    }

    auto learned = session.run({}, {w, b});
    auto w_values = learned[0].to_vector<float>();
    float b_value = learned[1].to_vector<float>()[0];
    bool ok = std::abs(b_value - true_b) < 0.05f;
    for (int64_t j = 0; j < features; ++j) {
      std::printf("w[%lld] = %.4f (true %.4f)\n", (long long)j, w_values[j], true_w[j]);
      ok = ok && std::abs(w_values[j] - true_w[j]) < 0.05f;
    }
    std::printf("b = %.4f (true %.4f)\n", b_value, true_b);
    std::printf(ok ? "learned the true weights\n" : "FAILED: the weights are off by more than 0.05\n");
    return ok ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "regression: %s\n", e.what());
    return 1;
  }
}
