// A directory the sandbox replaced with a file, or a file it replaced with a directory, as
// apply and pull see it from a sync: manifests of files and symlinks only (directories are
// implied, guest_changes.h).
#include <sys/stat.h>

#include <map>
#include <string>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "src/workspace/apply.h"
#include "src/workspace/apply_test_util.h"

namespace abox::workspace {
namespace {

namespace fs = std::filesystem;
using Action = PlannedChange::Action;
using testing::Get;
using testing::Put;
using testing::Snapshot;

// What FetchGuestChanges compares: no directory entries.
Manifest FilesOnly(Manifest m) {
  std::erase_if(m, [](const auto& kv) { return kv.second.type == EntryType::kDir; });
  return m;
}

class ApplyReplacedTest : public testing::ApplyFixture {
 protected:
  void SyncFiles() { base_ = FilesOnly(testing::ScanInto(guest_, *store_)); }
  Manifest Guest() { return FilesOnly(testing::ScanInto(guest_, *store_)); }
  absl::StatusOr<ApplyPlan> PlanFiles(const ApplyOptions& options = {}) {
    return PlanApply(*tree_, base_, Guest(), *store_, options);
  }
  absl::StatusOr<ApplyPlan> PullFiles(const ApplyOptions& options) {
    return PlanPull(*tree_, base_, Guest(), *store_, options);
  }
  // Synced: d/a.txt and d/sub/b.txt; the sandbox then made d a file.
  void SandboxReplacesDirWithFile() {
    Both("d/a.txt", "a\n");
    Both("d/sub/b.txt", "b\n");
    SyncFiles();
    fs::remove_all(guest_ + "/d");
    Put(guest_ + "/d", "now a file\n");
  }
  // Runs `plan`: the host then matches the sandbox; its undo brings back `before`.
  void ExpectAppliedThenUndone(const ApplyPlan& plan,
                               const std::map<std::string, std::string>& before) {
    auto result = Run(plan);
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_EQ(Snapshot(host_), Snapshot(guest_));
    auto undo = artifacts_->Undo(result->artifact_id, /*force=*/false);
    ASSERT_TRUE(undo.ok()) << undo.status();
    EXPECT_EQ(Snapshot(host_), before);
  }
  static std::string Dump(const ApplyPlan& plan) {
    std::string out;
    for (const PlannedChange& c : plan.changes) {
      out += c.path + " " + std::string(ActionName(c.action)) + " " + c.reason + "\n";
    }
    return out;
  }
};

// Issue 19: the sandbox replaced directory d with a file, the host left d as synced. The
// sandbox's change, not "both sides changed": d's files and its subdirectory go (backed up).
TEST_F(ApplyReplacedTest, ADirectoryTheSandboxReplacedWithAFileIsTheSandboxsChange) {
  Both("keep.txt", "k\n");
  SandboxReplacesDirWithFile();
  auto before = Snapshot(host_);
  auto plan = PlanFiles();
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_FALSE(plan->has_conflicts()) << Dump(*plan);
  EXPECT_EQ(Find(*plan, "d")->action, Action::kWrite) << Dump(*plan);
  EXPECT_EQ(Find(*plan, "d")->base, PathState::Dir());
  EXPECT_EQ(Find(*plan, "d/a.txt")->action, Action::kDelete);
  EXPECT_EQ(Find(*plan, "d/sub/b.txt")->action, Action::kDelete);
  ASSERT_NE(Find(*plan, "d/sub"), nullptr) << Dump(*plan);
  EXPECT_EQ(Find(*plan, "d/sub")->action, Action::kRmdir);
  // Undo puts the directory back, every file byte for byte.
  ExpectAppliedThenUndone(*plan, before);
}

TEST_F(ApplyReplacedTest, AFileTheSandboxReplacedWithADirectoryIsTheSandboxsChange) {
  Both("x", "file\n");
  SyncFiles();
  fs::remove(guest_ + "/x");
  Put(guest_ + "/x/inner", "now a dir\n");
  auto before = Snapshot(host_);
  auto plan = PlanFiles();
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_FALSE(plan->has_conflicts()) << Dump(*plan);
  EXPECT_EQ(Find(*plan, "x")->action, Action::kMkdir) << Dump(*plan);
  EXPECT_EQ(Find(*plan, "x/inner")->action, Action::kWrite);
  ExpectAppliedThenUndone(*plan, before);
}

TEST_F(ApplyReplacedTest, AFileTheHostEditedWhileTheSandboxMadeItADirectoryConflicts) {
  Both("x", "file\n");
  SyncFiles();
  Put(host_ + "/x", "host edit\n");
  fs::remove(guest_ + "/x");
  Put(guest_ + "/x/inner", "now a dir\n");
  auto plan = PlanFiles();
  ASSERT_TRUE(plan.ok()) << plan.status();
  const PlannedChange* x = Find(*plan, "x");
  EXPECT_EQ(x->action, Action::kConflict);
  EXPECT_TRUE(absl::StrContains(x->reason, "the host has a file, the sandbox has a directory"))
      << x->reason;
  EXPECT_TRUE(x->forceable);
  EXPECT_EQ(Find(*plan, "x/inner")->action, Action::kConflict);
  auto refused = Run(*plan);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(refused.status().message(), "abox pull --force"))
      << refused.status();
  EXPECT_EQ(Get(host_ + "/x"), "host edit\n");
}

// What the host changed beneath the directory since the sync stays a conflict that names it;
// nothing is written.
TEST_F(ApplyReplacedTest, AHostChangeBeneathTheReplacedDirectoryConflicts) {
  SandboxReplacesDirWithFile();

  Put(host_ + "/d/sub/b.txt", "edited on the host\n");
  auto edited = PlanFiles();
  ASSERT_TRUE(edited.ok()) << edited.status();
  const PlannedChange* d = Find(*edited, "d");
  EXPECT_EQ(d->action, Action::kConflict) << Dump(*edited);
  EXPECT_TRUE(absl::StrContains(d->reason, "'d/sub/b.txt' (changed on the host since the sync)"))
      << d->reason;
  EXPECT_TRUE(d->forceable);

  Put(host_ + "/d/sub/b.txt", "b\n");
  Put(host_ + "/d/mine.txt", "the person's\n");
  auto before = Snapshot(host_);
  auto added = PlanFiles();
  ASSERT_TRUE(added.ok()) << added.status();
  d = Find(*added, "d");
  EXPECT_EQ(d->action, Action::kConflict) << Dump(*added);
  EXPECT_TRUE(absl::StrContains(d->reason, "'d/mine.txt' (not there at sync)")) << d->reason;
  EXPECT_EQ(Find(*added, "d/mine.txt"), nullptr) << "apply planned to remove the person's file";
  auto refused = Run(*added);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(refused.status().message(), "d/mine.txt")) << refused.status();
  EXPECT_TRUE(absl::StrContains(refused.status().message(), "abox pull --force <path>"))
      << refused.status();
  EXPECT_EQ(Snapshot(host_), before);
}

