#include "src/vmm/qemu_argv.h"

#include <sys/stat.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace abox::vmm {
namespace {

// Boot-time tuning measured on TCG (docs: PLATFORM-NOTES): each saves time or avoids a hang.
constexpr const char* kCmdlineTuning[] = {
    "console=ttyS0",        // the serial console the shim logs
    "mitigations=off",      // the VM boundary is the security boundary, not in-guest mitigations
    "cryptomgr.notests",    // crypto self-tests cost ~0.5 s under TCG
    "nokaslr",              // measured faster; KASLR buys little in a disposable guest
    "edd=off",              // no BIOS disks to probe
    "audit=0",              // no audit subsystem in the guest
    "no_timer_check",       // the IO-APIC timer check is slow and pointless under emulation
    "random.trust_cpu=on",  // do not block on entropy at boot
    "panic=-1",             // a guest panic reboots at once; with -no-reboot QEMU then exits
    "quiet",                // fewer console bytes to emulate and log
};

}  // namespace

const std::vector<HardeningFlag>& QemuHardeningFlags() {
  static const std::vector<HardeningFlag> kFlags = {
      {"-nodefaults", nullptr,
       "no default NIC, VGA, serial, monitor, floppy or CD-ROM: every device is listed here"},
      {"-no-user-config", nullptr, "ignore /etc/qemu/*.conf so the host cannot add devices"},
      {"-nic", "none",
       "the VM has no network card: all egress goes through the host proxy over the agent "
       "channel"},
      {"-sandbox", "on,obsolete=deny,elevateprivileges=deny,spawn=deny,resourcecontrol=deny",
       "seccomp: a guest that takes over QEMU cannot use obsolete syscalls, set*id, "
       "fork/exec, or change scheduling/affinity/priority"},
      {"-msg", "timestamp=on", "timestamps in QEMU's log, to line it up with the console log"},
  };
  return kFlags;
}

PrivilegePlan PlanPrivileges(const PrivilegeInputs& in) {
  PrivilegePlan plan;
  if (in.euid != 0) {
    return plan;  // Already unprivileged: QEMU runs as the caller's user.
  }
  PrivilegeDrop drop;
  if (in.accel == Accel::kKvm) {
    mode_t mode = in.kvm_mode.value_or(0);
    if ((mode & S_IROTH) != 0 && (mode & S_IWOTH) != 0) {
      // World-accessible /dev/kvm: nothing to add.
    } else if ((mode & S_IRGRP) != 0 && (mode & S_IWGRP) != 0) {
      drop.groups.push_back(in.kvm_gid);
    } else {
      plan.warning =
          "QEMU runs as root: /dev/kvm is accessible to root only; give it a group (e.g. "
          "`chgrp kvm /dev/kvm && chmod 660 /dev/kvm`) so abox can drop privileges";
      return plan;
    }
  }
  plan.drop = drop;
  return plan;
}

std::string KernelCmdline(std::optional<uint64_t> tsc_khz, const std::string& extra) {
  std::vector<std::string> parts(std::begin(kCmdlineTuning), std::end(kCmdlineTuning));
  if (tsc_khz) {
    // Without it the stock kernel hangs at "Marking TSC unstable" on microvm under TCG.
    parts.insert(parts.begin() + 1, absl::StrCat("tsc_early_khz=", *tsc_khz));
  }
  if (!extra.empty()) {
    parts.push_back(extra);
  }
  return absl::StrJoin(parts, " ");
}

std::string FingerprintKernelCmdline(std::optional<uint64_t> tsc_khz, const std::string& extra) {
  return KernelCmdline(tsc_khz ? std::optional<uint64_t>(0) : std::nullopt, extra);
}

std::vector<std::string> VmmChildEnvironment() {
  return {"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8"};
}

