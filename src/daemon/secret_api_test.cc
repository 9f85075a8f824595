// /v1/secrets in-process (fixture: testing/daemon_api_fixture.h, whose daemon keeps stored
// values in a 0600 file in its home): set from a value, a command or (refused) nothing; list,
// get, replace, remove; values never in an answer, SQLite or the log.
#include <sys/stat.h>

#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/escaping.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "src/daemon/services/secret_grants.h"
#include "src/daemon/testing/daemon_api_fixture.h"

namespace abox::daemon {
namespace {

using testing::DaemonApiTest;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kValue[] = "ghp_realvalue0123456789abcdef";

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

nlohmann::json Spec(const std::string& name, nlohmann::json source = {{"kind", "stored"}}) {
  return {{"name", name}, {"hosts", {"api.github.com"}}, {"source", std::move(source)}};
}

TEST_F(DaemonApiTest, StoredSecretsAreSetListedReplacedAndRemovedWithoutTheirValue) {
  http::httptest::Response set = Call(
      "POST", "/v1/secrets", nlohmann::json{{"spec", Spec("GH_TOKEN")}, {"value", kValue}}.dump());
  ASSERT_EQ(set.status, 201) << set.body;
  EXPECT_EQ(set.Json()["name"], "GH_TOKEN");
  EXPECT_EQ(set.Json()["source"], "stored");
  EXPECT_THAT(set.Json()["stored_in"].get<std::string>(), HasSubstr("file "));
  EXPECT_EQ(set.Json()["spec"]["format"], "Bearer {}");  // the defaults filled in
  EXPECT_THAT(set.body, Not(HasSubstr(kValue)));

  http::httptest::Response listed = Call("GET", "/v1/secrets");
  ASSERT_EQ(listed.status, 200);
  ASSERT_EQ(listed.Json()["secrets"].size(), 1u);
  EXPECT_THAT(listed.body, Not(HasSubstr(kValue)));
  EXPECT_EQ(Call("GET", "/v1/secrets/GH_TOKEN").Json()["spec"]["hosts"],
            nlohmann::json({"api.github.com"}));

  // The value is in the 0600 file store, and nowhere in the state database or the daemon log.
  const std::string values = dir_.path() + "/secrets/values.json";
  struct stat st {};
  ASSERT_EQ(::stat(values.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  // (SQLite in WAL mode: the newest pages are in the -wal file.)
  const std::string db =
      ReadAll(dir_.path() + "/state.db") + ReadAll(dir_.path() + "/state.db-wal");
  EXPECT_THAT(db, Not(HasSubstr(kValue)));
  EXPECT_THAT(db, HasSubstr("api.github.com"));

  // Replaced: new hosts, created_at kept.
  nlohmann::json spec = Spec("GH_TOKEN");
  spec["hosts"] = {"api.github.com", "uploads.github.com"};
  http::httptest::Response again = Call(
      "POST", "/v1/secrets", nlohmann::json{{"spec", spec}, {"value", "other-value-1"}}.dump());
  ASSERT_EQ(again.status, 201) << again.body;
  EXPECT_EQ(again.Json()["created_at"], set.Json()["created_at"]);
  EXPECT_EQ(again.Json()["spec"]["hosts"].size(), 2u);

  EXPECT_EQ(Call("DELETE", "/v1/secrets/GH_TOKEN").status, 204);
  http::httptest::Response gone = Call("DELETE", "/v1/secrets/GH_TOKEN");
  EXPECT_EQ(gone.status, 404);
  EXPECT_THAT(gone.body, HasSubstr("no secret named GH_TOKEN"));
  EXPECT_TRUE(Call("GET", "/v1/secrets").Json()["secrets"].empty());
  EXPECT_THAT(ReadAll(values), Not(HasSubstr("GH_TOKEN")));
}

TEST_F(DaemonApiTest, BadSecretsAreRefusedWithWhatToDo) {
  auto post = [&](const nlohmann::json& body) { return Call("POST", "/v1/secrets", body.dump()); };
  http::httptest::Response no_value = post({{"spec", Spec("GH_TOKEN")}});
  EXPECT_EQ(no_value.status, 400);
  EXPECT_THAT(no_value.body, HasSubstr("--from-env"));

  http::httptest::Response bad_name = post({{"spec", Spec("gh-token")}, {"value", kValue}});
  EXPECT_EQ(bad_name.status, 400);
  EXPECT_THAT(bad_name.body, Not(HasSubstr(kValue)));

  nlohmann::json wide = Spec("WIDE");
  wide["hosts"] = {"*.com"};
  EXPECT_EQ(post({{"spec", wide}, {"value", kValue}}).status, 400);

  http::httptest::Response two_lines =
      post({{"spec", Spec("TWO")}, {"value", std::string("line1\nline2")}});
  EXPECT_EQ(two_lines.status, 400);
  EXPECT_THAT(two_lines.body, HasSubstr("line break"));
  EXPECT_THAT(two_lines.body, Not(HasSubstr("line1")));

  // A command source takes no value, and is read once to check it works.
  nlohmann::json failing = {{"kind", "command"},
                            {"argv", {"/bin/sh", "-c", "echo nope >&2; exit 3"}}};
  http::httptest::Response broken = post({{"spec", Spec("CMD", failing)}});
  EXPECT_NE(broken.status, 201);
  EXPECT_THAT(broken.body, HasSubstr("reading secret CMD from its command failed"));
  EXPECT_THAT(broken.body, HasSubstr("nope"));
  nlohmann::json works = {{"kind", "command"}, {"argv", {"/bin/echo", "from-a-command"}}};
  EXPECT_EQ(post({{"spec", Spec("CMD", works)}, {"value", kValue}}).status, 400);
  http::httptest::Response ok = post({{"spec", Spec("CMD", works)}});
  ASSERT_EQ(ok.status, 201) << ok.body;
  EXPECT_EQ(ok.Json()["source"], "command");
  EXPECT_EQ(ok.Json()["stored_in"], "");

  // Nothing refused was kept.
  nlohmann::json all = Call("GET", "/v1/secrets").Json()["secrets"];
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0]["name"], "CMD");
}

// --- Secrets given to sandboxes (abox create --secret / --git-push) ---

class SandboxSecretsTest : public DaemonApiTest {
 protected:
  void SetUp() override {
    DaemonApiTest::SetUp();
    http::httptest::Response set =
        Call("POST", "/v1/secrets",
             nlohmann::json{{"spec", Spec("GH_TOKEN")}, {"value", kValue}}.dump());
    ASSERT_EQ(set.status, 201) << set.body;
  }

