#define BOOST_TEST_MODULE graph
#include <boost/test/unit_test.hpp>
