#include "src/daemon/lifecycle/warm_pool.h"

#include <atomic>
#include <chrono>
#include <fstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/testing/fake_vmm.h"

namespace abox::daemon {
namespace {

const PoolShape kShape{.image = "default", .cpus = 1, .memory_mib = 512};

// The pool's boundaries as recorded fakes: VMs are ids with hooks (no process), the image is a
// manifest whose build time a test changes to "rebuild" it.
class FakePoolWorld {
 public:
  FakePoolWorld() {
    files_.manifest.name = "default";
    files_.manifest.created_at = "2026-12-01T00:00:00Z";
  }

  PoolDeps Deps() {
    PoolDeps d;
    d.start = [this](const std::string& id, const PoolShape& shape,
                     const image::ImageFiles& files) -> absl::StatusOr<BootedVm> {
      std::lock_guard lock(mu_);
      if (fail_starts_ > 0) {
        --fail_starts_;
        return absl::InternalError("qemu said no");
      }
      started_.push_back(id);
      shapes_.push_back(shape);
      EXPECT_EQ(files.manifest, files_.manifest);
      auto hooks = std::make_shared<VmHooks>();
      hooks_[id] = hooks;
      return BootedVm{.vm = nullptr, .hooks = hooks, .restored = true};
    };
    d.destroy = [this](const std::string& id, std::unique_ptr<runtime::Sandbox>) {
      std::lock_guard lock(mu_);
      destroyed_.push_back(id);
    };
    d.open_image = [this](const std::string& name) -> absl::StatusOr<image::ImageFiles> {
      std::lock_guard lock(mu_);
      if (name != "default") {
        return absl::NotFoundError(absl::StrCat("no image ", name));
      }
      return files_;
    };
    d.available_mib = [this] { return available_mib_.load(); };
    d.new_id = [this] { return absl::StrCat("vm", next_id_++); };
    return d;
  }

  image::ImageFiles files() {
    std::lock_guard lock(mu_);
    return files_;
  }
  void Rebuild() {
    std::lock_guard lock(mu_);
    files_.manifest.created_at = "2026-12-02T00:00:00Z";
  }
  void FailStarts(int n) {
    std::lock_guard lock(mu_);
    fail_starts_ = n;
  }
  std::vector<std::string> started() {
    std::lock_guard lock(mu_);
    return started_;
  }
  std::vector<std::string> destroyed() {
    std::lock_guard lock(mu_);
    return destroyed_;
  }
  std::shared_ptr<VmHooks> hooks(const std::string& id) {
    std::lock_guard lock(mu_);
    return hooks_[id];
  }

  std::atomic<int64_t> available_mib_{1 << 20};

