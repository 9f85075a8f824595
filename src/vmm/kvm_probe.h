// Choosing the accelerator: is KVM *usable* here?
//
// "/dev/kvm opens" is not the test: some hosts (nested or paravirtual KVM such as PVM) accept
// the ioctls but hang or crash a stock guest kernel. So the probe boots the real guest kernel
// with `-accel kvm` and no root disk under a deadline: a working KVM reaches the kernel's
// "VFS: Unable to mount root fs" panic within a second or two and QEMU exits (panic=-1 plus
// -no-reboot); a hang or a QEMU crash means "use TCG". The verdict is cached in a JSON file,
// keyed by everything that could change it (host kernel release, QEMU version, guest kernel
// hash and size).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "src/vmm/vmm.h"

namespace abox::vmm {

struct KvmProbeKey {
  std::string host_kernel;   // uname -r
  std::string qemu_version;  // first line of `qemu-system-x86_64 --version`
  std::string kernel_sha256;
  uint64_t kernel_size = 0;

  bool operator==(const KvmProbeKey&) const = default;
};

struct KvmVerdict {
  bool usable = false;
  std::string detail;    // short, for the user: "probe boot hung", "QEMU crashed (signal 6)..."
  std::string evidence;  // QEMU's or the guest's last output line, for logs
  int64_t probe_ms = 0;
};

struct AccelDecision {
  Accel accel = Accel::kTcg;  // never kAuto
  // One line for the user when abox fell back to TCG; empty otherwise.
  std::string warning;
  // Where the decision came from: "ABOX_ACCEL", "requested", "no /dev/kvm", "cache", "probe".
  std::string source;
};

// What ResolveAccel needs from the world; tests substitute fakes.
struct AccelResolverDeps {
  std::optional<std::string> env_accel;           // $ABOX_ACCEL, when set
  std::function<absl::Status()> open_kvm_device;  // can /dev/kvm be opened read-write?
  std::function<absl::StatusOr<KvmProbeKey>()> key;
  std::function<KvmVerdict()> probe;  // the (slow) probe boot
  std::string cache_path;             // empty: no cache
};

// $ABOX_ACCEL (kvm|tcg|auto) overrides `requested`; an explicit kvm/tcg is taken as is; auto
// uses TCG when /dev/kvm cannot be opened, else the cached verdict, else probes and caches.
[[nodiscard]] absl::StatusOr<AccelDecision> ResolveAccel(Accel requested,
                                                         const AccelResolverDeps& deps);

// The user-facing line for a fallback to TCG, e.g. "KVM is not usable on this host (probe boot
// hung); using TCG software emulation, expect ~10x slower VMs".
[[nodiscard]] std::string TcgFallbackWarning(const std::string& why);

// Cache file access. Lookup treats a missing or unreadable cache as a miss.
[[nodiscard]] std::optional<KvmVerdict> LookupKvmVerdict(const std::string& cache_path,
                                                         const KvmProbeKey& key);
[[nodiscard]] absl::Status StoreKvmVerdict(const std::string& cache_path, const KvmProbeKey& key,
                                           const KvmVerdict& verdict);

// The real world.
struct KvmProbeOptions {
  std::string qemu_binary = "qemu-system-x86_64";
  std::string kernel;      // the guest kernel the VMs will boot
  std::string cache_path;  // e.g. $ABOX_HOME/cache/kvm-probe.json; empty: no cache
  std::chrono::milliseconds deadline{8000};
  std::optional<uint64_t> tsc_khz;
};

[[nodiscard]] absl::StatusOr<KvmProbeKey> ComputeKvmProbeKey(const KvmProbeOptions& options);
// Boots options.kernel under KVM with the deadline and judges the outcome.
[[nodiscard]] KvmVerdict ProbeKvm(const KvmProbeOptions& options);
// Dependencies wired to the host: getenv, /dev/kvm, uname, QEMU, sha256sum.
[[nodiscard]] AccelResolverDeps HostAccelResolverDeps(const KvmProbeOptions& options);

}  // namespace abox::vmm
