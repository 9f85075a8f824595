#include "src/store/exec_repo.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "src/store/sandbox_repo.h"
#include "src/store/test_util.h"

namespace abox::store {
namespace {

using ::testing::ElementsAre;
using testing::FakeClock;
using ::testing::HasSubstr;
using testing::QueryInt;
using testing::TempDir;

constexpr char kSandbox[] = "0123456789ab";
constexpr char kOtherSandbox[] = "ba9876543210";

ExecRecord Exec(const std::string& id, const std::string& sandbox = kSandbox) {
  ExecRecord e;
  e.id = id;
  e.sandbox_id = sandbox;
  e.argv = {"true"};
  return e;
}

std::vector<std::string> Ids(const std::vector<ExecRecord>& execs) {
  std::vector<std::string> ids;
  ids.reserve(execs.size());
  for (const auto& e : execs) {
    ids.push_back(e.id);
  }
  return ids;
}

// "seq:stream:data" per chunk, for compact expectations.
std::vector<std::string> Chunks(const ExecWithOutput& exec) {
  std::vector<std::string> out;
  out.reserve(exec.output.size());
  for (const auto& c : exec.output) {
    out.push_back(std::to_string(c.seq) + ":" + ExecStreamName(c.stream) + ":" + c.data);
  }
  return out;
}

class ExecRepoTest : public ::testing::Test {
 protected:
  void SetUp() override {
    db_ = testing::OpenStateOrDie(tmp_.file("state.db"));
    ASSERT_NE(db_, nullptr);
    SandboxRepo sandboxes(*db_, clock_.AsClock());
    for (const char* id : {kSandbox, kOtherSandbox}) {
      SandboxRecord s;
      s.id = id;
      s.image = "default";
      ASSERT_TRUE(sandboxes.Insert(s).ok());
    }
    MakeRepo(ExecRepoOptions());
  }

  void MakeRepo(ExecRepoOptions options) {
    repo_ = std::make_unique<ExecRepo>(*db_, clock_.AsClock(), options);
  }

  void Start(const ExecRecord& exec) {
    auto stored = repo_->Insert(exec);
    ASSERT_TRUE(stored.ok()) << stored.status();
    clock_.Advance(absl::Milliseconds(1));
  }

  TempDir tmp_;
  FakeClock clock_;
  std::unique_ptr<Database> db_;
  std::unique_ptr<ExecRepo> repo_;
};

TEST_F(ExecRepoTest, RoundTripsEveryField) {
  ExecRecord e = Exec("exec-1");
  e.argv = {"python3", "-c", "print('héllo wörld 🚀')", "", "a b"};
  e.env = {{"PATH", "/usr/bin:/bin"}, {"LANG", "C.UTF-8"}, {"EMPTY", ""}};
  e.cwd = "/workspace/sub dir";
  e.user = "agent";
  e.pty = true;
  e.timeout_ms = 30'000;
  e.state = ExecState::kFailed;  // ignored: Insert stores it running
  e.output_bytes = 99;           // ignored

  auto stored = repo_->Insert(e);
  ASSERT_TRUE(stored.ok()) << stored.status();
  ExecRecord want = e;
  want.state = ExecState::kRunning;
  want.started_at = clock_.now();
  want.output_bytes = 0;
  EXPECT_EQ(*stored, want);
  auto got = repo_->Get("exec-1");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, want);
}

TEST_F(ExecRepoTest, ShellCommandsRoundTrip) {
  ExecRecord e = Exec("exec-1");
  e.argv.clear();
  e.shell = "echo $HOME | tr a-z A-Z && exit 3";
  Start(e);
  auto got = repo_->Get("exec-1");
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->shell, e.shell);
  EXPECT_TRUE(got->argv.empty());
}

