// Agents inside the VM end to end (issue 16): the real Claude Code CLI (from npm, installed into
// the "claude" image by `abox image build --agent claude`) runs headless inside a sandbox on a
// copy of a repository, talks to a scripted fake Anthropic server on the host's loopback
// (tests/e2e/testdata/fake_model_server.py) through aboxd's model broker, and writes a file in
// /workspace with its own Write tool. The fake server gets the real key; the guest holds only the
// sandbox's broker token. Then, from inside a VM, hostile requests to the broker: another token,
// a route outside the list, a flood; each is refused, logged and counted.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
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

constexpr char kKey[] = "sk-ant-real-key-4f2b9d07c1e84a6b";
constexpr char kProviderName[] = "api.model.test";
constexpr char kOpenAiKey[] = "sk-proj-real-key-9e1d5c3b7a2f4860";
// The Claude Code release the image is built with: pinned, so a new release cannot change
// what this test sees (bump it on purpose).
constexpr char kClaudeAgent[] = "claude@2.1.332";
constexpr char kCodexAgent[] = "codex@0.171.0";

class AgentE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(home_.path()) / "model";
    fs::create_directories(dir_);
    // The Anthropic fake speaks HTTPS as api.model.test, with a test CA's certificate that the
    // broker verifies; the name reaches the loopback through the test-only resolver override.
    ASSERT_TRUE(MakeTestCa(dir_, {kProviderName}));
    port_ = StartServer("anthropic", server_);
    ASSERT_NE(port_, 0);
    fs::path override_file = dir_ / "resolver-override.json";
    std::ofstream(override_file) << nlohmann::json{{kProviderName, {"127.0.0.1"}}}.dump();
    daemon_ = std::make_unique<AboxdProcess>(home_);
    // A low rate, so that a flood of a few dozen requests meets it whatever the machine's speed.
    ASSERT_TRUE(
        daemon_
            ->Start({"--model-requests-per-minute", "6", "--test-resolver-override",
                     override_file.string(), "--test-upstream-ca", (dir_ / "ca.pem").string()})
            .ok())
        << daemon_->Log();
    AboxResult login = Abox({"agent", "login", "anthropic", "--stdin", "--base-url",
                             absl::StrCat("https://", kProviderName, ":", port_)},
                            std::string(kKey) + "\n");
    ASSERT_EQ(login.exit_code, 0) << login.err;
  }
  void TearDown() override {
    RemoveAllSandboxes([this](std::vector<std::string> args) { return Abox(std::move(args)); });
    (void)daemon_->Stop();
  }

  // A fake model server for `api` on a free loopback port (0 when it did not start). Its
  // requests go to <api>-requests.jsonl; its script writes hello.txt through the agent's tool.
  int StartServer(const std::string& api, base::ChildProcess& server) {
    int port = FreeLoopbackPort();
    std::vector<std::string> argv = {"python3",         ABOX_FAKE_MODEL_SERVER,
                                     "--api",           api,
                                     "--port",          std::to_string(port),
                                     "--expect-key",    api == "anthropic" ? kKey : kOpenAiKey,
                                     "--log",           (dir_ / (api + "-requests.jsonl")).string(),
                                     "--write-path",    "hello.txt",
                                     "--write-content", "hello from " + api + " in the vm\n"};
    if (api == "anthropic") {  // HTTPS; the OpenAI fake stays a plain-HTTP local server
      argv.insert(argv.end(), {"--tls-cert", (dir_ / "leaf.pem").string(), "--tls-key",
                               (dir_ / "leaf.key").string()});
    }
    auto spawned = base::ChildProcess::Spawn({.argv = argv});
    if (!spawned.ok()) {
      ADD_FAILURE() << spawned.status();
      return 0;
    }
    server = *std::move(spawned);
    return WaitForLoopbackPort(port) ? port : 0;
  }

  // The sandbox id in `abox agent`'s "sandbox ID: ..." line.
  static std::string SandboxOf(const AboxResult& run) {
    for (absl::string_view line : absl::StrSplit(run.err, '\n')) {
      if (absl::ConsumePrefix(&line, "sandbox ")) {
        return std::string(line.substr(0, line.find(':')));
      }
    }
    return "";
  }

  // `key` is nowhere in the guest: every process's environment and command line, the agent's
  // home and config, the workspace, /etc, /tmp, /var. `config`: the agent's config entry in the
  // agent user's home, which must exist (the agent ran there). The key is split in two (a
  // command line holding it whole is refused before it reaches the VM) and joined by the
  // shell's printf builtin into a pattern file on /run, so that no process of the search holds
  // it in its own command line for the search to find.
  void ExpectKeyNowhereInTheGuest(const std::string& id, const std::string& key,
                                  const std::string& config) {
    std::string search = Guest(
        id,
        absl::StrCat("printf '%s%s\\n' '", key.substr(0, 12), "' '", key.substr(12),
                     "' > /run/needle; cat /proc/[0-9]*/environ /proc/[0-9]*/cmdline 2>/dev/null "
                     "| grep -c -a -F -f /run/needle; grep -r -l -a -F -f /run/needle /etc /root "
                     "/home /tmp /var /workspace 2>/dev/null | head -3; rm /run/needle; "
                     "ls -a /home/agent | grep -c '",
                     config, "'"),
        /*root=*/true);
    EXPECT_THAT(search, ::testing::StartsWith("0\n")) << search;
    EXPECT_THAT(search, Not(HasSubstr("/"))) << search;
    EXPECT_THAT(search, Not(HasSubstr("0\n0\n"))) << "the agent wrote no " << config;
  }

  AboxResult Abox(std::vector<std::string> args, std::string stdin_data = "") {
    AboxCall call;
    call.args = std::move(args);
    call.env = home_.Env();
    call.env["ABOX_NO_AUTOSTART"] = "1";
    call.stdin_data = std::move(stdin_data);
    call.timeout_seconds = 600;
    return RunAbox(call);
  }

  // A shell command in the sandbox; returns stdout + stderr + "exit=N".
  std::string Guest(const std::string& id, const std::string& script, bool root = false) {
    AboxResult r = Abox(GuestShellArgs(id, script, root));
    return r.out + r.err;
  }

  std::vector<nlohmann::json> Requests(const std::string& api = "anthropic") {
    std::vector<nlohmann::json> out;
    for (absl::string_view line :
         absl::StrSplit(workspace::testing::ReadWholeFile(dir_ / (api + "-requests.jsonl")), '\n',
                        absl::SkipEmpty())) {
      out.push_back(nlohmann::json::parse(line));
    }
    return out;
  }

  std::string Events(const std::string& id) {
    std::string file = (dir_ / "events.txt").string();
    std::system(absl::StrCat("curl -sS --max-time 3 --unix-socket '", home_.socket(),  // NOLINT
                             "' 'http://abox/v1/events?since=0&sandbox=", id, "' > '", file,
                             "' 2>/dev/null")
                    .c_str());
    return workspace::testing::ReadWholeFile(file);
  }

  DaemonHome home_;
  fs::path dir_;
  std::unique_ptr<AboxdProcess> daemon_;
  base::ChildProcess server_;
  int port_ = 0;
};

