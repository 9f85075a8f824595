// Apply's guards against a hostile sandbox: where symlinks of the resulting tree lead, the
// modes files land with, nested git state.
#include <sys/stat.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "src/workspace/apply.h"
#include "src/workspace/apply_test_util.h"

namespace abox::workspace {
namespace {

namespace fs = std::filesystem;
using Action = PlannedChange::Action;
using testing::Get;
using ::testing::HasSubstr;
using testing::Put;
using testing::Snapshot;

using ApplyGuardsTest = testing::ApplyFixture;

mode_t ModeOf(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(::lstat(path.c_str(), &st), 0) << path;
  return st.st_mode & 07777;
}

TEST_F(ApplyGuardsTest, ADotLinkAndAParentStepTogetherNeedTheFlag) {
  Both("a.txt", "a\n");
  Sync();
  // Each harmless by its text; together `b` is the workspace's parent.
  fs::create_symlink(".", guest_ + "/a");
  fs::create_symlink("a/..", guest_ + "/b");
  Put(guest_ + "/a.txt", "b\n");
  auto before = Snapshot(host_);

  auto plan = Plan();
  ASSERT_TRUE(plan.ok()) << plan.status();
  const PlannedChange* b = Find(*plan, "b");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->action, Action::kSkipExecFile);
  EXPECT_THAT(b->reason, HasSubstr("outside the workspace"));
  EXPECT_THAT(b->reason, HasSubstr("a -> ."));
  EXPECT_EQ(Find(*plan, "a")->action, Action::kSymlink);  // the root itself: inside
  auto refused = Run(*plan);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(refused.status().message(), HasSubstr("--allow-exec-files"));
  EXPECT_EQ(Snapshot(host_), before);  // nothing written

  // As before for links that leave the workspace: the person may take them by name.
  auto allowed = Plan({.allow_exec_files = true});
  ASSERT_TRUE(allowed.ok()) << allowed.status();
  EXPECT_TRUE(Find(*allowed, "b")->exec_sensitive);
  ASSERT_TRUE(Run(*allowed).ok());
  EXPECT_EQ(fs::read_symlink(host_ + "/b"), "a/..");
}

TEST_F(ApplyGuardsTest, AChangeThatMakesAHostLinkLeaveIsBlamed) {
  // The host's b -> a/.. is the root while `a` is a directory.
  Both("a/f", "f\n");
  fs::create_symlink("a/..", host_ + "/b");
  fs::create_symlink("a/..", guest_ + "/b");
  Sync();
  // The sandbox makes `a` a link to the root: the host's `b` now climbs out.
  fs::remove_all(guest_ + "/a");
  fs::create_symlink(".", guest_ + "/a");
  auto plan = Plan();
  ASSERT_TRUE(plan.ok()) << plan.status();
  const PlannedChange* a = Find(*plan, "a");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->action, Action::kSkipExecFile);
  EXPECT_THAT(a->reason, HasSubstr("the host's symlink 'b'"));
  EXPECT_FALSE(Run(*plan).ok());
  EXPECT_TRUE(fs::is_directory(host_ + "/a") && !fs::is_symlink(host_ + "/a"));
}

TEST_F(ApplyGuardsTest, TheHostsOwnLinksOutsideBlockNothing) {
  // A virtualenv's interpreter link, the person's own.
  fs::create_directories(host_ + "/venv/bin");
  fs::create_symlink("/usr/bin/python3", host_ + "/venv/bin/python");
  fs::create_symlink("../../outside", host_ + "/up");
  Both("a.txt", "a\n");
  Sync();
  Put(guest_ + "/a.txt", "b\n");
  fs::create_symlink("a.txt", guest_ + "/alias");
  auto plan = Plan();
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_TRUE(plan->Blocking().empty());
  ASSERT_TRUE(Run(*plan).ok());
  EXPECT_EQ(Get(host_ + "/a.txt"), "b\n");
}

TEST_F(ApplyGuardsTest, LoopsAndDeepChainsNeedTheFlag) {
  Both("file", "x\n");
  Sync();
  fs::create_symlink("loop2", guest_ + "/loop1");
  fs::create_symlink("d/../loop1", guest_ + "/loop2");
  // l0 -> l1 -> ... -> l49 -> file: each inside by its text, but more hops than any kernel
  // follows from l0.
  for (int i = 0; i < 50; ++i) {
    fs::create_symlink(i == 49 ? "file" : absl::StrCat("l", i + 1), guest_ + absl::StrCat("/l", i));
  }
  // A 30-link chain that ends through a -> . above the root.
  fs::create_symlink(".", guest_ + "/a");
  fs::create_directories(guest_ + "/c");
  for (int i = 0; i < 30; ++i) {
    fs::create_symlink(i == 29 ? "../a/.." : absl::StrCat("../c/m", i + 1),
                       guest_ + "/c/m" + std::to_string(i));
  }
  auto plan = Plan();
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(Find(*plan, "loop1")->action, Action::kSkipExecFile);
  EXPECT_THAT(Find(*plan, "loop1")->reason, HasSubstr("loop"));
  EXPECT_EQ(Find(*plan, "loop2")->action, Action::kSkipExecFile);
  EXPECT_EQ(Find(*plan, "l0")->action, Action::kSkipExecFile);
  EXPECT_EQ(Find(*plan, "l49")->action, Action::kSymlink);
  EXPECT_EQ(Find(*plan, "c/m0")->action, Action::kSkipExecFile);
  EXPECT_EQ(Find(*plan, "c/m29")->action, Action::kSkipExecFile);
  EXPECT_EQ(Find(*plan, "a")->action, Action::kSymlink);
  EXPECT_FALSE(Run(*plan).ok());
  EXPECT_FALSE(fs::exists(host_ + "/c"));
}

