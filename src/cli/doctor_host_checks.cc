// `abox doctor`'s host checks: what the machine gives abox (KVM, QEMU with seccomp, user
// namespaces, cgroups, disk space).
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "src/cli/doctor_checks.h"
#include "src/cli/output.h"

namespace abox::cli {
namespace {

constexpr char kHost[] = "host";

Check Make(std::string name, CheckStatus status, std::string reason, std::string fix = "") {
  return Check{kHost, std::move(name), status, std::move(reason), std::move(fix)};
}

Check KvmCheck(const HostView& host, const HostCheckOptions& o) {
  std::string override_note;
  if (o.env_accel && !o.env_accel->empty() && *o.env_accel != "auto") {
    override_note = absl::StrCat(" (ABOX_ACCEL=", *o.env_accel, " overrides the probe)");
  }
  if (!host.Lstat("/dev/kvm").ok()) {
    return Make(
        "host.kvm", CheckStatus::kWarn,
        "no /dev/kvm: VMs run under TCG (software emulation, several times slower)" + override_note,
        "enable virtualization (VT-x/AMD-V, nested virtualization on a VM) and load the "
        "kvm_intel or kvm_amd module");
  }
  if (absl::Status open = host.OpenReadWrite("/dev/kvm"); !open.ok()) {
    return Make("host.kvm", CheckStatus::kWarn,
                absl::StrCat("/dev/kvm does not open read-write (", open.message(),
                             "): VMs run under TCG") +
                    override_note,
                "add yourself to the group of /dev/kvm (usually `kvm`) and log in again");
  }
  std::optional<vmm::KvmVerdict> verdict = o.kvm_verdict ? o.kvm_verdict() : std::nullopt;
  if (!verdict) {
    return Make(
        "host.kvm", CheckStatus::kInfo,
        "/dev/kvm opens; whether a guest really boots under it is not known (no cached probe "
        "verdict)" +
            override_note,
        "run `abox doctor` without --quick once an image is built (it runs abox's KVM probe "
        "boot)");
  }
  if (verdict->usable) {
    return Make("host.kvm", CheckStatus::kPass,
                absl::StrCat("KVM is usable: ", verdict->detail) + override_note);
  }
  return Make("host.kvm", CheckStatus::kWarn,
              absl::StrCat("/dev/kvm opens but KVM is not usable (", verdict->detail,
                           "): VMs run under TCG, several times slower") +
                  override_note,
              "nothing to fix in abox; on a nested or paravirtual host, ask for nested "
              "virtualization");
}

std::vector<Check> QemuChecks(const HostView& host, const HostCheckOptions& o) {
  std::vector<Check> out;
  absl::StatusOr<std::string> version = host.run({o.qemu_binary, "--version"});
  if (!version.ok()) {
    out.push_back(Make("host.qemu", CheckStatus::kFail,
                       absl::StrCat(o.qemu_binary, " does not run: ", version.status().message()),
                       "apt-get install qemu-system-x86"));
    return out;
  }
  std::vector<std::string> lines = absl::StrSplit(*version, '\n');
  out.push_back(Make("host.qemu", CheckStatus::kPass,
                     std::string(absl::StripAsciiWhitespace(lines.empty() ? "" : lines[0]))));
  absl::StatusOr<std::string> help = host.run({o.qemu_binary, "-help"});
  if (help.ok() && absl::StrContains(*help, "-sandbox on")) {
    out.push_back(Make("host.qemu_seccomp", CheckStatus::kPass,
                       "QEMU has -sandbox (seccomp); abox runs every VM with "
                       "-sandbox on,obsolete=deny,elevateprivileges=deny,spawn=deny,"
                       "resourcecontrol=deny"));
  } else {
    out.push_back(Make("host.qemu_seccomp", CheckStatus::kFail,
                       "QEMU was built without seccomp (-sandbox): VMs would not start",
                       "install Debian's qemu-system-x86 (built with libseccomp)"));
  }
  return out;
}

Check UserNamespaceCheck(const HostView& host) {
  absl::StatusOr<std::string> max = host.Read("/proc/sys/user/max_user_namespaces");
  int64_t n = 0;
  if (!max.ok() || !absl::SimpleAtoi(absl::StripAsciiWhitespace(*max), &n)) {
    return Make("host.userns", CheckStatus::kWarn, "cannot read /proc/sys/user/max_user_namespaces",
                "");
  }
  // Debian kernels before 5.10 had their own switch; newer ones drop it.
  absl::StatusOr<std::string> clone = host.Read("/proc/sys/kernel/unprivileged_userns_clone");
  bool clone_off = clone.ok() && absl::StripAsciiWhitespace(*clone) == "0";
  if (n == 0 || clone_off) {
    return Make("host.userns", CheckStatus::kWarn,
                n == 0 ? "user namespaces are off (user.max_user_namespaces = 0)"
                       : "unprivileged user namespaces are off (kernel.unprivileged_userns_clone "
                         "= 0)",
                "`abox image build` (mmdebstrap --mode=unshare) and, when abox is not root, "
                "QEMU's jail need them: sysctl -w user.max_user_namespaces=15000 "
                "kernel.unprivileged_userns_clone=1");
  }
  return Make("host.userns", CheckStatus::kPass,
              absl::StrCat("available (max ", n,
                           "): image builds use them, and QEMU's jail when abox is not root"));
}

Check CgroupCheck(const HostView& host) {
  if (!host.Lstat("/sys/fs/cgroup/cgroup.controllers").ok()) {
    return Make("host.cgroups", CheckStatus::kWarn,
                "no unified cgroup v2 hierarchy at /sys/fs/cgroup (v1 or hybrid): no per-VM "
                "limits can be delegated here; abox sets none yet (decision 0021)",
                "boot with systemd.unified_cgroup_hierarchy=1");
  }
  std::string path = "/";
  if (absl::StatusOr<std::string> self = host.Read("/proc/self/cgroup"); self.ok()) {
    for (absl::string_view line : absl::StrSplit(*self, '\n', absl::SkipEmpty())) {
      if (absl::StartsWith(line, "0::")) {
        path = std::string(line.substr(3));
      }
    }
  }
  std::string dir = absl::StrCat("/sys/fs/cgroup", path == "/" ? "" : path);
  absl::StatusOr<struct stat> st = host.Stat(dir);
  absl::StatusOr<std::string> controllers = host.Read(dir + "/cgroup.controllers");
  std::string list(controllers.ok() ? absl::StripAsciiWhitespace(*controllers) : "");
  bool writable = st.ok() && (host.euid == 0 || st->st_uid == host.euid);
  bool has_all = absl::StrContains(list, "memory") && absl::StrContains(list, "pids") &&
                 absl::StrContains(list, "cpu");
  if (!writable || !has_all) {
    return Make("host.cgroups", CheckStatus::kWarn,
                absl::StrCat("cgroup v2; your cgroup ", path, " is ",
                             writable ? "yours" : "not yours", ", controllers: [", list,
                             "]: memory, pids and cpu cannot be delegated; abox sets no per-VM "
                             "limits yet (decision 0021)"),
                "run abox under a systemd user session with Delegate=yes");
  }
  return Make("host.cgroups", CheckStatus::kPass,
              absl::StrCat("cgroup v2, ", path, " delegated with [", list,
                           "]; abox sets no per-VM limits yet (decision 0021)"));
}

Check DiskCheck(const HostView& host, const std::string& home) {
  // $ABOX_HOME may not exist yet: its nearest existing parent holds it.
  std::filesystem::path at(home);
  while (!at.empty() && at != at.root_path() && !host.Stat(at.string()).ok()) {
    at = at.parent_path();
  }
  absl::StatusOr<uint64_t> free = host.free_bytes(at.string());
  if (!free.ok()) {
    return Make(
        "host.disk", CheckStatus::kWarn,
        absl::StrCat("cannot tell the free space under ", home, ": ", free.status().message()));
  }
  constexpr uint64_t kGiB = uint64_t{1} << 30;
  std::string reason = absl::StrCat(HumanBytes(*free), " free under ", home);
  if (*free < kGiB) {
    return Make("host.disk", CheckStatus::kFail,
                reason + ": workspace fetches need 1 GiB free and VM overlays grow",
                "free disk space, or set ABOX_HOME to a larger file system");
  }
  if (*free < 10 * kGiB) {
    return Make("host.disk", CheckStatus::kWarn,
                reason + ": an image takes ~1 GiB, each sandbox's overlay grows with its writes",
                "free disk space");
  }
  return Make("host.disk", CheckStatus::kPass, reason);
}

}  // namespace

std::vector<Check> HostChecks(const HostView& host, const HostCheckOptions& options) {
  std::vector<Check> out;
  out.push_back(KvmCheck(host, options));
  for (Check& c : QemuChecks(host, options)) {
    out.push_back(std::move(c));
  }
  out.push_back(UserNamespaceCheck(host));
  out.push_back(CgroupCheck(host));
  out.push_back(DiskCheck(host, options.home));
  return out;
}

}  // namespace abox::cli
