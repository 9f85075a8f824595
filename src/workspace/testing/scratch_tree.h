// Test helpers for code that works on directory trees: a scratch directory removed at scope
// exit (through the fenced delete), and whole-file reads and writes.
#pragma once

#include <stdlib.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "gtest/gtest.h"
#include "src/base/fenced_remove.h"

namespace abox::workspace::testing {

// A fresh directory ($TEST_TMPDIR or /tmp), removed with everything in it at scope exit.
class ScratchDir {
 public:
  explicit ScratchDir(const std::string& prefix = "abox-test") {
    const char* base = ::getenv("TEST_TMPDIR");  // NOLINT(concurrency-mt-unsafe)
    std::string templ = std::string(base ? base : "/tmp") + "/" + prefix + "-XXXXXX";
    EXPECT_NE(::mkdtemp(templ.data()), nullptr);
    path_ = std::filesystem::path(templ).lexically_normal();
  }
  ~ScratchDir() { (void)base::RemoveUnder(path_.parent_path(), path_); }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  [[nodiscard]] std::string path() const { return path_.string(); }
  [[nodiscard]] std::string operator/(const std::string& rel) const {
    return (path_ / rel).string();
  }

 private:
  std::filesystem::path path_;
};

// The whole file ("" when it cannot be read).
inline std::string ReadWholeFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Writes `content` (creating parent directories) and sets `mode`.
inline void WriteWholeFile(const std::filesystem::path& path, const std::string& content,
                           int mode = 0644) {
  std::filesystem::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary | std::ios::trunc) << content;
  ::chmod(path.c_str(), static_cast<mode_t>(mode));
}

}  // namespace abox::workspace::testing
