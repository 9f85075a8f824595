// aboxd end to end: the real daemon, real QEMU, the real guest image, driven over its HTTP API.
// (The CLI on top of it: daemon_cli_test.cc.)
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>

#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "src/base/child_process.h"
#include "src/http/testing/http_test_client.h"
#include "tests/testing/abox_runner.h"
#include "tests/testing/aboxd_process.h"

namespace abox::testing {
namespace {

using http::httptest::HttpTestClient;
using http::httptest::Response;
using ::testing::HasSubstr;

class DaemonE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    aboxd_ = std::make_unique<AboxdProcess>(home_);
    absl::Status started = aboxd_->Start();
    ASSERT_TRUE(started.ok()) << started;
  }
  void TearDown() override {
    if (HasFailure() && aboxd_) {
      std::fprintf(stderr, "--- aboxd log ---\n%s\n", aboxd_->Log().c_str());
    }
    // Remove whatever is left through the API, then make sure no VM survived.
    if (auto c = HttpTestClient::ConnectUnix(home_.socket()); c.ok()) {
      if (auto list = (*c)->Request("GET", "/v1/sandboxes"); list.ok()) {
        for (const auto& s : list->Json().value("sandboxes", nlohmann::json::array())) {
          (void)(*c)->Request(
              "DELETE", absl::StrCat("/v1/sandboxes/", s["id"].get<std::string>(), "?force=true"));
        }
      }
    }
    aboxd_.reset();
    EXPECT_TRUE(ProcessesMatching(home_.path() + "/sandboxes").empty());
  }

  std::unique_ptr<HttpTestClient> Connect() {
    auto c = HttpTestClient::ConnectUnix(home_.socket());
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? *std::move(c) : nullptr;
  }

  Response Call(absl::string_view method, absl::string_view target, absl::string_view body = "") {
    auto c = Connect();
    absl::StatusOr<Response> r = c->Request(method, target, body);
    EXPECT_TRUE(r.ok()) << method << " " << target << ": " << r.status();
    return r.ok() ? *r : Response{};
  }

  std::string Create(const std::string& body = "{}") {
    Response r = Call("POST", "/v1/sandboxes", body);
    EXPECT_EQ(r.status, 201) << r.body;
    return r.Json().value("id", "");
  }

  std::string StartExec(const std::string& sb, const nlohmann::json& body) {
    Response r = Call("POST", absl::StrCat("/v1/sandboxes/", sb, "/execs"), body.dump());
    EXPECT_EQ(r.status, 201) << r.body;
    return r.Json().value("id", "");
  }

  // stdout, stderr and the exit line of an exec's output stream.
  struct Output {
    std::string out, err;
    nlohmann::json exit;
  };
  Output ReadOutput(const std::string& sb, const std::string& exec) {
    Output o;
    Response r = Call("GET", absl::StrCat("/v1/sandboxes/", sb, "/execs/", exec, "/output"));
    for (absl::string_view line : absl::StrSplit(r.body, '\n', absl::SkipEmpty())) {
      nlohmann::json j = nlohmann::json::parse(line);
      if (j["type"] == "output") {
        (j["stream"] == "stdout" ? o.out : o.err) += j.value("data", "");
      } else if (j["type"] == "exit") {
        o.exit = j["exec"];
      }
    }
    return o;
  }

  DaemonHome home_;
  std::unique_ptr<AboxdProcess> aboxd_;
};

