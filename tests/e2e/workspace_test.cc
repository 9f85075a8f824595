// Workspaces end to end with real VMs and the real CLI: create -w, sync before exec, diff,
// apply, undo, pull, run -w, a large tree, and aboxd killed (-9) in the middle of an apply.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "src/workspace/testing/scratch_tree.h"
#include "tests/testing/abox_runner.h"
#include "tests/testing/aboxd_process.h"

namespace abox::testing {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;

std::string ReadAll(const fs::path& p) { return workspace::testing::ReadWholeFile(p); }

void WriteAll(const fs::path& p, const std::string& data) {
  workspace::testing::WriteWholeFile(p, data);
}

int Sh(const std::string& cmd) { return std::system(cmd.c_str()); }  // NOLINT

// Every file of a tree (outside .git) with its content and mode: equal trees compare equal.
std::map<std::string, std::string> Snapshot(const fs::path& root) {
  std::map<std::string, std::string> out;
  for (auto it = fs::recursive_directory_iterator(root); it != fs::recursive_directory_iterator();
       ++it) {
    std::string rel = fs::relative(it->path(), root).string();
    if (rel == ".git") {
      it.disable_recursion_pending();
      continue;
    }
    if (it->is_symlink()) {
      out[rel] = "link:" + fs::read_symlink(it->path()).string();
    } else if (it->is_regular_file()) {
      auto perms = static_cast<int>(fs::status(it->path()).permissions());
      out[rel] = absl::StrCat(perms & 0777, ":", ReadAll(it->path()));
    } else if (it->is_directory()) {
      out[rel] = "dir";
    }
  }
  return out;
}

class WorkspaceE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    repo_ = fs::path(home_.path()) / "repo";
    WriteAll(repo_ / "README.md", "# demo\n\nline a\nline b\nline c\nline d\nline e\nline f\n");
    WriteAll(repo_ / "src/app.py", "print('hello')\n");
    WriteAll(repo_ / ".env", "SECRET_TOKEN=hunter2\n");
    WriteAll(repo_ / "deploy.pem", "-----BEGIN PRIVATE KEY-----\n");
    WriteAll(repo_ / ".gitignore", "__pycache__/\n");
    std::string git = absl::StrCat("cd '", repo_.string(),
                                   "' && GIT_CONFIG_GLOBAL=/dev/null git -c user.name=t -c "
                                   "user.email=t@e ");
    // The secrets are committed, removed from git and committed again: the history holds
    // them, the worktree keeps them untracked.
    ASSERT_EQ(
        Sh(git + "init -q . && git config credential.helper store && " + git +
           "remote add origin https://me:ghp_secret@github.com/x/y.git && " + git + "add -A && " +
           git + "commit -qm init && " + git + "rm -q --cached .env deploy.pem && " + git +
           "commit -qm 'remove the secrets' && printf '#!/bin/sh\\nexit 0\\n' > "
           ".git/hooks/pre-commit && chmod +x .git/hooks/pre-commit"),
        0);
  }
  void TearDown() override {
    RemoveAllSandboxes([this](std::vector<std::string> args) { return Abox(std::move(args)); });
    Abox({"daemon", "stop"});
  }

  AboxResult Abox(std::vector<std::string> args, std::string stdin_data = "") {
    AboxCall call;
    call.args = std::move(args);
    call.stdin_data = std::move(stdin_data);
    call.env = home_.Env();
    call.timeout_seconds = 300;
    return RunAbox(call);
  }

  std::string Create(const fs::path& dir) {
    AboxResult created = Abox({"create", "-w", dir.string()});
    EXPECT_EQ(created.exit_code, 0) << created.err;
    return std::string(absl::StripAsciiWhitespace(created.out));
  }

  DaemonHome home_;
  fs::path repo_;
};

