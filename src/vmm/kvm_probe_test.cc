#include "src/vmm/kvm_probe.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace abox::vmm {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;

// Fake world: counts probes, returns a scripted verdict and key.
class ResolveAccelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "/kvm_probe_XXXXXX";
    ASSERT_NE(::mkdtemp(dir_.data()), nullptr);
    key_ = {.host_kernel = "6.1.0-test",
            .qemu_version = "QEMU emulator version 7.2.22",
            .kernel_sha256 = std::string(64, 'a'),
            .kernel_size = 1234};
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  AccelResolverDeps Deps() {
    AccelResolverDeps deps;
    deps.open_kvm_device = [this] { return kvm_device_; };
    deps.key = [this]() -> absl::StatusOr<KvmProbeKey> { return key_; };
    deps.probe = [this] {
      ++probes_;
      return verdict_;
    };
    deps.cache_path = dir_ + "/cache/kvm-probe.json";
    return deps;
  }

  std::string dir_;
  absl::Status kvm_device_ = absl::OkStatus();
  absl::StatusOr<KvmProbeKey> key_;
  KvmVerdict verdict_{.usable = false, .detail = "probe boot hung", .probe_ms = 8000};
  int probes_ = 0;
};

TEST_F(ResolveAccelTest, EnvironmentOverridesTheRequest) {
  AccelResolverDeps deps = Deps();
  deps.env_accel = "tcg";
  absl::StatusOr<AccelDecision> d = ResolveAccel(Accel::kKvm, deps);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->accel, Accel::kTcg);
  EXPECT_EQ(d->source, "ABOX_ACCEL");
  deps.env_accel = "kvm";
  EXPECT_EQ(ResolveAccel(Accel::kTcg, deps)->accel, Accel::kKvm);
  EXPECT_EQ(probes_, 0);
}

TEST_F(ResolveAccelTest, EnvironmentAutoForcesTheProbe) {
  AccelResolverDeps deps = Deps();
  deps.env_accel = "auto";
  EXPECT_EQ(ResolveAccel(Accel::kKvm, deps)->source, "probe");
  EXPECT_EQ(probes_, 1);
}

TEST_F(ResolveAccelTest, BadEnvironmentValueIsAnError) {
  AccelResolverDeps deps = Deps();
  deps.env_accel = "hvf";
  absl::StatusOr<AccelDecision> d = ResolveAccel(Accel::kAuto, deps);
  EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(d.status().message(), HasSubstr("ABOX_ACCEL"));
}

TEST_F(ResolveAccelTest, ExplicitRequestSkipsTheProbe) {
  absl::StatusOr<AccelDecision> d = ResolveAccel(Accel::kKvm, Deps());
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->accel, Accel::kKvm);
  EXPECT_THAT(d->warning, IsEmpty());
  EXPECT_EQ(probes_, 0);
}

TEST_F(ResolveAccelTest, NoKvmDeviceMeansTcgWithoutProbing) {
  kvm_device_ = absl::NotFoundError("/dev/kvm: No such file or directory");
  absl::StatusOr<AccelDecision> d = ResolveAccel(Accel::kAuto, Deps());
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->accel, Accel::kTcg);
  EXPECT_THAT(d->warning, HasSubstr("/dev/kvm"));
  EXPECT_THAT(d->warning, HasSubstr("TCG"));
  EXPECT_EQ(probes_, 0);
}

TEST_F(ResolveAccelTest, UnusableKvmFallsBackWithTheWarning) {
  absl::StatusOr<AccelDecision> d = ResolveAccel(Accel::kAuto, Deps());
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->accel, Accel::kTcg);
  EXPECT_EQ(d->warning,
            "KVM is not usable on this host (probe boot hung); using TCG software emulation, "
            "expect ~10x slower VMs");
}

TEST_F(ResolveAccelTest, VerdictIsCachedPerKey) {
  verdict_ = {.usable = true, .detail = "probe boot reached the root-mount panic"};
  EXPECT_EQ(ResolveAccel(Accel::kAuto, Deps())->source, "probe");
  absl::StatusOr<AccelDecision> again = ResolveAccel(Accel::kAuto, Deps());
  EXPECT_EQ(again->source, "cache");
  EXPECT_EQ(again->accel, Accel::kKvm);
  EXPECT_EQ(probes_, 1);

  key_->qemu_version = "QEMU emulator version 8.0.0";  // a QEMU upgrade invalidates it
  EXPECT_EQ(ResolveAccel(Accel::kAuto, Deps())->source, "probe");
  key_->qemu_version = "QEMU emulator version 7.2.22";  // the old entry is still there
  EXPECT_EQ(ResolveAccel(Accel::kAuto, Deps())->source, "cache");
  key_->kernel_sha256 = std::string(64, 'b');
  EXPECT_EQ(ResolveAccel(Accel::kAuto, Deps())->source, "probe");
  key_->host_kernel = "6.2.0";
  EXPECT_EQ(ResolveAccel(Accel::kAuto, Deps())->source, "probe");
  EXPECT_EQ(probes_, 4);
}

TEST_F(ResolveAccelTest, CorruptCacheIsReplaced) {
  AccelResolverDeps deps = Deps();
  std::filesystem::create_directories(dir_ + "/cache");
  std::ofstream(deps.cache_path) << R"({"version": 1, "entries": [17, {"usable": "yes"})";
  EXPECT_EQ(ResolveAccel(Accel::kAuto, deps)->source, "probe");
  EXPECT_EQ(ResolveAccel(Accel::kAuto, deps)->source, "cache");
  std::ofstream(deps.cache_path) << R"({"version": 1, "entries": [17, {"usable": "yes"}]})";
  EXPECT_EQ(ResolveAccel(Accel::kAuto, deps)->source, "probe");
  EXPECT_EQ(probes_, 2);
}

TEST_F(ResolveAccelTest, NoKeyMeansProbeWithoutCaching) {
  key_ = absl::InternalError("sha256sum failed");
  EXPECT_EQ(ResolveAccel(Accel::kAuto, Deps())->source, "probe");
  EXPECT_EQ(ResolveAccel(Accel::kAuto, Deps())->source, "probe");
  EXPECT_FALSE(std::filesystem::exists(Deps().cache_path));
}

TEST_F(ResolveAccelTest, CacheKeepsABoundedNumberOfEntries) {
  std::string path = Deps().cache_path;
  for (int i = 0; i < 40; ++i) {
    KvmProbeKey k = *key_;
    k.kernel_size = static_cast<uint64_t>(i);
    ASSERT_TRUE(StoreKvmVerdict(path, k, {.usable = true}).ok());
  }
  KvmProbeKey newest = *key_;
  newest.kernel_size = 39;
  KvmProbeKey oldest = *key_;
  oldest.kernel_size = 0;
  EXPECT_TRUE(LookupKvmVerdict(path, newest).has_value());
  EXPECT_FALSE(LookupKvmVerdict(path, oldest).has_value());
  EXPECT_LT(std::filesystem::file_size(path), 16u << 10);
}

}  // namespace
}  // namespace abox::vmm