TEST_F(AgentE2eTest, CodexInTheVmEditsTheWorkspaceAndNeverHoldsTheKey) {
  AboxResult image =
      BuildSharedImage({"--name", "codex", "--preset", "minimal", "--agent", kCodexAgent});
  ASSERT_EQ(image.exit_code, 0) << image.err;
  base::ChildProcess openai;
  int port = StartServer("openai", openai);
  ASSERT_NE(port, 0);
  AboxResult login = Abox({"agent", "login", "openai", "--stdin", "--base-url",
                           absl::StrCat("http://127.0.0.1:", port)},
                          std::string(kOpenAiKey) + "\n");
  ASSERT_EQ(login.exit_code, 0) << login.err;
  fs::path repo = fs::path(home_.path()) / "repo";
  fs::create_directories(repo);
  std::ofstream(repo / "README.md") << "a repository\n";

  AboxResult run =
      Abox({"agent", "codex", "-w", repo.string(), "--prompt", "Create hello.txt saying hello",
            // A model Codex knows: for others it offers the fake server no file tool.
            "--model", "gpt-5.5"});
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  EXPECT_THAT(run.out, HasSubstr("turn.completed"));  // codex exec --json on stdout
  std::string id = SandboxOf(run);
  ASSERT_FALSE(id.empty()) << run.err;
  EXPECT_THAT(Abox({"diff", id}).out, HasSubstr("hello from openai in the vm")) << run.out;
  std::vector<nlohmann::json> requests = Requests("openai");
  ASSERT_GE(requests.size(), 2U);
  for (const nlohmann::json& r : requests) {
    EXPECT_EQ(r["path"], "/v1/responses");
    EXPECT_EQ(r["headers"].value("Authorization", r["headers"].value("authorization", "")),
              absl::StrCat("Bearer ", kOpenAiKey));
    EXPECT_THAT(r.dump(), Not(HasSubstr("abox-broker-")));
  }
  nlohmann::json u = nlohmann::json::parse(Abox({"agent", "usage", id, "--json"}).out)["usage"][0];
  EXPECT_EQ(u["api"], "openai");
  EXPECT_EQ(u["output_tokens"].get<int64_t>(), 7 * u["requests"].get<int64_t>());
  ExpectKeyNowhereInTheGuest(id, kOpenAiKey, ".codex");
}

