#define BOOST_TEST_MODULE devices
#include <boost/test/unit_test.hpp>

#include "core/error.hpp"
#include "core/tensor.hpp"
#include "devices/device.hpp"

using namespace troupe;

BOOST_AUTO_TEST_CASE(the_registry_always_has_the_cpu_first) {
  auto& r = DeviceRegistry::instance();
  BOOST_REQUIRE(!r.devices().empty());
  BOOST_TEST(r.cpu().name() == "/job:localhost/task:0/device:CPU:0");
  BOOST_TEST((r.cpu().type() == DeviceType::cpu));
  BOOST_TEST(r.find("/job:localhost/task:0/device:CPU:0") == &r.cpu());
  BOOST_TEST(r.find("/job:localhost/task:0/device:GPU:99") == nullptr);
  BOOST_TEST(r.matching(DeviceSpec::parse("/cpu:0")).size() == 1u);
}

BOOST_AUTO_TEST_CASE(without_a_gpu_the_registry_says_why) {
  auto& r = DeviceRegistry::instance();
  if (r.gpu_count() > 0) return;  // the GPU test covers that case
  BOOST_TEST(!r.gpu_status().empty());
  BOOST_TEST_MESSAGE("GPU status: " << r.gpu_status());
}

BOOST_AUTO_TEST_CASE(the_cpu_allocator_counts_bytes_in_use_and_the_peak) {
  auto& alloc = DeviceRegistry::instance().cpu().allocator();
  auto before = alloc.bytes_in_use();
  {
    Tensor t(DType::float32, Shape{1024, 256}, alloc);
    BOOST_TEST(alloc.bytes_in_use() == before + 1024 * 256 * 4);
    BOOST_TEST(alloc.peak_bytes() >= before + 1024 * 256 * 4);
    BOOST_TEST(reinterpret_cast<std::uintptr_t>(t.raw_data()) % 64 == 0u);
  }
  BOOST_TEST(alloc.bytes_in_use() == before);
}
