#include "src/workspace/store_budget.h"

#include <filesystem>
#include <memory>
#include <set>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "src/workspace/sha256.h"
#include "src/workspace/testing/scratch_tree.h"
#include "src/workspace/workspace_state.h"

namespace abox::workspace {
namespace {

using ::testing::HasSubstr;
using testing::ScratchDir;

Entry FileOf(const std::string& content) {
  Entry e;
  e.mode = 0644;
  e.size = content.size();
  e.sha256 = Sha256Hex(content);
  return e;
}

class StoreBudgetTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::filesystem::create_directories(scratch_.path() + "/host");
    Binding binding;
    binding.host_root = scratch_.path() + "/host";
    auto state = WorkspaceState::Create(scratch_.path() + "/state", binding);
    ASSERT_TRUE(state.ok()) << state.status();
    state_ = *std::move(state);
    budget_.guest_bytes = 1000;
    budget_.min_free_bytes = 100;
    budget_.free_bytes = [this](const std::string&) -> absl::StatusOr<uint64_t> { return free_; };
  }

  // Stores `content` as the guest's (fetched) content; returns its digest.
  std::string Put(const std::string& content) {
    auto sha = state_->objects().PutData(content);
    EXPECT_TRUE(sha.ok()) << sha.status();
    return sha.value_or("");
  }

  ScratchDir scratch_;
  std::unique_ptr<WorkspaceState> state_;
  StoreBudget budget_;
  uint64_t free_ = uint64_t{1} << 40;
};

TEST_F(StoreBudgetTest, AClaimBeyondTheQuotaIsRefusedAndNothingIsWritten) {
  Manifest wanted = {{"huge.bin", FileOf("small really")}};
  wanted["huge.bin"].size = 1001;
  absl::Status s = MakeRoomForGuestContent(*state_, {wanted["huge.bin"].sha256}, wanted, budget_);
  EXPECT_TRUE(absl::IsResourceExhausted(s)) << s;
  EXPECT_TRUE(IsStorageRefusal(s));
  EXPECT_THAT(s.message(), HasSubstr("--workspace-quota"));
  EXPECT_FALSE(state_->objects().Has(wanted["huge.bin"].sha256));
  // Exactly the quota fits.
  wanted["huge.bin"].size = 1000;
  EXPECT_TRUE(MakeRoomForGuestContent(*state_, {}, wanted, budget_).ok());
}

TEST_F(StoreBudgetTest, ContentTheGuestStillHasCountsAndWhatItDroppedIsCollected) {
  const std::string old_content(600, 'o');
  std::string old_sha = Put(old_content);
  Manifest wanted = {{"new.bin", FileOf(std::string(500, 'n'))}};
  // The guest still has the old file: 600 held + 500 wanted > 1000.
  absl::Status s =
      MakeRoomForGuestContent(*state_, {old_sha, wanted["new.bin"].sha256}, wanted, budget_);
  EXPECT_TRUE(IsStorageRefusal(s)) << s;
  EXPECT_THAT(s.message(), HasSubstr("come to 1100 bytes (500 bytes still to fetch)"));
  EXPECT_TRUE(state_->objects().Has(old_sha));
  // The guest replaced it: the old content is collected and the new one fits.
  EXPECT_TRUE(MakeRoomForGuestContent(*state_, {wanted["new.bin"].sha256}, wanted, budget_).ok());
  EXPECT_FALSE(state_->objects().Has(old_sha));
}

TEST_F(StoreBudgetTest, TheBaseAndKeptUndoBasesAreNeverCollectedNorCounted) {
  const std::string base_content(900, 'b');
  const std::string undo_content(900, 'u');
  std::string base_sha = Put(base_content);
  std::string undo_sha = Put(undo_content);
  std::string garbage_sha = Put("nobody refers to me");
  ASSERT_TRUE(state_->CommitSync({{"a.txt", FileOf(base_content)}}).ok());
  ASSERT_TRUE(
      state_->SaveUndoBase("20261202-010203-abcdef", {"u.txt"}, {{"u.txt", FileOf(undo_content)}})
          .ok());
  Manifest wanted = {{"new.bin", FileOf(std::string(900, 'n'))}};
  // 900 + 900 of the state's own content do not count against the guest's 1000.
  EXPECT_TRUE(MakeRoomForGuestContent(*state_, {base_sha}, wanted, budget_).ok());
  EXPECT_TRUE(state_->objects().Has(base_sha));
  EXPECT_TRUE(state_->objects().Has(undo_sha));
  EXPECT_FALSE(state_->objects().Has(garbage_sha));
  // Once the undo base is used, its content is no longer referenced.
  ASSERT_TRUE(state_->RestoreUndoBase("20261202-010203-abcdef").ok());
  EXPECT_TRUE(state_->base().contains("u.txt"));
  ASSERT_TRUE(CollectObjects(*state_, {}).ok());
  EXPECT_TRUE(state_->objects().Has(undo_sha));  // now the base's
}

TEST_F(StoreBudgetTest, AFetchThatWouldLeaveTheDiskTooFullIsRefused) {
  Manifest wanted = {{"a.bin", FileOf(std::string(500, 'a'))}};
  free_ = 599;  // 500 needed + 100 kept free > 599
  absl::Status s = MakeRoomForGuestContent(*state_, {}, wanted, budget_);
  EXPECT_TRUE(IsStorageRefusal(s)) << s;
  EXPECT_THAT(s.message(), HasSubstr("free disk space"));
  free_ = 600;
  EXPECT_TRUE(MakeRoomForGuestContent(*state_, {}, wanted, budget_).ok());
}

TEST_F(StoreBudgetTest, UndoBaseIdsThatAreNotArtifactIdsAreRefused) {
  for (const char* id : {"../../etc/passwd", "", "-rf", "a/b", "X"}) {
    EXPECT_FALSE(state_->SaveUndoBase(id, {}, {}).ok()) << id;
    EXPECT_FALSE(state_->RestoreUndoBase(id).ok()) << id;
  }
}

TEST_F(StoreBudgetTest, OtherFailuresAreNotStorageRefusals) {
  EXPECT_FALSE(IsStorageRefusal(absl::ResourceExhaustedError("the host's vCPUs")));
}

}  // namespace
}  // namespace abox::workspace
