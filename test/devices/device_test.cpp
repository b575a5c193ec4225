#define BOOST_TEST_MODULE devices
#include <boost/test/unit_test.hpp>

#include "core/error.hpp"
#include "core/tensor.hpp"
#include "devices/device.hpp"

using namespace troupe;

BOOST_AUTO_TEST_CASE(a_full_device_name_parses_into_its_parts) {
  auto s = DeviceSpec::parse("/job:worker/task:3/device:GPU:1");
  BOOST_TEST(*s.job == "worker");
  BOOST_TEST(*s.task == 3);
  BOOST_TEST(*s.type == "GPU");
  BOOST_TEST(*s.index == 1);
  BOOST_TEST(s.to_string() == "/job:worker/task:3/device:GPU:1");
}

BOOST_AUTO_TEST_CASE(a_partial_name_matches_every_device_that_agrees) {
  auto full = DeviceSpec::parse("/job:localhost/task:0/device:CPU:0");
  BOOST_TEST(DeviceSpec::parse("").matches(full));
  BOOST_TEST(DeviceSpec::parse("/device:CPU:0").matches(full));
  BOOST_TEST(DeviceSpec::parse("/cpu:0").matches(full));
  BOOST_TEST(DeviceSpec::parse("/device:cpu:*").matches(full));
  BOOST_TEST(!DeviceSpec::parse("/device:GPU:0").matches(full));
  BOOST_TEST(!DeviceSpec::parse("/job:ps").matches(full));
}

BOOST_AUTO_TEST_CASE(a_malformed_device_name_is_refused_with_the_name_in_the_message) {
  try {
    DeviceSpec::parse("/job:w/device:TPU:0");
    BOOST_FAIL("expected an error");
  } catch (const Error& e) {
    BOOST_TEST(std::string(e.what()).find("TPU") != std::string::npos);
  }
  BOOST_CHECK_THROW(DeviceSpec::parse("/replica:0/bogus:1"), Error);
  BOOST_CHECK_THROW(DeviceSpec::parse("/device:GPU:x"), Error);
}

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
