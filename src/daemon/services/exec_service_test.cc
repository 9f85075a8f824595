// ExecService alone: start, find, output and history, and the states that refuse commands.
#include "src/daemon/services/exec_service.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "src/daemon/testing/service_fixture.h"

namespace abox::daemon {
namespace {

using ::testing::HasSubstr;
using ExecServiceTest = testing::ServiceTest;

TEST_F(ExecServiceTest, AnExecIsLiveWhileItRunsAndKeepsItsOutputAfter) {
  std::string id = Ready();
  api::ExecCreate request;
  request.shell = "echo out; echo err >&2; exit 3";
  absl::StatusOr<std::shared_ptr<LiveExec>> exec = d().execs().Start(id, request);
  ASSERT_TRUE(exec.ok()) << exec.status();
  absl::StatusOr<ExecHandle> found = d().execs().Find(id, (*exec)->id());
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ(found->record.sandbox_id, id);

  store::ExecRecord ended = Ended(*exec);
  EXPECT_EQ(ended.state, store::ExecState::kExited);
  EXPECT_EQ(ended.result.exit_code, 3);
  absl::StatusOr<store::ExecWithOutput> output = d().execs().Output(ended.id);
  ASSERT_TRUE(output.ok()) << output.status();
  std::string out;
  std::string err;
  for (const store::OutputChunk& c : output->output) {
    (c.stream == store::ExecStream::kStdout ? out : err) += c.data;
  }
  EXPECT_EQ(out, "out\n");
  EXPECT_EQ(err, "err\n");
  absl::StatusOr<std::vector<store::ExecRecord>> history = d().execs().List(id, 10);
  ASSERT_TRUE(history.ok());
  ASSERT_EQ(history->size(), 1u);
  EXPECT_EQ((*history)[0].id, ended.id);
  // Once it ended and was reaped, the live object is gone; the record stays.
  EXPECT_TRUE(Eventually([&] {
    absl::StatusOr<ExecHandle> h = d().execs().Find(id, ended.id);
    return h.ok() && h->live == nullptr;
  }));
}

TEST_F(ExecServiceTest, OnlyAReadySandboxRunsCommands) {
  std::string id = Ready();
  ASSERT_TRUE(d().sandboxes().Stop(id).ok());
  api::ExecCreate request;
  request.argv = {"true"};
  absl::StatusOr<std::shared_ptr<LiveExec>> refused = d().execs().Start(id, request);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(refused.status().message(), HasSubstr("only ready sandboxes run commands"));
  EXPECT_EQ(d().execs().Start("nosuchsandbox", request).status().code(),
            absl::StatusCode::kNotFound);
}

TEST_F(ExecServiceTest, FindingAnotherSandboxsExecIsNotFoundAndSaysHowToList) {
  std::string a = Ready();
  std::string b = Ready();
  api::ExecCreate request;
  request.argv = {"true"};
  absl::StatusOr<std::shared_ptr<LiveExec>> exec = d().execs().Start(a, request);
  ASSERT_TRUE(exec.ok()) << exec.status();
  Ended(*exec);
  absl::StatusOr<ExecHandle> wrong = d().execs().Find(b, (*exec)->id());
  EXPECT_EQ(wrong.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(wrong.status().message(), HasSubstr("abox logs " + b));
}

TEST_F(ExecServiceTest, AStopEndsARunningExecAsInterruptedWithTheReason) {
  std::string id = Ready();
  api::ExecCreate request;
  request.argv = {"sleep", "600"};
  absl::StatusOr<std::shared_ptr<LiveExec>> exec = d().execs().Start(id, request);
  ASSERT_TRUE(exec.ok()) << exec.status();
  ASSERT_TRUE(d().sandboxes().Stop(id).ok());
  store::ExecRecord ended = Ended(*exec);
  EXPECT_EQ(ended.state, store::ExecState::kInterrupted);
  EXPECT_THAT(ended.result.error, HasSubstr("the sandbox was stopped"));
}

}  // namespace
}  // namespace abox::daemon
