// mnist_pipeline: a layers model trained from an input pipeline, with Troupe.
//
// The training input is a data::Pipeline that streams Fashion-MNIST's IDX files (as Debian's
// dataset-fashion-mnist installs them, in /usr/share/datasets/fashion-mnist), shuffles the
// examples through a buffer and batches them; a Prefetcher runs it on its own thread into a
// FIFO queue, and the graph dequeues each training batch from that queue, so reading overlaps
// the steps. The model is a layers::Sequential MLP (784-128-10) trained with momentum. It
// measures the accuracy on the first 1,000 test images before and after training and exits
// with 1 unless training lifted it above 50% (chance is 10%).
//
//   mnist_pipeline [STEPS (default 300)] [DATA_DIR]
//
// Build and run against an installed Troupe (cmake --install build --prefix ~/troupe):
//   cmake -S examples/mnist_pipeline -B /tmp/mnist_pipeline -DCMAKE_PREFIX_PATH=$HOME/troupe
//   cmake --build /tmp/mnist_pipeline && /tmp/mnist_pipeline/mnist_pipeline
#include <cstdio>
#include <exception>
#include <string>

#include "actors/prefetch.hpp"
#include "actors/session.hpp"
#include "ops/all.hpp"
#include "ops/data/idx.hpp"
#include "ops/data/pipeline.hpp"
#include "ops/data/queue.hpp"
#include "ops/layers/layers.hpp"

using namespace troupe;

int main(int argc, char** argv) {
  try {
    const int steps = argc > 1 ? std::stoi(argv[1]) : 300;
    const std::string dir = argc > 2 ? argv[2] : data::kFashionMnistDir;
    const int64_t batch = 64;

    // Batches of {float32 [64, 1, 28, 28] in [0, 1], int32 [64]}, a new order each epoch.
    auto train_files = data::fashion_mnist_files(dir, data::Split::train);
    auto pipeline = data::Pipeline::from_idx(train_files.first, train_files.second)
                        .shuffle(10000, /*seed=*/1)
                        .batch(batch)
                        .repeat(-1);
    auto test_files = data::fashion_mnist_files(dir, data::Split::test);
    auto test = data::Pipeline::from_idx(test_files.first, test_files.second).batch(1000).begin()->next();

    auto root = Scope::root();
    auto queue = ops::Queue::fifo(root.sub("input"), {DType::float32, DType::int32},
                                  {PartialShape{-1, 1, 28, 28}, PartialShape{-1}},
                                  {.capacity = 8, .shared_name = "mnist_pipeline_train"});
    auto input = queue.dequeue(root.sub("input"));

    layers::Sequential model(root, /*seed=*/1);
    model.add(layers::Flatten{})
        .add(layers::Dense{.units = 128, .activation = layers::Activation::relu})
        .add(layers::Dense{.units = 10});
    auto loss = model.loss(model(input[0], layers::Mode::training), input[1]);
    Node* train = Optimizer::momentum(0.05, 0.9).minimize(root, loss);

    auto test_images = ops::placeholder(root.with_op_name("test_images"), DType::float32, {-1, 1, 28, 28});
    auto test_labels = ops::placeholder(root.with_op_name("test_labels"), DType::int32, {-1});
    auto accuracy = ops::accuracy(root, model(test_images, layers::Mode::inference), test_labels);
    const FeedList test_feeds = {{test_images, (*test)[0]}, {test_labels, (*test)[1]}};

    Session session(root);
    session.run({}, {}, {model.initializer()});
    const float before = session.run(test_feeds, {accuracy})[0].scalar_value<float>();
    std::printf("test accuracy before training: %.3f\n", before);

    float after = 0;
    {
      Prefetcher prefetch(session, queue, pipeline);  // starts reading ahead
      for (int step = 1; step <= steps; ++step) {
        float l = session.run({}, {loss}, {train})[0].scalar_value<float>();
        if (step % 50 == 0 || step == steps) std::printf("step %4d: loss %.4f\n", step, l);
      }
      after = session.run(test_feeds, {accuracy})[0].scalar_value<float>();
      // The pipeline repeats forever: leaving this block destroys the prefetcher, which stops
      // it and closes the queue (prefetch.join() would wait for an end that never comes).
    }
    std::printf("test accuracy after %d steps: %.3f\n", steps, after);
    if (after <= 0.5f || after <= before) {
      std::printf("FAILED: training did not lift the accuracy above 0.5\n");
      return 1;
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mnist_pipeline: %s\n", e.what());
    return 1;
  }
}