// Issue 19: pull said "use --force" and then refused with --force. Now --force takes the
// sandbox's version: the host's files beneath the directory are removed, backed up, and undo
// brings them back.
TEST_F(ApplyReplacedTest, PullForceTakesTheSandboxsVersionOfAReplacedDirectory) {
  SandboxReplacesDirWithFile();
  Put(host_ + "/d/a.txt", "edited on the host\n");
  Put(host_ + "/d/mine.txt", "the person's\n");
  Put(host_ + "/d/new/n.txt", "new on the host\n");
  auto before = Snapshot(host_);

  auto pull = PullFiles({.paths = {"d"}});
  ASSERT_TRUE(pull.ok()) << pull.status();
  EXPECT_EQ(Find(*pull, "d")->action, Action::kConflict);
  auto refused = Run(*pull);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(refused.status().message(), "use --force")) << refused.status();
  EXPECT_FALSE(absl::StrContains(refused.status().message(), "would not change"))
      << refused.status();
  EXPECT_EQ(Snapshot(host_), before);

  auto forced = PullFiles({.paths = {"d"}, .force = true});
  ASSERT_TRUE(forced.ok()) << forced.status();
  EXPECT_FALSE(forced->has_conflicts()) << Dump(*forced);
  EXPECT_EQ(Find(*forced, "d")->action, Action::kWrite);
  EXPECT_EQ(Find(*forced, "d/mine.txt")->action, Action::kDelete) << Dump(*forced);
  EXPECT_EQ(Find(*forced, "d/new")->action, Action::kRmdir);
  ExpectAppliedThenUndone(*forced, before);
}