TEST_F(ExecRepoTest, InsertValidatesItsInput) {
  ExecRecord neither = Exec("x");
  neither.argv.clear();
  EXPECT_EQ(repo_->Insert(neither).status().code(), absl::StatusCode::kInvalidArgument);
  ExecRecord both = Exec("x");
  both.shell = "true";
  auto status = repo_->Insert(both).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("not both"));
  EXPECT_EQ(repo_->Insert(Exec("")).status().code(), absl::StatusCode::kInvalidArgument);

  auto orphan = repo_->Insert(Exec("x", "ffffffffffff"));
  EXPECT_EQ(orphan.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(orphan.status().message(), "no sandbox 'ffffffffffff'");

  Start(Exec("x"));
  EXPECT_EQ(repo_->Insert(Exec("x")).status().code(), absl::StatusCode::kAlreadyExists);
}

TEST_F(ExecRepoTest, OutputKeepsOrderStreamsAndBinaryBytes) {
  Start(Exec("exec-1"));
  const std::string binary("\0\xff\n\x01", 4);
  ASSERT_TRUE(repo_->Append("exec-1", ExecStream::kStdout, "hello ").ok());
  ASSERT_TRUE(repo_->Append("exec-1", ExecStream::kStderr, "warning\n").ok());
  ASSERT_TRUE(repo_->Append("exec-1", ExecStream::kStdout, binary).ok());
  ASSERT_TRUE(repo_->Append("exec-1", ExecStream::kStdout, "").ok());  // no-op

  auto got = repo_->GetWithOutput("exec-1");
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->output.size(), 3u);
  EXPECT_EQ(got->output[0], (OutputChunk{1, ExecStream::kStdout, "hello "}));
  EXPECT_EQ(got->output[1], (OutputChunk{2, ExecStream::kStderr, "warning\n"}));
  EXPECT_EQ(got->output[2], (OutputChunk{3, ExecStream::kStdout, binary}));
  EXPECT_EQ(got->exec.output_bytes, 18);
  EXPECT_FALSE(got->exec.output_truncated);
}

TEST_F(ExecRepoTest, AppendToUnknownExecIsNotFound) {
  absl::Status status = repo_->Append("nope", ExecStream::kStdout, "x");
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(status.message(), "no exec 'nope'");
  EXPECT_EQ(QueryInt(*db_, "SELECT count(*) FROM exec_output"), 0);
}

TEST_F(ExecRepoTest, AppendBatchWritesEveryPieceInOneTransactionAndKeepsTheCap) {
  MakeRepo({.output_cap_bytes = 10});
  Start(Exec("exec-1"));
  std::vector<OutputPiece> pieces;
  for (int i = 0; i < 1000; ++i) {  // a flood of 1-byte frames
    pieces.push_back({i % 2 == 0 ? ExecStream::kStdout : ExecStream::kStderr, i % 2 ? "e" : "o"});
  }
  const uint64_t before = repo_->output_transactions();
  ASSERT_TRUE(repo_->AppendBatch("exec-1", pieces).ok());
  EXPECT_EQ(repo_->output_transactions(), before + 1);
  auto got = repo_->GetWithOutput("exec-1");
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->output.size(), 10u);  // the cap holds inside a batch too
  EXPECT_EQ(got->output.front(), (OutputChunk{991, ExecStream::kStdout, "o"}));
  EXPECT_EQ(got->output.back(), (OutputChunk{1000, ExecStream::kStderr, "e"}));
  EXPECT_EQ(got->exec.output_bytes, 10);
  EXPECT_TRUE(got->exec.output_truncated);
  // Empty pieces only: no transaction at all.
  ASSERT_TRUE(repo_->AppendBatch("exec-1", {{ExecStream::kStdout, ""}}).ok());
  EXPECT_EQ(repo_->output_transactions(), before + 1);
}

TEST_F(ExecRepoTest, AppendBatchForAnUnknownExecStoresNothing) {
  Start(Exec("exec-1"));
  absl::Status status = repo_->AppendBatch("nope", {{ExecStream::kStdout, "x"}});
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(QueryInt(*db_, "SELECT count(*) FROM exec_output"), 0);
}

