// What a command sees and what the host gets back: stdio separation, exit codes and signals,
// spawn errors, cwd, environment, user, stdin, timeouts, signals, background processes, PTYs,
// concurrency. Runs the real agent on a socketpair (see fake_host.h).
#include "src/guest/exec_stream.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "src/guest/exec.h"
#include "src/guest/fake_host.h"
#include "src/guest/user.h"

namespace abox::guest {
namespace {

using testing::Argv;
using testing::ExecResult;
using testing::FakeHost;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using testing::Shell;
using ::testing::StartsWith;

// A directory every user can read (commands may run as `agent` when the tests run as root).
class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/abox-guest-test-XXXXXX";
    path_ = ::mkdtemp(tmpl);
    ::chmod(path_.c_str(), 0755);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  [[nodiscard]] const std::string& path() const { return path_; }
  std::string Write(const std::string& name, const std::string& content, mode_t mode) {
    std::string file = absl::StrCat(path_, "/", name);
    std::ofstream(file) << content;
    ::chmod(file.c_str(), mode);
    return file;
  }

 private:
  std::string path_;
};

void ExpectClean(const ExecResult& r) {
  EXPECT_THAT(r.problems, IsEmpty());
  EXPECT_FALSE(r.reset) << *r.reset;
  ASSERT_TRUE(r.exit);
}

class ExecTest : public ::testing::Test {
 protected:
  void SetUp() override { host_.Handshake(); }
  FakeHost host_;
};

TEST_F(ExecTest, SeparatesStdoutAndStderr) {
  ExecResult r = host_.Run(Shell("echo out; echo err >&2; echo out2"));
  ExpectClean(r);
  EXPECT_EQ(r.out, "out\nout2\n");
  EXPECT_EQ(r.err, "err\n");
  EXPECT_EQ(r.exit->exit_code, 0);
  EXPECT_FALSE(r.exit->signal);
  EXPECT_FALSE(r.exit->timed_out);
  EXPECT_THAT(r.exit->error, IsEmpty());
  EXPECT_GT(r.exit->duration_us, 0u);
}

TEST_F(ExecTest, RunsArgvWithPathSearch) {
  ExecResult r = host_.Run(Argv({"echo", "hello", "two words", "$HOME"}));
  ExpectClean(r);
  EXPECT_EQ(r.out, "hello two words $HOME\n");
}

TEST_F(ExecTest, ReportsExitCodes) {
  for (int code : {0, 1, 3, 255}) {
    ExecResult r = host_.Run(Shell(absl::StrCat("exit ", code)));
    ExpectClean(r);
    EXPECT_EQ(r.exit->exit_code, code);
  }
}

TEST_F(ExecTest, ReportsDeathBySignal) {
  ExecResult r = host_.Run(Shell("kill -TERM $$"));
  ExpectClean(r);
  EXPECT_FALSE(r.exit->exit_code);
  EXPECT_EQ(r.exit->signal, 15);
  EXPECT_EQ(r.exit->ShellCode(), 143);
}

TEST_F(ExecTest, CommandNotFoundIs127) {
  ExecResult r = host_.Run(Argv({"abox-no-such-command", "x"}));
  ExpectClean(r);
  EXPECT_EQ(r.exit->exit_code, 127);
  EXPECT_EQ(r.exit->error, "abox-no-such-command: command not found");
  EXPECT_THAT(r.out, IsEmpty());
  EXPECT_THAT(r.err, IsEmpty());
}

TEST_F(ExecTest, MissingPathIs127WithReason) {
  ExecResult r = host_.Run(Argv({"/nonexistent/tool"}));
  ExpectClean(r);
  EXPECT_EQ(r.exit->exit_code, 127);
  EXPECT_EQ(r.exit->error, "/nonexistent/tool: No such file or directory");
}

TEST_F(ExecTest, NotExecutableIs126WithReason) {
  TempDir dir;
  std::string file = dir.Write("data.txt", "not a program\n", 0644);
  ExecResult r = host_.Run(Argv({file}));
  ExpectClean(r);
  EXPECT_EQ(r.exit->exit_code, 126);
  EXPECT_EQ(r.exit->error, absl::StrCat(file, ": Permission denied"));
}

TEST_F(ExecTest, NotExecutableInPathIs126) {
  TempDir dir;
  dir.Write("tool", "echo hi\n", 0644);
  proto::ExecRequest req = Argv({"tool"});
  req.env["PATH"] = dir.path();
  ExecResult r = host_.Run(req);
  ExpectClean(r);
  EXPECT_EQ(r.exit->exit_code, 126);
  EXPECT_EQ(r.exit->error, "tool: Permission denied");
}

TEST_F(ExecTest, ScriptWithoutShebangRunsInSh) {
  TempDir dir;
  std::string file = dir.Write("script", "echo from script \"$1\"\n", 0755);
  ExecResult r = host_.Run(Argv({file, "arg"}));
  ExpectClean(r);
  EXPECT_EQ(r.exit->exit_code, 0);
  EXPECT_EQ(r.out, "from script arg\n");
}

TEST_F(ExecTest, RunsInTheRequestedDirectory) {
  TempDir dir;
  proto::ExecRequest req = Argv({"pwd"});
  req.cwd = dir.path();
  ExecResult r = host_.Run(req);
  ExpectClean(r);
  EXPECT_EQ(r.out, dir.path() + "\n");
}

TEST_F(ExecTest, DefaultDirectoryIsTheHomeOrRoot) {
  ExecResult r = host_.Run(Shell("pwd; echo $HOME"));
  ExpectClean(r);
  std::vector<std::string> lines = absl::StrSplit(r.out, '\n');
  ASSERT_GE(lines.size(), 2u);
  struct stat st {};
  bool home_exists = ::stat(lines[1].c_str(), &st) == 0 && S_ISDIR(st.st_mode);
  EXPECT_EQ(lines[0], home_exists ? lines[1] : "/");
}

TEST_F(ExecTest, MissingDirectoryIs126WithReason) {
  proto::ExecRequest req = Argv({"true"});
  req.cwd = "/nonexistent/dir";
  ExecResult r = host_.Run(req);
  ExpectClean(r);
  EXPECT_EQ(r.exit->exit_code, 126);
  EXPECT_EQ(r.exit->error, "cwd /nonexistent/dir: No such file or directory");
}

TEST_F(ExecTest, SetsTheBaseEnvironmentPlusTheRequest) {
  proto::ExecRequest req = Argv({"env"});
  req.env = {{"FOO", "bar baz"}, {"LANG", "en_US.UTF-8"}};
  ExecResult r = host_.Run(req);
  ExpectClean(r);
  EXPECT_THAT(r.out, HasSubstr(absl::StrCat("PATH=", kDefaultPath, "\n")));
  EXPECT_THAT(r.out, HasSubstr("FOO=bar baz\n"));
  EXPECT_THAT(r.out, HasSubstr("LANG=en_US.UTF-8\n"));  // The request wins.
  EXPECT_THAT(r.out, HasSubstr("HOME="));
  EXPECT_THAT(r.out, HasSubstr("USER="));
  EXPECT_THAT(r.out, HasSubstr("LOGNAME="));
  EXPECT_THAT(r.out, HasSubstr("SHELL="));
  EXPECT_THAT(r.out, ::testing::Not(HasSubstr("TERM=")));  // Only with a PTY.
  for (const char* name : {"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"}) {
    EXPECT_THAT(r.out, HasSubstr(absl::StrCat(name, "=http://127.0.0.1:3128\n")));
  }
  EXPECT_THAT(r.out, HasSubstr("NO_PROXY=localhost,127.0.0.1,::1\n"));
  EXPECT_THAT(r.out, HasSubstr("no_proxy=localhost,127.0.0.1,::1\n"));
  // Nothing leaks from the agent's own environment.
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 13);
}

