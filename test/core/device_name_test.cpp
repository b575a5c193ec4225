// Device names and partial specs (core/device_name.hpp): parsed, matched, refused by name.
#include <boost/test/unit_test.hpp>

#include "core/device_name.hpp"
#include "core/error.hpp"

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
