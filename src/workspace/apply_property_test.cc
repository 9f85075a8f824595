// Property tests for apply + undo on random trees, and crash recovery after kill -9 mid-apply.
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "src/workspace/apply.h"
#include "src/workspace/apply_test_util.h"

namespace abox::workspace {
namespace {

namespace fs = std::filesystem;
using testing::Get;
using testing::Put;
using testing::Snapshot;

constexpr const char* kNames[] = {"a", "b", "c", "src", "lib", "x.txt", "y.md", "z.bin"};
constexpr int kSeeds = 200;

class RandomTrees {
 public:
  explicit RandomTrees(uint32_t seed) : rng_(seed) {}

  int Uniform(int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng_); }
  bool Chance(int percent) { return Uniform(100) < percent; }

  std::string Text(int lines) {
    std::string out;
    for (int i = 0; i < lines; ++i) {
      absl::StrAppend(&out, "line ", i, " ", Uniform(1000), "\n");
    }
    return out;
  }
  std::string Binary() {
    std::string out(static_cast<size_t>(16 + Uniform(64)), '\0');
    for (char& c : out) {
      c = static_cast<char>(Uniform(256));
    }
    out[3] = '\0';
    return out;
  }

  // A random tree under `root`: nested directories, text and binary files, exec bits,
  // symlinks pointing inside.
  void Fill(const std::string& root, int depth) {
    int n = 2 + Uniform(4);
    for (int i = 0; i < n; ++i) {
      std::string path = absl::StrCat(root, "/", kNames[Uniform(8)], i);
      int kind = Uniform(10);
      if (kind < 2 && depth < 3) {
        fs::create_directories(path);
        Fill(path, depth + 1);
      } else if (kind < 7) {
        Put(path, Text(3 + Uniform(8)), Chance(30) ? 0755 : 0644);
      } else if (kind < 9) {
        Put(path, Binary(), 0644);
      } else {
        fs::create_symlink(kNames[Uniform(8)], path);
      }
    }
  }

  // Every path under `root` (files, symlinks, dirs), sorted.
  static std::vector<std::string> Paths(const std::string& root) {
    std::vector<std::string> out;
    for (const auto& [rel, desc] : Snapshot(root)) {
      out.push_back(rel);
    }
    return out;
  }

  // One random edit on the tree at `root`, never touching `protect`.
  void Edit(const std::string& root, const std::string& protect) {
    std::vector<std::string> paths = Paths(root);
    std::erase_if(paths, [&](const std::string& p) { return p == protect; });
    if (paths.empty()) {
      return;
    }
    std::string rel = paths[static_cast<size_t>(Uniform(static_cast<int>(paths.size())))];
    std::string path = root + "/" + rel;
    bool is_file = fs::is_regular_file(fs::symlink_status(path));
    switch (Uniform(6)) {
      case 0:  // modify
        if (is_file) {
          std::string text = Get(path);
          Put(path, Chance(80) ? text + Text(1) : Text(4),
              fs::status(path).permissions() == fs::perms(0755) ? 0755 : 0644);
        }
        break;
      case 1:  // add
        if (fs::is_directory(fs::symlink_status(path))) {
          Put(absl::StrCat(path, "/new", Uniform(100)), Text(3));
        } else {
          Put(absl::StrCat(root, "/added", Uniform(100)), Text(2));
        }
        break;
      case 2:  // delete
        if (rel.find('/') != std::string::npos || !fs::is_directory(fs::symlink_status(path))) {
          fs::remove_all(path);
        }
        break;
      case 3:  // mode
        if (is_file) {
          ::chmod(path.c_str(), Chance(50) ? 0755 : 0600);
        }
        break;
      case 4:  // file -> dir
        if (is_file) {
          fs::remove(path);
          Put(path + "/inside", Text(2));
        }
        break;
      case 5:  // symlink
        fs::remove_all(path);
        fs::create_symlink(absl::StrCat("target", Uniform(5)), path);
        break;
    }
  }