TEST_F(WorkspaceE2eTest, CopyInDiffApplyUndoPull) {
  std::string id = Create(repo_);
  ASSERT_EQ(id.size(), 12u);

  // What went in: the tree, git that works, no secrets, no hooks, no credentials.
  AboxResult look =
      Abox({"exec", id, "--", "sh", "-c",
            "pwd; ls -A; echo ---; cat .git/config; echo ---; ls .git/hooks 2>&1; git log "
            "--oneline | wc -l; test -e .env || echo no-env; test -e deploy.pem || echo no-pem"});
  ASSERT_EQ(look.exit_code, 0) << look.err;
  EXPECT_THAT(look.out, HasSubstr("/workspace\n"));
  EXPECT_THAT(look.out, HasSubstr("README.md"));
  EXPECT_THAT(look.out, HasSubstr("no-env\n"));
  EXPECT_THAT(look.out, HasSubstr("no-pem\n"));
  EXPECT_THAT(look.out, Not(HasSubstr("ghp_secret")));
  EXPECT_THAT(look.out, Not(HasSubstr("helper = store")));
  EXPECT_THAT(look.out, Not(HasSubstr("pre-commit")));
  EXPECT_THAT(look.out, HasSubstr("\n1\nno-env"));  // one commit: git works as the agent

  // The secrets were committed, removed and committed again on the host: in the VM, the
  // history, every object and every file under /workspace hold no byte of them.
  AboxResult history =
      Abox({"exec", id, "--", "sh", "-c",
            "set -e; git log -p --all > /tmp/log; git cat-file --batch-all-objects --batch > "
            "/tmp/objects; test -s /tmp/log; test -s /tmp/objects; grep -c -F -e hunter2 -e "
            "'PRIVATE KEY' /tmp/log /tmp/objects || true; grep -rlF -e hunter2 -e 'PRIVATE KEY' "
            "/workspace || echo none; git log -1 --format=%B | grep Abox-Host-Head; git status "
            "--porcelain | wc -l"});
  ASSERT_EQ(history.exit_code, 0) << history.err;
  std::string host_head;
  {
    FILE* p = ::popen(absl::StrCat("git -C '", repo_.string(), "' rev-parse HEAD").c_str(), "r");
    char buf[200] = {};
    ASSERT_NE(std::fgets(buf, sizeof(buf), p), nullptr);
    ::pclose(p);
    host_head = std::string(absl::StripAsciiWhitespace(buf));
  }
  EXPECT_EQ(history.out,
            absl::StrCat("/tmp/log:0\n/tmp/objects:0\nnone\nAbox-Host-Head: ", host_head, "\n0\n"));

  // Sync before every exec: a host edit and a host delete show up in the guest.
  WriteAll(repo_ / "notes.txt", "from the host\n");
  fs::remove(repo_ / "src/app.py");
  AboxResult synced = Abox({"exec", id, "--", "sh", "-c", "cat notes.txt; ls src | wc -l"});
  EXPECT_EQ(synced.exit_code, 0) << synced.err;
  EXPECT_EQ(synced.out, "from the host\n0\n");

  // The agent works: edits, creates, marks executable; its build output is .gitignored.
  AboxResult work = Abox({"exec", id, "--", "sh", "-c",
                          "sed -i 's/line b/line b (agent)/' README.md && mkdir -p tools "
                          "__pycache__ && printf '#!/bin/sh\\necho hi\\n' > tools/run.sh && "
                          "chmod +x tools/run.sh && echo x > __pycache__/c.pyc"});
  ASSERT_EQ(work.exit_code, 0) << work.err;
  AboxResult diff = Abox({"diff", id});
  ASSERT_EQ(diff.exit_code, 0) << diff.err;
  EXPECT_THAT(diff.out, HasSubstr("+line b (agent)"));
  EXPECT_THAT(diff.out, HasSubstr("b/tools/run.sh"));
  EXPECT_THAT(diff.out, HasSubstr("new file mode 100755"));
  EXPECT_THAT(diff.out, Not(HasSubstr("c.pyc")));
  AboxResult stat = Abox({"diff", "--stat", id});
  EXPECT_THAT(stat.out, HasSubstr("2 files changed"));
  AboxResult json = Abox({"diff", "--json", id, "README.md"});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  EXPECT_EQ(nlohmann::json::parse(json.out)["files"].size(), 1u);

  // Apply (the host also changed another line meanwhile: a clean merge), then undo.
  WriteAll(repo_ / "README.md",
           "# demo\n\nline a\nline b\nline c\nline d\nline e\nline f (host)\n");
  std::map<std::string, std::string> before = Snapshot(repo_);
  AboxResult applied = Abox({"apply", id});
  ASSERT_EQ(applied.exit_code, 0) << applied.err << applied.out;
  EXPECT_EQ(ReadAll(repo_ / "README.md"),
            "# demo\n\nline a\nline b (agent)\nline c\nline d\nline e\nline f (host)\n");
  EXPECT_TRUE(fs::exists(repo_ / "tools/run.sh"));
  EXPECT_TRUE((fs::status(repo_ / "tools/run.sh").permissions() & fs::perms::owner_exec) !=
              fs::perms::none);
  EXPECT_EQ(ReadAll(repo_ / ".env"), "SECRET_TOKEN=hunter2\n");  // untouched
  EXPECT_EQ(Sh(absl::StrCat("cd '", repo_.string(), "' && git diff --cached --quiet")), 0)
      << "apply touched the git index";
  size_t at = applied.out.find("abox undo ");
  ASSERT_NE(at, std::string::npos) << applied.out;
  std::string artifact(absl::StripAsciiWhitespace(
      absl::string_view(applied.out).substr(at + 10, applied.out.find(')', at) - at - 10)));
  EXPECT_THAT(Abox({"artifacts"}).out, HasSubstr(artifact));
  AboxResult undone = Abox({"undo", artifact});
  ASSERT_EQ(undone.exit_code, 0) << undone.err;
  EXPECT_EQ(Snapshot(repo_), before) << "undo did not restore the host exactly";

  // Pull one file into another directory.
  fs::path out = fs::path(home_.path()) / "out";
  fs::create_directories(out);
  AboxResult pulled = Abox({"pull", id, "tools/run.sh", "--to", out.string()});
  ASSERT_EQ(pulled.exit_code, 0) << pulled.err;
  EXPECT_EQ(ReadAll(out / "tools/run.sh"), "#!/bin/sh\necho hi\n");

  // A conflict is refused and named, and nothing is written.
  ASSERT_EQ(Abox({"exec", id, "--", "sh", "-c", "echo guest > notes.txt"}).exit_code, 0);
  WriteAll(repo_ / "notes.txt", "host side\n");
  AboxResult refused = Abox({"apply", id, "notes.txt"});
  EXPECT_NE(refused.exit_code, 0);
  EXPECT_THAT(refused.err, HasSubstr("notes.txt"));
  EXPECT_EQ(ReadAll(repo_ / "notes.txt"), "host side\n");
}

