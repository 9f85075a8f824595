#include "src/daemon/lifecycle/pipeline.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace abox::daemon {
namespace {

using ::testing::ElementsAre;

// Three steps that log what they do and undo.
class PipelineTest : public ::testing::Test {
 protected:
  void Build(Pipeline& p, const std::string& failing = "") {
    for (const char* name : {"a", "b", "c"}) {
      std::string n = name;
      p.Add(
          n,
          [this, n, failing]() -> absl::Status {
            if (n == failing) {
              log_.push_back("fail " + n);
              return absl::UnavailableError("step " + n + " broke");
            }
            log_.push_back("run " + n);
            return absl::OkStatus();
          },
          [this, n](const absl::Status& why) {
            log_.push_back("undo " + n + " (" + std::string(why.message()) + ")");
          });
    }
  }
  std::vector<std::string> log_;
};

TEST_F(PipelineTest, RunsEveryStepInOrderAndUndoesNothingOnSuccess) {
  {
    Pipeline p;
    Build(p);
    ASSERT_TRUE(p.Run().ok());
    EXPECT_TRUE(p.finished());
  }
  EXPECT_THAT(log_, ElementsAre("run a", "run b", "run c"));
}

// Each step that ran is timed, in order, so a slow create says where its time went.
TEST_F(PipelineTest, TimesEachStepThatRan) {
  Pipeline p;
  Build(p, "c");
  (void)p.Run();
  ASSERT_EQ(p.step_ms().size(), 3u);  // the failing step ran too
  EXPECT_EQ(p.step_ms()[0].first, "a");
  EXPECT_EQ(p.step_ms()[2].first, "c");
  for (const auto& [name, ms] : p.step_ms()) {
    EXPECT_GE(ms, 0.0) << name;
  }
  Pipeline injected;
  Build(injected);
  injected.set_injector([](absl::string_view step) {
    return step == "b" ? absl::UnavailableError("injected") : absl::OkStatus();
  });
  (void)injected.Run();
  ASSERT_EQ(injected.step_ms().size(), 1u);  // a step the injector failed never ran
  EXPECT_EQ(injected.step_ms()[0].first, "a");
}

TEST_F(PipelineTest, AFailureUndoesTheStepsThatRanInReverseWithTheFailure) {
  Pipeline p;
  Build(p, "c");
  absl::Status s = p.Run();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(p.failed_step(), "c");
  EXPECT_FALSE(p.finished());
  // The failing step cleans up after itself; only the ones that finished are undone.
  EXPECT_THAT(log_, ElementsAre("run a", "run b", "fail c", "undo b (step c broke)",
                                "undo a (step c broke)"));
  log_.clear();
  EXPECT_EQ(p.Run().code(), absl::StatusCode::kUnavailable) << "a failed pipeline stays failed";
  EXPECT_TRUE(log_.empty());
}

TEST_F(PipelineTest, RunThroughAStepStopsThereAndTheRestRunsLater) {
  Pipeline p;
  Build(p);
  ASSERT_TRUE(p.Run("a").ok());
  EXPECT_THAT(log_, ElementsAre("run a"));
  EXPECT_FALSE(p.finished());
  ASSERT_TRUE(p.Run().ok());
  EXPECT_THAT(log_, ElementsAre("run a", "run b", "run c"));
}

TEST_F(PipelineTest, TheInjectorFailsTheNamedStepInsteadOfRunningIt) {
  for (const char* step : {"a", "b", "c"}) {
    log_.clear();
    Pipeline p;
    Build(p);
    p.set_injector([step](absl::string_view name) {
      return name == step ? absl::InternalError("injected") : absl::OkStatus();
    });
    EXPECT_EQ(p.Run().code(), absl::StatusCode::kInternal);
    EXPECT_EQ(p.failed_step(), step);
    for (const std::string& line : log_) {
      EXPECT_NE(line, std::string("run ") + step) << "the injected step ran";
    }
  }
}

TEST_F(PipelineTest, AbandonAndAHalfRunPipelineGoingAwayUndoWhatRan) {
  {
    Pipeline p;
    Build(p);
    ASSERT_TRUE(p.Run("b").ok());
    p.Abandon(absl::CancelledError("shutting down"));
    EXPECT_EQ(p.Run().code(), absl::StatusCode::kCancelled);
  }
  EXPECT_THAT(log_,
              ElementsAre("run a", "run b", "undo b (shutting down)", "undo a (shutting down)"));
  log_.clear();
  {
    Pipeline p;
    Build(p);
    ASSERT_TRUE(p.Run("a").ok());
  }
  EXPECT_THAT(log_, ElementsAre("run a", "undo a (the create was abandoned half-way)"));
}

}  // namespace
}  // namespace abox::daemon