// What --force cannot replace (a nested repository's .git, a fifo) is not offered to it.
TEST_F(ApplyReplacedTest, PullNamesForceOnlyForWhatForceResolves) {
  SandboxReplacesDirWithFile();
  Put(host_ + "/d/.git/config", "[core]\n");
  ASSERT_EQ(::mkfifo((host_ + "/d/pipe").c_str(), 0600), 0);
  auto before = Snapshot(host_);

  auto pull = PullFiles({.paths = {"d"}});
  ASSERT_TRUE(pull.ok()) << pull.status();
  EXPECT_FALSE(Find(*pull, "d")->forceable) << Dump(*pull);
  auto refused = Run(*pull);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_FALSE(absl::StrContains(refused.status().message(), "use --force")) << refused.status();
  EXPECT_TRUE(absl::StrContains(refused.status().message(), "--force would not change d"))
      << refused.status();

  auto forced = PullFiles({.paths = {"d"}, .force = true});
  ASSERT_TRUE(forced.ok()) << forced.status();
  const PlannedChange* d = Find(*forced, "d");
  EXPECT_EQ(d->action, Action::kConflict);
  EXPECT_TRUE(absl::StrContains(d->reason, "abox never replaces it")) << d->reason;
  auto still = Run(*forced);
  EXPECT_EQ(still.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(still.status().message(), "--force does not change d"))
      << still.status();
  EXPECT_FALSE(absl::StrContains(still.status().message(), "use --force")) << still.status();
  EXPECT_EQ(Snapshot(host_), before);

  // Apply does not point at pull --force for it either.
  auto apply = PlanFiles();
  ASSERT_TRUE(apply.ok()) << apply.status();
  auto apply_refused = Run(*apply);
  EXPECT_FALSE(absl::StrContains(apply_refused.status().message(), "takes the sandbox's version"))
      << apply_refused.status();
  EXPECT_TRUE(
      absl::StrContains(apply_refused.status().message(), "`abox pull --force` would not change d"))
      << apply_refused.status();
}

// A pull into another directory removes nothing, --force or not: it does not offer --force
// for a directory there that the sandbox has as a file.
TEST_F(ApplyReplacedTest, PullIntoAnotherDirectoryNeverRemovesADirectorysFiles) {
  Put(guest_ + "/d", "a file in the sandbox\n");
  std::string out = dir_ / "out";
  Put(out + "/d/x.txt", "there\n");
  auto other = HostTree::Open(out);
  ASSERT_TRUE(other.ok()) << other.status();
  auto before = Snapshot(out);
  for (bool force : {false, true}) {
    auto plan = PlanPullInto(*other, Guest(), *store_, {.paths = {"d"}, .force = force});
    ASSERT_TRUE(plan.ok()) << plan.status();
    const PlannedChange* d = Find(*plan, "d");
    EXPECT_EQ(d->action, Action::kConflict) << Dump(*plan);
    EXPECT_FALSE(d->forceable);
    EXPECT_TRUE(absl::StrContains(d->reason, "never removes")) << d->reason;
    auto refused = Apply(*other, *plan, *store_, *artifacts_, {});
    EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_FALSE(absl::StrContains(refused.status().message(), "use --force")) << refused.status();
  }
  EXPECT_EQ(Snapshot(out), before);
}

}  // namespace
}  // namespace abox::workspace
