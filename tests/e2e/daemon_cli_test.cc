// The abox CLI as a client of aboxd, end to end: auto-start, create, exec (stdin, separate
// stdout/stderr, exit code, PTY, out of memory), ls, inspect, logs, stop, rm, events, daemon
// stop/status.
#include <signal.h>

#include <chrono>
#include <cstdlib>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "src/base/child_process.h"
#include "tests/testing/abox_runner.h"
#include "tests/testing/aboxd_process.h"

namespace abox::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

class DaemonCliTest : public ::testing::Test {
 protected:
  void TearDown() override {
    // Whatever is left: removed through the CLI, then the daemon stopped.
    RemoveAllSandboxes([this](std::vector<std::string> args) { return Abox(std::move(args)); });
    Abox({"daemon", "stop"});
  }

  AboxResult Abox(std::vector<std::string> args, std::string stdin_data = "") {
    AboxCall call;
    call.args = std::move(args);
    call.stdin_data = std::move(stdin_data);
    call.env = home_.Env();
    call.timeout_seconds = 180;
    return RunAbox(call);
  }

  DaemonHome home_;
};

TEST_F(DaemonCliTest, SandboxLifecycleThroughTheCli) {
  // No daemon yet: the first command starts one.
  AboxResult created = Abox({"create", "--name", "cli-box", "-l", "team=blue", "--ttl", "1h"});
  ASSERT_EQ(created.exit_code, 0) << created.err;
  std::string id(absl::StripAsciiWhitespace(created.out));
  EXPECT_EQ(id.size(), 12u) << created.out;

  // exec: separate streams, the exit code, stdin; by name and by id prefix.
  AboxResult exec = Abox({"exec", "cli-box", "--", "sh", "-c", "echo out; echo err >&2; exit 4"});
  EXPECT_EQ(exec.exit_code, 4) << exec.err;
  EXPECT_EQ(exec.out, "out\n");
  EXPECT_THAT(exec.err, HasSubstr("err\n"));
  EXPECT_THAT(exec.err, Not(HasSubstr("out")));
  AboxResult counted = Abox({"exec", id.substr(0, 5), "--", "wc", "-c"}, std::string(70000, 'z'));
  EXPECT_EQ(counted.exit_code, 0) << counted.err;
  EXPECT_EQ(counted.out, "70000\n");
  AboxResult missing = Abox({"exec", "cli-box", "--", "no-such-command"});
  EXPECT_EQ(missing.exit_code, 127) << missing.err;

  // ls: table and JSON; inspect; logs with the exec history.
  AboxResult table = Abox({"ls"});
  EXPECT_EQ(table.exit_code, 0) << table.err;
  EXPECT_THAT(table.out, HasSubstr("cli-box"));
  EXPECT_THAT(table.out, HasSubstr("team=blue"));
  AboxResult json = Abox({"ls", "--json", "-l", "team=blue"});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  nlohmann::json list = nlohmann::json::parse(json.out);
  ASSERT_EQ(list["sandboxes"].size(), 1u);
  EXPECT_EQ(list["sandboxes"][0]["id"], id);
  AboxResult inspect = Abox({"inspect", "--json", "cli-box"});
  ASSERT_EQ(inspect.exit_code, 0) << inspect.err;
  EXPECT_EQ(nlohmann::json::parse(inspect.out)["state"], "ready");
  AboxResult logs = Abox({"logs", "cli-box"});
  EXPECT_EQ(logs.exit_code, 0) << logs.err;
  EXPECT_THAT(logs.out, HasSubstr("echo out; echo err >&2; exit 4"));

  // Errors a user meets: an unknown id, rm of a running sandbox without -f.
  AboxResult unknown = Abox({"inspect", "nosuchbox"});
  EXPECT_NE(unknown.exit_code, 0);
  EXPECT_THAT(unknown.err, HasSubstr("nosuchbox"));
  AboxResult refused = Abox({"rm", "cli-box"});
  EXPECT_NE(refused.exit_code, 0);
  EXPECT_THAT(refused.err, HasSubstr("-f"));

  // stop keeps the record (ls -a), rm removes it; events saw it all.
  EXPECT_EQ(Abox({"stop", "cli-box"}).exit_code, 0);
  EXPECT_THAT(Abox({"ls"}).out, Not(HasSubstr("cli-box")));
  EXPECT_THAT(Abox({"ls", "-a"}).out, HasSubstr("stopped"));
  EXPECT_EQ(Abox({"rm", "cli-box"}).exit_code, 0);
  EXPECT_EQ(Abox({"ls", "-a", "-q"}).out, "");
  AboxCall events;
  events.args = {"events", "--since", "0", "--json"};
  events.env = home_.Env();
  events.when_output = "\"removed\"";
  events.on_output = [](pid_t pid) { ::kill(pid, SIGINT); };
  events.timeout_seconds = 30;
  AboxResult seen = RunAbox(events);
  for (const char* type :
       {"created", "ready", "exec_started", "exec_finished", "stopped", "removed"}) {
    EXPECT_THAT(seen.out, HasSubstr(absl::StrCat("\"", type, "\""))) << seen.out;
  }

  // daemon status / stop.
  AboxResult status = Abox({"daemon", "status"});
  EXPECT_EQ(status.exit_code, 0) << status.err;
  EXPECT_EQ(Abox({"daemon", "stop"}).exit_code, 0);
  AboxCall no_autostart;
  no_autostart.args = {"ls"};
  no_autostart.env = home_.Env();
  no_autostart.env["ABOX_NO_AUTOSTART"] = "1";
  AboxResult down = RunAbox(no_autostart);
  EXPECT_NE(down.exit_code, 0);
  EXPECT_THAT(down.err, HasSubstr("abox daemon start"));
}