TEST_F(ApplyGuardsTest, SandboxModesLandAs0644Or0755) {
  Both("private.txt", "p\n", 0600);
  Both("group.txt", "g\n", 0664);
  Both("plain.txt", "x\n", 0644);
  Both("tool.sh", "#!/bin/sh\n", 0644);
  Sync();
  Put(guest_ + "/new-exec.sh", "#!/bin/sh\n", 0777);
  Put(guest_ + "/new-data.txt", "d\n", 0666);
  Put(guest_ + "/new-private.txt", "d\n", 0600);
  Put(guest_ + "/private.txt", "edited\n", 0600);  // content only: the host's 0600 stays
  Put(guest_ + "/group.txt", "edited\n", 0664);    // the person's 0664 stays too
  ASSERT_EQ(::chmod((guest_ + "/plain.txt").c_str(), 0666), 0);  // mode only: nothing lands
  ASSERT_EQ(::chmod((guest_ + "/tool.sh").c_str(), 0775), 0);    // +x lands as 0755
  Manifest guest = testing::ScanInto(guest_, *store_);
  // Bits a manifest can claim that no chmod here sets.
  Entry setuid = guest.at("new-exec.sh");
  setuid.mode = 06777;
  guest["setuid.sh"] = setuid;
  Entry sticky = guest.at("new-data.txt");
  sticky.mode = 01666;
  guest["sticky.txt"] = sticky;

  auto plan = PlanApply(*tree_, base_, guest, *store_, {});
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(Find(*plan, "plain.txt")->action, Action::kAlreadyDone);
  EXPECT_EQ(Find(*plan, "tool.sh")->action, Action::kMode);
  ASSERT_TRUE(Run(*plan).ok());
  EXPECT_EQ(ModeOf(host_ + "/new-exec.sh"), 0755u);
  EXPECT_EQ(ModeOf(host_ + "/new-data.txt"), 0644u);
  EXPECT_EQ(ModeOf(host_ + "/new-private.txt"), 0644u);
  EXPECT_EQ(ModeOf(host_ + "/setuid.sh"), 0755u);
  EXPECT_EQ(ModeOf(host_ + "/sticky.txt"), 0644u);
  EXPECT_EQ(ModeOf(host_ + "/private.txt"), 0600u);
  EXPECT_EQ(Get(host_ + "/private.txt"), "edited\n");
  EXPECT_EQ(ModeOf(host_ + "/group.txt"), 0664u);
  EXPECT_EQ(ModeOf(host_ + "/plain.txt"), 0644u);
  EXPECT_EQ(ModeOf(host_ + "/tool.sh"), 0755u);
}

TEST_F(ApplyGuardsTest, MergedEditsTakeTheMappedMode) {
  Both("m.txt", "1\n2\n3\n4\n5\n6\n", 0644);
  Sync();
  Put(host_ + "/m.txt", "host\n2\n3\n4\n5\n6\n", 0644);
  Put(guest_ + "/m.txt", "1\n2\n3\n4\n5\nsandbox\n", 0777);
  auto plan = Plan();
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(Find(*plan, "m.txt")->action, Action::kMerge);
  ASSERT_TRUE(Run(*plan).ok());
  EXPECT_EQ(ModeOf(host_ + "/m.txt"), 0755u);
}

TEST_F(ApplyGuardsTest, NestedGitStateFailsTheWholePlan) {
  Both("a.txt", "a\n");
  Sync();
  Put(guest_ + "/a.txt", "b\n");
  Manifest guest = testing::ScanInto(guest_, *store_);
  const std::string config = "[core]\n\tfsmonitor = touch /tmp/pwned\n";
  Entry evil;
  evil.sha256 = *store_->PutData(config);
  evil.size = config.size();
  for (const char* path :
       {"tools/.git/config", "sub/.git", "x/.GIT/hooks/post-checkout", ".Git/config"}) {
    Manifest g = guest;
    g[path] = evil;
    auto plan = PlanApply(*tree_, base_, g, *store_, {});
    EXPECT_EQ(plan.status().code(), absl::StatusCode::kPermissionDenied) << path;
    EXPECT_THAT(plan.status().message(), HasSubstr(path));
  }
  EXPECT_FALSE(fs::exists(host_ + "/tools"));
  EXPECT_EQ(Get(host_ + "/a.txt"), "a\n");
}

TEST_F(ApplyGuardsTest, ADirectoryHoldingTheHostsNestedRepositoryIsNotReplaced) {
  Both("vendor/lib/f", "f\n");
  Sync();
  Put(host_ + "/vendor/lib/.git/config", "[core]\n");  // the person's clone, never synced
  fs::remove_all(guest_ + "/vendor/lib");
  Put(guest_ + "/vendor/lib", "now a file\n");
  auto plan = Plan();
  ASSERT_TRUE(plan.ok()) << plan.status();
  const PlannedChange* lib = Find(*plan, "vendor/lib");
  ASSERT_NE(lib, nullptr);
  EXPECT_EQ(lib->action, Action::kConflict);
  EXPECT_THAT(lib->reason, HasSubstr("vendor/lib/.git"));
  EXPECT_EQ(Get(host_ + "/vendor/lib/.git/config"), "[core]\n");
}

}  // namespace
}  // namespace abox::workspace