TEST_F(AgentE2eTest, ClaudeCodeInTheVmEditsTheWorkspaceAndNeverHoldsTheKey) {
  AboxResult image =
      BuildSharedImage({"--name", "claude", "--preset", "minimal", "--agent", kClaudeAgent});
  ASSERT_EQ(image.exit_code, 0) << image.err;
  fs::path repo = fs::path(home_.path()) / "repo";
  fs::create_directories(repo);
  std::ofstream(repo / "README.md") << "a repository\n";

  AboxResult run =
      Abox({"agent", "claude", "-w", repo.string(), "--prompt", "Create hello.txt saying hello"});
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  // Headless: Claude Code's stream-json on stdout, abox's summary on stderr.
  EXPECT_THAT(run.out, HasSubstr("\"type\":\"result\""));
  EXPECT_THAT(run.err, HasSubstr("hello.txt"));
  EXPECT_THAT(run.err, HasSubstr("abox apply "));
  std::string id = SandboxOf(run);
  ASSERT_FALSE(id.empty()) << run.err;

  // The agent's own Write tool made the file; abox diff shows it; the host's copy is untouched.
  AboxResult diff = Abox({"diff", id});
  EXPECT_THAT(diff.out, HasSubstr("hello from anthropic in the vm"));
  EXPECT_FALSE(fs::exists(repo / "hello.txt"));

  // The fake server got the real key on every request and never the guest's token.
  std::vector<nlohmann::json> requests = Requests();
  ASSERT_GE(requests.size(), 2U);
  for (const nlohmann::json& r : requests) {
    EXPECT_THAT(r["path"].get<std::string>(), ::testing::StartsWith("/v1/messages"));
    EXPECT_EQ(r["headers"].value("x-api-key", ""), kKey) << r.dump();
    EXPECT_THAT(r.dump(), Not(HasSubstr("abox-broker-")));
  }
  // Usage, read from the streamed responses: 11 in and 7 out per reply (the fake's numbers).
  AboxResult usage = Abox({"agent", "usage", id, "--json"});
  ASSERT_EQ(usage.exit_code, 0) << usage.err;
  nlohmann::json u = nlohmann::json::parse(usage.out)["usage"][0];
  EXPECT_EQ(u["api"], "anthropic");
  EXPECT_EQ(u["requests"].get<int64_t>(), static_cast<int64_t>(requests.size()));
  EXPECT_EQ(u["input_tokens"].get<int64_t>(), 11 * u["requests"].get<int64_t>());
  EXPECT_EQ(u["output_tokens"].get<int64_t>(), 7 * u["requests"].get<int64_t>());
  EXPECT_THAT(Events(id), HasSubstr("model_request"));

  ExpectKeyNowhereInTheGuest(id, kKey, ".claude");
  EXPECT_THAT(Guest(id, "printf %s \"$ANTHROPIC_API_KEY\""), HasSubstr("abox-broker-"));
}