TEST_F(DaemonE2eTest, CreateExecStreamStdinPtyListRemove) {
  std::string sb = Create(R"({"name":"e2e-box","labels":{"suite":"daemon"}})");
  ASSERT_FALSE(sb.empty());
  Response got = Call("GET", "/v1/sandboxes/e2e-box");
  EXPECT_EQ(got.Json()["state"], "ready");

  // stdout, stderr and the exit code, streamed.
  std::string exec = StartExec(sb, {{"shell", "uname -s; echo oops >&2; exit 7"}});
  Output o = ReadOutput(sb, exec);
  EXPECT_EQ(o.out, "Linux\n");
  EXPECT_EQ(o.err, "oops\n");
  EXPECT_EQ(o.exit["exit_code"], 7);

  // stdin.
  std::string cat = StartExec(sb, {{"argv", {"sh", "-c", "wc -c"}}, {"stdin", true}});
  std::string base = absl::StrCat("/v1/sandboxes/", sb, "/execs/", cat);
  EXPECT_EQ(Call("POST", base + "/stdin", std::string(100000, 'x')).status, 204);
  EXPECT_EQ(Call("POST", base + "/stdin?eof=true", "").status, 204);
  EXPECT_EQ(ReadOutput(sb, cat).out, "100000\n");

  // A PTY with a resize.
  std::string tty = StartExec(sb, {{"shell", "read line; stty size; tty"},
                                   {"stdin", true},
                                   {"pty", {{"rows", 24}, {"cols", 80}}}});
  std::string tbase = absl::StrCat("/v1/sandboxes/", sb, "/execs/", tty);
  EXPECT_EQ(Call("POST", tbase + "/resize", R"({"rows":50,"cols":132})").status, 204);
  EXPECT_EQ(Call("POST", tbase + "/stdin", "go\n").status, 204);
  Output t = ReadOutput(sb, tty);
  EXPECT_THAT(t.out, HasSubstr("50 132"));
  EXPECT_THAT(t.out, HasSubstr("/dev/pts/"));

  // Listed with its label and exec history; removal needs force while it runs.
  Response listed = Call("GET", "/v1/sandboxes?label=suite%3Ddaemon");
  ASSERT_EQ(listed.Json()["sandboxes"].size(), 1u);
  EXPECT_EQ(Call("GET", absl::StrCat("/v1/sandboxes/", sb, "/execs")).Json()["execs"].size(), 3u);
  Response console = Call("GET", absl::StrCat("/v1/sandboxes/", sb, "/console"));
  // The guest agent's lines (a sandbox restored from the golden snapshot booted in its
  // template: its console starts with the agent taking this host).
  EXPECT_THAT(console.body, HasSubstr("abox-guest: session started"));
  EXPECT_EQ(Call("DELETE", "/v1/sandboxes/e2e-box").status, 409);
  EXPECT_EQ(Call("DELETE", "/v1/sandboxes/e2e-box?force=true").status, 204);
  EXPECT_EQ(Call("GET", "/v1/sandboxes/e2e-box").status, 404);
  EXPECT_TRUE(ProcessesMatching(home_.path() + "/sandboxes").empty());
}

TEST_F(DaemonE2eTest, TenExecsInParallelAcrossThreeSandboxes) {
  std::vector<std::string> boxes;
  for (int i = 0; i < 3; ++i) {
    boxes.push_back(Create());
  }
  std::vector<Output> outputs(10);
  std::vector<std::thread> threads;
  for (int i = 0; i < 10; ++i) {
    threads.emplace_back([&, i] {
      const std::string& sb = boxes[i % 3];
      std::string exec =
          StartExec(sb, {{"shell", absl::StrCat("sleep 1; echo exec-", i, " on $(hostname)")}});
      outputs[i] = ReadOutput(sb, exec);
    });
  }
  for (auto& t : threads) {
    t.join();
  }
  for (int i = 0; i < 10; ++i) {
    EXPECT_THAT(outputs[i].out, HasSubstr(absl::StrCat("exec-", i, " on"))) << i;
    EXPECT_EQ(outputs[i].exit.value("exit_code", -1), 0) << i;
  }
}

