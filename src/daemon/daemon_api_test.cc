// The API end to end in-process (fixture: testing/daemon_api_fixture.h): sandboxes created,
// listed and removed, execs with stdin, signals and PTY, errors, the budget, boot failures,
// restarts, VMs that die, timeouts, events, parallel execs. Readers, disconnects and the output
// log: exec_output_api_test.cc. Real VMs: tests/e2e/daemon_e2e_test.cc.
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "src/daemon/testing/daemon_api_fixture.h"

namespace abox::daemon {
namespace {

using http::httptest::Response;
using testing::DaemonApiTest;
using ::testing::HasSubstr;

TEST_F(DaemonApiTest, CreateGetListAndRemoveASandbox) {
  std::string id = CreateSandbox(R"({"name":"web","labels":{"app":"shop","tier":"db"}})");
  ASSERT_EQ(id.size(), 12u);
  Response got = Call("GET", "/v1/sandboxes/web");  // by name
  ASSERT_EQ(got.status, 200) << got.body;
  EXPECT_EQ(got.Json()["id"], id);
  EXPECT_EQ(got.Json()["state"], "ready");
  EXPECT_EQ(got.Json()["accel"], "tcg");
  EXPECT_EQ(Call("GET", "/v1/sandboxes/" + id.substr(0, 4)).Json()["id"], id);  // by prefix

  std::string other = CreateSandbox(R"({"labels":{"app":"blog"}})");
  nlohmann::json all = Call("GET", "/v1/sandboxes").Json()["sandboxes"];
  EXPECT_EQ(all.size(), 2u);
  nlohmann::json shop = Call("GET", "/v1/sandboxes?label=app%3Dshop").Json()["sandboxes"];
  ASSERT_EQ(shop.size(), 1u);
  EXPECT_EQ(shop[0]["id"], id);
  EXPECT_EQ(Call("GET", "/v1/sandboxes?label=app=shop&label=tier=web").Json()["sandboxes"].size(),
            0u);

  Response refused = Call("DELETE", "/v1/sandboxes/" + id);
  EXPECT_EQ(refused.status, 409);
  EXPECT_THAT(refused.body, HasSubstr("abox rm -f"));
  EXPECT_EQ(Call("DELETE", "/v1/sandboxes/" + id + "?force=true").status, 204);
  Response gone = Call("GET", "/v1/sandboxes/" + id);
  EXPECT_EQ(gone.status, 404);
  EXPECT_THAT(gone.Json()["error"]["message"].get<std::string>(), HasSubstr(id));
  EXPECT_EQ(daemon_->ledger().Usage().cpus, 1);  // only `other` holds capacity

  // Stop keeps the record; then rm needs no force.
  Response stopped = Call("POST", "/v1/sandboxes/" + other + "/stop");
  EXPECT_EQ(stopped.status, 200) << stopped.body;
  EXPECT_EQ(stopped.Json()["state"], "stopped");
  EXPECT_EQ(daemon_->ledger().Usage().cpus, 0);
  EXPECT_EQ(Call("DELETE", "/v1/sandboxes/" + other).status, 204);
  EXPECT_TRUE(abox::testing::FakeVmm::LiveVms().empty());
}

TEST_F(DaemonApiTest, ExecStreamsStdoutAndStderrSeparatelyWithTheExitCode) {
  std::string sb = CreateSandbox();
  std::string exec = StartExec(sb, {{"shell", "echo out; echo err >&2; printf '\\377'; exit 3"}});
  std::vector<nlohmann::json> lines = ReadOutput(sb, exec);
  ASSERT_FALSE(lines.empty());
  EXPECT_EQ(Joined(lines, "stdout"), "out\n\xff");
  EXPECT_EQ(Joined(lines, "stderr"), "err\n");
  EXPECT_EQ(lines.back()["type"], "exit");
  EXPECT_EQ(lines.back()["exec"]["exit_code"], 3);
  EXPECT_EQ(lines.back()["exec"]["state"], "exited");
  EXPECT_EQ(Wait(sb, exec)["exit_code"], 3);

  // Replays from the log after the end, and `after` skips what a client already has.
  std::vector<nlohmann::json> again = ReadOutput(sb, exec);
  EXPECT_EQ(Joined(again, "stdout"), "out\n\xff");
  Response listed = Call("GET", "/v1/sandboxes/" + sb + "/execs?output=true");
  ASSERT_EQ(listed.status, 200);
  ASSERT_EQ(listed.Json()["execs"].size(), 1u);
  EXPECT_EQ(listed.Json()["execs"][0]["output"].size(), lines.size() - 1);
  Response one = Call("GET", "/v1/sandboxes/" + sb + "/execs/" + exec);
  EXPECT_EQ(one.Json()["shell"], "echo out; echo err >&2; printf '\\377'; exit 3");
}

TEST_F(DaemonApiTest, StdinIsDeliveredAndClosed) {
  std::string sb = CreateSandbox();
  std::string exec =
      StartExec(sb, {{"argv", {"sh", "-c", "tr a-z A-Z; echo done"}}, {"stdin", true}});
  std::string base = "/v1/sandboxes/" + sb + "/execs/" + exec;
  EXPECT_EQ(Call("POST", base + "/stdin", "hello ").status, 204);
  EXPECT_EQ(Call("POST", base + "/stdin?eof=true", "world\n").status, 204);
  Response late = Call("POST", base + "/stdin", "more");
  EXPECT_EQ(late.status, 409) << late.body;
  std::vector<nlohmann::json> lines = ReadOutput(sb, exec);
  EXPECT_EQ(Joined(lines, "stdout"), "HELLO WORLD\ndone\n");
  // An exec started without stdin refuses input and says how to get it.
  std::string no_stdin = StartExec(sb, {{"argv", {"true"}}});
  Response refused = Call("POST", "/v1/sandboxes/" + sb + "/execs/" + no_stdin + "/stdin", "x");
  EXPECT_EQ(refused.status, 409);
}

TEST_F(DaemonApiTest, SignalsAndPtyResize) {
  std::string sb = CreateSandbox();
  std::string exec = StartExec(sb, {{"argv", {"sleep", "100"}}});
  std::string base = "/v1/sandboxes/" + sb + "/execs/" + exec;
  EXPECT_EQ(Call("POST", base + "/signal", R"({"signal":"TERM"})").status, 204);
  nlohmann::json done = Wait(sb, exec);
  EXPECT_EQ(done["signal"], SIGTERM);
  EXPECT_EQ(Call("POST", base + "/signal", R"({"signal":"TERM"})").status, 409);
  EXPECT_EQ(Call("POST", base + "/signal", R"({"signal":"NOPE"})").status, 400);

  std::string tty = StartExec(sb, {{"shell", "read x; stty size; echo got $x"},
                                   {"stdin", true},
                                   {"pty", {{"rows", 30}, {"cols", 100}}}});
  std::string tbase = "/v1/sandboxes/" + sb + "/execs/" + tty;
  EXPECT_EQ(Call("POST", tbase + "/resize", R"({"rows":40,"cols":120})").status, 204);
  EXPECT_EQ(Call("POST", tbase + "/stdin", "hi\n").status, 204);
  std::vector<nlohmann::json> lines = ReadOutput(sb, tty);
  std::string out = Joined(lines, "stdout");
  EXPECT_THAT(out, HasSubstr("40 120"));
  EXPECT_THAT(out, HasSubstr("got hi"));
  EXPECT_EQ(Call("POST", base + "/resize", R"({"rows":40,"cols":120})").status, 409);
  EXPECT_EQ(Call("POST", tbase + "/resize", R"({"rows":0,"cols":120})").status, 400);
}

TEST_F(DaemonApiTest, BadInputGetsClearErrors) {
  struct Case {
    const char* method;
    const char* target;
    std::string body;
    int status;
    const char* field;  // "" when none
  };
  std::string sb = CreateSandbox(R"({"name":"box"})");
  std::vector<Case> cases = {
      {"POST", "/v1/sandboxes", "{not json", 400, ""},
      {"POST", "/v1/sandboxes", R"({"cpus":"two"})", 400, "cpus"},
      {"POST", "/v1/sandboxes", R"({"colour":"red"})", 400, "colour"},
      {"POST", "/v1/sandboxes", R"({"name":"box"})", 409, ""},
      {"POST", "/v1/sandboxes", std::string(2 << 20, ' '), 413, ""},
      {"GET", "/v1/sandboxes/nosuchbox", "", 404, ""},
      {"GET", "/v1/sandboxes?colour=red", "", 400, "colour"},
      {"GET", "/v1/sandboxes?label=novalue", "", 400, "label"},
      {"POST", "/v1/sandboxes/box/execs", R"({"argv":"ls"})", 400, "argv"},
      {"POST", "/v1/sandboxes/box/execs", R"({"argv":["ls"],"timeout_ms":-1})", 400, "timeout_ms"},
      {"GET", "/v1/sandboxes/box/execs/feedfeedfeed", "", 404, ""},
      {"GET", "/v1/sandboxes/box/execs?limit=0", "", 400, "limit"},
      {"GET", "/v1/sandboxes/box/console?tail=x", "", 400, "tail"},
      {"PUT", "/v1/sandboxes/box", "", 405, ""},
      {"GET", "/v1/events?since=-4", "", 400, "since"},
  };
  for (const Case& c : cases) {
    Response r = Call(c.method, c.target, c.body);
    EXPECT_EQ(r.status, c.status) << c.method << " " << c.target << ": " << r.body.substr(0, 300);
    nlohmann::json error = r.Json()["error"];
    EXPECT_TRUE(error.is_object()) << r.body.substr(0, 300);
    EXPECT_FALSE(error.value("message", "").empty());
    EXPECT_EQ(error.value("field", ""), c.field) << c.target << " " << r.body.substr(0, 300);
    if (r.status == 413) {
      client_ = daemon_->Connect();  // the server closes after a 413
    }
  }
  Response missing = Call("GET", "/v1/sandboxes/nosuchbox");
  EXPECT_THAT(missing.Json()["error"]["message"].get<std::string>(), HasSubstr("nosuchbox"));
}

class SmallBudgetTest : public DaemonApiTest {
 protected:
  SmallBudgetTest() { budget_ = {2, 1024}; }
};

TEST_F(SmallBudgetTest, CreateBeyondTheBudgetShowsTheNumbers) {
  CreateSandbox(R"({"cpus":2,"memory_mib":512})");
  Response r = Call("POST", "/v1/sandboxes", R"({"cpus":1,"memory_mib":768})");
  EXPECT_EQ(r.status, 429) << r.body;
  std::string message = r.Json()["error"]["message"];
  EXPECT_THAT(message, HasSubstr("1 vCPUs requested, 2 of 2 in use"));
  EXPECT_THAT(message, HasSubstr("768 MiB requested, 512 of 1024 MiB in use"));
  Response health = Call("GET", "/v1/health");
  EXPECT_EQ(health.Json()["ledger"]["cpus_used"], 2);
  EXPECT_EQ(health.Json()["ledger"]["memory_mib_budget"], 1024);
}

TEST_F(DaemonApiTest, CreateWithoutWaitingAnswers202WhileBooting) {
  daemon_->vmm().set_boot_delay(std::chrono::milliseconds(500));
  Response r = Call("POST", "/v1/sandboxes?wait=false", R"({"name":"slow"})");
  ASSERT_EQ(r.status, 202) << r.body;
  EXPECT_EQ(r.Json()["state"], "creating");
  // Still booting: commands and removal are refused with what to do.
  Response early = Call("POST", "/v1/sandboxes/slow/execs", R"({"argv":["true"]})");
  EXPECT_EQ(early.status, 409) << early.body;
  EXPECT_THAT(early.body, HasSubstr("wait for it to boot"));
  std::string state;
  for (int i = 0; i < 100 && state != "ready"; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    state = Call("GET", "/v1/sandboxes/slow").Json().value("state", "");
  }
  EXPECT_EQ(state, "ready");
}

TEST_F(DaemonApiTest, BootFailureLeavesAFailedSandboxAndFreesCapacity) {
  daemon_->vmm().FailStartVm(absl::UnavailableError("qemu exploded"));
  Response r = Call("POST", "/v1/sandboxes", R"({"name":"doomed"})");
  EXPECT_EQ(r.status, 503) << r.body;
  EXPECT_THAT(r.body, HasSubstr("qemu exploded"));
  Response got = Call("GET", "/v1/sandboxes/doomed");
  EXPECT_EQ(got.Json()["state"], "failed");
  EXPECT_EQ(daemon_->ledger().Usage().cpus, 0);
  EXPECT_EQ(Call("DELETE", "/v1/sandboxes/doomed").status, 204);
}

TEST_F(DaemonApiTest, RestartReattachesAndReportsTheInterruptedExec) {
  std::string sb = CreateSandbox(R"({"name":"keep"})");
  std::string exec = StartExec(sb, {{"argv", {"sleep", "100"}}});
  client_.reset();
  daemon_->Shutdown();
  daemon_.reset();  // the old one lets go of the socket lock before the new one takes it
  daemon_ = std::make_unique<testing::TestDaemon>(dir_.path(), budget_);
  daemon_->Start();
  client_ = daemon_->Connect();
  Response got = Call("GET", "/v1/sandboxes/keep");
  EXPECT_EQ(got.Json()["state"], "ready") << got.body;
  nlohmann::json old = Call("GET", "/v1/sandboxes/keep/execs/" + exec).Json();
  EXPECT_EQ(old["state"], "interrupted");
  EXPECT_THAT(old.value("error", ""), HasSubstr("aboxd stopped"));
  std::string next = StartExec(sb, {{"argv", {"echo", "still here"}}});
  EXPECT_EQ(Joined(ReadOutput(sb, next), "stdout"), "still here\n");
  EXPECT_EQ(daemon_->ledger().Usage().cpus, 1);
}

TEST_F(DaemonApiTest, RestartMarksASandboxWhoseVmDiedAsFailed) {
  std::string sb = CreateSandbox();
  client_.reset();
  daemon_->Shutdown();
  ASSERT_TRUE(abox::testing::FakeVmm::Crash(sb).ok());
  daemon_.reset();  // the old one lets go of the socket lock before the new one takes it
  daemon_ = std::make_unique<testing::TestDaemon>(dir_.path(), budget_);
  daemon_->Start();
  client_ = daemon_->Connect();
  nlohmann::json got = Call("GET", "/v1/sandboxes/" + sb).Json();
  EXPECT_EQ(got["state"], "failed");
  EXPECT_THAT(got.value("failure", ""), HasSubstr("died while aboxd was not running"));
  EXPECT_FALSE(std::filesystem::exists(dir_.path() + "/sandboxes/" + sb));
}

// A restore or resume the previous aboxd started and died before it recorded: its VM ("<id>.<n>")
// is nobody's and goes at the next start. A VM of an id without a record (`abox run --direct`)
// is not aboxd's and stays.
TEST_F(DaemonApiTest, RestartKillsAVmOfAKnownSandboxThatNoRecordNames) {
  std::string sb = CreateSandbox();
  client_.reset();
  daemon_->Shutdown();
  abox::testing::FakeVmm fake;
  auto start = [&](const std::string& id) {
    abox::vmm::VmSpec spec;
    spec.id = id;
    spec.run_dir = dir_.path() + "/sandboxes/" + id;
    spec.tie_to_caller = false;
    absl::StatusOr<std::unique_ptr<abox::vmm::Vm>> vm = fake.StartVm(spec);
    EXPECT_TRUE(vm.ok()) << vm.status();
    if (vm.ok()) {
      (void)(*vm)->Detach();
    }
    return spec.run_dir;
  };
  std::string orphan = start(sb + ".1");
  std::string direct = start("0123456789ab");
  daemon_.reset();  // the old one lets go of the socket lock before the new one takes it
  daemon_ = std::make_unique<testing::TestDaemon>(dir_.path(), budget_);
  daemon_->Start();
  client_ = daemon_->Connect();

  EXPECT_FALSE(abox::testing::FakeVmm::Find(orphan).has_value()) << "the orphan VM runs on";
  EXPECT_FALSE(std::filesystem::exists(orphan));
  EXPECT_TRUE(abox::testing::FakeVmm::Find(direct).has_value());
  EXPECT_EQ(Call("GET", "/v1/sandboxes/" + sb).Json()["state"], "ready");
  std::string exec = StartExec(sb, {{"argv", {"echo", "still here"}}});
  EXPECT_EQ(Joined(ReadOutput(sb, exec), "stdout"), "still here\n");
}

TEST_F(DaemonApiTest, AVmThatDiesFailsTheSandboxAndItsExecs) {
  std::string sb = CreateSandbox();
  std::string exec = StartExec(sb, {{"argv", {"sleep", "100"}}});
  ASSERT_TRUE(abox::testing::FakeVmm::Crash(sb, "killed by signal 9").ok());
  nlohmann::json done = Wait(sb, exec);
  EXPECT_EQ(done["state"], "interrupted");
  for (int i = 0; i < 100; ++i) {
    if (Call("GET", "/v1/sandboxes/" + sb).Json()["state"] == "failed") {
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  nlohmann::json got = Call("GET", "/v1/sandboxes/" + sb).Json();
  EXPECT_EQ(got["state"], "failed");
  EXPECT_THAT(got.value("failure", ""), HasSubstr("killed by signal 9"));
  EXPECT_EQ(daemon_->ledger().Usage().cpus, 0);
}

TEST_F(DaemonApiTest, EventsStreamLifecycleWithReplay) {
  std::string sb = CreateSandbox();
  std::string exec = StartExec(sb, {{"argv", {"true"}}});
  Wait(sb, exec);
  auto events = daemon_->Connect();
  ASSERT_TRUE(events->Send("GET", "/v1/events?since=0&sandbox=" + sb, "").ok());
  absl::StatusOr<Response> head = events->ReadHeader();
  ASSERT_TRUE(head.ok());
  EXPECT_EQ(head->Header("Content-Type").value_or(""), "text/event-stream");
  absl::StatusOr<std::string> seen = events->ReadUntil("event: exec_finished");
  ASSERT_TRUE(seen.ok()) << seen.status();
  for (const char* type : {"event: created", "event: ready", "event: exec_started"}) {
    EXPECT_THAT(*seen, HasSubstr(type));
  }
  // Live: removing the sandbox arrives on the open stream.
  EXPECT_EQ(Call("DELETE", "/v1/sandboxes/" + sb + "?force=1").status, 204);
  absl::StatusOr<std::string> live = events->ReadUntil("event: removed");
  ASSERT_TRUE(live.ok()) << live.status();
  EXPECT_THAT(*live, HasSubstr("event: stopped"));
}

TEST_F(DaemonApiTest, TenExecsInParallelAcrossThreeSandboxes) {
  std::vector<std::string> boxes = {CreateSandbox(), CreateSandbox(), CreateSandbox()};
  std::vector<std::thread> threads;
  std::vector<std::string> outputs(10);
  for (int i = 0; i < 10; ++i) {
    threads.emplace_back([&, i] {
      const std::string& sb = boxes[i % 3];
      auto c = daemon_->Connect();
      nlohmann::json body = {{"shell", absl::StrCat("sleep 0.2; echo exec-", i)}};
      absl::StatusOr<Response> started =
          c->Request("POST", "/v1/sandboxes/" + sb + "/execs", body.dump());
      ASSERT_TRUE(started.ok());
      ASSERT_EQ(started->status, 201) << started->body;
      std::vector<nlohmann::json> lines = ReadOutput(sb, started->Json()["id"]);
      outputs[i] = Joined(lines, "stdout");
    });
  }
  for (auto& t : threads) {
    t.join();
  }
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(outputs[i], absl::StrCat("exec-", i, "\n"));
  }
}

TEST_F(DaemonApiTest, HealthVersionAndConsole) {
  Response health = Call("GET", "/v1/health");
  EXPECT_EQ(health.status, 200);
  EXPECT_EQ(health.Json()["status"], "ok");
  Response version = Call("GET", "/v1/version");
  EXPECT_EQ(version.Json()["api"], "v1");
  std::string sb = CreateSandbox();
  ASSERT_TRUE(abox::testing::FakeVmm::AppendConsole(sb, "hello from the console").ok());
  Response console = Call("GET", "/v1/sandboxes/" + sb + "/console");
  EXPECT_EQ(console.status, 200);
  EXPECT_THAT(console.body, HasSubstr("hello from the console"));
}

}  // namespace
}  // namespace abox::daemon
