#include "src/cli/exit_status.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "src/api/errors.h"

namespace abox::cli {
namespace {

using nlohmann::json;
using ::testing::ElementsAre;
using ::testing::IsEmpty;

// An exec as the CLI gets it: the API's JSON decoded by the api codec.
api::Exec Exec(const json& j) {
  absl::StatusOr<api::Exec> e = api::DecodeExec(j);
  EXPECT_TRUE(e.ok()) << e.status();
  return e.ok() ? *e : api::Exec{};
}

TEST(ReportCommandEndTest, ExitCodeSignalAndTimeout) {
  EXPECT_EQ(ReportCommandEnd({.exit_code = 42}).code, 42);
  EXPECT_THAT(ReportCommandEnd({.exit_code = 0}).messages, IsEmpty());
  EXPECT_EQ(ReportCommandEnd({.signal = 15}).code, 143);
  ExitReport timed_out = ReportCommandEnd({.signal = 9, .timed_out = true, .timeout_seconds = 2.5});
  EXPECT_EQ(timed_out.code, kExitTimeout);
  EXPECT_THAT(timed_out.messages, ElementsAre("the command timed out after 2.5s and was killed"));
  ExitReport not_found = ReportCommandEnd({.exit_code = 127, .error = "frob: command not found"});
  EXPECT_EQ(not_found.code, 127);
  EXPECT_THAT(not_found.messages, ElementsAre("frob: command not found"));
}

TEST(ReportExecEndTest, ExitedExecsKeepTheirStatus) {
  EXPECT_EQ(ReportExecEnd(Exec(json{{"state", "exited"}, {"exit_code", 3}})).code, 3);
  EXPECT_EQ(ReportExecEnd(Exec(json{{"state", "exited"}, {"signal", 2}})).code, 130);
  ExitReport timed_out = ReportExecEnd(
      Exec(json{{"state", "exited"}, {"signal", 9}, {"timed_out", true}, {"timeout_ms", 1500}}));
  EXPECT_EQ(timed_out.code, kExitTimeout);
  EXPECT_THAT(timed_out.messages, ElementsAre("the command timed out after 1.5s and was killed"));
}

TEST(ReportCommandEndTest, ACommandTheOomKillerKilledIsSaidPlainlyAndKeeps137) {
  ExitReport r = ReportCommandEnd(
      {.signal = 9, .oom_kills = 1, .memory = {.memory_mib = 512, .command = "abox create"}});
  EXPECT_EQ(r.code, 137);
  EXPECT_THAT(r.messages,
              ElementsAre("the command was killed for lack of memory (the sandbox has 512 MiB; "
                          "give it more with --memory MIB, e.g. abox create --memory 1024)"));
  // Without the sandbox's size (it could not be looked up): the advice alone.
  ExitReport unknown = ReportCommandEnd({.signal = 9, .oom_kills = 1, .memory = {}});
  EXPECT_THAT(unknown.messages,
              ElementsAre("the command was killed for lack of memory (give it more with "
                          "--memory MIB, e.g. abox create --memory 4096)"));
}

TEST(ReportCommandEndTest, OomKillsOfOtherProcessesAreCountedAndTheCodeStays) {
  ExitReport r = ReportCommandEnd(
      {.exit_code = 2, .oom_kills = 3, .memory = {.memory_mib = 2048, .command = "abox run"}});
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.messages,
              ElementsAre("the OOM killer ended 3 processes during this command (the sandbox "
                          "has 2048 MiB; give it more with --memory MIB, e.g. abox run --memory "
                          "4096)"));
  ExitReport one = ReportCommandEnd({.exit_code = 0, .oom_kills = 1, .memory = {512, "x"}});
  EXPECT_EQ(one.code, 0);
  EXPECT_THAT(
      one.messages,
      ElementsAre(::testing::StartsWith("the OOM killer ended 1 process during this command")));
  // A timeout's SIGKILL is the timeout's: both are said.
  ExitReport timed_out = ReportCommandEnd(
      {.signal = 9, .timed_out = true, .timeout_seconds = 2, .oom_kills = 1, .memory = {}});
  EXPECT_EQ(timed_out.code, kExitTimeout);
  EXPECT_THAT(timed_out.messages,
              ElementsAre("the command timed out after 2s and was killed",
                          ::testing::StartsWith("the OOM killer ended 1 process")));
  // No OOM kills, no word.
  EXPECT_THAT(ReportCommandEnd({.signal = 9, .memory = {512, "abox create"}}).messages, IsEmpty());
}

TEST(ReportExecEndTest, AnExecsOomKillsAreReportedWithTheSandboxsMemory) {
  ExitReport r = ReportExecEnd(Exec(json{{"state", "exited"}, {"signal", 9}, {"oom_kills", 1}}),
                               {.memory_mib = 768, .command = "abox run"});
  EXPECT_EQ(r.code, 137);
  EXPECT_THAT(r.messages,
              ElementsAre("the command was killed for lack of memory (the sandbox has 768 MiB; "
                          "give it more with --memory MIB, e.g. abox run --memory 1536)"));
  ExitReport make =
      ReportExecEnd(Exec(json{{"state", "exited"}, {"exit_code", 2}, {"oom_kills", 2}}));
  EXPECT_EQ(make.code, 2);
  EXPECT_THAT(
      make.messages,
      ElementsAre(::testing::HasSubstr("the OOM killer ended 2 processes during this command")));
  EXPECT_THAT(ReportExecEnd(Exec(json{{"state", "exited"}, {"signal", 9}})).messages, IsEmpty());
}

TEST(ReportExecEndTest, FailedToStartIs127Or126Or125WithTheError) {
  ExitReport not_found =
      ReportExecEnd(Exec(json{{"state", "failed"}, {"error", "frob: command not found"}}));
  EXPECT_EQ(not_found.code, kExitNotFound);
  EXPECT_THAT(not_found.messages, ElementsAre("frob: command not found"));
  EXPECT_EQ(ReportExecEnd(Exec(json{{"state", "failed"},
                                    {"error", "/nonexistent/tool: No such file or directory"}}))
                .code,
            kExitNotFound);
  EXPECT_EQ(
      ReportExecEnd(Exec(json{{"state", "failed"}, {"error", "/tmp/x: Permission denied"}})).code,
      kExitCannotRun);
  EXPECT_EQ(ReportExecEnd(Exec(json{{"state", "failed"}, {"error", "guest agent went away"}})).code,
            kExitAboxFailure);
  // A failed exec that carries the guest's own exit code keeps it.
  EXPECT_EQ(ReportExecEnd(Exec(json{{"state", "failed"}, {"exit_code", 126}, {"error", "x"}})).code,
            126);
}

TEST(ReportExecEndTest, InterruptedOrOddStatesAre125WithAReason) {
  ExitReport interrupted =
      ReportExecEnd(Exec(json{{"state", "interrupted"}, {"error", "the sandbox was stopped"}}));
  EXPECT_EQ(interrupted.code, kExitAboxFailure);
  EXPECT_THAT(interrupted.messages,
              ElementsAre("the command was interrupted: the sandbox was stopped"));
  EXPECT_EQ(ReportExecEnd(Exec(json{{"state", "interrupted"}})).messages.size(), 1u);
  EXPECT_EQ(ReportExecEnd(Exec(json{{"state", "running"}})).code, kExitAboxFailure);
  EXPECT_EQ(ReportExecEnd(api::Exec{}).code, kExitAboxFailure);
  // An answer that is not an exec at all does not get this far: it does not decode.
  EXPECT_FALSE(api::DecodeExec(json("garbage")).ok());
}

}  // namespace
}  // namespace abox::cli
