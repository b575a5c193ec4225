// One process of an all-reduce test (allreduce_test.cpp): joins the ring of the spec's worker
// job as TASK, sums tensors whose values follow from (rank, tensor, element), so it can compute
// the sequential reference itself, checks its sums against it (integers exactly, floats within
// tolerance), and prints one hash of every result byte so the test can see that all processes
// hold the same bits.
//   allreduce_worker SPEC TASK CASE     CASE: sums | float16 | vanish
// Exit 0 when the sums are right (vanish: when the call failed naming the vanished task).
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "actors/cluster/allreduce.hpp"
#include "actors/cluster/member.hpp"
#include "core/error.hpp"

using namespace troupe;

namespace {

double value_of(int rank, int tensor, int64_t i) {
  return std::sin(double(rank * 7919 + tensor * 104729) + double(i) * 0.37);  // in [-1, 1]
}

uint64_t fnv(uint64_t h, const void* data, std::size_t n) {
  auto* p = static_cast<const uint8_t*>(data);
  for (std::size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: allreduce_worker SPEC TASK sums|float16|vanish\n");
    return 2;
  }
  const std::string what = argv[3];
  try {
    ClusterSpec spec = ClusterSpec::from_file(argv[1]);
    TaskId task = parse_task_id(argv[2]);
    ClusterMember member(spec, task);
    AllReduceOptions options;
    options.chunk_bytes = 64 << 10;    // many chunks per segment
    options.fusion_bytes = 256 << 10;  // several fused buffers, and the large tensor alone
    options.float16 = what == "float16";
    options.timeout = std::chrono::milliseconds(20000);
    AllReduceGroup group(member, "worker", options);
    const int n = group.size(), rank = group.rank();
    if (what == "vanish" && rank == n - 1) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      std::printf("vanishing\n");
      std::fflush(stdout);
      std::_Exit(0);
    }
    // Sizes that do not divide by 2, 3 or 4; small ones fused, the large one alone.
    const std::vector<int64_t> sizes = {1, 7, 1000003, 5, 3000, 65537};
    const std::vector<DType> dtypes = what == "sums"
                                          ? std::vector<DType>{DType::float32, DType::float64, DType::int32, DType::int64,
                                                               DType::float32, DType::int32}
                                          : std::vector<DType>(sizes.size(), DType::float32);
    std::vector<Tensor> tensors;
    for (std::size_t k = 0; k < sizes.size(); ++k) {
      Tensor t(dtypes[k], Shape{sizes[k]});
      for (int64_t i = 0; i < sizes[k]; ++i) {
        double v = value_of(rank, int(k), i);
        switch (dtypes[k]) {
          case DType::float32: t.data<float>()[i] = float(v); break;
          case DType::float64: t.data<double>()[i] = v; break;
          case DType::int32: t.data<int32_t>()[i] = int32_t(std::lround(v * 1e9 / 4)); break;
          case DType::int64: t.data<int64_t>()[i] = std::llround(v * 1e18 / 4); break;
          default: break;
        }
      }
      tensors.push_back(t);
    }
    if (what == "vanish") {
      try {
        group.all_reduce(tensors);
      } catch (const Error& e) {
        std::printf("error: %s\n", e.what());
        std::fflush(stdout);
        // This member stays up a while: the other survivor must see the vanished task go, not
        // this one (under load it could otherwise see this one's exit first).
        std::this_thread::sleep_for(std::chrono::seconds(3));
        return std::string(e.what()).find("worker:") != std::string::npos ? 0 : 1;
      }
    } else {
      group.all_reduce(tensors);
    }
    if (what == "vanish") {
      std::fprintf(stderr, "the all-reduce succeeded although worker:%d vanished\n", n - 1);
      return 1;
    }
    // A second call on the same group: the ring is reusable.
    std::vector<Tensor> again = {Tensor::from_vector<int64_t>({int64_t(rank), 1})};
    group.all_reduce(again);
    if (again[0].data<int64_t>()[0] != int64_t(n) * (n - 1) / 2 || again[0].data<int64_t>()[1] != n) {
      std::fprintf(stderr, "the second all-reduce is wrong\n");
      return 1;
    }
    uint64_t hash = 1469598103934665603ull;
    double worst = 0;
    for (std::size_t k = 0; k < sizes.size(); ++k) {
      const Tensor& t = tensors[k];
      hash = fnv(hash, t.raw_data(), t.byte_size());
      for (int64_t i = 0; i < sizes[k]; ++i) {
        double want = 0;
        int64_t want_int = 0;
        for (int r = 0; r < n; ++r) {
          double v = value_of(r, int(k), i);
          want += v;
          if (dtypes[k] == DType::int32) want_int += int32_t(std::lround(v * 1e9 / 4));
          if (dtypes[k] == DType::int64) want_int += std::llround(v * 1e18 / 4);
        }
        bool ok = true;
        double got = 0;
        switch (dtypes[k]) {
          case DType::float32: got = t.data<float>()[i]; break;
          case DType::float64: got = t.data<double>()[i]; break;
          case DType::int32: ok = t.data<int32_t>()[i] == want_int; break;
          case DType::int64: ok = t.data<int64_t>()[i] == want_int; break;
          default: break;
        }
        if (dtypes[k] == DType::float32 || dtypes[k] == DType::float64) {
          // float32: n roundings of sums <= n; float16: each of the 2(n-1) hops rounds to 11 bits.
          const double bound = what == "float16" ? 2e-3 * n * n : (dtypes[k] == DType::float32 ? 1e-6 * n : 1e-12 * n);
          worst = std::max(worst, std::fabs(got - want));
          ok = std::fabs(got - want) <= bound;
        }
        if (!ok) {
          std::fprintf(stderr, "%s: tensor %zu (%s[%lld]) element %lld is %.9g, the sum is %.9g\n", argv[2], k,
                       name_of(dtypes[k]), (long long)sizes[k], (long long)i, got, want);
          return 1;
        }
      }
    }
    std::printf("hash %016llx worst %.3g\n", (unsigned long long)hash, worst);
    return 0;
  } catch (const Error& e) {
    std::printf("error: %s\n", e.what());
    std::fflush(stdout);
    return what == "vanish" && std::string(e.what()).find("worker:") != std::string::npos ? 0 : 1;
  }
}
