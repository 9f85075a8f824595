// Test fixture for the workspace routes end to end in-process: real HTTP, real SQLite, the real
// guest agent and the real `abox-guest ws` tools; only the VM is fake, so the guest's /workspace
// is a directory on this host (guest_path). Used by workspace_api_test.cc (the honest path),
// workspace_hostile_test.cc (guest tools that lie) and guest_deadline_test.cc (tools that hang).
#pragma once

#include <stdlib.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "src/daemon/testing/daemon_test_base.h"
#include "src/daemon/testing/test_daemon.h"
#include "src/http/testing/http_test_client.h"
#include "src/http/testing/test_server.h"
#include "src/workspace/testing/scratch_tree.h"
#include "tests/testing/fake_vmm.h"

namespace abox::daemon::testing {

inline std::string ReadAll(const std::filesystem::path& p) {
  return workspace::testing::ReadWholeFile(p);
}

inline void WriteAll(const std::filesystem::path& p, const std::string& data) {
  workspace::testing::WriteWholeFile(p, data);
}

inline int Sh(const std::string& cmd) { return std::system(cmd.c_str()); }  // NOLINT

// What `cmd` prints on stdout (the test fails if it cannot run or exits non-zero).
inline std::string GitOut(const std::string& cmd) {
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

// The daemon on a fresh home, with a host git repo (a committed-then-removed secret, an ignored
// build dir, a credential helper) and an empty guest workspace directory.
class WorkspaceApiTest : public DaemonTestBase {
 protected:
  void SetUp() override {
    host_ = std::filesystem::path(tmp_.path()) / "repo";
    guest_ = std::filesystem::path(tmp_.path()) / "guest";
    std::filesystem::create_directories(host_);
    std::filesystem::create_directories(guest_);
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
    daemon_ = std::make_unique<TestDaemon>(home_.path());
    StartAndConnect();
  }

  std::string Create() {
    nlohmann::json body = {
        {"workspace", {{"path", host_.string()}, {"guest_path", guest_.string()}}}};
    http::httptest::Response r = Call("POST", "/v1/sandboxes", body.dump());
    EXPECT_EQ(r.status, 201) << r.body;
    return r.Json().value("id", "");
  }

  http::httptest::Response Post(const std::string& id, const std::string& what,
                                const nlohmann::json& body) {
    return Call("POST", absl::StrCat("/v1/sandboxes/", id, "/", what), body.dump());
  }

  nlohmann::json Diff(const std::string& id, const std::string& query = "") {
    http::httptest::Response r = Call("GET", absl::StrCat("/v1/sandboxes/", id, "/diff", query));
    EXPECT_EQ(r.status, 200) << r.body;
    return r.Json();
  }

  http::httptest::TempDir home_;
  http::httptest::TempDir tmp_;
  std::filesystem::path host_;
  std::filesystem::path guest_;
};

}  // namespace abox::daemon::testing
