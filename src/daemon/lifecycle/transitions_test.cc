#include "src/daemon/lifecycle/transitions.h"

#include <unistd.h>

#include <filesystem>
#include <set>
#include <string>
#include <utility>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "src/daemon/lifecycle/state_recorder.h"
#include "src/daemon/services/event_bus.h"
#include "src/store/database.h"
#include "src/store/event_repo.h"
#include "src/store/migrations.h"
#include "src/store/sandbox_repo.h"

namespace abox::daemon {
namespace {

using ::testing::HasSubstr;

constexpr SandboxState kAll[] = {SandboxState::kCreating, SandboxState::kReady,
                                 SandboxState::kStopping, SandboxState::kStopped,
                                 SandboxState::kFailed,   SandboxState::kRemoved,
                                 SandboxState::kPaused};

// The lifecycle as users know it (docs/architecture.md): exactly these moves, nothing else.
const std::set<std::pair<SandboxState, SandboxState>>& Expected() {
  using S = SandboxState;
  static const auto* const expected = new std::set<std::pair<S, S>>{
      {S::kCreating, S::kReady}, {S::kCreating, S::kFailed},  {S::kReady, S::kStopping},
      {S::kReady, S::kFailed},   {S::kStopping, S::kStopped}, {S::kStopped, S::kRemoved},
      {S::kFailed, S::kRemoved}, {S::kReady, S::kPaused},     {S::kPaused, S::kReady},
      {S::kPaused, S::kStopped}, {S::kPaused, S::kRemoved},   {S::kPaused, S::kFailed},
      {S::kStopped, S::kReady},  {S::kFailed, S::kReady}};
  return *expected;
}

TEST(TransitionTableTest, AllowsExactlyTheLifecycleAndNothingElse) {
  for (SandboxState from : kAll) {
    for (SandboxState to : kAll) {
      bool allowed = Expected().count({from, to}) > 0;
      EXPECT_EQ(FindTransition(from, to) != nullptr, allowed)
          << store::SandboxStateName(from) << " -> " << store::SandboxStateName(to);
    }
  }
  EXPECT_EQ(TransitionTable().size(), Expected().size()) << "a rule is listed twice";
}

TEST(TransitionTableTest, EachRulePublishesTheEventClientsWatchFor) {
  using S = SandboxState;
  EXPECT_STREQ(FindTransition(S::kCreating, S::kReady)->event, "ready");
  EXPECT_STREQ(FindTransition(S::kCreating, S::kFailed)->event, "failed");
  EXPECT_STREQ(FindTransition(S::kReady, S::kStopping)->event, "");
  EXPECT_STREQ(FindTransition(S::kReady, S::kFailed)->event, "failed");
  EXPECT_STREQ(FindTransition(S::kStopping, S::kStopped)->event, "stopped");
  EXPECT_STREQ(FindTransition(S::kStopped, S::kRemoved)->event, "removed");
  EXPECT_STREQ(FindTransition(S::kFailed, S::kRemoved)->event, "removed");
  EXPECT_STREQ(FindTransition(S::kReady, S::kPaused)->event, "paused");
  EXPECT_STREQ(FindTransition(S::kPaused, S::kReady)->event, "resumed");
  EXPECT_STREQ(FindTransition(S::kPaused, S::kStopped)->event, "stopped");
}

store::SandboxRecord In(SandboxState state, std::string name = "") {
  store::SandboxRecord r;
  r.id = "0123456789ab";
  r.name = std::move(name);
  r.state = state;
  return r;
}

// A paused sandbox: exec resumes it first (ExecService), other guest work asks for a resume,
// pause of it is done already, resume of a ready one too; rm wants force (its processes are
// saved), stop discards the saved state.
TEST(OperationTableTest, PausedSandboxesResumeStopOrGoWithForce) {
  EXPECT_EQ(Decide(Operation::kPause, In(SandboxState::kReady)).verdict, Verdict::kAllow);
  EXPECT_EQ(Decide(Operation::kPause, In(SandboxState::kPaused)).verdict, Verdict::kAlreadyDone);
  EXPECT_EQ(Decide(Operation::kResume, In(SandboxState::kPaused)).verdict, Verdict::kAllow);
  EXPECT_EQ(Decide(Operation::kResume, In(SandboxState::kReady)).verdict, Verdict::kAlreadyDone);
  EXPECT_THAT(Decide(Operation::kResume, In(SandboxState::kStopped)).refusal.message(),
              HasSubstr("only paused sandboxes are resumed"));
  EXPECT_THAT(Decide(Operation::kWorkspace, In(SandboxState::kPaused)).refusal.message(),
              HasSubstr("abox resume 0123456789ab"));
  EXPECT_THAT(Decide(Operation::kSnapshot, In(SandboxState::kPaused)).refusal.message(),
              HasSubstr("abox resume 0123456789ab"));
  EXPECT_EQ(Decide(Operation::kStop, In(SandboxState::kPaused)).verdict, Verdict::kAllow);
  EXPECT_THAT(Decide(Operation::kRemove, In(SandboxState::kPaused)).refusal.message(),
              HasSubstr("abox rm -f 0123456789ab"));
  EXPECT_EQ(Decide(Operation::kForceRemove, In(SandboxState::kPaused)).verdict, Verdict::kAllow);
  EXPECT_THAT(Decide(Operation::kPause, In(SandboxState::kStopped)).refusal.message(),
              HasSubstr("only ready sandboxes can be paused"));
}

// A restore brings back a sandbox whose VM is gone (stopped, or failed because QEMU died) from
// one of its checkpoints; a paused one is resumed instead.
TEST(OperationTableTest, RestoreRevivesStoppedAndFailedSandboxes) {
  for (SandboxState state : {SandboxState::kReady, SandboxState::kStopped, SandboxState::kFailed}) {
    EXPECT_EQ(Decide(Operation::kRestore, In(state)).verdict, Verdict::kAllow)
        << store::SandboxStateName(state);
  }
  EXPECT_THAT(Decide(Operation::kRestore, In(SandboxState::kPaused)).refusal.message(),
              HasSubstr("abox resume 0123456789ab"));
  EXPECT_EQ(Decide(Operation::kSnapshot, In(SandboxState::kFailed)).verdict, Verdict::kRefuse);
  EXPECT_STREQ(FindTransition(SandboxState::kFailed, SandboxState::kReady)->event, "restored");
  EXPECT_STREQ(FindTransition(SandboxState::kStopped, SandboxState::kReady)->event, "restored");
}

TEST(OperationTableTest, EveryOperationHasAVerdictForEveryLiveState) {
  for (Operation op : {Operation::kExec, Operation::kWorkspace, Operation::kStop,
                       Operation::kRemove, Operation::kForceRemove, Operation::kSnapshot,
                       Operation::kRestore, Operation::kPause, Operation::kResume}) {
    for (SandboxState state : kAll) {
      if (state == SandboxState::kRemoved) {
        continue;  // no record left to ask about
      }
      bool listed = false;
      for (const OperationRule& rule : OperationTable()) {
        listed |= rule.op == op && rule.state == state;
      }
      EXPECT_TRUE(listed) << static_cast<int>(op) << " in " << store::SandboxStateName(state);
    }
  }
}

TEST(OperationTableTest, OnlyReadySandboxesRunCommandsAndWorkspaceTools) {
  for (SandboxState state : kAll) {
    if (state == SandboxState::kRemoved) {
      continue;
    }
    Decision exec = Decide(Operation::kExec, In(state));
    Decision tools = Decide(Operation::kWorkspace, In(state));
    if (state == SandboxState::kReady) {
      EXPECT_EQ(exec.verdict, Verdict::kAllow);
      EXPECT_EQ(tools.verdict, Verdict::kAllow);
      continue;
    }
    EXPECT_EQ(exec.verdict, Verdict::kRefuse);
    EXPECT_EQ(exec.refusal.code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(exec.refusal.message(), HasSubstr("only ready sandboxes run commands"));
    EXPECT_EQ(tools.verdict, Verdict::kRefuse);
    EXPECT_THAT(tools.refusal.message(),
                HasSubstr("the workspace is read through a running sandbox"));
  }
  EXPECT_THAT(Decide(Operation::kExec, In(SandboxState::kCreating)).refusal.message(),
              HasSubstr("(wait for it to boot)"));
  EXPECT_THAT(Decide(Operation::kExec, In(SandboxState::kStopped)).refusal.message(),
              HasSubstr("(create a new one)"));
}

TEST(OperationTableTest, StopIsIdempotentAndWaitsForABootOrAStop) {
  EXPECT_EQ(Decide(Operation::kStop, In(SandboxState::kReady)).verdict, Verdict::kAllow);
  EXPECT_EQ(Decide(Operation::kStop, In(SandboxState::kStopped)).verdict, Verdict::kAlreadyDone);
  EXPECT_EQ(Decide(Operation::kStop, In(SandboxState::kFailed)).verdict, Verdict::kAlreadyDone);
  Decision booting = Decide(Operation::kStop, In(SandboxState::kCreating, "web"));
  EXPECT_EQ(booting.verdict, Verdict::kRefuse);
  EXPECT_EQ(booting.refusal.message(),
            "sandbox 0123456789ab (web) is creating: wait until it is ready (or failed), then "
            "retry");
  EXPECT_THAT(Decide(Operation::kStop, In(SandboxState::kStopping)).refusal.message(),
              HasSubstr("already stopping: retry in a moment"));
}

TEST(OperationTableTest, RemoveNeedsForceForARunningSandboxAndNeverRacesABootOrAStop) {
  EXPECT_EQ(Decide(Operation::kRemove, In(SandboxState::kStopped)).verdict, Verdict::kAllow);
  EXPECT_EQ(Decide(Operation::kRemove, In(SandboxState::kFailed)).verdict, Verdict::kAllow);
  Decision running = Decide(Operation::kRemove, In(SandboxState::kReady));
  EXPECT_EQ(running.verdict, Verdict::kRefuse);
  EXPECT_EQ(running.refusal.message(),
            "sandbox 0123456789ab is ready (running): stop it first (abox stop 0123456789ab) or "
            "remove it anyway with force (abox rm -f 0123456789ab)");
  EXPECT_EQ(Decide(Operation::kForceRemove, In(SandboxState::kReady)).verdict, Verdict::kAllow);
  for (Operation op : {Operation::kRemove, Operation::kForceRemove}) {
    for (SandboxState busy : {SandboxState::kCreating, SandboxState::kStopping}) {
      Decision d = Decide(op, In(busy));
      EXPECT_EQ(d.verdict, Verdict::kRefuse);
      EXPECT_THAT(d.refusal.message(), HasSubstr("retry once it is ready or stopped"));
    }
  }
}

class StateRecorderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    recorder_.reset();
    events_.reset();
    event_repo_.reset();
    sandboxes_.reset();
    db_.reset();
    std::filesystem::remove(path_);
    auto db = store::OpenStateDatabase(path_.string());
    ASSERT_TRUE(db.ok()) << db.status();
    db_ = *std::move(db);
    sandboxes_ = std::make_unique<store::SandboxRepo>(*db_);
    event_repo_ = std::make_unique<store::EventRepo>(*db_);
    events_ = std::make_unique<EventBus>(*event_repo_);
    recorder_ = std::make_unique<StateRecorder>(*sandboxes_, *events_);
  }
  // A stored sandbox in `state` (inserted as creating, then moved there in the store).
  void Stored(SandboxState state) {
    store::SandboxRecord r = In(SandboxState::kCreating);
    ASSERT_TRUE(recorder_->Insert(r).ok());
    if (state != SandboxState::kCreating) {
      ASSERT_TRUE(sandboxes_->UpdateState(r.id, state).ok());
    }
  }
  std::vector<std::string> EventTypes() {
    events_->Flush();
    absl::StatusOr<store::EventBatch> batch = event_repo_->Since(0, 1000);
    EXPECT_TRUE(batch.ok()) << batch.status();
    std::vector<std::string> types;
    for (const store::Event& e : batch.ok() ? batch->events : std::vector<store::Event>{}) {
      types.push_back(e.type);
    }
    return types;
  }

