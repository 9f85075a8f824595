// GuestToolsGate alone: who gets a ready sandbox's workspace tools, the caps, and that a stop
// waits for the operations that hold them.
#include "src/daemon/services/guest_tools_gate.h"

#include <atomic>
#include <condition_variable>
#include <future>
#include <mutex>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "src/daemon/testing/service_fixture.h"

namespace abox::daemon {
namespace {

using ::testing::HasSubstr;
using GuestToolsGateTest = testing::ServiceTest;

// Holds every operation that enters until Open().
class Latch {
 public:
  void Wait() {
    std::unique_lock lock(mu_);
    ++waiting_;
    cv_.notify_all();
    cv_.wait(lock, [&] { return open_; });
  }
  void Open() {
    std::lock_guard lock(mu_);
    open_ = true;
    cv_.notify_all();
  }
  bool WaitForWaiting(int n) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, std::chrono::seconds(20), [&] { return waiting_ >= n; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int waiting_ = 0;
  bool open_ = false;
};

TEST_F(GuestToolsGateTest, AReadySandboxLendsItsToolsAndOthersSayWhyNot) {
  std::string id = Ready();
  bool ran = false;
  absl::Status s = d().guest_tools().WithGuestTools(
      id, [&](const store::SandboxRecord& r, workspace::GuestTools&) {
        ran = r.id == id;
        return absl::OkStatus();
      });
  EXPECT_TRUE(s.ok()) << s;
  EXPECT_TRUE(ran);
  ASSERT_TRUE(d().sandboxes().Stop(id).ok());
  absl::Status stopped = d().guest_tools().WithGuestTools(
      id, [&](const store::SandboxRecord&, workspace::GuestTools&) { return absl::OkStatus(); });
  EXPECT_EQ(stopped.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(stopped.message(), HasSubstr("the workspace is read through a running sandbox"));
}

TEST_F(GuestToolsGateTest, OneSandboxGetsTwoAtOnceAndAllTogetherSix) {
  std::vector<std::string> ids;
  for (int i = 0; i < 4; ++i) {
    ids.push_back(Ready());
  }
  Latch latch;
  auto hold = [&](const std::string& id) {
    return std::async(std::launch::async, [&, id] {
      return d().guest_tools().WithGuestTools(
          id, [&](const store::SandboxRecord&, workspace::GuestTools&) {
            latch.Wait();
            return absl::OkStatus();
          });
    });
  };
  std::vector<std::future<absl::Status>> held;
  held.push_back(hold(ids[0]));
  held.push_back(hold(ids[0]));
  ASSERT_TRUE(latch.WaitForWaiting(2));
  // A third for the same sandbox is refused at once (its guest may be stalling the two).
  absl::Status third = d().guest_tools().WithGuestTools(
      ids[0],
      [&](const store::SandboxRecord&, workspace::GuestTools&) { return absl::OkStatus(); });
  EXPECT_EQ(third.code(), absl::StatusCode::kAborted);
  EXPECT_THAT(third.message(), HasSubstr("already has 2 workspace operations in flight"));
  // Four more across the other sandboxes fill the daemon-wide six; the seventh is refused.
  held.push_back(hold(ids[1]));
  held.push_back(hold(ids[1]));
  held.push_back(hold(ids[2]));
  held.push_back(hold(ids[2]));
  ASSERT_TRUE(latch.WaitForWaiting(6));
  absl::Status seventh = d().guest_tools().WithGuestTools(
      ids[3],
      [&](const store::SandboxRecord&, workspace::GuestTools&) { return absl::OkStatus(); });
  EXPECT_EQ(seventh.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(seventh.message(), HasSubstr("the most it runs at once"));
  latch.Open();
  for (auto& f : held) {
    EXPECT_TRUE(f.get().ok());
  }
  // The slots come back.
  absl::Status after = d().guest_tools().WithGuestTools(
      ids[3],
      [&](const store::SandboxRecord&, workspace::GuestTools&) { return absl::OkStatus(); });
  EXPECT_TRUE(after.ok()) << after;
}

TEST_F(GuestToolsGateTest, AStopWaitsForTheOperationHoldingTheTools) {
  std::string id = Ready();
  Latch latch;
  std::atomic<bool> released{false};
  auto op = std::async(std::launch::async, [&] {
    return d().guest_tools().WithGuestTools(
        id, [&](const store::SandboxRecord&, workspace::GuestTools&) {
          latch.Wait();
          released = true;
          return absl::OkStatus();
        });
  });
  ASSERT_TRUE(latch.WaitForWaiting(1));
  auto stop = std::async(std::launch::async, [&] { return d().sandboxes().Stop(id).status(); });
  EXPECT_EQ(stop.wait_for(std::chrono::milliseconds(300)), std::future_status::timeout)
      << "the stop tore the VM down under a running workspace operation";
  latch.Open();
  EXPECT_TRUE(stop.get().ok());
  EXPECT_TRUE(released.load());
  EXPECT_TRUE(op.get().ok());
}

}  // namespace
}  // namespace abox::daemon
