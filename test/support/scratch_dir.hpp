#pragma once
// A fresh directory under the system's temporary directory, removed with everything in it when
// the test ends (also when it fails).
#include <stdlib.h>

#include <filesystem>
#include <string>
#include <system_error>

#include <boost/test/unit_test.hpp>

namespace troupe::testing {

class ScratchDir {
 public:
  ScratchDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "troupe-test-XXXXXX").string();
    BOOST_TEST_REQUIRE(::mkdtemp(pattern.data()) != nullptr);
    path_ = pattern;
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

}  // namespace troupe::testing
