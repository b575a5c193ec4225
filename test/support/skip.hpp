#pragma once
// Skips are skips: a test that cannot run here says so before it starts, through Boost.Test's
// precondition decorator, and is reported as skipped with the reason, never as a pass.
//
//   BOOST_AUTO_TEST_CASE(name, *troupe::testing::runs_here([] { return why_not_here(); }))
//
// `why_not` gives the reason the test cannot run on this machine, or "" when it can.
#include <boost/test/unit_test.hpp>

#include <functional>
#include <string>

namespace troupe::testing {

inline boost::unit_test::precondition runs_here(std::function<std::string()> why_not) {
  return boost::unit_test::precondition([why_not = std::move(why_not)](boost::unit_test::test_unit_id) {
    const std::string why = why_not();
    boost::test_tools::assertion_result ok(why.empty());
    if (!why.empty()) ok.message() << why;
    return ok;
  });
}

}  // namespace troupe::testing