TEST_F(ExecRepoTest, OutputCapDropsOldestChunksAndFlagsTruncation) {
  MakeRepo({.output_cap_bytes = 10});
  Start(Exec("exec-1"));
  ASSERT_TRUE(repo_->Append("exec-1", ExecStream::kStdout, "aaaa").ok());
  ASSERT_TRUE(repo_->Append("exec-1", ExecStream::kStderr, "bbbb").ok());
  ASSERT_TRUE(repo_->Append("exec-1", ExecStream::kStdout, "cc").ok());
  auto full = repo_->GetWithOutput("exec-1");
  EXPECT_THAT(Chunks(*full), ElementsAre("1:stdout:aaaa", "2:stderr:bbbb", "3:stdout:cc"));
  EXPECT_EQ(full->exec.output_bytes, 10);
  EXPECT_FALSE(full->exec.output_truncated);  // exactly at the cap

  ASSERT_TRUE(repo_->Append("exec-1", ExecStream::kStdout, "d").ok());
  auto over = repo_->GetWithOutput("exec-1");
  EXPECT_THAT(Chunks(*over), ElementsAre("2:stderr:bbbb", "3:stdout:cc", "4:stdout:d"));
  EXPECT_EQ(over->exec.output_bytes, 7);
  EXPECT_TRUE(over->exec.output_truncated);

  ASSERT_TRUE(repo_->Append("exec-1", ExecStream::kStderr, "eeeeeeee").ok());
  auto again = repo_->GetWithOutput("exec-1");
  EXPECT_THAT(Chunks(*again), ElementsAre("4:stdout:d", "5:stderr:eeeeeeee"));
  EXPECT_EQ(again->exec.output_bytes, 9);
  EXPECT_EQ(QueryInt(*db_, "SELECT sum(length(data)) FROM exec_output"), 9);
}

TEST_F(ExecRepoTest, AChunkLargerThanTheCapKeepsItsEnd) {
  MakeRepo({.output_cap_bytes = 10});
  Start(Exec("exec-1"));
  ASSERT_TRUE(repo_->Append("exec-1", ExecStream::kStdout, "old").ok());
  ASSERT_TRUE(repo_->Append("exec-1", ExecStream::kStdout, "0123456789ABCDEFGHIJ").ok());
  auto got = repo_->GetWithOutput("exec-1");
  EXPECT_THAT(Chunks(*got), ElementsAre("2:stdout:ABCDEFGHIJ"));
  EXPECT_EQ(got->exec.output_bytes, 10);
  EXPECT_TRUE(got->exec.output_truncated);
}

TEST_F(ExecRepoTest, DroppingStopsAsSoonAsTheCapIsMet) {
  MakeRepo({.output_cap_bytes = 10});
  Start(Exec("exec-1"));
  ASSERT_TRUE(repo_->Append("exec-1", ExecStream::kStdout, "aaaa").ok());
  ASSERT_TRUE(repo_->Append("exec-1", ExecStream::kStdout, "bbbbbb").ok());
  ASSERT_TRUE(repo_->Append("exec-1", ExecStream::kStdout, "cccc").ok());
  auto got = repo_->GetWithOutput("exec-1");
  EXPECT_THAT(Chunks(*got), ElementsAre("2:stdout:bbbbbb", "3:stdout:cccc"));
  EXPECT_EQ(got->exec.output_bytes, 10);
  EXPECT_TRUE(got->exec.output_truncated);
}

TEST_F(ExecRepoTest, AFirstChunkLargerThanTheCapIsCutAndFlagged) {
  MakeRepo({.output_cap_bytes = 4});
  Start(Exec("exec-1"));
  ASSERT_TRUE(repo_->Append("exec-1", ExecStream::kStderr, "123456").ok());
  auto got = repo_->GetWithOutput("exec-1");
  EXPECT_THAT(Chunks(*got), ElementsAre("1:stderr:3456"));
  EXPECT_EQ(got->exec.output_bytes, 4);
  EXPECT_TRUE(got->exec.output_truncated);
}