  // The exec's stdout, run to its end.
  std::string Run(const std::string& sandbox, const nlohmann::json& body) {
    std::string exec = StartExec(sandbox, body);
    Wait(sandbox, exec);
    return Joined(ReadOutput(sandbox, exec), "stdout");
  }
};

TEST_F(SandboxSecretsTest, TheSandboxGetsAPlaceholderOfItsOwnNeverTheValue) {
  std::string a = CreateSandbox(R"({"secrets": {"GH_TOKEN": "GITHUB_TOKEN"}})");
  std::string b = CreateSandbox(R"({"secrets": {"GH_TOKEN": ""}})");
  ASSERT_FALSE(a.empty());
  ASSERT_FALSE(b.empty());

  std::string in_a = Run(a, {{"shell", "printf '%s' \"$GITHUB_TOKEN\""}});
  std::string in_b = Run(b, {{"shell", "printf '%s' \"$GH_TOKEN\""}});
  EXPECT_THAT(in_a, ::testing::StartsWith("ABOX_SECRET_GH_TOKEN_"));
  EXPECT_THAT(in_b, ::testing::StartsWith("ABOX_SECRET_GH_TOKEN_"));
  EXPECT_NE(in_a, in_b);  // one placeholder per sandbox
  // The CA variables point TLS clients at the bundle abox adds its CA to.
  EXPECT_EQ(Run(a, {{"shell", "printf '%s' \"$SSL_CERT_FILE\""}}), kGuestCaBundle);
  EXPECT_EQ(Run(a, {{"shell", "printf '%s' \"$NODE_EXTRA_CA_CERTS\""}}), kGuestCaFile);
  // A variable the command sets itself wins.
  EXPECT_EQ(Run(a, {{"shell", "printf '%s' \"$GITHUB_TOKEN\""}, {"env", {{"GITHUB_TOKEN", "x"}}}}),
            "x");

  // Shown by name (inspect) and in `secret ls` (used by), never with the value.
  http::httptest::Response shown = Call("GET", "/v1/sandboxes/" + a);
  EXPECT_EQ(shown.Json()["secrets"], nlohmann::json({{"GH_TOKEN", "GITHUB_TOKEN"}}));
  EXPECT_THAT(shown.body, Not(HasSubstr(kValue)));
  EXPECT_THAT(shown.body, Not(HasSubstr(in_a)));
  http::httptest::Response listed = Call("GET", "/v1/secrets/GH_TOKEN");
  std::vector<std::string> users = listed.Json()["used_by"];
  EXPECT_THAT(users, ::testing::UnorderedElementsAre(a, b));

  // A sandbox without secrets gets none of it.
  std::string c = CreateSandbox();
  EXPECT_EQ(Run(c, {{"shell", "printf '%s' \"${GH_TOKEN-unset}${SSL_CERT_FILE-unset}\""}}),
            "unsetunset");
}

TEST_F(SandboxSecretsTest, TheSecretsHostsAreAllowedForTheSandbox) {
  std::string a =
      CreateSandbox(R"({"secrets": {"GH_TOKEN": ""}, "egress": {"mode": "allowlist"}})");
  http::httptest::Response policy = Call("GET", "/v1/sandboxes/" + a + "/egress/policy");
  ASSERT_EQ(policy.status, 200) << policy.body;
  EXPECT_THAT(policy.body, HasSubstr("api.github.com"));
}

TEST_F(SandboxSecretsTest, ACreateNamingAnUnknownSecretOrABadPushIsRefusedAndLeavesNothing) {
  http::httptest::Response unknown = Call("POST", "/v1/sandboxes", R"({"secrets": {"NOPE": ""}})");
  EXPECT_EQ(unknown.status, 400) << unknown.body;
  EXPECT_THAT(unknown.body, HasSubstr("no secret named NOPE"));
  EXPECT_THAT(unknown.body, HasSubstr("abox secret set NOPE"));
  http::httptest::Response reserved =
      Call("POST", "/v1/sandboxes", R"({"secrets": {"GH_TOKEN": "PATH"}})");
  EXPECT_EQ(reserved.status, 400) << reserved.body;
  EXPECT_THAT(reserved.body, HasSubstr("PATH is set by abox or the system"));
  http::httptest::Response push =
      Call("POST", "/v1/sandboxes", R"({"git_push": ["github.com/acme:main"]})");
  EXPECT_EQ(push.status, 400) << push.body;
  EXPECT_THAT(push.body, HasSubstr("HOST/OWNER/REPO:BRANCH-PATTERN"));
  http::httptest::Response bad_branch =
      Call("POST", "/v1/sandboxes", R"({"git_push": ["github.com/acme/app:refs/heads/x"]})");
  EXPECT_EQ(bad_branch.status, 400) << bad_branch.body;
  EXPECT_TRUE(Call("GET", "/v1/sandboxes").Json()["sandboxes"].empty());
}

TEST_F(SandboxSecretsTest, ACommandCarryingARealValueIsRefusedBeforeTheVm) {
  std::string a = CreateSandbox(R"({"secrets": {"GH_TOKEN": ""}})");
  auto refused = [&](const nlohmann::json& body) {
    http::httptest::Response r =
        Call("POST", absl::StrCat("/v1/sandboxes/", a, "/execs"), body.dump());
    EXPECT_EQ(r.status, 403) << body.dump() << " -> " << r.body;
    EXPECT_THAT(r.body, HasSubstr("real value of secret GH_TOKEN"));
    EXPECT_THAT(r.body, Not(HasSubstr(kValue)));
  };
  refused({{"argv", {"echo", kValue}}});
  refused({{"shell", absl::StrCat("curl -H 'Authorization: Bearer ", kValue, "' x")}});
  refused({{"argv", {"true"}}, {"env", {{"T", kValue}}}});
  std::string b64;
  absl::Base64Escape(absl::StrCat("x-access-token:", kValue), &b64);
  refused({{"argv", {"echo", b64}}});  // encoded too
  // Nothing of it was recorded as an exec.
  EXPECT_TRUE(Call("GET", absl::StrCat("/v1/sandboxes/", a, "/execs")).Json()["execs"].empty());

  // Stdin: a value split across two writes is refused at the second.
  std::string exec = StartExec(a, {{"argv", {"cat"}}, {"stdin", true}});
  std::string path = absl::StrCat("/v1/sandboxes/", a, "/execs/", exec, "/stdin");
  std::string value(kValue);
  EXPECT_EQ(Call("POST", path, value.substr(0, 10)).status, 204);
  http::httptest::Response second = Call("POST", path, value.substr(10));
  EXPECT_EQ(second.status, 403) << second.body;
  EXPECT_THAT(second.body, HasSubstr("stdin holds the real value of secret GH_TOKEN"));
  EXPECT_EQ(Call("POST", path + "?eof=true", "").status, 403);  // and every later write
  Call("POST", absl::StrCat("/v1/sandboxes/", a, "/execs/", exec, "/signal"),
       R"({"signal": "KILL"})");
}

// What the sandbox's proxy gets is read per connection: a rotated value reaches the next
// connection, a removed secret is no longer swapped, and only bound hosts are terminated.
TEST_F(SandboxSecretsTest, TheProxySeesRotationAndRemovalAtTheNextConnection) {
  std::string a = CreateSandbox(
      R"({"secrets": {"GH_TOKEN": ""}, "git_push": ["git.example.com/acme/app:agent/*"]})");
  absl::StatusOr<std::shared_ptr<const net::InterceptSource>> source =
      daemon_->daemon().grants().InterceptFor(a);
  ASSERT_TRUE(source.ok()) << source.status();
  ASSERT_NE(*source, nullptr);
  EXPECT_TRUE((*source)->terminates("api.github.com", 443));
  EXPECT_TRUE((*source)->terminates("git.example.com", 443));
  EXPECT_FALSE((*source)->terminates("api.github.com", 8443));
  EXPECT_FALSE((*source)->terminates("example.com", 443));

  auto value_for = [&](const std::string& host) -> std::string {
    auto rules = (*source)->rules(host, 443);
    EXPECT_TRUE(rules.ok()) << rules.status();
    if (!rules.ok() || (*rules)->secrets == nullptr) {
      return "";
    }
    for (const auto& entry : (*rules)->secrets->entries()) {
      if (entry.binding.name == "GH_TOKEN") {
        return entry.binding.value;
      }
    }
    return "";
  };
  EXPECT_EQ(value_for("api.github.com"), kValue);
  EXPECT_NE(value_for("example.com"), kValue) << "an unbound host's table must not hold it";
  auto rules = (*source)->rules("git.example.com", 443);
  ASSERT_TRUE(rules.ok());
  ASSERT_EQ((*rules)->git_push.size(), 1u);
  EXPECT_EQ((*rules)->git_push[0].repo, "acme/app");
  EXPECT_THAT((*rules)->git_push[0].refs.branch_patterns, ::testing::ElementsAre("agent/*"));

  ASSERT_EQ(
      Call("POST", "/v1/secrets",
           nlohmann::json{{"spec", Spec("GH_TOKEN")}, {"value", "rotated-value-0123456"}}.dump())
          .status,
      201);
  EXPECT_EQ(value_for("api.github.com"), "rotated-value-0123456");
  ASSERT_EQ(Call("DELETE", "/v1/secrets/GH_TOKEN").status, 204);
  EXPECT_EQ(value_for("api.github.com"), "");
  EXPECT_FALSE((*source)->terminates("api.github.com", 443));
}

}  // namespace
}  // namespace abox::daemon
