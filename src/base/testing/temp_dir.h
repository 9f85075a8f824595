// A fresh temporary directory for a test (header-only, tests only).
#pragma once

#include <cstdlib>
#include <filesystem>
#include <string>
#include <system_error>

#include "gtest/gtest.h"

namespace abox::base::testing {

// A directory made by mkdtemp under the test temp dir (unique even when ctest runs test
// binaries in parallel), removed with everything in it at scope exit.
class TempDir final {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::path(::testing::TempDir()) / "abox-test-XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr) {
      ADD_FAILURE() << "mkdtemp(" << tmpl << ") failed";
    }
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  [[nodiscard]] const std::string& path() const { return path_; }
  // `name` inside the directory.
  [[nodiscard]] std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

}  // namespace abox::base::testing