 private:
  std::mt19937 rng_;
};

struct Trees {
  testing::TempDir dir;
  std::string orig = dir / "orig";
  std::string host = dir / "host";
  std::string guest = dir / "guest";
  std::optional<ObjectStore> objects;
  std::optional<ArtifactStore> artifacts;
  Manifest base;
  std::string merge_file;  // edited on both sides in different places
};

void Build(Trees& s, RandomTrees& rnd, int host_edits, int guest_edits) {
  fs::create_directories(s.orig);
  rnd.Fill(s.orig, 0);
  s.merge_file = "merge-me.txt";
  Put(s.orig + "/" + s.merge_file, rnd.Text(8));
  s.objects.emplace(*ObjectStore::Open(s.dir / "objects"));
  s.artifacts.emplace(*ArtifactStore::Open(s.dir / "artifacts"));
  s.base = testing::ScanInto(s.orig, *s.objects);
  const auto opts = fs::copy_options::recursive | fs::copy_options::copy_symlinks;
  fs::copy(s.orig, s.host, opts);
  fs::copy(s.orig, s.guest, opts);
  for (int i = 0; i < host_edits; ++i) {
    rnd.Edit(s.host, s.merge_file);
  }
  for (int i = 0; i < guest_edits; ++i) {
    rnd.Edit(s.guest, s.merge_file);
  }
  // Non-overlapping edits to one file: the first line on the host, the last in the sandbox.
  std::vector<std::string> lines = absl::StrSplit(Get(s.orig + "/" + s.merge_file), '\n');
  std::vector<std::string> host_lines = lines;
  std::vector<std::string> guest_lines = lines;
  host_lines.front() = "HOST EDIT";
  guest_lines[guest_lines.size() - 2] = "SANDBOX EDIT";
  Put(s.host + "/" + s.merge_file, absl::StrJoin(host_lines, "\n"));
  Put(s.guest + "/" + s.merge_file, absl::StrJoin(guest_lines, "\n"));
}

TEST(ApplyPropertyTest, ApplyThenUndoRestoresTheHostByteForByte) {
  for (int seed = 1; seed <= kSeeds; ++seed) {
    SCOPED_TRACE(absl::StrCat("seed ", seed));
    RandomTrees rnd(static_cast<uint32_t>(seed));
    Trees s;
    Build(s, rnd, rnd.Uniform(4), 1 + rnd.Uniform(6));
    auto before = Snapshot(s.host);
    auto tree = HostTree::Open(s.host);
    ASSERT_TRUE(tree.ok());
    Manifest guest = testing::ScanInto(s.guest, *s.objects);
    ApplyOptions options{.conflicts = ConflictMode::kMarkers, .allow_exec_files = true};
    auto plan = PlanApply(*tree, s.base, guest, *s.objects, options);
    ASSERT_TRUE(plan.ok()) << plan.status();
    auto result = Apply(*tree, *plan, *s.objects, *s.artifacts, {.sandbox = "prop"});
    ASSERT_TRUE(result.ok()) << result.status();

    // Every written change left what the plan said.
    for (const PlannedChange& c : plan->changes) {
      auto now = tree->Read(c.path);
      if (!now.ok()) {
        // Beneath a symlink: the host made it (a conflict), or the apply did (then nothing
        // may be beneath it any more).
        PathState expect = c.Writes() ? c.result : c.host;
        EXPECT_TRUE(c.action == PlannedChange::Action::kConflict ||
                    expect.kind == PathState::Kind::kAbsent)
            << c.path << ": " << now.status();
        continue;
      }
      PathState expect = c.Writes() ? c.result : c.host;
      if (c.action == PlannedChange::Action::kRmdir && now->kind == HostState::Kind::kDir) {
        continue;  // kept: the host has files in it
      }
      EXPECT_EQ(PathState::FromHost(*now), expect) << c.path << " " << ActionName(c.action);
    }
    // Both non-overlapping edits are in the merged file.
    std::string merged = Get(s.host + "/" + s.merge_file);
    EXPECT_NE(merged.find("HOST EDIT"), std::string::npos);
    EXPECT_NE(merged.find("SANDBOX EDIT"), std::string::npos);
    EXPECT_EQ(merged.find("<<<<<<<"), std::string::npos);

    ASSERT_FALSE(result->artifact_id.empty());
    auto undo = s.artifacts->Undo(result->artifact_id, /*force=*/false);
    ASSERT_TRUE(undo.ok()) << undo.status();
    ASSERT_EQ(Snapshot(s.host), before);
  }
}

// Runs the apply in a child that dies (exit 9, like kill -9: no cleanup runs) after `k` host
// writes; then recovery must restore the host exactly.
TEST(ApplyPropertyTest, RecoveryAfterKillMidApplyRestoresTheHost) {
  for (size_t k : {1u, 2u, 3u, 5u, 8u, 13u}) {
    SCOPED_TRACE(absl::StrCat("crash after write ", k));
    RandomTrees rnd(1000u + static_cast<uint32_t>(k));
    Trees s;
    Build(s, rnd, 2, 12);
    // Plenty of writes: more guest files than k.
    for (size_t i = 0; i < 2 * k; ++i) {
      Put(absl::StrCat(s.guest, "/crash/new", i), rnd.Text(2));
    }
    auto before = Snapshot(s.host);
    auto tree = HostTree::Open(s.host);
    ASSERT_TRUE(tree.ok());
    Manifest guest = testing::ScanInto(s.guest, *s.objects);
    ApplyOptions options{.conflicts = ConflictMode::kMarkers, .allow_exec_files = true};
    options.after_each_write = [k](size_t n) {
      if (n == k) {
        ::_exit(9);
      }
    };
    auto plan = PlanApply(*tree, s.base, guest, *s.objects, options);
    ASSERT_TRUE(plan.ok()) << plan.status();
    ASSERT_GT(plan->writes(), k);
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      auto result = Apply(*tree, *plan, *s.objects, *s.artifacts, {.sandbox = "crash"});
      ::_exit(result.ok() ? 0 : 1);
    }
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status));
    ASSERT_EQ(WEXITSTATUS(status), 9);
    ASSERT_NE(Snapshot(s.host), before);  // the crash left a half-applied tree

    auto recovered = s.artifacts->RecoverInterrupted();
    ASSERT_TRUE(recovered.ok()) << recovered.status();
    EXPECT_EQ(recovered->size(), 1u);
    EXPECT_EQ(Snapshot(s.host), before);
    // Recovering again changes nothing.
    EXPECT_TRUE(s.artifacts->RecoverInterrupted()->empty());
    EXPECT_EQ(Snapshot(s.host), before);
  }
}

}  // namespace
}  // namespace abox::workspace
