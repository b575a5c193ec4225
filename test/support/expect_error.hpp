#pragma once
// Runs f, which must throw troupe::Error with the expected code; returns the message.
#include <string>

#include <boost/test/unit_test.hpp>

#include "core/error.hpp"

namespace troupe::testing {

inline bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

template <class F>
std::string error_of(F&& f, ErrorCode expected) {
  try {
    f();
  } catch (const Error& e) {
    BOOST_TEST(int(e.code()) == int(expected), "code " << e.code() << ": " << e.what());
    return e.what();
  }
  BOOST_ERROR("expected a troupe::Error with code " << expected);
  return "";
}

}  // namespace troupe::testing
