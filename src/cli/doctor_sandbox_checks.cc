// `abox doctor`'s sandbox checks: each running QEMU's confinement read back from /proc
// (seccomp, no_new_privs, capabilities, cgroup, environment, descriptors, argv; its jail's uid,
// namespaces, root and limits in doctor_jail_checks.cc), and the residual risks the results
// leave.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/algorithm/container.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "src/cli/doctor_checks.h"
#include "src/cli/doctor_jail_checks.h"
#include "src/vmm/jail.h"

namespace abox::cli {
namespace {

struct Ctx {
  const HostView& host;
  const SandboxFacts& f;
  std::string proc;  // /proc/<pid>
};

Check Make(const Ctx& c, const std::string& what, CheckStatus status, const std::string& reason,
           std::string fix = "") {
  return Check{"sandbox", absl::StrCat("sandbox.", c.f.id, ".", what), status,
               absl::StrCat(c.f.name.empty() ? c.f.id : c.f.name, ": ", reason), std::move(fix)};
}

std::vector<Check> StatusChecks(const Ctx& c, const std::string& status) {
  std::vector<Check> out;
  auto field = [&](const char* key) { return HostView::StatusField(status, key).value_or("?"); };
  std::string seccomp = field("Seccomp");
  out.push_back(seccomp == "2"
                    ? Make(c, "seccomp", CheckStatus::kPass, "Seccomp: 2 (a filter is loaded)")
                    : Make(c, "seccomp", CheckStatus::kFail,
                           absl::StrCat("Seccomp: ", seccomp, " (no filter)"),
                           "recreate the sandbox; QEMU must run with -sandbox on"));
  std::string nnp = field("NoNewPrivs");
  out.push_back(nnp == "1" ? Make(c, "no_new_privs", CheckStatus::kPass, "NoNewPrivs: 1")
                           : Make(c, "no_new_privs", CheckStatus::kFail,
                                  absl::StrCat("NoNewPrivs: ", nnp), "recreate the sandbox"));
  std::string cap = field("CapEff");
  bool no_caps = !cap.empty() && cap.find_first_not_of('0') == std::string::npos;
  out.push_back(no_caps ? Make(c, "capabilities", CheckStatus::kPass, "CapEff: 0 (none)")
                        : Make(c, "capabilities", CheckStatus::kFail,
                               absl::StrCat("CapEff: ", cap, " (QEMU holds capabilities)"),
                               "recreate the sandbox"));
  out[0].value = seccomp;
  out[1].value = nnp;
  out[2].value = cap;
  return out;
}

Check CgroupCheck(const Ctx& c) {
  absl::StatusOr<std::string> text = c.host.Read(c.proc + "/cgroup");
  if (!text.ok()) {
    return Make(c, "cgroup", CheckStatus::kWarn, "cannot read QEMU's cgroup");
  }
  std::string path;
  for (absl::string_view line : absl::StrSplit(*text, '\n', absl::SkipEmpty())) {
    if (absl::StartsWith(line, "0::")) {
      path = std::string(line.substr(3));
    }
  }
  std::string dir = absl::StrCat("/sys/fs/cgroup", path == "/" ? "" : path);
  absl::StatusOr<std::string> memory = c.host.Read(dir + "/memory.max");
  absl::StatusOr<std::string> pids = c.host.Read(dir + "/pids.max");
  auto limited = [](const absl::StatusOr<std::string>& v) {
    return v.ok() && absl::StripAsciiWhitespace(*v) != "max";
  };
  if (limited(memory) && limited(pids)) {
    return Make(c, "cgroup", CheckStatus::kPass,
                absl::StrCat("cgroup ", path, ": memory.max ", absl::StripAsciiWhitespace(*memory),
                             ", pids.max ", absl::StripAsciiWhitespace(*pids)));
  }
  return Make(
      c, "cgroup", CheckStatus::kWarn,
      absl::StrCat("no memory and pids limit of its own (cgroup ", path.empty() ? "v1 only" : path,
                   "): abox does not set per-VM cgroup limits yet (decision 0021); its "
                   "memory is bounded by QEMU's -m and the TCG cache"));
}

Check EnvironmentCheck(const Ctx& c) {
  absl::StatusOr<std::string> text = c.host.Read(c.proc + "/environ");
  if (!text.ok()) {
    return Make(c, "environment", CheckStatus::kWarn,
                absl::StrCat("cannot read QEMU's environment: ", text.status().message()));
  }
  std::vector<std::string> names;
  std::vector<std::string> secrets;
  std::vector<std::string> unexpected;
  for (absl::string_view entry : absl::StrSplit(*text, '\0', absl::SkipEmpty())) {
    std::string name(entry.substr(0, entry.find('=')));
    names.push_back(name);
    if (SecretLookingVariable(name)) {
      secrets.push_back(name);
    } else if (name != "PATH" && name != "LANG") {
      unexpected.push_back(name);
    }
  }
  if (!secrets.empty()) {
    return Make(c, "environment", CheckStatus::kFail,
                absl::StrCat("QEMU's environment holds ", absl::StrJoin(secrets, ", ")),
                "recreate the sandbox; abox gives QEMU PATH and LANG only");
  }
  if (!unexpected.empty()) {
    return Make(c, "environment", CheckStatus::kWarn,
                absl::StrCat("QEMU's environment has ", absl::StrJoin(names, ", "),
                             " (abox gives PATH and LANG only)"));
  }
  return Make(
      c, "environment", CheckStatus::kPass,
      absl::StrCat("environment: ", names.empty() ? "empty" : absl::StrJoin(names, ", "), " only"));
}

Check DescriptorCheck(const Ctx& c) {
  absl::StatusOr<std::vector<std::string>> fds = c.host.List(c.proc + "/fd");
  if (!fds.ok()) {
    return Make(c, "descriptors", CheckStatus::kWarn,
                absl::StrCat("cannot list QEMU's descriptors: ", fds.status().message()));
  }
  std::vector<std::string> prefixes = {c.f.run_dir + "/"};
  for (const std::string& d : c.f.image_dirs) {
    prefixes.push_back(d + "/");
  }
  std::vector<std::string> stray;
  for (const std::string& fd : *fds) {
    absl::StatusOr<std::string> target = c.host.ReadLink(absl::StrCat(c.proc, "/fd/", fd));
    if (!target.ok()) {
      continue;  // closed meanwhile
    }
    bool ok = *target == "/dev/null" || *target == "/dev/kvm";
    for (const char* kind : {"socket:[", "pipe:[", "anon_inode:", "/memfd:"}) {
      ok = ok || absl::StartsWith(*target, kind);
    }
    for (const std::string& p : prefixes) {
      ok = ok || absl::StartsWith(*target, p);
    }
    if (!ok) {
      stray.push_back(absl::StrCat(fd, " -> ", *target));
    }
  }
  if (!stray.empty()) {
    return Make(
        c, "descriptors", CheckStatus::kFail,
        absl::StrCat("QEMU holds host paths besides its own files: ", absl::StrJoin(stray, ", ")),
        "recreate the sandbox and report this as a bug");
  }
  return Make(c, "descriptors", CheckStatus::kPass,
              absl::StrCat(fds->size(),
                           " descriptors, all of the expected kinds: its run dir, the image and "
                           "frozen disk layers, /dev/null, /dev/kvm, sockets, pipes, memfds"));
}

Check NetworkCheck(const Ctx& c) {
  absl::StatusOr<std::string> text = c.host.Read(c.proc + "/cmdline");
  if (!text.ok()) {
    return Make(c, "network", CheckStatus::kWarn, "cannot read QEMU's command line");
  }
  std::vector<std::string> argv = absl::StrSplit(*text, '\0', absl::SkipEmpty());
  bool nic_none = false;
  std::vector<std::string> devices;
  for (size_t i = 0; i + 1 < argv.size(); ++i) {
    if (argv[i] == "-nic" && argv[i + 1] == "none") {
      nic_none = true;
    }
    if (argv[i] == "-netdev" || argv[i] == "-net" ||
        (argv[i] == "-device" && absl::StrContains(argv[i + 1], "net"))) {
      devices.push_back(absl::StrCat(argv[i], " ", argv[i + 1]));
    }
  }
  if (!nic_none || !devices.empty()) {
    return Make(c, "network", CheckStatus::kFail,
                absl::StrCat("QEMU's argv ", nic_none ? "has -nic none but " : "lacks -nic none",
                             devices.empty() ? "" : absl::StrJoin(devices, ", ")),
                "recreate the sandbox and report this as a bug");
  }
  std::string argv_note = "argv has -nic none and no -netdev";
  if (!c.host.qmp_hmp) {
    return Make(c, "network", CheckStatus::kPass, "no network device: " + argv_note);
  }
  // What QEMU itself reports, as QemuVmmE2eTest.QmpAnswersAndTheVmHasNoNetwork asks it.
  std::string qmp = absl::StrCat(c.f.run_dir, "/qmp.sock");
  absl::StatusOr<std::string> network = c.host.qmp_hmp(qmp, "info network");
  absl::StatusOr<std::string> qtree =
      network.ok() ? c.host.qmp_hmp(qmp, "info qtree") : network.status();
  if (!qtree.ok()) {
    return Make(c, "network", CheckStatus::kPass,
                absl::StrCat("no network device: ", argv_note,
                             " (QMP not asked: ", qtree.status().message(), ")"));
  }
  if (!absl::StripAsciiWhitespace(*network).empty() || absl::StrContains(*qtree, "net")) {
    return Make(c, "network", CheckStatus::kFail,
                absl::StrCat("QEMU reports a network device over QMP: ",
                             absl::StripAsciiWhitespace(*network).substr(0, 200)),
                "recreate the sandbox and report this as a bug");
  }
  return Make(c, "network", CheckStatus::kPass,
              "no network device: QMP's `info network` is empty and `info qtree` has no net "
              "device; " +
                  argv_note);
}

}  // namespace

bool SecretLookingVariable(const std::string& name) {
  std::string upper = absl::AsciiStrToUpper(name);
  for (const char* word :
       {"KEY", "TOKEN", "SECRET", "PASSW", "CREDENTIAL", "AUTH", "SESSION", "COOKIE", "PRIVATE"}) {
    if (absl::StrContains(upper, word)) {
      return true;
    }
  }
  return absl::StartsWith(upper, "AWS_") || absl::StartsWith(upper, "SSH_") ||
         absl::StartsWith(upper, "GPG_");
}

std::vector<Check> SandboxChecks(const HostView& host, const SandboxFacts& f) {
  Ctx c{host, f, absl::StrCat("/proc/", f.vmm_pid)};
  std::vector<Check> out;
  if (f.vmm_pid <= 0) {
    out.push_back(Make(c, "process", CheckStatus::kWarn, "aboxd reports no QEMU pid"));
  } else if (absl::StatusOr<std::string> status = host.Read(c.proc + "/status"); !status.ok()) {
    out.push_back(
        Make(c, "process", CheckStatus::kFail,
             absl::StrCat("QEMU pid ", f.vmm_pid, " is not readable: ", status.status().message()),
             "run doctor as the user who runs aboxd; `abox inspect` shows the state"));
  } else {
    std::string name = HostView::StatusField(*status, "Name").value_or("?");
    if (!absl::StartsWith(name, "qemu")) {
      out.push_back(Make(c, "process", CheckStatus::kFail,
                         absl::StrCat("pid ", f.vmm_pid, " runs ", name, ", not QEMU"),
                         "`abox inspect` it; the VM may have died"));
    } else {
      out.push_back(Make(c, "process", CheckStatus::kInfo, absl::StrCat("QEMU pid ", f.vmm_pid)));
      out.back().value = std::to_string(f.vmm_pid);
      for (Check& check : JailChecks(host, f, *status)) {
        out.push_back(std::move(check));
      }
      for (Check& check : StatusChecks(c, *status)) {
        out.push_back(std::move(check));
      }
      out.push_back(CgroupCheck(c));
      out.push_back(EnvironmentCheck(c));
      out.push_back(DescriptorCheck(c));
      out.push_back(NetworkCheck(c));
    }
  }
  std::string who = f.name.empty() ? f.id : f.name;
  std::string name = absl::StrCat("egress.", f.id, ".mode");
  if (f.egress_mode == "open") {
    out.push_back(Check{"egress", name, CheckStatus::kWarn,
                        who + ": egress open: any public address is reachable (still no private "
                              "or host address)",
                        absl::StrCat("abox egress policy ", f.id, " --mode allowlist")});
  } else if (!f.egress_mode.empty()) {
    out.push_back(Check{"egress", name, CheckStatus::kPass,
                        absl::StrCat(who, ": egress ", f.egress_mode,
                                     ": only allowed names get out, through aboxd's proxy")});
  }
  return out;
}

std::vector<Risk> ResidualRisks(const std::vector<Check>& checks, uid_t euid) {
  auto any = [&](const std::string& suffix, CheckStatus status) {
    return std::any_of(checks.begin(), checks.end(), [&](const Check& c) {
      return c.status == status && absl::EndsWith(c.name, suffix);
    });
  };
  // A failed .uid check: a per-VM uid two QEMUs share (FailSharedVmUids), or else root.
  auto uid_fail = [&](bool shared_vm_uid) {
    return std::any_of(checks.begin(), checks.end(), [&](const Check& c) {
      if (c.status != CheckStatus::kFail || !absl::EndsWith(c.name, ".uid")) {
        return false;
      }
      std::vector<std::string> uids = absl::StrSplit(c.value, '/');
      uint32_t uid = 0;
      bool vm_uid = uids.size() == 4 && absl::c_count(uids, uids[0]) == 4 &&
                    absl::SimpleAtoi(uids[0], &uid) && vmm::IsVmUid(uid);
      return vm_uid == shared_vm_uid;
    });
  };
  std::vector<Risk> risks;
  // What the jail leaves, whether or not a sandbox runs now.
  risks.push_back({"no per-VM cgroup limits (memory, pids, CPU)",
                   "abox does not set them yet (decision 0021); QEMU's memory is bounded by its -m "
                   "and the TCG cache"});
  risks.push_back(
      {"QEMU can read the host's /usr (read-only) and the kernel's global /proc files "
       "(its own PID namespace)",
       "the jail's root binds /usr read-only; /proc is its own PID namespace's"});
  // What the jail removes, unless a running QEMU was seen without it.
  if (any(".namespaces", CheckStatus::kWarn)) {
    risks.push_back({"QEMU shares the host's namespaces",
                     "the host refused new namespaces or aboxd runs with ABOX_JAIL=off (seen on a "
                     "running QEMU: sandbox.*.namespaces)"});
  }
  if (any(".root", CheckStatus::kWarn)) {
    risks.push_back({"QEMU sees the host's file system",
                     "it runs without the jail's root (seen on a running QEMU: sandbox.*.root)"});
  }
  if (any(".uid", CheckStatus::kWarn)) {
    risks.push_back({euid == 0 ? "QEMUs share one uid (e.g. 65534): one could signal another"
                               : "QEMU runs as your own uid in the host's user namespace",
                     "it runs without a uid or user namespace of its own (seen on a running QEMU: "
                     "sandbox.*.uid)"});
  }
  if (uid_fail(true)) {
    risks.push_back({"two QEMUs run as one per-VM uid", "sandbox.*.uid: a bug in abox's leases"});
  }
  if (uid_fail(false)) {
    risks.push_back({"a QEMU runs as root", "/dev/kvm is root-only (sandbox.*.uid)"});
  }
  if (any("host.kvm", CheckStatus::kWarn)) {
    risks.push_back({"VMs run under TCG: more of QEMU (the TCG translator) faces the guest",
                     "KVM is not usable on this host"});
  }
  risks.push_back({"an allowed name on a shared CDN can front for others on it",
                   "egress decides by name (SNI / Host), not by what the CDN routes to"});
  risks.push_back(
      {"a sandbox given a secret can use it on the hosts it is bound to, as far as "
       "the secret allows",
       "the proxy swaps the sandbox's placeholder for the value on requests to those "
       "hosts; the guest never holds the value"});
  return risks;
}

}  // namespace abox::cli
