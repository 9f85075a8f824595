#include "src/vmm/bounded_log.h"

#include <cstdlib>
#include <filesystem>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "src/base/io.h"

namespace abox::vmm {
namespace {

class BoundedLogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "/bounded_log_XXXXXX";
    ASSERT_NE(::mkdtemp(dir_.data()), nullptr);
    path_ = dir_ + "/console.log";
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  uint64_t OnDisk() {
    uint64_t total = 0;
    for (const auto& entry : std::filesystem::directory_iterator(dir_)) {
      total += entry.file_size();
    }
    return total;
  }

  std::string dir_;
  std::string path_;
};

TEST_F(BoundedLogTest, KeepsEverythingBelowTheLimit) {
  absl::StatusOr<BoundedLog> log = BoundedLog::Create(path_, 1000);
  ASSERT_TRUE(log.ok());
  ASSERT_TRUE(log->Append("hello ").ok());
  ASSERT_TRUE(log->Append("world\n").ok());
  EXPECT_EQ(*base::ReadFile(path_), "hello world\n");
  EXPECT_FALSE(std::filesystem::exists(path_ + ".1"));
}

TEST_F(BoundedLogTest, NeverExceedsTheLimitAndKeepsTheNewestOutput) {
  absl::StatusOr<BoundedLog> log = BoundedLog::Create(path_, 4096);
  ASSERT_TRUE(log.ok());
  for (int i = 0; i < 2000; ++i) {
    ASSERT_TRUE(log->Append(absl::StrCat("line ", i, "\n")).ok());
    ASSERT_LE(OnDisk(), 4096u);
  }
  ASSERT_TRUE(log->Append(std::string(10000, 'x') + "END").ok());  // one chunk > limit
  EXPECT_LE(OnDisk(), 4096u);
  EXPECT_TRUE(absl::EndsWith(*base::ReadFile(path_), "xxxEND"));
  EXPECT_GT(log->total_bytes(), 10000u);
}

TEST_F(BoundedLogTest, TailSpansTheRotatedFile) {
  absl::StatusOr<BoundedLog> log = BoundedLog::Create(path_, 20);
  ASSERT_TRUE(log.ok());
  ASSERT_TRUE(log->Append("0123456789abcdefghij").ok());  // fills both halves
  EXPECT_EQ(*base::ReadFile(path_ + ".1"), "0123456789");
  EXPECT_EQ(*base::ReadFile(path_), "abcdefghij");
  EXPECT_EQ(ReadLogTail(path_, 15), "56789abcdefghij");
  EXPECT_EQ(ReadLogTail(path_, 4), "ghij");
  EXPECT_EQ(ReadLogTail(dir_ + "/missing.log", 10), "");
}

TEST_F(BoundedLogTest, RejectsATinyLimit) { EXPECT_FALSE(BoundedLog::Create(path_, 1).ok()); }

}  // namespace
}  // namespace abox::vmm