TEST_F(DaemonE2eTest, KillNineOfAboxdMidExecThenRestart) {
  std::string sb = Create(R"({"name":"survivor"})");
  std::string exec = StartExec(sb, {{"shell", "echo started; sleep 60"}});
  // Follow the output until the command runs, then kill the daemon under it.
  auto reader = Connect();
  ASSERT_TRUE(
      reader->Send("GET", absl::StrCat("/v1/sandboxes/", sb, "/execs/", exec, "/output"), "").ok());
  ASSERT_TRUE(reader->ReadUntil("started").ok());
  pid_t vmm_pid = Call("GET", "/v1/sandboxes/survivor").Json().value("vmm_pid", 0);
  ASSERT_GT(vmm_pid, 0);
  aboxd_->Kill();
  EXPECT_EQ(::kill(vmm_pid, 0), 0) << "the VM died with aboxd";

  ASSERT_TRUE(aboxd_->Start().ok()) << aboxd_->Log();
  nlohmann::json again = Call("GET", "/v1/sandboxes/survivor").Json();
  EXPECT_EQ(again["state"], "ready") << again.dump();
  nlohmann::json old =
      Call("GET", absl::StrCat("/v1/sandboxes/", sb, "/execs/", exec, "?output=true")).Json();
  EXPECT_EQ(old["state"], "interrupted");
  EXPECT_THAT(old.value("error", ""), HasSubstr("aboxd stopped"));
  EXPECT_EQ(old["output"][0]["data"], "started\n");
  std::string next = StartExec(sb, {{"argv", {"echo", "usable"}}});
  EXPECT_EQ(ReadOutput(sb, next).out, "usable\n");

  // An orderly stop leaves it running too.
  ASSERT_TRUE(aboxd_->Stop().ok());
  EXPECT_EQ(::kill(vmm_pid, 0), 0);
  ASSERT_TRUE(aboxd_->Start().ok());
  EXPECT_EQ(Call("GET", "/v1/sandboxes/survivor").Json()["state"], "ready");
}

TEST_F(DaemonE2eTest, StartupAndCreateErrorsSayWhy) {
  // A second daemon on the same socket is refused.
  std::string home_env = "ABOX_HOME=" + home_.path();
  absl::StatusOr<base::CommandResult> second =
      base::RunCommand({"env", home_env, AboxdBin(), "--socket", home_.socket()});
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_NE(second->status.ShellCode(), 0);
  EXPECT_THAT(second->err, HasSubstr("already serves"));

  // A socket directory that cannot be created.
  absl::StatusOr<base::CommandResult> bad =
      base::RunCommand({"env", home_env, AboxdBin(), "--socket", "/proc/abox-e2e/aboxd.sock"});
  ASSERT_TRUE(bad.ok()) << bad.status();
  EXPECT_NE(bad->status.ShellCode(), 0);
  EXPECT_THAT(bad->err, HasSubstr("/proc/abox-e2e"));

  // A TCP port in use.
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(::listen(fd, 1), 0);
  socklen_t len = sizeof(addr);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  std::string other_socket = home_.path() + "/other/aboxd.sock";
  absl::StatusOr<base::CommandResult> busy =
      base::RunCommand({"env", home_env, AboxdBin(), "--socket", other_socket, "--tcp-port",
                        std::to_string(ntohs(addr.sin_port))});
  ::close(fd);
  ASSERT_TRUE(busy.ok()) << busy.status();
  EXPECT_NE(busy->status.ShellCode(), 0);
  EXPECT_THAT(busy->err, HasSubstr(std::to_string(ntohs(addr.sin_port))));

  // A missing image: nothing is created, and the error says how to build it.
  Response r = Call("POST", "/v1/sandboxes", R"({"image":"no-such-image"})");
  EXPECT_GE(r.status, 400);
  EXPECT_LT(r.status, 500);
  EXPECT_THAT(r.Json()["error"]["message"].get<std::string>(), HasSubstr("abox image build"));
  EXPECT_EQ(Call("GET", "/v1/sandboxes").Json()["sandboxes"].size(), 0u);
}

}  // namespace
}  // namespace abox::testing