TEST_F(DaemonCliTest, ExecWithATerminal) {
  AboxResult created = Abox({"create", "--name", "tty-box"});
  ASSERT_EQ(created.exit_code, 0) << created.err;
  // `script` gives abox a terminal of 33x101, as a person's would be.
  std::vector<std::string> argv = {"env"};
  for (const auto& [k, v] : home_.Env()) {
    argv.push_back(absl::StrCat(k, "=", v));
  }
  std::string command = absl::StrCat("stty rows 33 cols 101; ", AboxBin(),
                                     " exec -t tty-box -- sh -c 'tty; stty size; exit 3'");
  argv.insert(argv.end(), {"script", "-qec", command, "/dev/null"});
  absl::StatusOr<base::CommandResult> r = base::RunCommand(argv);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->status.ShellCode(), 3) << r->out << r->err;
  EXPECT_THAT(r->out, HasSubstr("/dev/pts/"));
  EXPECT_THAT(r->out, HasSubstr("33 101"));
}

// Issue 11 item 16: "start `abox exec -- yes`, kill -9 the client" left `yes` running in the
// guest for ever when the client died before it attached to the output. Killed at any moment
// (before, during or after the attach), the client takes its command with it.
TEST_F(DaemonCliTest, CommandsDieWithTheirKilledClient) {
  AboxResult created = Abox({"create", "--name", "orphans"});
  ASSERT_EQ(created.exit_code, 0) << created.err;
  std::vector<std::string> env;
  for (const auto& [k, v] : home_.Env()) {
    env.push_back(absl::StrCat(k, "=", v));
  }
  for (const char* key : {"PATH", "HOME"}) {
    if (const char* value = std::getenv(key); value != nullptr) {  // NOLINT(concurrency-mt-unsafe)
      env.push_back(absl::StrCat(key, "=", value));
    }
  }
  constexpr int kRounds = 16;
  for (int round = 0; round < kRounds; ++round) {
    base::SpawnOptions options;
    options.argv = {AboxBin(), "exec", "--no-stdin", "orphans", "--", "yes"};
    options.env = env;
    absl::StatusOr<base::ChildProcess> client = base::ChildProcess::Spawn(options);
    ASSERT_TRUE(client.ok()) << client.status();
    // From at once, through the create in flight (the guest starting the command), to after
    // the attach.
    std::this_thread::sleep_for(std::chrono::milliseconds(round * 25));
    ASSERT_TRUE(client->Kill(SIGKILL).ok());
    ASSERT_TRUE(client->Wait(std::chrono::milliseconds(10000)).ok());
  }
  // Past the attach deadline (10 s): no `yes` is left in the guest. (Before the fix, one in
  // 16 or so was: its reader was dropped by a failed write, and the Detach then killed none.)
  std::this_thread::sleep_for(std::chrono::seconds(12));
  AboxResult counted = Abox(
      {"exec", "orphans", "--", "sh", "-c", "cat /proc/[0-9]*/comm 2>/dev/null | grep -cx yes"});
  EXPECT_EQ(absl::StripAsciiWhitespace(counted.out), "0") << counted.err;
}

// Issue 19: `tail /dev/zero` used to end with 137 and no word. A command the guest's OOM killer
// ends is said to have died for lack of memory, with the sandbox's size and how to give it
// more; one that survives the OOM kill of one of its processes gets the count; the exit codes
// stay the commands' own; the exec's record keeps it.
TEST_F(DaemonCliTest, OutOfMemoryIsSaidPlainly) {
  AboxResult created = Abox({"create", "--name", "small", "--memory", "256"});
  ASSERT_EQ(created.exit_code, 0) << created.err;

  AboxResult oom = Abox({"exec", "--no-stdin", "small", "--", "tail", "/dev/zero"});
  EXPECT_EQ(oom.exit_code, 128 + SIGKILL) << oom.err;
  EXPECT_THAT(oom.err, HasSubstr("abox: the command was killed for lack of memory (the sandbox "
                                 "has 256 MiB; give it more with --memory MIB, e.g. abox create "
                                 "--memory 512)"))
      << oom.err;

  AboxResult survived = Abox(
      {"exec", "--no-stdin", "small", "--", "sh", "-c", "tail /dev/zero; echo tail ended with $?"});
  EXPECT_EQ(survived.exit_code, 0) << survived.err;
  EXPECT_THAT(survived.out, HasSubstr("tail ended with 137"));
  EXPECT_THAT(survived.err, HasSubstr("abox: the OOM killer ended "));
  EXPECT_THAT(survived.err, HasSubstr("during this command (the sandbox has 256 MiB"));

  // A SIGKILL that is not the OOM killer's is only 137.
  AboxResult killed = Abox({"exec", "--no-stdin", "small", "--", "sh", "-c", "kill -KILL $$"});
  EXPECT_EQ(killed.exit_code, 128 + SIGKILL) << killed.err;
  EXPECT_THAT(killed.err, Not(HasSubstr("memory")));

  AboxResult logs = Abox({"logs", "small", "--execs"});
  EXPECT_EQ(logs.exit_code, 0) << logs.err;
  EXPECT_THAT(logs.out,
              HasSubstr("tail /dev/zero -> killed by SIGKILL, out of memory [OOM killer:"));
}

}  // namespace
}  // namespace abox::testing