TEST_F(ExecTest, RunsAsTheRequestedUser) {
  ExecResult agent = host_.Run(Shell("id -u; id -g"));
  ExecResult root = [&] {
    proto::ExecRequest req = Shell("id -u");
    req.user = "root";
    return host_.Run(req);
  }();
  ExpectClean(agent);
  ExpectClean(root);
  if (::geteuid() != 0) {
    // Not root: no switching, commands run as we do.
    EXPECT_EQ(agent.out, absl::StrCat(::getuid(), "\n", ::getgid(), "\n"));
    EXPECT_EQ(root.out, absl::StrCat(::getuid(), "\n"));
    return;
  }
  Identity expected = LookUpIdentity("agent");
  EXPECT_NE(expected.uid, 0u);
  EXPECT_EQ(agent.out, absl::StrCat(expected.uid, "\n", expected.gid, "\n"));
  EXPECT_EQ(root.out, "0\n");
}

TEST_F(ExecTest, StreamsStdinThroughWc) {
  proto::ExecRequest req = Argv({"wc", "-c"});
  req.stdin_open = true;
  ExecResult r = host_.Run(req, std::string(5 << 20, 'x'));
  ExpectClean(r);
  EXPECT_EQ(absl::StripAsciiWhitespace(r.out), "5242880");
}

