#include "src/store/model_repo.h"

#include <memory>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "src/store/sandbox_repo.h"
#include "src/store/test_util.h"

namespace abox::store {
namespace {

using testing::TempDir;

class ModelRepoTest : public ::testing::Test {
 protected:
  void SetUp() override {
    db_ = testing::OpenStateOrDie(tmp_.file("state.db"));
    ASSERT_NE(db_, nullptr);
    sandboxes_ = std::make_unique<SandboxRepo>(*db_);
    repo_ = std::make_unique<ModelRepo>(*db_, [this] { return now_; });
    SandboxRecord s;
    s.id = "0123456789ab";
    s.image = "default";
    ASSERT_TRUE(sandboxes_->Insert(s).ok());
  }

  TempDir tmp_;
  absl::Time now_ = absl::FromUnixSeconds(1000);
  std::unique_ptr<Database> db_;
  std::unique_ptr<SandboxRepo> sandboxes_;
  std::unique_ptr<ModelRepo> repo_;
};

TEST_F(ModelRepoTest, AProviderIsSetReplacedAndRemoved) {
  EXPECT_FALSE(repo_->GetProvider("anthropic")->has_value());
  ASSERT_TRUE(repo_
                  ->PutProvider({.api = "anthropic",
                                 .secret = "ANTHROPIC_API_KEY",
                                 .base_url = "https://api.anthropic.com"})
                  .ok());
  now_ += absl::Seconds(5);
  absl::StatusOr<ModelProviderRow> put = repo_->PutProvider(
      {.api = "anthropic", .secret = "OTHER", .base_url = "http://127.0.0.1:8080"});
  ASSERT_TRUE(put.ok()) << put.status();
  absl::StatusOr<std::optional<ModelProviderRow>> got = repo_->GetProvider("anthropic");
  ASSERT_TRUE(got.ok() && got->has_value());
  EXPECT_EQ(**got, *put);
  EXPECT_EQ((*got)->secret, "OTHER");
  EXPECT_EQ((*got)->updated_at, absl::FromUnixSeconds(1005));
  EXPECT_EQ(repo_->ListProviders()->size(), 1U);
  EXPECT_TRUE(repo_->DeleteProvider("anthropic").ok());
  EXPECT_EQ(repo_->DeleteProvider("anthropic").code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(repo_->ListProviders()->empty());
}

TEST_F(ModelRepoTest, AnUnknownApiIsRefusedByTheSchema) {
  EXPECT_FALSE(repo_->PutProvider({.api = "gemini", .secret = "K", .base_url = "https://x"}).ok());
}

TEST_F(ModelRepoTest, UsageAddsUpPerApi) {
  EXPECT_TRUE(repo_->Usage("0123456789ab")->empty());
  ModelUsageRow one{.sandbox_id = "0123456789ab",
                    .api = "anthropic",
                    .requests = 1,
                    .input_tokens = 11,
                    .output_tokens = 7};
  ASSERT_TRUE(repo_->AddUsage(one).ok());
  now_ += absl::Seconds(1);
  ASSERT_TRUE(repo_->AddUsage(one).ok());
  ASSERT_TRUE(
      repo_->AddUsage({.sandbox_id = "0123456789ab", .api = "anthropic", .refused = 1}).ok());
  ASSERT_TRUE(
      repo_->AddUsage({.sandbox_id = "0123456789ab", .api = "openai", .requests = 1, .errors = 1})
          .ok());
  absl::StatusOr<std::vector<ModelUsageRow>> rows = repo_->Usage("0123456789ab");
  ASSERT_TRUE(rows.ok()) << rows.status();
  ASSERT_EQ(rows->size(), 2U);
  EXPECT_EQ((*rows)[0], (ModelUsageRow{.sandbox_id = "0123456789ab",
                                       .api = "anthropic",
                                       .requests = 2,
                                       .refused = 1,
                                       .input_tokens = 22,
                                       .output_tokens = 14,
                                       .last_at = absl::FromUnixSeconds(1001)}));
  EXPECT_EQ((*rows)[1].errors, 1U);
  // A sandbox that does not exist has no usage row to add to.
  EXPECT_FALSE(
      repo_->AddUsage({.sandbox_id = "nosuchsandbx", .api = "openai", .requests = 1}).ok());
}

}  // namespace
}  // namespace abox::store
