// Fingerprints: the published FNV-1a 64 test vectors, and fixed values that every build of any
// process must reproduce (frame ids cross processes).
#include <boost/test/unit_test.hpp>

#include "core/fingerprint.hpp"

using namespace troupe;

BOOST_AUTO_TEST_CASE(fnv1a64_gives_the_published_values) {
  BOOST_TEST(fnv1a64("") == 0xcbf29ce484222325ULL);
  BOOST_TEST(fnv1a64("a") == 0xaf63dc4c8601ec8cULL);
  BOOST_TEST(fnv1a64("foobar") == 0x85944171f73967e8ULL);
}

BOOST_AUTO_TEST_CASE(a_fingerprint_is_the_same_in_every_build) {
  static_assert(fingerprint64("while") == mix64(fnv1a64("while")));
  // Values written down once: a change of the hash changes frame ids across processes.
  BOOST_TEST(mix64(0) == 0ULL);
  BOOST_TEST(mix64(1) == 0x5692161d100b05e5ULL);
  BOOST_TEST(fingerprint64("while") == 0xb0568a252de37f65ULL);  // computed from the definition apart
  BOOST_TEST(fingerprint64("while") != fingerprint64("while_grad"));
}
