#include "src/daemon/services/event_bus.h"

#include <thread>

#include "gtest/gtest.h"
#include "src/store/test_util.h"

namespace abox::daemon {
namespace {

// Events published before, during and after a subscription reach it exactly once, in seq
// order: the replay from the table and the live delivery meet without a gap.
TEST(EventBusTest, ReplayAndLiveDeliveryHaveNoGapAndNoDuplicate) {
  store::testing::TempDir dir;
  auto db = store::testing::OpenStateOrDie(dir.file("state.db"));
  ASSERT_NE(db, nullptr);
  store::EventRepo repo(*db);
  std::vector<int64_t> seen;
  std::mutex seen_mu;
  {
    EventBus bus(repo);
    std::thread publisher([&] {
      for (int i = 0; i < 200; ++i) {
        bus.Publish("0123456789ab", "exec_started", {{"i", i}});
      }
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    bool missed = true;
    absl::StatusOr<uint64_t> handle = bus.Subscribe(
        [&](const store::Event& e) {
          std::lock_guard lock(seen_mu);
          seen.push_back(e.seq);
        },
        0, &missed);
    ASSERT_TRUE(handle.ok()) << handle.status();
    EXPECT_FALSE(missed);
    publisher.join();
    bus.Flush();
    bus.Unsubscribe(*handle);
    bus.Publish("", "after", nlohmann::json::object());
  }  // the destructor records what is still queued
  ASSERT_EQ(seen.size(), 200u);
  for (size_t i = 0; i < seen.size(); ++i) {
    EXPECT_EQ(seen[i], static_cast<int64_t>(i) + 1);
  }
  absl::StatusOr<int64_t> last = repo.LastSeq();
  ASSERT_TRUE(last.ok());
  EXPECT_EQ(*last, 201);
}

}  // namespace
}  // namespace abox::daemon
