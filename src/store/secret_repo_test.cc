#include "src/store/secret_repo.h"

#include <memory>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "src/store/test_util.h"

namespace abox::store {
namespace {

using testing::FakeClock;
using ::testing::HasSubstr;
using testing::TempDir;

class SecretRepoTest : public ::testing::Test {
 protected:
  void SetUp() override {
    db_ = testing::OpenStateOrDie(tmp_.file("state.db"));
    ASSERT_NE(db_, nullptr);
    repo_ = std::make_unique<SecretRepo>(*db_, clock_.AsClock());
  }

  TempDir tmp_;
  FakeClock clock_;
  std::unique_ptr<Database> db_;
  std::unique_ptr<SecretRepo> repo_;
};

TEST_F(SecretRepoTest, PutReplacesTheSpecAndKeepsWhenItWasFirstSet) {
  absl::Time first = clock_.now();
  ASSERT_TRUE(repo_->Put("GH_TOKEN", R"({"name":"GH_TOKEN","hosts":["a.example"]})").ok());
  clock_.Advance(absl::Minutes(5));
  absl::StatusOr<SecretRow> row = repo_->Put("GH_TOKEN", R"({"name":"GH_TOKEN","hosts":["b"]})");
  ASSERT_TRUE(row.ok()) << row.status();
  EXPECT_EQ(row->spec, R"({"name":"GH_TOKEN","hosts":["b"]})");
  EXPECT_EQ(row->created_at, first);
  EXPECT_EQ(row->updated_at, first + absl::Minutes(5));
  ASSERT_EQ(repo_->List()->size(), 1u);
}

TEST_F(SecretRepoTest, ListsByNameAndSaysWhatIsMissing) {
  ASSERT_TRUE(repo_->Put("ZED", "{}").ok());
  ASSERT_TRUE(repo_->Put("ALPHA", "{}").ok());
  absl::StatusOr<std::vector<SecretRow>> rows = repo_->List();
  ASSERT_TRUE(rows.ok());
  ASSERT_EQ(rows->size(), 2u);
  EXPECT_EQ((*rows)[0].name, "ALPHA");
  EXPECT_EQ((*rows)[1].name, "ZED");

  ASSERT_TRUE(repo_->Delete("ZED").ok());
  absl::Status again = repo_->Delete("ZED");
  EXPECT_EQ(again.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(again.message(), HasSubstr("no secret named ZED"));
  EXPECT_EQ(repo_->Get("ZED").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(repo_->List()->size(), 1u);
}

TEST_F(SecretRepoTest, TheTableRefusesAnEmptyName) { EXPECT_FALSE(repo_->Put("", "{}").ok()); }

}  // namespace
}  // namespace abox::store
