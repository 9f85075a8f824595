// SandboxService alone: create, stop, remove, failures and the create's threads, called
// directly over the fake VMM.
#include "src/daemon/services/sandbox_service.h"

#include <atomic>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "src/api/errors.h"
#include "src/daemon/testing/service_fixture.h"
#include "tests/testing/fake_vmm.h"

namespace abox::daemon {
namespace {

using ::testing::HasSubstr;
using testing::ServiceTest;
using SandboxServiceTest = ServiceTest;

TEST_F(SandboxServiceTest, CreateStopAndRemoveKeepRecordCapacityAndRegistryInStep) {
  api::SandboxCreate request;
  request.name = "web";
  request.cpus = 2;
  absl::StatusOr<SandboxView> created = d().sandboxes().CreateAndWait(request);
  ASSERT_TRUE(created.ok()) << created.status();
  const std::string id = created->record.id;
  EXPECT_EQ(created->record.state, store::SandboxState::kReady);
  EXPECT_EQ(d().sandboxes().RunningCount(), 1);
  EXPECT_EQ(d().ledger().Usage().cpus, 2);

  absl::StatusOr<SandboxView> stopped = d().sandboxes().Stop("web");  // by name
  ASSERT_TRUE(stopped.ok()) << stopped.status();
  EXPECT_EQ(stopped->record.state, store::SandboxState::kStopped);
  EXPECT_EQ(d().sandboxes().RunningCount(), 0);
  EXPECT_EQ(d().ledger().Usage().cpus, 0);
  EXPECT_TRUE(abox::testing::FakeVmm::LiveVms().empty());
  // Stop is idempotent: the stopped sandbox comes back as it is.
  absl::StatusOr<SandboxView> again = d().sandboxes().Stop(id);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->record.state, store::SandboxState::kStopped);

  ASSERT_TRUE(d().sandboxes().Remove(id, /*force=*/false).ok());
  EXPECT_EQ(d().sandboxes().Get(id).status().code(), absl::StatusCode::kNotFound);
}

TEST_F(SandboxServiceTest, AcceptedComesOnTheCallersThreadAndDoneOnTheCreatesOwn) {
  std::thread::id caller = std::this_thread::get_id();
  std::thread::id accepted_on;
  std::thread::id done_on;
  std::atomic<bool> finished{false};
  std::string accepted_state;
  d().sandboxes().Create(
      {},
      [&](const SandboxView& v) {
        accepted_on = std::this_thread::get_id();
        accepted_state = store::SandboxStateName(v.record.state);
      },
      [&](absl::StatusOr<SandboxView> v) {
        EXPECT_TRUE(v.ok()) << v.status();
        done_on = std::this_thread::get_id();
        finished = true;
      });
  EXPECT_EQ(accepted_on, caller);
  EXPECT_EQ(accepted_state, "creating");
  ASSERT_TRUE(Eventually([&] { return finished.load(); }));
  EXPECT_NE(done_on, caller) << "the boot ran on the caller's (a server worker's) thread";
}

TEST_F(SandboxServiceTest, ARequestRefusedAtAdmissionLeavesNothingAndAnswersAtOnce) {
  api::SandboxCreate bad;
  bad.egress = api::EgressSpec{.mode = "allowlist", .allow = {"exa mple.com"}};
  std::thread::id caller = std::this_thread::get_id();
  std::thread::id done_on;
  absl::Status got;
  bool accepted = false;
  d().sandboxes().Create(
      bad, [&](const SandboxView&) { accepted = true; },
      [&](absl::StatusOr<SandboxView> v) {
        got = v.status();
        done_on = std::this_thread::get_id();
      });
  EXPECT_EQ(got.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(api::FieldOf(got).value_or(""), "egress.allow[0]");
  EXPECT_THAT(got.message(), HasSubstr("exa mple.com"));
  EXPECT_EQ(done_on, caller);
  EXPECT_FALSE(accepted);
  absl::StatusOr<std::vector<SandboxView>> all = d().sandboxes().List({});
  ASSERT_TRUE(all.ok());
  EXPECT_TRUE(all->empty());
  EXPECT_EQ(d().ledger().Usage().cpus, 0);
}

TEST_F(SandboxServiceTest, RemoveOfARunningSandboxNeedsForce) {
  std::string id = Ready();
  absl::Status refused = d().sandboxes().Remove(id, /*force=*/false);
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(refused.message(), HasSubstr("abox rm -f " + id));
  EXPECT_EQ(d().sandboxes().RunningCount(), 1);
  ASSERT_TRUE(d().sandboxes().Remove(id, /*force=*/true).ok());
  EXPECT_EQ(d().sandboxes().RunningCount(), 0);
  EXPECT_EQ(d().ledger().Usage().cpus, 0);
  EXPECT_EQ(d().sandboxes().Get(id).status().code(), absl::StatusCode::kNotFound);
}

TEST_F(SandboxServiceTest, AVmThatDiesLeavesTheSandboxFailedSayingWhyAndFreesItsCapacity) {
  std::string id = Ready();
  ASSERT_TRUE(abox::testing::FakeVmm::Crash(id).ok());
  ASSERT_TRUE(Eventually([&] {
    absl::StatusOr<SandboxView> v = d().sandboxes().Get(id);
    return v.ok() && v->record.state == store::SandboxState::kFailed;
  }));
  absl::StatusOr<SandboxView> failed = d().sandboxes().Get(id);
  EXPECT_THAT(failed->record.failure, HasSubstr("the sandbox failed"));
  EXPECT_THAT(failed->record.failure, HasSubstr("killed by signal 9"));
  EXPECT_TRUE(Eventually([&] { return d().ledger().Usage().cpus == 0; }));
  EXPECT_EQ(d().sandboxes().RunningCount(), 0);
  EXPECT_EQ(d().recorder().noted_failures(), 0);
}

TEST_F(SandboxServiceTest, ConsoleLogIsTheLiveLogWhileItRuns) {
  std::string id = Ready();
  ASSERT_TRUE(abox::testing::FakeVmm::AppendConsole(id, "Linux version 6.1 (abox)").ok());
  absl::StatusOr<std::string> log = d().sandboxes().ConsoleLog(id, 1 << 20);
  ASSERT_TRUE(log.ok()) << log.status();
  EXPECT_THAT(*log, HasSubstr("Linux version 6.1 (abox)"));
  absl::StatusOr<std::string> tail = d().sandboxes().ConsoleLog(id, 5);
  ASSERT_TRUE(tail.ok());
  EXPECT_EQ(tail->size(), 5u);
}

}  // namespace
}  // namespace abox::daemon
