// ExecService alone: start, find, output and history, and the states that refuse commands.
#include "src/daemon/services/exec_service.h"

#include <fstream>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "src/daemon/resource_views.h"
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

// The agents of this daemon's fake VMs read their OOM kill counter from a file of the test's,
// which a command rewrites as the guest kernel would when its OOM killer strikes.
class ExecServiceOomTest : public testing::ServiceTest {
 protected:
  void SetUp() override {
    vmstat_ = home_.path() + "/vmstat";
    std::ofstream(vmstat_) << "pgfault 3\noom_kill 10\n";
    daemon_ = std::make_unique<testing::TestDaemon>(home_.path(), Budget{16, 16384});
    daemon_->Start({.oom_counter_path = vmstat_});
    client_ = daemon_->Connect();
    ASSERT_NE(client_, nullptr);
  }
  // The exec_finished events published so far.
  std::vector<store::Event> Finished() {
    d().events().Flush();
    std::vector<store::Event> seen;
    bool missed = false;
    absl::StatusOr<uint64_t> handle = d().events().Subscribe(
        [&](const store::Event& e) {
          if (e.type == store::event_type::kExecFinished) {
            seen.push_back(e);
          }
        },
        0, &missed);
    EXPECT_TRUE(handle.ok()) << handle.status();
    if (handle.ok()) {
      d().events().Unsubscribe(*handle);
    }
    return seen;
  }

  std::string vmstat_;
};

TEST_F(ExecServiceOomTest, AnOomKillOfTheCommandIsRecordedShownAndPublished) {
  std::string id = Ready();
  api::ExecCreate request;
  request.shell = absl::StrCat("printf 'oom_kill 12\\n' > ", vmstat_, "; kill -KILL $$");
  absl::StatusOr<std::shared_ptr<LiveExec>> exec = d().execs().Start(id, request);
  ASSERT_TRUE(exec.ok()) << exec.status();
  store::ExecRecord ended = Ended(*exec);
  EXPECT_EQ(ended.state, store::ExecState::kExited);
  EXPECT_EQ(ended.result.signal, 9);
  EXPECT_EQ(ended.result.oom_kills, 2);
  // The exec as the API shows it (GET .../execs/ID, the output stream's exit line).
  EXPECT_EQ(ExecJson(ended)["oom_kills"], 2);
  EXPECT_EQ(ExitLineJson(ended)["exec"]["oom_kills"], 2);
  std::vector<store::Event> finished = Finished();
  ASSERT_EQ(finished.size(), 1u);
  EXPECT_EQ(finished[0].payload["oom_kills"], 2);
  EXPECT_EQ(finished[0].payload["signal"], 9);
}

TEST_F(ExecServiceOomTest, AnExecWithoutOomKillsHasNone) {
  std::string id = Ready();
  api::ExecCreate request;
  request.shell = "exit 3";
  absl::StatusOr<std::shared_ptr<LiveExec>> exec = d().execs().Start(id, request);
  ASSERT_TRUE(exec.ok()) << exec.status();
  store::ExecRecord ended = Ended(*exec);
  EXPECT_EQ(ended.result.exit_code, 3);
  EXPECT_EQ(ended.result.oom_kills, 0);
  EXPECT_EQ(ExecJson(ended)["oom_kills"], 0);
  std::vector<store::Event> finished = Finished();
  ASSERT_EQ(finished.size(), 1u);
  EXPECT_FALSE(finished[0].payload.contains("oom_kills"));
}

}  // namespace
}  // namespace abox::daemon