std::vector<std::string> BuildQemuArgv(const QemuArgvInput& in) {
  std::vector<std::string> a = in.jail_prefix;
  auto add = [&a](std::string flag, std::string value) {
    a.push_back(std::move(flag));
    a.push_back(std::move(value));
  };
  a.emplace_back(in.qemu_binary);
  add("-name", absl::StrCat("abox-", in.id));
  // microvm keeps its defaults: pit/pic/rtc on (turning them off hangs TCG boots), ACPI on
  // (the stock kernel finds the virtio-mmio devices through ACPI).
  add("-M", absl::StrCat("microvm,memory-backend=", kMemoryBackendId));
  for (const HardeningFlag& f : QemuHardeningFlags()) {
    a.emplace_back(f.flag);
    if (f.value != nullptr) {
      a.emplace_back(f.value);
    }
  }
  a.emplace_back("-nographic");
  a.emplace_back("-no-reboot");  // a guest reboot/panic ends the VM instead of looping
  if (in.accel == Accel::kKvm) {
    add("-accel", "kvm");
    add("-cpu", "host");
  } else {
    // QEMU's default translation cache is 1 GiB, and it fills: a TCG VM at -m 512 reached
    // 1.3 GiB RSS after a benchmark run. 128 MiB bounds it (docs/BENCHMARKS.md).
    add("-accel", "tcg,tb-size=128");
    // Every x86-64 feature TCG emulates (AVX2 included since QEMU 7.2), not qemu64's baseline:
    // agent CLIs built with Bun (Claude Code's native binary) die with SIGILL without AVX2.
    add("-cpu", "max");
  }
  // Guest memory is always an explicit backend with one name, so that a state saved from a VM
  // with file-backed memory loads into one with anonymous memory and back (migration matches
  // memory blocks by name).
  if (in.memory_fd >= 0) {
    add("-object", absl::StrCat("memory-backend-file,id=", kMemoryBackendId,
                                ",size=", in.memory_mib, "M,mem-path=/proc/self/fd/", in.memory_fd,
                                ",share=", in.memory_shared ? "on" : "off"));
  } else {
    add("-object",
        absl::StrCat("memory-backend-ram,id=", kMemoryBackendId, ",size=", in.memory_mib, "M"));
  }
  add("-m", absl::StrCat(in.memory_mib));
  add("-smp", absl::StrCat(in.cpus));
  add("-kernel", in.kernel_path);
  add("-initrd", in.initrd_path);
  add("-append", in.kernel_cmdline);

  // Root disk: a per-VM qcow2 overlay over the read-only golden image (and over the frozen
  // layers of a template or checkpoint between them), all passed as descriptors (fd sets 1, 2,
  // 3...), with each backing node given explicitly so QEMU never opens a backing path recorded
  // in an image.
  add("-add-fd", absl::StrCat("fd=", in.overlay_fd, ",set=1"));
  add("-add-fd", absl::StrCat("fd=", in.rootfs_fd, ",set=2"));
  add("-blockdev",
      "driver=raw,node-name=rootfs-base,read-only=on,file.driver=file,"
      "file.filename=/dev/fdset/2");
  std::string below = "rootfs-base";
  for (size_t i = 0; i < in.layer_fds.size(); ++i) {
    size_t set = 3 + i;
    std::string node = absl::StrCat("layer", i);
    add("-add-fd", absl::StrCat("fd=", in.layer_fds[i], ",set=", set));
    // drop-cache=off: no slow posix_fadvise(DONTNEED) on a read-only image at activation.
    add("-blockdev", absl::StrCat("driver=qcow2,node-name=", node, ",backing=", below,
                                  ",read-only=on,file.driver=file,file.drop-cache=off,"
                                  "file.filename=/dev/fdset/",
                                  set));
    below = node;
  }
  add("-blockdev", absl::StrCat("driver=qcow2,node-name=rootfs,backing=", below,
                                ",discard=unmap,file.driver=file,file.filename=/dev/fdset/1"));
  add("-device", "virtio-blk-device,drive=rootfs");

  // Agent channel: one virtio-serial port on a unix socket the host connects to.
  add("-device", "virtio-serial-device");
  add("-chardev", absl::StrCat("socket,id=agent,fd=", in.agent_fd, ",server=on,wait=off"));
  add("-device", "virtserialport,chardev=agent,name=org.abox.agent.0");

  // QMP, for the host only.
  add("-chardev", absl::StrCat("socket,id=qmp,fd=", in.qmp_fd, ",server=on,wait=off"));
  add("-mon", "chardev=qmp,mode=control");

  // Serial console into the shim, which keeps a bounded log.
  add("-chardev", absl::StrCat("socket,id=con,fd=", in.console_fd, ",server=off"));
  add("-serial", "chardev:con");

  add("-device", "virtio-rng-device");
  if (in.incoming) {
    // The state comes later over QMP (migrate-incoming), after the capabilities that must match
    // the saving side are set.
    add("-incoming", "defer");
  }
  return a;
}

}  // namespace abox::vmm