TEST_F(AgentE2eTest, TheBrokerRefusesOtherTokensOtherRoutesAndFloods) {
  // Egress none: the broker is the host's own client of the provider, not a policy exception.
  AboxResult created = Abox({"create", "--json", "--model", "anthropic", "--egress", "none"});
  ASSERT_EQ(created.exit_code, 0) << created.err;
  std::string id = nlohmann::json::parse(created.out)["id"];
  EXPECT_THAT(Guest(id, absl::StrCat("curl -sk --max-time 20 https://", kProviderName, ":", port_,
                                     "/v1/messages")),
              Not(HasSubstr("exit=0")));
  const std::string url = "http://127.0.0.1:15080/anthropic";
  auto curl = [&](const std::string& args) {
    return Guest(id, absl::StrCat("curl -s -o /dev/null -w '%{http_code}\\n' ", args));
  };
  // Another sandbox's (or a made-up) token: 401, and nothing reaches the provider.
  std::string other_token = absl::StrCat("abox-broker-", std::string(64, 'a'));
  EXPECT_THAT(
      curl(absl::StrCat("-H 'x-api-key: ", other_token,
                        "' -H 'content-type: application/json' --data '{}' ", url, "/v1/messages")),
      HasSubstr("401"));
  // A route outside the list, with the right token: 404.
  EXPECT_THAT(curl(absl::StrCat("-H \"x-api-key: $ANTHROPIC_API_KEY\" ", url, "/v1/files")),
              HasSubstr("404"));
  EXPECT_THAT(curl(absl::StrCat("-H \"x-api-key: $ANTHROPIC_API_KEY\" ", url,
                                "/../openai/v1/responses --path-as-is")),
              HasSubstr("404"));
  EXPECT_TRUE(Requests().empty()) << "a refused request reached the provider";

  // A flood of token counts on one kept-alive connection: 6 a minute are allowed (a burst of
  // 1), so most of 20 get 429.
  std::string urls;  // curl's -o applies to one URL: one each
  for (int i = 0; i < 20; ++i) {
    absl::StrAppend(&urls, " -o /dev/null ", url, "/v1/messages/count_tokens");
  }
  std::string codes =
      curl(absl::StrCat("-H \"x-api-key: $ANTHROPIC_API_KEY\" -H 'content-type: "
                        "application/json' --data '{}'",
                        urls));
  int ok = 0;
  int limited = 0;
  for (absl::string_view line : absl::StrSplit(codes, '\n')) {
    ok += line == "200" ? 1 : 0;
    limited += line == "429" ? 1 : 0;
  }
  EXPECT_GE(ok, 1) << codes;
  EXPECT_GE(limited, 10) << codes;
  EXPECT_EQ(ok + limited, 20) << codes;
  EXPECT_EQ(Requests().size(), static_cast<size_t>(ok));

  // Every refusal is counted and an event.
  AboxResult usage = Abox({"agent", "usage", id, "--json"});
  ASSERT_EQ(usage.exit_code, 0) << usage.err;
  nlohmann::json u = nlohmann::json::parse(usage.out)["usage"][0];
  EXPECT_EQ(u["refused"].get<int64_t>(), 3 + limited);
  std::string events = Events(id);
  EXPECT_THAT(events, HasSubstr("\"refused\":true"));
  EXPECT_THAT(events, HasSubstr("429"));
  EXPECT_THAT(events, Not(HasSubstr(kKey)));
}

}  // namespace
}  // namespace abox::testing