TEST_F(ExecRepoTest, OutputCapIsPerExec) {
  MakeRepo({.output_cap_bytes = 4});
  Start(Exec("exec-1"));
  Start(Exec("exec-2"));
  ASSERT_TRUE(repo_->Append("exec-1", ExecStream::kStdout, "1111").ok());
  ASSERT_TRUE(repo_->Append("exec-2", ExecStream::kStdout, "2222").ok());
  ASSERT_TRUE(repo_->Append("exec-2", ExecStream::kStdout, "3").ok());
  EXPECT_THAT(Chunks(*repo_->GetWithOutput("exec-1")), ElementsAre("1:stdout:1111"));
  EXPECT_THAT(Chunks(*repo_->GetWithOutput("exec-2")), ElementsAre("2:stdout:3"));
  EXPECT_FALSE(repo_->Get("exec-1")->output_truncated);
  EXPECT_TRUE(repo_->Get("exec-2")->output_truncated);
}

TEST_F(ExecRepoTest, FinishRecordsTheResultOnce) {
  Start(Exec("exec-1"));
  clock_.Advance(absl::Seconds(2));
  ExecResult result{.state = ExecState::kExited, .exit_code = 3, .timed_out = false};
  ASSERT_TRUE(repo_->Finish("exec-1", result).ok());
  auto got = repo_->Get("exec-1");
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->state, ExecState::kExited);
  EXPECT_EQ(got->result, result);
  EXPECT_EQ(got->result.signal, std::nullopt);
  EXPECT_EQ(got->finished_at, clock_.now());

  absl::Status twice = repo_->Finish("exec-1", result);
  EXPECT_EQ(twice.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(twice.message(), HasSubstr("already ended (exited)"));
  EXPECT_EQ(repo_->Finish("nope", result).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(repo_->Finish("exec-1", {.state = ExecState::kRunning}).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(ExecRepoTest, FinishRecordsSignalsTimeoutsAndErrors) {
  Start(Exec("killed"));
  Start(Exec("failed"));
  ExecResult killed{.state = ExecState::kExited, .signal = 9, .timed_out = true};
  ExecResult failed{.state = ExecState::kFailed, .error = "no such file: /bin/nope"};
  ASSERT_TRUE(repo_->Finish("killed", killed).ok());
  ASSERT_TRUE(repo_->Finish("failed", failed).ok());
  EXPECT_EQ(repo_->Get("killed")->result, killed);
  EXPECT_EQ(repo_->Get("failed")->result, failed);
}

TEST_F(ExecRepoTest, FinishRecordsTheOomKills) {
  Start(Exec("oom"));
  Start(Exec("plain"));
  ExecResult oom{.state = ExecState::kExited, .signal = 9, .oom_kills = 2};
  ASSERT_TRUE(repo_->Finish("oom", oom).ok());
  EXPECT_EQ(repo_->Get("oom")->result, oom);
  EXPECT_EQ(repo_->Get("oom")->result.oom_kills, 2);
  EXPECT_EQ(repo_->Get("plain")->result.oom_kills, 0);  // still running: none yet
  ASSERT_TRUE(repo_->Finish("plain", {.state = ExecState::kExited, .exit_code = 0}).ok());
  EXPECT_EQ(repo_->Get("plain")->result.oom_kills, 0);
}

TEST_F(ExecRepoTest, GetUnknownIsNotFound) {
  EXPECT_EQ(repo_->Get("nope").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(repo_->GetWithOutput("nope").status().code(), absl::StatusCode::kNotFound);
}

TEST_F(ExecRepoTest, ListBySandboxIsNewestFirstAndLimited) {
  Start(Exec("a1"));
  Start(Exec("b1", kOtherSandbox));
  Start(Exec("a2"));
  Start(Exec("a3"));
  EXPECT_THAT(Ids(*repo_->ListBySandbox(kSandbox, 10)), ElementsAre("a3", "a2", "a1"));
  EXPECT_THAT(Ids(*repo_->ListBySandbox(kSandbox, 2)), ElementsAre("a3", "a2"));
  EXPECT_THAT(Ids(*repo_->ListBySandbox(kOtherSandbox, 10)), ElementsAre("b1"));
  EXPECT_THAT(Ids(*repo_->ListBySandbox("ffffffffffff", 10)), ElementsAre());
  EXPECT_EQ(repo_->ListBySandbox(kSandbox, 0).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(ExecRepoTest, ListBreaksTimeTiesByInsertionOrder) {
  for (const char* id : {"x1", "x2", "x3"}) {
    ASSERT_TRUE(repo_->Insert(Exec(id)).ok());  // same clock reading
  }
  EXPECT_THAT(Ids(*repo_->ListBySandbox(kSandbox, 10)), ElementsAre("x3", "x2", "x1"));
}

TEST_F(ExecRepoTest, MarkRunningAsInterruptedTouchesOnlyRunningExecsOfTheSandbox) {
  Start(Exec("running"));
  Start(Exec("done"));
  Start(Exec("elsewhere", kOtherSandbox));
  ASSERT_TRUE(repo_->Finish("done", {.state = ExecState::kExited, .exit_code = 0}).ok());
  clock_.Advance(absl::Minutes(1));

  auto changed = repo_->MarkRunningAsInterrupted(kSandbox, "aboxd restarted while it ran");
  ASSERT_TRUE(changed.ok()) << changed.status();
  EXPECT_EQ(*changed, 1);
  auto got = repo_->Get("running");
  EXPECT_EQ(got->state, ExecState::kInterrupted);
  EXPECT_EQ(got->result.state, ExecState::kInterrupted);
  EXPECT_EQ(got->result.error, "aboxd restarted while it ran");
  EXPECT_EQ(got->finished_at, clock_.now());
  EXPECT_EQ(repo_->Get("done")->state, ExecState::kExited);
  EXPECT_EQ(repo_->Get("elsewhere")->state, ExecState::kRunning);

  EXPECT_EQ(*repo_->MarkRunningAsInterrupted(kSandbox, "again"), 0);
  EXPECT_EQ(*repo_->MarkAllRunningAsInterrupted("aboxd restarted"), 1);
  EXPECT_EQ(repo_->Get("elsewhere")->state, ExecState::kInterrupted);
  EXPECT_EQ(repo_->Get("running")->result.error, "aboxd restarted while it ran");
}

TEST_F(ExecRepoTest, DeletingTheSandboxDeletesItsExecsAndOutput) {
  Start(Exec("exec-1"));
  Start(Exec("exec-2", kOtherSandbox));
  ASSERT_TRUE(repo_->Append("exec-1", ExecStream::kStdout, "bye").ok());
  ASSERT_TRUE(repo_->Append("exec-2", ExecStream::kStdout, "stay").ok());
  SandboxRepo sandboxes(*db_);
  ASSERT_TRUE(sandboxes.Delete(kSandbox).ok());
  EXPECT_EQ(repo_->Get("exec-1").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(QueryInt(*db_, "SELECT count(*) FROM execs"), 1);
  EXPECT_EQ(QueryInt(*db_, "SELECT count(*) FROM exec_output WHERE exec_id = 'exec-1'"), 0);
  EXPECT_EQ(QueryInt(*db_, "SELECT count(*) FROM exec_output"), 1);
}

TEST(ExecNamesTest, RoundTrip) {
  for (ExecState state :
       {ExecState::kRunning, ExecState::kExited, ExecState::kFailed, ExecState::kInterrupted}) {
    EXPECT_EQ(*ParseExecState(ExecStateName(state)), state);
  }
  for (ExecStream stream : {ExecStream::kStdout, ExecStream::kStderr}) {
    EXPECT_EQ(*ParseExecStream(ExecStreamName(stream)), stream);
  }
  EXPECT_EQ(ParseExecState("done").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseExecStream("stdin").status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace abox::store