TEST_F(ExecTest, CatEchoesStdinExactly) {
  std::string data;
  for (int i = 0; data.size() < (3 << 20); ++i) {
    absl::StrAppend(&data, "line ", i, " ", std::string(i % 97, 'a' + i % 26), "\n");
  }
  proto::ExecRequest req = Argv({"cat"});
  req.stdin_open = true;
  ExecResult r = host_.Run(req, data);
  ExpectClean(r);
  EXPECT_EQ(r.exit->exit_code, 0);
  EXPECT_TRUE(r.out == data) << "output differs (" << r.out.size() << " vs " << data.size()
                             << " bytes)";
}

TEST_F(ExecTest, StdinIsDevNullUnlessOpened) {
  ExecResult r = host_.Run(Shell("cat; readlink /proc/self/fd/0"));
  ExpectClean(r);
  EXPECT_EQ(r.out, "/dev/null\n");
}

TEST_F(ExecTest, CommandThatClosesStdinEarlyDoesNotStallTheHost) {
  proto::ExecRequest req = Shell("head -c 10 >/dev/null; exec 0<&-; sleep 0.2; echo done");
  req.stdin_open = true;
  ExecResult r = host_.Run(req, std::string(2 << 20, 'y'));
  ExpectClean(r);
  EXPECT_EQ(r.out, "done\n");
}

TEST_F(ExecTest, TimeoutKillsTheWholeGroup) {
  proto::ExecRequest req = Shell("sleep 100 & echo $!; sleep 100");
  req.timeout_ms = 300;
  ExecResult r = host_.Run(req);
  ExpectClean(r);
  EXPECT_TRUE(r.exit->timed_out);
  EXPECT_EQ(r.exit->signal, 9);
  int background = 0;
  ASSERT_TRUE(absl::SimpleAtoi(absl::StripAsciiWhitespace(r.out), &background)) << r.out;
  EXPECT_TRUE(testing::ProcessGone(background));
}

TEST_F(ExecTest, FinishingBeforeTheTimeoutIsNotATimeout) {
  proto::ExecRequest req = Argv({"true"});
  req.timeout_ms = 60'000;
  ExecResult r = host_.Run(req);
  ExpectClean(r);
  EXPECT_FALSE(r.exit->timed_out);
  EXPECT_EQ(r.exit->exit_code, 0);
}

