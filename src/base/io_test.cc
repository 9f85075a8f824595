#include "src/base/io.h"

#include <filesystem>

#include "gtest/gtest.h"

namespace abox::base {
namespace {

TEST(IoTest, WriteFileAtomicReplacesContentAndSetsMode) {
  auto dir = std::filesystem::path(::testing::TempDir()) / "io_test_atomic";
  std::filesystem::create_directories(dir);
  std::string path = (dir / "f").string();
  ASSERT_TRUE(WriteFileAtomic(path, "one", 0600).ok());
  ASSERT_TRUE(WriteFileAtomic(path, "two", 0600).ok());
  auto data = ReadFile(path);
  ASSERT_TRUE(data.ok());
  EXPECT_EQ(*data, "two");
  EXPECT_EQ(std::filesystem::status(path).permissions() & std::filesystem::perms::all,
            std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  // No temp files left behind.
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir), {}), 1);
}

TEST(IoTest, ReadFileEnforcesLimit) {
  auto path = std::filesystem::path(::testing::TempDir()) / "io_test_limit";
  ASSERT_TRUE(WriteFileAtomic(path.string(), std::string(100, 'x')).ok());
  EXPECT_EQ(ReadFile(path.string(), 10).status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(ReadFile("/nonexistent/x").status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace abox::base