 private:
  std::mutex mu_;
  image::ImageFiles files_;
  int fail_starts_ = 0;
  std::vector<std::string> started_;
  std::vector<PoolShape> shapes_;
  std::vector<std::string> destroyed_;
  std::map<std::string, std::shared_ptr<VmHooks>> hooks_;
  std::atomic<int> next_id_{1};
};

// Waits (not a timing assertion: the bound only ends a hung test) for the pool to get there.
template <typename Pred>
bool Eventually(Pred pred) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (std::chrono::steady_clock::now() < deadline) {
    if (pred()) {
      return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return pred();
}

int Idle(const WarmPool& pool) {
  int n = 0;
  for (const PoolShapeStatus& s : pool.Status().shapes) {
    n += s.idle;
  }
  return n;
}

class WarmPoolTest : public ::testing::Test {
 protected:
  void SetUp() override {
    home_ =
        std::filesystem::path(::testing::TempDir()) /
        absl::StrCat("warm-pool-", ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(home_);
    std::filesystem::create_directories(home_);
    layout_.home = home_;
  }
  PoolOptions Options(int size) {
    return PoolOptions{.size = size,
                       .check_interval = absl::Milliseconds(5),
                       .min_available_mib = 1024,
                       .max_failures = 2,
                       .failure_backoff = absl::Hours(1)};
  }
  bool HasMarker(const std::string& id) { return std::filesystem::exists(home_ / "pool" / id); }

  std::filesystem::path home_;
  base::HostLayout layout_;
  FakePoolWorld world_;
};

TEST_F(WarmPoolTest, FillsToItsSizeCountedInTheLedgerAndRefillsAfterATake) {
  Ledger ledger({.cpus = 8, .memory_mib = 8192});
  WarmPool pool(Options(2), ledger, layout_, world_.Deps());
  pool.Start({kShape});
  ASSERT_TRUE(Eventually([&] { return Idle(pool) == 2; }));
  EXPECT_EQ(ledger.Usage().memory_mib, 1024);
  EXPECT_EQ(ledger.Usage().cpus, 2);
  EXPECT_TRUE(HasMarker("vm1"));
  EXPECT_TRUE(HasMarker("vm2"));

  std::optional<PooledVm> vm = pool.Take(kShape, world_.files());
  ASSERT_TRUE(vm.has_value());
  EXPECT_EQ(vm->id, "vm1");  // the oldest
  EXPECT_TRUE(vm->booted.restored);
  // The reservation passed to the taker, under the VM's id: the ledger still counts it, and the
  // marker stays until a sandbox record owns the id.
  EXPECT_TRUE(HasMarker("vm1"));
  pool.Adopted("vm1");
  EXPECT_FALSE(HasMarker("vm1"));

  ASSERT_TRUE(Eventually([&] { return Idle(pool) == 2; }));
  EXPECT_EQ(ledger.Usage().memory_mib, 1536);  // 2 idle + the one taken
  PoolStatus status = pool.Status();
  EXPECT_EQ(status.handed_out, 1);
  EXPECT_EQ(status.made, 3);
  ledger.Release("vm1");

  pool.Stop();
  EXPECT_EQ(Idle(pool), 0);
  EXPECT_EQ(ledger.Usage().memory_mib, 0);
  EXPECT_EQ(world_.destroyed().size(), 2u);
  EXPECT_FALSE(HasMarker("vm2"));
  EXPECT_FALSE(HasMarker("vm3"));
  // A stopped pool hands out nothing.
  EXPECT_FALSE(pool.Take(kShape, world_.files()).has_value());
}

TEST_F(WarmPoolTest, HandsOutOnlyTheSameShapeAndTheImageAsItIsNow) {
  Ledger ledger({.cpus = 8, .memory_mib = 8192});
  WarmPool pool(Options(1), ledger, layout_, world_.Deps());
  pool.Start({kShape});
  ASSERT_TRUE(Eventually([&] { return Idle(pool) == 1; }));

  PoolShape bigger = kShape;
  bigger.memory_mib = 1024;
  EXPECT_FALSE(pool.Take(bigger, world_.files()).has_value());
  PoolShape other_image = kShape;
  other_image.image = "node";
  EXPECT_FALSE(pool.Take(other_image, world_.files()).has_value());

  // The image was rebuilt: the VM of the old build is never handed out; it is replaced.
  world_.Rebuild();
  EXPECT_FALSE(pool.Take(kShape, world_.files()).has_value());
  ASSERT_TRUE(Eventually([&] { return world_.destroyed() == std::vector<std::string>{"vm1"}; }));
  ASSERT_TRUE(Eventually([&] { return Idle(pool) == 1; }));
  std::optional<PooledVm> vm = pool.Take(kShape, world_.files());
  ASSERT_TRUE(vm.has_value());
  EXPECT_EQ(vm->id, "vm2");
  EXPECT_EQ(vm->files.manifest, world_.files().manifest);
  pool.Discard(*std::move(vm));
  EXPECT_FALSE(HasMarker("vm2"));
  EXPECT_EQ(world_.destroyed(), (std::vector<std::string>{"vm1", "vm2"}));
}

TEST_F(WarmPoolTest, AVmThatDiesWhileIdleIsReplacedAndNeverHandedOut) {
  Ledger ledger({.cpus = 8, .memory_mib = 8192});
  WarmPool pool(Options(1), ledger, layout_, world_.Deps());
  pool.Start({kShape});
  ASSERT_TRUE(Eventually([&] { return Idle(pool) == 1; }));
  world_.hooks("vm1")->OnFailure(absl::UnavailableError("QEMU killed by signal 9"));
  ASSERT_TRUE(Eventually([&] { return !world_.destroyed().empty(); }));
  EXPECT_EQ(world_.destroyed(), std::vector<std::string>{"vm1"});
  ASSERT_TRUE(Eventually([&] { return Idle(pool) == 1; }));
  std::optional<PooledVm> vm = pool.Take(kShape, world_.files());
  ASSERT_TRUE(vm.has_value());
  EXPECT_EQ(vm->id, "vm2");
  pool.Discard(*std::move(vm));
}

TEST_F(WarmPoolTest, GivesUpIdleVmsWhenACreateNeedsTheBudget) {
  Ledger ledger({.cpus = 8, .memory_mib = 2048});
  WarmPool pool(Options(2), ledger, layout_, world_.Deps());
  pool.Start({kShape});
  ASSERT_TRUE(Eventually([&] { return Idle(pool) == 2; }));

  // 1024 of 2048 MiB are the pool's; a create of 1536 needs one of its VMs gone.
  ASSERT_FALSE(ledger.Reserve("big", 1, 1536).ok());
  ASSERT_TRUE(pool.ReserveGivingWay("big", 1, 1536).ok());
  EXPECT_EQ(world_.destroyed().size(), 1u);
  EXPECT_EQ(pool.Status().drained, 1);
  // The pool does not take the room back while the sandbox holds it.
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(Idle(pool), 1);
  EXPECT_EQ(ledger.Usage().memory_mib, 2048);

  // A create that would not fit even with the whole pool gone destroys nothing.
  absl::Status refused = pool.ReserveGivingWay("huge", 1, 4096);
  EXPECT_TRUE(absl::IsResourceExhausted(refused)) << refused;
  EXPECT_EQ(Idle(pool), 1);
  EXPECT_EQ(world_.destroyed().size(), 1u);

  // Once the sandbox goes, the pool fills up again.
  ledger.Release("big");
  ASSERT_TRUE(Eventually([&] { return Idle(pool) == 2; }));
}

TEST_F(WarmPoolTest, DrainsWhileTheHostIsShortOfMemoryAndFillsAfter) {
  Ledger ledger({.cpus = 8, .memory_mib = 8192});
  WarmPool pool(Options(2), ledger, layout_, world_.Deps());
  pool.Start({kShape});
  ASSERT_TRUE(Eventually([&] { return Idle(pool) == 2; }));
  world_.available_mib_ = 512;
  ASSERT_TRUE(Eventually([&] { return Idle(pool) == 0; }));
  EXPECT_TRUE(pool.Status().memory_low);
  EXPECT_EQ(pool.Status().drained, 2);
  EXPECT_EQ(ledger.Usage().memory_mib, 0);
  size_t started = world_.started().size();
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(world_.started().size(), started);  // nothing started while memory is short
  world_.available_mib_ = 4096;
  ASSERT_TRUE(Eventually([&] { return Idle(pool) == 2; }));
  EXPECT_FALSE(pool.Status().memory_low);
}

TEST_F(WarmPoolTest, FailedStartsAreReportedReleasedAndRestAfterTheLimit) {
  Ledger ledger({.cpus = 8, .memory_mib = 8192});
  world_.FailStarts(2);
  WarmPool pool(Options(1), ledger, layout_, world_.Deps());
  pool.Start({kShape});
  ASSERT_TRUE(Eventually([&] {
    PoolStatus s = pool.Status();
    return !s.shapes.empty() && s.shapes[0].last_error == "qemu said no" && !s.shapes[0].filling;
  }));
  // Two failures in a row: the shape rests (an hour here), so nothing more is started.
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_TRUE(world_.started().empty());
  EXPECT_EQ(Idle(pool), 0);
  EXPECT_EQ(ledger.Usage().memory_mib, 0);
  EXPECT_FALSE(std::filesystem::exists(home_ / "pool" / "vm1"));
  EXPECT_FALSE(std::filesystem::exists(home_ / "pool" / "vm2"));

  // An image that cannot be opened is a failed fill too, with the reason.
  PoolShape missing = kShape;
  missing.image = "nosuch";
  pool.Want(missing);
  ASSERT_TRUE(Eventually([&] {
    for (const PoolShapeStatus& s : pool.Status().shapes) {
      if (s.shape.image == "nosuch" && s.last_error == "no image nosuch") {
        return true;
      }
    }
    return false;
  }));
}

TEST_F(WarmPoolTest, KeepsOnlyTheLatestShapes) {
  Ledger ledger({.cpus = 8, .memory_mib = 8192});
  PoolOptions options = Options(1);
  options.max_shapes = 1;
  WarmPool pool(options, ledger, layout_, world_.Deps());
  pool.Start({kShape});
  ASSERT_TRUE(Eventually([&] { return Idle(pool) == 1; }));
  PoolShape two_cpus = kShape;
  two_cpus.cpus = 2;
  pool.Want(two_cpus);
  ASSERT_TRUE(Eventually([&] {
    PoolStatus s = pool.Status();
    return s.shapes.size() == 1 && s.shapes[0].shape == two_cpus && s.shapes[0].idle == 1;
  }));
  EXPECT_EQ(world_.destroyed(), std::vector<std::string>{"vm1"});
  EXPECT_EQ(ledger.Usage().cpus, 2);
}

TEST_F(WarmPoolTest, SizeZeroStartsNothing) {
  Ledger ledger({.cpus = 8, .memory_mib = 8192});
  WarmPool pool(Options(0), ledger, layout_, world_.Deps());
  pool.Start({kShape});
  pool.Want(kShape);
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  EXPECT_TRUE(world_.started().empty());
  EXPECT_FALSE(pool.Take(kShape, world_.files()).has_value());
  EXPECT_TRUE(pool.ReserveGivingWay("one", 1, 512).ok());  // a plain reservation
  EXPECT_EQ(ledger.Usage().memory_mib, 512);
}

TEST(WarmPoolDefaultsTest, DefaultSizeFitsTheBudget) {
  // A quarter of the budget: two 2 GiB VMs from 16 GiB up, one from a 16 GiB laptop's 11 GiB.
  EXPECT_EQ(DefaultPoolSize({.cpus = 4, .memory_mib = 17408}, 2048), 2);
  EXPECT_EQ(DefaultPoolSize({.cpus = 4, .memory_mib = 11264}, 2048), 1);
  EXPECT_EQ(DefaultPoolSize({.cpus = 4, .memory_mib = 5120}, 2048), 0);
  EXPECT_EQ(DefaultPoolSize({.cpus = 4, .memory_mib = 2048}, 512), 1);
  EXPECT_EQ(DefaultPoolSize({.cpus = 4, .memory_mib = 17408}, 0), 0);
}

// What a killed aboxd left: markers of pooled VMs. Those no sandbox record owns are killed and
// their run dirs removed; an owned one (a create had taken it) is left to sandbox recovery.
TEST_F(WarmPoolTest, CollectsTheVmsAKilledAboxdLeftInThePool) {
  abox::testing::FakeVmm vmm;
  std::filesystem::create_directories(home_ / "pool");
  for (const char* id : {"aaaaaaaaaaaa", "bbbbbbbbbbbb"}) {
    std::ofstream(home_ / "pool" / id).put('\n');
    std::filesystem::create_directories(layout_.SandboxRunDir(id));
  }
  int removed = WarmPool::CollectLeftovers(
      layout_, vmm, [](const std::string& id) { return id == "bbbbbbbbbbbb"; });
  EXPECT_EQ(removed, 1);
  EXPECT_FALSE(std::filesystem::exists(home_ / "pool" / "aaaaaaaaaaaa"));
  EXPECT_FALSE(std::filesystem::exists(layout_.SandboxRunDir("aaaaaaaaaaaa")));
  EXPECT_FALSE(std::filesystem::exists(home_ / "pool" / "bbbbbbbbbbbb"));
  EXPECT_TRUE(std::filesystem::exists(layout_.SandboxRunDir("bbbbbbbbbbbb")));
}

}  // namespace
}  // namespace abox::daemon