// Waits for the stream's kExit, collecting stdout.
proto::ExitInfo WaitForExit(FakeHost& host, std::string* out = nullptr) {
  for (;;) {
    auto f = host.Next();
    if (!f) {
      ADD_FAILURE() << "no exit";
      return {};
    }
    if (f->header.type == proto::FrameType::kStdout && out != nullptr) {
      *out += f->payload;
    }
    if (f->header.type == proto::FrameType::kExit) {
      return *proto::DecodeExitInfo(f->payload);
    }
  }
}

TEST_F(ExecTest, SignalReachesTheProcessGroup) {
  // (SIGTERM: a non-interactive shell starts background jobs with SIGINT ignored.)
  uint32_t id = host_.Open(Shell("sleep 100 & echo $!; wait"));
  auto f = host_.Next();
  ASSERT_TRUE(f);
  ASSERT_EQ(f->header.type, proto::FrameType::kStdout);
  int background = 0;
  ASSERT_TRUE(absl::SimpleAtoi(absl::StripAsciiWhitespace(f->payload), &background));
  host_.Send(proto::FrameType::kSignal, id, 0, proto::EncodeSignal(SIGTERM));
  proto::ExitInfo exit = WaitForExit(host_);
  EXPECT_EQ(exit.signal, SIGTERM);
  EXPECT_FALSE(exit.timed_out);
  EXPECT_TRUE(testing::ProcessGone(background));
}

TEST_F(ExecTest, SignalInterruptsTheCommand) {
  uint32_t id = host_.Open(Argv({"sleep", "100"}));
  host_.Send(proto::FrameType::kSignal, id, 0, proto::EncodeSignal(SIGINT));
  proto::ExitInfo exit = WaitForExit(host_);
  EXPECT_EQ(exit.signal, SIGINT);
  EXPECT_EQ(exit.ShellCode(), 130);
}

TEST_F(ExecTest, HandledSignalLetsTheCommandExitItsWay) {
  uint32_t id =
      host_.Open(Shell("trap 'echo bye; exit 7' USR1; echo ready; while :; do sleep 0.01; done"));
  auto f = host_.Next();
  ASSERT_TRUE(f);
  ASSERT_EQ(f->payload, "ready\n");
  host_.Send(proto::FrameType::kSignal, id, 0, proto::EncodeSignal(SIGUSR1));
  std::string out;
  proto::ExitInfo exit = WaitForExit(host_, &out);
  EXPECT_EQ(exit.exit_code, 7);
  EXPECT_EQ(out, "bye\n");
}

TEST_F(ExecTest, BackgroundChildHoldingThePipesDoesNotHangTheExec) {
  ExecResult r = host_.Run(Shell("sleep 30 & echo started"));
  ExpectClean(r);
  EXPECT_EQ(r.exit->exit_code, 0);
  EXPECT_EQ(r.out, "started\n");
}

TEST_F(ExecTest, OutputWrittenJustBeforeExitIsDelivered) {
  // More than a pipe buffer is still unread when the shell exits.
  ExecResult r = host_.Run(Shell("head -c 3000000 /dev/zero | tr '\\0' x"));
  ExpectClean(r);
  EXPECT_EQ(r.out.size(), 3000000u);
}

TEST_F(ExecTest, PtyMergesOutputAndSetsTheTerminal) {
  proto::ExecRequest req = Shell("tty; stty size; echo err >&2; echo $TERM");
  req.pty = proto::PtySize{33, 111};
  ExecResult r = host_.Run(req);
  ExpectClean(r);
  EXPECT_EQ(r.exit->exit_code, 0);
  EXPECT_THAT(r.out, StartsWith("/dev/pts/"));
  EXPECT_THAT(r.out, HasSubstr("33 111\r\n"));
  EXPECT_THAT(r.out, HasSubstr("err\r\n"));
  EXPECT_THAT(r.out, HasSubstr("xterm-256color\r\n"));
  EXPECT_THAT(r.err, IsEmpty());
  EXPECT_TRUE(r.err_eof);
}

