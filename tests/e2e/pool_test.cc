// The warm pool with real VMs (issue 13): creates take restored, idle VMs that never ran a
// command and get their own identity; the pool refills; it gives way when the budget is needed;
// what a killed aboxd left in it is collected by the next one.
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
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

class PoolTest : public CliHomeTest {
 protected:
  nlohmann::json Health() {
    AboxResult r = Abox({"daemon", "status", "--json"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    nlohmann::json j = nlohmann::json::parse(r.out, nullptr, false);
    return j.is_object() ? j["health"] : nlohmann::json::object();
  }

  // Idle VMs of the default image and size.
  static int Idle(const nlohmann::json& health) {
    if (!health.contains("pool")) {
      return -1;
    }
    for (const nlohmann::json& s : health["pool"]["shapes"]) {
      if (s.value("image", "") == "default" && s.value("memory_mib", 0) == 2048) {
        return s.value("idle", 0);
      }
    }
    return 0;
  }

  // Polls the pool until `idle` VMs of the default shape are ready (the bound only ends a hung
  // test: a fill is a restore, a template make the first time).
  nlohmann::json WaitIdle(int idle) {
    nlohmann::json health;
    for (int i = 0; i < 600; ++i) {
      health = Health();
      if (Idle(health) == idle) {
        return health;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    ADD_FAILURE() << "the pool never had " << idle << " idle VMs: " << health.dump();
    return health;
  }

  // How each sandbox started ("pool", "snapshot", "boot"), from its ready event.
  std::map<std::string, std::string> StartedFrom(const std::string& last_id) {
    std::map<std::string, std::string> from;
    for (const auto& [id, payload] : ReadyEvents(last_id)) {
      from[id] = payload.value("started_from", "");
    }
    return from;
  }

  // The ids of the VMs idling in the pool now (their marker files).
  std::vector<std::string> PooledIds() {
    std::vector<std::string> ids;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(fs::path(home_.path()) / "pool", ec)) {
      ids.push_back(e.path().filename().string());
    }
    return ids;
  }
};

TEST_F(PoolTest, CreatesTakePooledVmsThePoolRefillsAndGivesWayToTheBudget) {
  // Room for 4 sandboxes of the default 2 GiB: 2 pooled, 2 for creates.
  AboxResult started = Abox({"daemon", "start", "--pool", "2", "--max-memory", "8192"});
  ASSERT_EQ(started.exit_code, 0) << started.err;
  nlohmann::json health = WaitIdle(2);
  // Pooled VMs count in the ledger like sandboxes.
  EXPECT_EQ(health["ledger"]["memory_mib_used"], 4096) << health.dump();
  std::vector<std::string> pooled = PooledIds();
  ASSERT_EQ(pooled.size(), 2u);

  std::string a = Create();
  std::string b = Create();
  ASSERT_FALSE(a.empty());
  ASSERT_FALSE(b.empty());
  std::map<std::string, std::string> from = StartedFrom(b);
  EXPECT_EQ(from[a], "pool");
  EXPECT_EQ(from[b], "pool");
  // A pooled VM's id is the sandbox's.
  EXPECT_THAT(pooled, ::testing::UnorderedElementsAre(a, b));

  // Each got its own identity before its first command: hostname, sandbox id, randomness.
  std::string probe_a = Sh(
      a,
      "hostname; cat /run/abox/sandbox-id; head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \\n'");
  std::string probe_b = Sh(
      b,
      "hostname; cat /run/abox/sandbox-id; head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \\n'");
  std::vector<std::string> pa = absl::StrSplit(probe_a, '\n');
  std::vector<std::string> pb = absl::StrSplit(probe_b, '\n');
  ASSERT_EQ(pa.size(), 3u) << probe_a;
  ASSERT_EQ(pb.size(), 3u) << probe_b;
  EXPECT_EQ(pa[0], absl::StrCat("abox-", a));
  EXPECT_EQ(pa[1], a);
  EXPECT_EQ(pb[0], absl::StrCat("abox-", b));
  EXPECT_EQ(pb[1], b);
  EXPECT_EQ(pa[2].size(), 64u);
  EXPECT_NE(pa[2], pb[2]);
  // The guest clock is the host's, not the template's.
  std::string guest_now = Sh(a, "date +%s");
  int64_t guest_secs = 0;
  ASSERT_TRUE(absl::SimpleAtoi(guest_now, &guest_secs)) << guest_now;
  EXPECT_LE(std::abs(guest_secs - static_cast<int64_t>(::time(nullptr))), 2);

  // The pool refills behind the hand-outs, with VMs that ran nothing: a later hand-out does not
  // see what an earlier sandbox did.
  Sh(a, "echo from-a > /tmp/mark");
  health = WaitIdle(2);
  EXPECT_EQ(health["pool"]["handed_out"], 2);
  EXPECT_GE(health["pool"]["made"].get<int>(), 4);
  EXPECT_EQ(health["ledger"]["memory_mib_used"], 8192);  // a, b and 2 pooled: the budget is full
  EXPECT_EQ(Abox({"rm", "-f", a}).exit_code, 0);
  std::string c = Create();
  ASSERT_FALSE(c.empty());
  EXPECT_EQ(StartedFrom(c)[c], "pool");
  EXPECT_EQ(Sh(c, "cat /tmp/mark 2>/dev/null || echo absent"), "absent");
  EXPECT_EQ(Sh(c, "cat /run/abox/sandbox-id"), c);

  // A create of another size finds no pooled VM and no room in the budget: the idle VMs give
  // way to it (destroyed, their reservations released), and the pool cannot refill meanwhile.
  health = WaitIdle(2);
  std::string big = Create({"--memory", "4096"});
  ASSERT_FALSE(big.empty());
  EXPECT_EQ(StartedFrom(big)[big], "snapshot");
  health = Health();
  EXPECT_EQ(Idle(health), 0) << health.dump();
  EXPECT_GE(health["pool"]["drained"].get<int>(), 2) << health.dump();
  EXPECT_EQ(health["ledger"]["memory_mib_used"], 8192) << health.dump();  // b, c and big
  // Once the budget has room again, the pool fills again: the latest size asked for first.
  EXPECT_EQ(Abox({"rm", "-f", big}).exit_code, 0);
  bool refilled = false;
  for (int i = 0; i < 600 && !refilled; ++i) {
    health = Health();
    for (const nlohmann::json& s : health["pool"]["shapes"]) {
      refilled = refilled || (s.value("memory_mib", 0) == 4096 && s.value("idle", 0) == 1);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  EXPECT_TRUE(refilled) << health.dump();
}

// kill -9 of aboxd leaves its pooled VMs running (they are not tied to it, like sandboxes);
// the next aboxd kills those no create had taken, and removes their files.
TEST_F(PoolTest, TheNextAboxdCollectsWhatAKilledOneLeftInThePool) {
  AboxResult started = Abox({"daemon", "start", "--pool", "1"});
  ASSERT_EQ(started.exit_code, 0) << started.err;
  nlohmann::json health = WaitIdle(1);
  std::vector<std::string> pooled = PooledIds();
  ASSERT_EQ(pooled.size(), 1u);
  const std::string vm = pooled[0];
  ASSERT_FALSE(ProcessesMatching(vm).empty()) << "no QEMU for pooled VM " << vm;

  pid_t aboxd = health["pid"].get<int>();
  ASSERT_EQ(::kill(aboxd, SIGKILL), 0);
  for (int i = 0; i < 100 && ::kill(aboxd, 0) == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_FALSE(ProcessesMatching(vm).empty()) << "the pooled VM died with aboxd";

  // The next aboxd (no pool) finds the marker, kills the VM and removes its run dir.
  AboxResult again = Abox({"daemon", "start", "--pool", "0"});
  ASSERT_EQ(again.exit_code, 0) << again.err;
  for (int i = 0; i < 100 && !ProcessesMatching(vm).empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_TRUE(ProcessesMatching(vm).empty()) << "pooled VM " << vm << " still runs";
  EXPECT_TRUE(PooledIds().empty());
  EXPECT_FALSE(fs::exists(fs::path(home_.path()) / "sandboxes" / vm));
  EXPECT_FALSE(Health().contains("pool"));
  // It is no sandbox of anyone's.
  AboxResult ls = Abox({"ls", "--all", "--json"});
  EXPECT_EQ(ls.exit_code, 0) << ls.err;
  EXPECT_THAT(ls.out, ::testing::Not(::testing::HasSubstr(vm)));
}

}  // namespace
}  // namespace abox::testing
