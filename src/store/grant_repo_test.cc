#include "src/store/grant_repo.h"

#include <memory>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "src/store/sandbox_repo.h"
#include "src/store/test_util.h"

namespace abox::store {
namespace {

using ::testing::ElementsAre;
using testing::TempDir;

class GrantRepoTest : public ::testing::Test {
 protected:
  void SetUp() override {
    db_ = testing::OpenStateOrDie(tmp_.file("state.db"));
    ASSERT_NE(db_, nullptr);
    sandboxes_ = std::make_unique<SandboxRepo>(*db_);
    repo_ = std::make_unique<GrantRepo>(*db_);
    for (const char* id : {"0123456789ab", "0123456789ac"}) {
      SandboxRecord s;
      s.id = id;
      s.image = "default";
      ASSERT_TRUE(sandboxes_->Insert(s).ok());
    }
  }

  static SandboxGrants Grants(const std::string& placeholder_suffix) {
    SandboxGrants g;
    g.secrets.push_back(
        {.name = "GH", .env = "GITHUB_TOKEN", .placeholder = "p-gh-" + placeholder_suffix});
    g.secrets.push_back(
        {.name = "NPM", .env = "NPM", .placeholder = "p-npm-" + placeholder_suffix});
    g.git_push = {"github.com/o/r:agent/*"};
    g.models = {"anthropic", "openai"};
    g.model_token = "abox-broker-" + placeholder_suffix + std::string(40, 'x');
    return g;
  }

  TempDir tmp_;
  std::unique_ptr<Database> db_;
  std::unique_ptr<SandboxRepo> sandboxes_;
  std::unique_ptr<GrantRepo> repo_;
};

TEST_F(GrantRepoTest, KeepsWhatEachSandboxWasGiven) {
  ASSERT_TRUE(repo_->Put("0123456789ab", Grants("a")).ok());
  absl::StatusOr<SandboxGrants> got = repo_->Get("0123456789ab");
  ASSERT_TRUE(got.ok()) << got.status();
  SandboxGrants want = Grants("a");
  for (SandboxSecretRow& row : want.secrets) {
    row.sandbox_id = "0123456789ab";
  }
  EXPECT_EQ(*got, want);
  EXPECT_TRUE(repo_->Get("0123456789ac")->empty());
}

TEST_F(GrantRepoTest, UsersOfASecretLeaveOutRemovedSandboxes) {
  ASSERT_TRUE(repo_->Put("0123456789ab", Grants("a")).ok());
  ASSERT_TRUE(repo_->Put("0123456789ac", Grants("b")).ok());
  EXPECT_THAT(*repo_->UsersOf("GH"), ElementsAre("0123456789ab", "0123456789ac"));
  ASSERT_TRUE(sandboxes_->UpdateState("0123456789ac", SandboxState::kRemoved).ok());
  EXPECT_THAT(*repo_->UsersOf("GH"), ElementsAre("0123456789ab"));
  EXPECT_TRUE(repo_->UsersOf("OTHER")->empty());
}

TEST_F(GrantRepoTest, APlaceholderIsNeverSharedAndAPartialPutLeavesNothing) {
  ASSERT_TRUE(repo_->Put("0123456789ab", Grants("a")).ok());
  SandboxGrants clash = Grants("x");
  clash.secrets[1].placeholder = "p-gh-a";  // the other sandbox's
  EXPECT_FALSE(repo_->Put("0123456789ac", clash).ok());
  EXPECT_TRUE(repo_->Get("0123456789ac")->empty());
}

TEST_F(GrantRepoTest, GrantsGoWithTheSandboxRow) {
  ASSERT_TRUE(repo_->Put("0123456789ab", Grants("a")).ok());
  ASSERT_TRUE(sandboxes_->Delete("0123456789ab").ok());
  EXPECT_TRUE(repo_->Get("0123456789ab")->empty());
}

}  // namespace
}  // namespace abox::store