TEST_F(ExecTest, PtyResizeAndInput) {
  proto::ExecRequest req = Shell("read line; stty size; echo \"got $line\"");
  req.pty = proto::PtySize{24, 80};
  req.stdin_open = true;
  uint32_t id = host_.Open(req);
  host_.Send(proto::FrameType::kResize, id, 0, proto::EncodeResize({50, 132}));
  host_.Send(proto::FrameType::kStdin, id, 0, "hello\n");
  std::string out;
  std::optional<proto::ExitInfo> exit;
  while (!exit) {
    auto f = host_.Next();
    ASSERT_TRUE(f);
    if (f->header.type == proto::FrameType::kStdout) {
      out += f->payload;
    } else if (f->header.type == proto::FrameType::kExit) {
      exit = *proto::DecodeExitInfo(f->payload);
    }
  }
  EXPECT_EQ(exit->exit_code, 0);
  EXPECT_THAT(out, HasSubstr("50 132\r\n"));
  EXPECT_THAT(out, HasSubstr("got hello\r\n"));
}

TEST_F(ExecTest, RunsEightCommandsConcurrently) {
  std::vector<FakeHost::Job> jobs;
  for (int i = 0; i < 8; ++i) {
    proto::ExecRequest req = Shell(absl::StrCat("yes ", i, " | head -c 600000; echo e", i, " >&2"));
    if (i % 2 == 1) {
      req = Argv({"cat"});
      req.stdin_open = true;
      jobs.push_back({req, std::string(700000, static_cast<char>('a' + i))});
    } else {
      jobs.push_back({req, ""});
    }
  }
  std::vector<ExecResult> results = host_.RunAll(jobs);
  ASSERT_EQ(results.size(), 8u);
  for (int i = 0; i < 8; ++i) {
    SCOPED_TRACE(i);
    ExpectClean(results[i]);
    EXPECT_EQ(results[i].exit->exit_code, 0);
    if (i % 2 == 1) {
      EXPECT_TRUE(results[i].out == jobs[i].stdin_data);
    } else {
      EXPECT_EQ(results[i].out.size(), 600000u);
      EXPECT_EQ(results[i].out.substr(0, 4), absl::StrCat(i, "\n", i, "\n"));
      EXPECT_EQ(results[i].err, absl::StrCat("e", i, "\n"));
    }
  }
}

// BuildSpawnSpec without spawning.
TEST(BuildSpawnSpecTest, ShellRunsThroughBinSh) {
  Identity id{"agent", 1000, 1000, {1000}, "/home/agent", "/bin/bash"};
  SpawnSpec spec = BuildSpawnSpec(Shell("echo hi | wc"), id, true);
  EXPECT_THAT(spec.argv, ::testing::ElementsAre("/bin/sh", "-c", "echo hi | wc"));
  ASSERT_TRUE(spec.switch_to);
  EXPECT_EQ(spec.switch_to->uid, 1000u);
}

TEST(BuildSpawnSpecTest, RelativeCwdIsUnderHomeAndPathFollowsTheRequest) {
  Identity id{"agent", 1000, 1000, {1000}, "/home/agent", "/bin/bash"};
  proto::ExecRequest req = Argv({"ls"});
  req.cwd = "src/x";
  req.env["PATH"] = "/opt/bin";
  req.pty = proto::PtySize{};
  SpawnSpec spec = BuildSpawnSpec(req, id, false);
  EXPECT_EQ(spec.cwd, "/home/agent/src/x");
  EXPECT_EQ(spec.path, "/opt/bin");
  EXPECT_FALSE(spec.switch_to);
  EXPECT_THAT(spec.env, ::testing::Contains("TERM=xterm-256color"));
  EXPECT_THAT(spec.env, ::testing::Contains("PATH=/opt/bin"));
  EXPECT_THAT(spec.env, ::testing::Contains("SHELL=/bin/bash"));
  EXPECT_THAT(spec.env, ::testing::Contains("USER=agent"));
}

}  // namespace
}  // namespace abox::guest
