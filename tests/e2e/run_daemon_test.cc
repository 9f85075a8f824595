// `abox run` through aboxd (issue 13: "every later create, `abox run` included, restores from
// the golden snapshot"): the run's sandbox is a clone of the template, the command behaves like
// `abox exec` (exit code, stdout and stderr apart, stdin, the workspace copy), the sandbox is
// removed when the command ends, and what a killed run leaves behind is removed by the next one.
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/testing/abox_runner.h"
#include "tests/testing/aboxd_process.h"
#include "tests/testing/cli_home_test.h"

namespace abox::testing {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

class RunThroughDaemonTest : public CliHomeTest {
 protected:
  // `abox run ARGS...` the default way (the test homes set ABOX_RUN_DIRECT=1 for the others).
  AboxCall RunCall(std::vector<std::string> args) {
    AboxCall call;
    call.args = {"run"};
    call.args.insert(call.args.end(), args.begin(), args.end());
    call.env = home_.Env();
    call.env["ABOX_RUN_DIRECT"] = "";
    call.timeout_seconds = 240;
    return call;
  }

  // Every sandbox aboxd has, in any state.
  std::vector<nlohmann::json> Sandboxes() {
    AboxResult r = Abox({"ls", "-a", "--json"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    nlohmann::json j = nlohmann::json::parse(r.out, nullptr, false);
    std::vector<nlohmann::json> out;
    if (j.is_object() && j["sandboxes"].is_array()) {
      out.assign(j["sandboxes"].begin(), j["sandboxes"].end());
    }
    return out;
  }
};

TEST_F(RunThroughDaemonTest, RunsInACloneOfTheGoldenSnapshotAndRemovesItsSandbox) {
  fs::path dir = fs::path(home_.path()) / "project";
  fs::create_directories(dir);
  std::ofstream(dir / "input.txt") << "from the host\n";

  // The first run makes the template; the second is a clone of it.
  AboxResult first = RunAbox(RunCall({"--", "true"}));
  ASSERT_EQ(first.exit_code, 0) << first.err;
  AboxCall call = RunCall({"-w", dir.string(), "-e", "FOO=bar", "--", "sh", "-c",
                           "cat input.txt; echo $FOO; cat; echo to-err >&2; exit 3"});
  call.stdin_data = "piped\n";
  AboxResult second = RunAbox(call);
  EXPECT_EQ(second.exit_code, 3) << second.err;
  EXPECT_EQ(second.out, "from the host\nbar\npiped\n");
  EXPECT_THAT(second.err, HasSubstr("to-err"));
  EXPECT_THAT(second.err, ::testing::Not(HasSubstr("from the host")));

  // Both sandboxes were aboxd's and are gone; the second came from the golden snapshot.
  EXPECT_THAT(Sandboxes(), IsEmpty());
  // The events so far (aboxd replays them at once; the stream then follows and is ended).
  AboxResult listed = RunAbox([&] {
    AboxCall c;
    c.args = {"events", "--since", "0", "--json"};
    c.env = home_.Env();
    c.when_output = "removed";
    c.on_output = [](pid_t pid) {
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
      ::kill(pid, SIGINT);
    };
    c.timeout_seconds = 30;
    return c;
  }());
  std::vector<std::string> started_from;
  for (absl::string_view line : absl::StrSplit(listed.out, '\n', absl::SkipEmpty())) {
    nlohmann::json e = nlohmann::json::parse(line, nullptr, false);
    if (e.is_object() && e.value("type", "") == "ready") {
      started_from.push_back(e["payload"].value("started_from", ""));
    }
  }
  ASSERT_EQ(started_from.size(), 2u) << listed.out;
  EXPECT_EQ(started_from[1], "snapshot");
}

TEST_F(RunThroughDaemonTest, TheNextRunRemovesWhatAKilledRunLeft) {
  // A run killed with SIGKILL cannot remove its sandbox: aboxd ends its command (the client
  // is gone) and keeps the sandbox, with an idle timeout.
  AboxCall call = RunCall({"--", "sh", "-c", "echo started; exec sleep 300"});
  call.when_output = "started";
  call.on_output = [](pid_t pid) { ::kill(pid, SIGKILL); };
  AboxResult killed = RunAbox(call);
  EXPECT_EQ(killed.exit_code, 128 + SIGKILL);
  std::vector<nlohmann::json> left = Sandboxes();
  ASSERT_EQ(left.size(), 1u);
  std::string id = left[0].value("id", "");
  EXPECT_EQ(left[0]["labels"].value("abox.run", ""), "1");
  EXPECT_EQ(left[0].value("idle_timeout_seconds", 0), 60);
  // Its idle timeout stops it (here: a stop, to not wait 60 s); the next run removes it.
  ASSERT_EQ(Abox({"stop", id}).exit_code, 0);
  AboxResult next = RunAbox(RunCall({"--no-stdin", "--", "true"}));
  EXPECT_EQ(next.exit_code, 0) << next.err;
  EXPECT_THAT(Sandboxes(), IsEmpty());

  // A sandbox of the person's own, stopped, is not a run's: it stays.
  std::string mine = Create();
  ASSERT_EQ(Abox({"stop", mine}).exit_code, 0);
  ASSERT_EQ(RunAbox(RunCall({"--no-stdin", "--", "true"})).exit_code, 0);
  ASSERT_EQ(Sandboxes().size(), 1u);
  EXPECT_EQ(Sandboxes()[0].value("id", ""), mine);

  // --direct refuses what only aboxd can give.
  AboxResult direct = RunAbox(RunCall({"--direct", "--allow", "pypi.org", "--", "true"}));
  EXPECT_EQ(direct.exit_code, 2);
  EXPECT_THAT(direct.err, HasSubstr("drop --direct"));
}

}  // namespace
}  // namespace abox::testing