  void TearDown() override {
    recorder_.reset();
    events_.reset();
    event_repo_.reset();
    sandboxes_.reset();
    db_.reset();
    std::filesystem::remove(path_);
  }

  const std::filesystem::path path_ = std::filesystem::path(::testing::TempDir()) /
                                      ("abox-recorder-test-" + std::to_string(::getpid()) + ".db");
  std::unique_ptr<store::Database> db_;
  std::unique_ptr<store::SandboxRepo> sandboxes_;
  std::unique_ptr<store::EventRepo> event_repo_;
  std::unique_ptr<EventBus> events_;
  std::unique_ptr<StateRecorder> recorder_;
};

TEST_F(StateRecorderTest, EveryAllowedTransitionWritesTheStoreAndPublishesItsEvent) {
  for (const TransitionRule& rule : TransitionTable()) {
    SetUp();
    Stored(rule.from);
    absl::Status s = recorder_->Transition("0123456789ab", rule.from, rule.to, {{"k", 1}}, "why");
    ASSERT_TRUE(s.ok()) << s << " " << store::SandboxStateName(rule.from) << " -> "
                        << store::SandboxStateName(rule.to);
    absl::StatusOr<store::SandboxRecord> now = sandboxes_->Get("0123456789ab");
    if (rule.to == SandboxState::kRemoved) {
      EXPECT_EQ(now.status().code(), absl::StatusCode::kNotFound);
    } else {
      ASSERT_TRUE(now.ok());
      EXPECT_EQ(now->state, rule.to);
      EXPECT_EQ(now->failure, "why");
    }
    std::vector<std::string> types = EventTypes();
    if (rule.event[0] == '\0') {
      EXPECT_TRUE(types.empty()) << types.size();
    } else {
      EXPECT_EQ(types, std::vector<std::string>{rule.event});
    }
  }
}

TEST_F(StateRecorderTest, EveryTransitionTheTableLacksIsRefusedAndChangesNothing) {
  for (SandboxState from : kAll) {
    for (SandboxState to : kAll) {
      if (from == SandboxState::kRemoved || FindTransition(from, to) != nullptr) {
        continue;
      }
      SetUp();
      Stored(from);
      absl::Status s = recorder_->Transition("0123456789ab", from, to);
      EXPECT_EQ(s.code(), absl::StatusCode::kInternal)
          << store::SandboxStateName(from) << " -> " << store::SandboxStateName(to);
      EXPECT_THAT(s.message(), HasSubstr("the lifecycle has no transition"));
      ASSERT_TRUE(sandboxes_->Get("0123456789ab").ok());
      EXPECT_EQ(sandboxes_->Get("0123456789ab")->state, from);
      EXPECT_TRUE(EventTypes().empty());
    }
  }
}

TEST_F(StateRecorderTest, ATransitionFromAStateTheSandboxLeftIsRefusedWithoutAnEvent) {
  Stored(SandboxState::kReady);
  // Two stops raced; the second finds it stopping already.
  ASSERT_TRUE(
      recorder_->Transition("0123456789ab", SandboxState::kReady, SandboxState::kStopping).ok());
  absl::Status late = recorder_->Transition("0123456789ab", SandboxState::kReady,
                                            SandboxState::kFailed, {{"error", "x"}}, "x");
  EXPECT_EQ(late.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(late.message(), "sandbox 0123456789ab is stopping, not ready");
  EXPECT_EQ(sandboxes_->Get("0123456789ab")->state, SandboxState::kStopping);
  EXPECT_TRUE(EventTypes().empty()) << "the refused move published an event";
  // A remove of a sandbox that is not stopped or failed (any more) is refused the same way.
  absl::Status removed =
      recorder_->Transition("0123456789ab", SandboxState::kStopped, SandboxState::kRemoved);
  EXPECT_EQ(removed.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(sandboxes_->Get("0123456789ab").ok());
}

TEST_F(StateRecorderTest, InsertPublishesNothingUntilAnnounced) {
  store::SandboxRecord r = In(SandboxState::kCreating);
  ASSERT_TRUE(recorder_->Insert(r).ok());
  EXPECT_TRUE(EventTypes().empty());
  recorder_->Announce(r.id, {{"name", ""}});
  EXPECT_EQ(EventTypes(), std::vector<std::string>{"created"});
  EXPECT_EQ(recorder_->Insert(In(SandboxState::kReady)).status().code(),
            absl::StatusCode::kInternal);
}

TEST_F(StateRecorderTest, WithdrawTakesBackOnlyACreateThatIsStillCreating) {
  Stored(SandboxState::kCreating);
  ASSERT_TRUE(recorder_->Withdraw("0123456789ab").ok());
  EXPECT_EQ(sandboxes_->Get("0123456789ab").status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(EventTypes().empty()) << "a withdrawn create published something";
  Stored(SandboxState::kReady);
  EXPECT_EQ(recorder_->Withdraw("0123456789ab").code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(sandboxes_->Get("0123456789ab").ok());
}

TEST_F(StateRecorderTest, NoteCountsFailuresAndIgnoresSuccess) {
  recorder_->Note(absl::OkStatus(), "fine");
  EXPECT_EQ(recorder_->noted_failures(), 0);
  recorder_->Note(absl::UnavailableError("disk full"), "touching 0123456789ab");
  recorder_->Note(absl::UnavailableError("disk full"), "touching 0123456789ab");
  EXPECT_EQ(recorder_->noted_failures(), 2);
}

}  // namespace
}  // namespace abox::daemon