TEST_F(WorkspaceE2eTest, RunWithAWorkspace) {
  AboxCall call;
  call.args = {"run", "-w", repo_.string(), "--", "sh", "-c", "pwd; cat README.md; ls -A"};
  call.env = home_.Env();
  AboxResult r = RunAbox(call);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("/workspace\n# demo\n"));
  EXPECT_THAT(r.out, Not(HasSubstr(".env")));
  AboxCall missing;
  missing.args = {"run", "-w", "/nonexistent/abox-dir", "--", "true"};
  missing.env = home_.Env();
  AboxResult bad = RunAbox(missing);
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_THAT(bad.err, HasSubstr("/nonexistent/abox-dir"));
}

// The workspace copies `abox run -w` left in the home's tmp/.
std::vector<std::string> RunCopies(const fs::path& home) {
  std::vector<std::string> out;
  std::error_code ec;
  for (auto it = fs::directory_iterator(home / "tmp", ec); !ec && it != fs::directory_iterator();
       it.increment(ec)) {
    if (absl::StartsWith(it->path().filename().string(), "run-workspace-")) {
      out.push_back(it->path().filename().string());
    }
  }
  return out;
}

// Issue item 19: `abox run -w` SIGKILLed while it copies the workspace leaves its copy behind
// (nothing can run in a killed process), and the next `abox run` removes it.
TEST_F(WorkspaceE2eTest, KilledRunWorkspaceCopyIsRemovedByTheNextRun) {
  fs::path big = fs::path(home_.path()) / "killed-run-tree";
  std::mt19937 rng(11);
  for (int i = 0; i < 2000; ++i) {
    WriteAll(big / absl::StrCat("d", i % 29) / absl::StrCat("f", i, ".txt"),
             std::string(100 + rng() % 4000, static_cast<char>('a' + i % 26)));
  }
  std::string blob(24 << 20, '\0');
  for (char& c : blob) {
    c = static_cast<char>(rng());
  }
  WriteAll(big / "blob.bin", blob);

  AboxCall call;
  call.args = {"run", "-w", big.string(), "--", "sleep", "100"};
  call.env = home_.Env();
  AboxResult killed_run;
  std::thread runner([&] { killed_run = RunAbox(call); });
  // Wait for the copy to exist, then SIGKILL the abox that makes it (found by its argv).
  bool killed = false;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  // (The copy's lock file comes first: wait for the copy's folder itself.)
  auto copy_exists = [&] {
    bool found = false;
    for (const std::string& name : RunCopies(home_.path())) {
      found |= fs::is_directory(fs::path(home_.path()) / "tmp" / name);
    }
    return found;
  };
  while (!killed && std::chrono::steady_clock::now() < deadline) {
    if (copy_exists()) {
      std::error_code ec;
      for (pid_t pid : ProcessesMatching(big.string())) {
        if (fs::read_symlink(absl::StrCat("/proc/", pid, "/exe"), ec) == fs::path(AboxBin())) {
          killed = ::kill(pid, SIGKILL) == 0;
        }
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  runner.join();
  ASSERT_TRUE(killed) << "the copy never appeared: " << killed_run.err;
  EXPECT_EQ(killed_run.exit_code, 128 + SIGKILL) << killed_run.err;
  ASSERT_TRUE(copy_exists()) << "the killed run left no copy, so this test proves nothing";

  AboxCall next;
  next.args = {"run", "--", "true"};
  next.env = home_.Env();
  AboxResult r = RunAbox(next);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(RunCopies(home_.path()), ::testing::IsEmpty());
}

TEST_F(WorkspaceE2eTest, LargeTreeRoundTrip) {
  fs::path big = fs::path(home_.path()) / "big";
  std::mt19937 rng(7);
  for (int i = 0; i < 3000; ++i) {
    WriteAll(big / absl::StrCat("d", i % 37) / absl::StrCat("f", i, ".txt"),
             std::string(100 + rng() % 4000, static_cast<char>('a' + i % 26)));
  }
  std::string blob(8 << 20, '\0');
  for (char& c : blob) {
    c = static_cast<char>(rng());
  }
  WriteAll(big / "blob.bin", blob);
  std::string id = Create(big);
  AboxResult count =
      Abox({"exec", id, "--", "sh", "-c", "find . -type f | wc -l; sha256sum blob.bin"});
  ASSERT_EQ(count.exit_code, 0) << count.err;
  std::string host_sum;
  {
    FILE* p = ::popen(absl::StrCat("sha256sum '", (big / "blob.bin").string(), "'").c_str(), "r");
    char buf[200] = {};
    ASSERT_NE(std::fgets(buf, sizeof(buf), p), nullptr);
    ::pclose(p);
    host_sum = std::string(buf).substr(0, 64);
  }
  EXPECT_THAT(count.out, HasSubstr("3001\n"));
  EXPECT_THAT(count.out, HasSubstr(host_sum));
  // One changed file: only it is sent.
  WriteAll(big / "d3/f3.txt", "changed\n");
  AboxResult sync = Abox({"sync", "--json", id});
  ASSERT_EQ(sync.exit_code, 0) << sync.err;
  nlohmann::json report = nlohmann::json::parse(sync.out);
  EXPECT_EQ(report["files"], 1) << sync.out;
  EXPECT_EQ(report["deleted"], 0);
}

TEST_F(WorkspaceE2eTest, AboxdKilledDuringAnApplyLeavesTheHostWholeOrUntouched) {
  fs::path tree = fs::path(home_.path()) / "tree";
  for (int i = 0; i < 600; ++i) {
    WriteAll(tree / absl::StrCat("f", i, ".txt"), absl::StrCat("original ", i, "\n"));
  }
  std::string id = Create(tree);
  ASSERT_EQ(Abox({"exec", id, "--", "sh", "-c", "for f in f*.txt; do echo changed >> $f; done"})
                .exit_code,
            0);
  std::map<std::string, std::string> original = Snapshot(tree);
  // The apply request is in flight when aboxd dies.
  AboxCall apply;
  apply.args = {"apply", id};
  apply.env = home_.Env();
  apply.timeout_seconds = 120;
  std::thread killer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    // Only this test's aboxd: the one listening on its own socket.
    pid_t aboxd = ListenerPid(home_.socket());
    ASSERT_GT(aboxd, 0) << "no aboxd on " << home_.socket();
    ::kill(aboxd, SIGKILL);
  });
  AboxResult r = RunAbox(apply);
  killer.join();
  // The next command starts aboxd again, which rolls back an interrupted apply first.
  AboxResult list = Abox({"artifacts", "--json"});
  ASSERT_EQ(list.exit_code, 0) << list.err;
  std::map<std::string, std::string> after = Snapshot(tree);
  bool untouched = after == original;
  bool complete = true;
  for (int i = 0; i < 600; ++i) {
    complete = complete && ReadAll(tree / absl::StrCat("f", i, ".txt")) ==
                               absl::StrCat("original ", i, "\nchanged\n");
  }
  EXPECT_TRUE(untouched || complete)
      << "half-written host tree after kill -9 (apply exit " << r.exit_code << ")\n"
      << list.out;
}

}  // namespace
}  // namespace abox::testing
