// `abox doctor`'s checks of each running QEMU's jail (decision 0021): its uid (a per-VM one as
// root, or the caller's as root of a user namespace of its own), its namespaces, its root (a
// read-only tmpfs with /usr, three device nodes and its own /proc) and its rlimits, each read
// back from /proc. A QEMU started without its jail (the host refused namespaces, or aboxd runs
// with ABOX_JAIL=off) shows as warnings saying which; state.json's `privileges` says why.
#include "src/cli/doctor_jail_checks.h"

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/algorithm/container.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "src/vmm/jail.h"
#include "src/vmm/shim_protocol.h"

namespace abox::cli {
namespace {

using vmm::kJailMaxFiles;
using vmm::kJailMaxProcesses;

struct Ctx {
  const HostView& host;
  const SandboxFacts& f;
  std::string proc;          // /proc/<pid>
  std::optional<uid_t> uid;  // QEMU's uid when its real, effective, saved and fs uids agree
  bool own_userns = false;   // QEMU's user namespace is not doctor's (the host's)
};

Check Make(const Ctx& c, const std::string& what, CheckStatus status, const std::string& reason,
           std::string fix = "") {
  return Check{"sandbox", absl::StrCat("sandbox.", c.f.id, ".", what), status,
               absl::StrCat(c.f.name.empty() ? c.f.id : c.f.name, ": ", reason), std::move(fix)};
}

// Why QEMU runs without (part of) its jail, from what its shim recorded in state.json.
std::string WhyNoJail(const Ctx& c) {
  absl::StatusOr<std::string> text = c.host.Read(c.f.run_dir + "/state.json");
  absl::StatusOr<vmm::VmState> state =
      text.ok() ? vmm::VmStateFromJson(*text) : absl::StatusOr<vmm::VmState>(text.status());
  if (state.ok() && absl::StrContains(state->privileges, "ABOX_JAIL=off")) {
    return "aboxd runs with ABOX_JAIL=off (the sandbox's state.json says so)";
  }
  if (state.ok() && absl::StrContains(state->privileges, "host refused")) {
    return "the host refused new namespaces (the sandbox's state.json says why)";
  }
  return "the host refused new namespaces, or aboxd runs with ABOX_JAIL=off";
}

std::string JailFix(const Ctx& c) {
  return absl::StrCat(
      "unset ABOX_JAIL in aboxd's environment",
      c.host.euid == 0 ? ""
                       : ", allow unprivileged user namespaces (sysctl "
                         "kernel.unprivileged_userns_clone=1, or "
                         "kernel.apparmor_restrict_unprivileged_userns=0)",
      ", restart aboxd (abox daemon stop; abox daemon start), then recreate the sandbox");
}

// The first `n` of `names`, and how many more.
std::string Few(const std::vector<std::string>& names, size_t n = 6) {
  if (names.size() <= n) {
    return absl::StrJoin(names, ", ");
  }
  return absl::StrCat(absl::StrJoin(names.begin(), names.begin() + static_cast<ptrdiff_t>(n), ", "),
                      " and ", names.size() - n, " more");
}

Check UidCheck(const Ctx& c, const std::vector<std::string>& uids) {
  std::string all = absl::StrJoin(uids, "/");
  Check out;
  std::vector<uid_t> parsed;
  for (const std::string& u : uids) {
    uint32_t v = 0;
    if (absl::SimpleAtoi(u, &v)) {
      parsed.push_back(v);
    }
  }
  if (parsed.size() != 4 || parsed.size() != uids.size()) {
    out = Make(c, "uid", CheckStatus::kWarn,
               absl::StrCat("cannot read QEMU's uids (Uid: ", all.empty() ? "?" : all, ")"));
  } else if (!c.uid || *c.uid == 0 || std::count(parsed.begin(), parsed.end(), 0) > 0) {
    out = Make(c, "uid", CheckStatus::kFail,
               absl::StrCat("QEMU runs with uids ", all, " (real/effective/saved/fs)"),
               "give /dev/kvm a group (chgrp kvm /dev/kvm && chmod 660 /dev/kvm) so abox can drop "
               "root, then recreate the sandbox");
  } else if (vmm::IsVmUid(*c.uid)) {
    out = Make(
        c, "uid", CheckStatus::kPass,
        absl::StrCat("QEMU runs as uid ", *c.uid, ", a per-VM uid of abox's range (0x",
                     absl::Hex(vmm::kVmUidBase), " on), leased to this QEMU alone while it runs"));
  } else if (*c.uid == c.host.euid && c.own_userns) {
    out = Make(c, "uid", CheckStatus::kPass,
               absl::StrCat("QEMU runs as your uid ", *c.uid,
                            " outside, root of a user namespace of its own that maps only your "
                            "uid, with no capabilities"));
  } else if (*c.uid == c.host.euid) {
    out = Make(c, "uid", CheckStatus::kWarn,
               absl::StrCat("QEMU runs as your own uid ", *c.uid,
                            " in the host's user namespace: a QEMU the guest takes over acts as "
                            "you; ",
                            WhyNoJail(c)),
               JailFix(c));
  } else {
    out = Make(c, "uid", CheckStatus::kWarn,
               absl::StrCat("QEMU runs as uid ", *c.uid,
                            ", not root but not a uid of its own: every VM started so shares it, "
                            "and one compromised QEMU could signal another VM's QEMU; ",
                            WhyNoJail(c)),
               JailFix(c));
  }
  out.value = all;
  return out;
}

Check NamespaceCheck(const Ctx& c) {
  // As root a per-VM uid stands in for a user namespace; not as root, QEMU needs one.
  bool want_user = c.host.euid != 0 && c.uid == c.host.euid;
  std::vector<std::string> own;
  std::vector<std::string> shared;
  std::vector<std::string> unreadable;
  for (const char* ns : {"mnt", "pid", "net", "ipc", "uts", "cgroup", "user"}) {
    absl::StatusOr<std::string> vm = c.host.ReadLink(absl::StrCat(c.proc, "/ns/", ns));
    absl::StatusOr<std::string> host = c.host.ReadLink(absl::StrCat("/proc/self/ns/", ns));
    std::string name(ns);
    if (!vm.ok() || !host.ok()) {
      if (name != "cgroup" && (name != "user" || want_user)) {
        unreadable.push_back(name);  // cgroup namespaces are checked where the kernel has them
      }
    } else if (*vm != *host) {
      own.push_back(name);
    } else if (name != "user" || want_user) {
      shared.push_back(name);
    }
  }
  if (own.empty() && shared.empty()) {
    return Make(c, "namespaces", CheckStatus::kWarn, "cannot read QEMU's namespaces");
  }
  if (!shared.empty()) {
    static const std::map<std::string, std::string> kWhat = {
        {"mnt", "file system"},           {"pid", "processes"}, {"net", "network"},
        {"ipc", "IPC objects"},           {"uts", "host name"}, {"cgroup", "cgroup tree"},
        {"user", "uids (it acts as you)"}};
    std::vector<std::string> what;
    for (const std::string& ns : shared) {
      what.push_back(kWhat.at(ns));
    }
    return Make(c, "namespaces", CheckStatus::kWarn,
                absl::StrCat("QEMU shares the host's ", absl::StrJoin(shared, ", "),
                             " namespaces: it sees the host's ", absl::StrJoin(what, ", "), "; ",
                             WhyNoJail(c)),
                JailFix(c));
  }
  if (!unreadable.empty()) {
    return Make(c, "namespaces", CheckStatus::kWarn,
                absl::StrCat("cannot read QEMU's ", absl::StrJoin(unreadable, ", "),
                             " namespaces (own: ", absl::StrJoin(own, ", "), ")"));
  }
  return Make(c, "namespaces", CheckStatus::kPass,
              absl::StrCat("own ", absl::StrJoin(own, ", "), " namespaces",
                           absl::c_linear_search(own, "user")
                               ? ""
                               : " (the host's user namespace: a per-VM uid instead)"));
}

Check RootCheck(const Ctx& c) {
  std::string root = c.proc + "/root";
  absl::StatusOr<std::vector<std::string>> entries = c.host.List(root + "/");
  if (!entries.ok()) {
    return Make(c, "root", CheckStatus::kWarn,
                absl::StrCat("cannot list QEMU's root: ", entries.status().message()));
  }
  // What the jail's root holds (the merged-/usr links, /dev, /etc, /proc, /usr), plus at most
  // one more directory: where a QEMU outside /usr lives (e.g. /opt).
  static const std::set<std::string> kJailRoot = {"dev",    "etc", "lib",  "lib64", "lib32",
                                                  "libx32", "bin", "sbin", "proc",  "usr"};
  static const std::set<std::string> kHostOnly = {"home", "root", "tmp",   "var", "run",
                                                  "srv",  "mnt",  "media", "boot"};
  std::vector<std::string> host_dirs;
  std::vector<std::string> extra;
  for (const std::string& e : *entries) {
    if (kHostOnly.contains(e)) {
      host_dirs.push_back(e);
    } else if (!kJailRoot.contains(e)) {
      extra.push_back(e);
    }
  }
  // $ABOX_HOME's first component may also hold a QEMU outside /usr: look for the run dir itself.
  bool sees_run_dir = !c.f.run_dir.empty() && c.host.Lstat(root + c.f.run_dir).ok();
  std::vector<std::string> etc_extra;
  if (absl::c_linear_search(*entries, "etc")) {
    absl::StatusOr<std::vector<std::string>> etc = c.host.List(root + "/etc");
    if (!etc.ok()) {
      etc_extra.emplace_back("(unreadable)");
    } else {
      std::copy_if(etc->begin(), etc->end(), std::back_inserter(etc_extra),
                   [](const std::string& n) { return n != "ld.so.cache"; });
    }
  }
  Check out;
  if (host_dirs.empty() && extra.size() <= 1 && !sees_run_dir && etc_extra.empty()) {
    out = Make(c, "root", CheckStatus::kPass,
               absl::StrCat("QEMU's root holds only ", absl::StrJoin(*entries, ", "),
                            " (its /etc: ld.so.cache alone): not the host's file system"));
  } else {
    std::vector<std::string> seen;
    if (!host_dirs.empty()) {
      seen.push_back(absl::StrJoin(host_dirs, ", "));
    }
    if (sees_run_dir) {
      seen.push_back(absl::StrCat("its run dir ", c.f.run_dir));
    }
    if (extra.size() > 1) {
      seen.push_back(Few(extra));
    }
    if (!etc_extra.empty()) {
      seen.push_back(absl::StrCat("/etc with ", Few(etc_extra)));
    }
    out = Make(c, "root", CheckStatus::kWarn,
               absl::StrCat("QEMU sees the host's file system: its root has ",
                            absl::StrJoin(seen, "; "), "; ", WhyNoJail(c)),
               JailFix(c));
  }
  out.value = absl::StrJoin(*entries, " ");
  return out;
}

// The soft and hard value of a /proc/<pid>/limits row ("Max open files  1024  4096  files").
std::optional<std::pair<std::string, std::string>> Limit(absl::string_view text,
                                                         absl::string_view row) {
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    if (absl::ConsumePrefix(&line, row) && absl::StartsWith(line, " ")) {
      std::vector<std::string> f = absl::StrSplit(line, ' ', absl::SkipEmpty());
      if (f.size() >= 2) {
        return std::make_pair(f[0], f[1]);
      }
    }
  }
  return std::nullopt;
}

bool AtMost(const std::string& value, uint64_t max) {
  uint64_t v = 0;
  return absl::SimpleAtoi(value, &v) && v <= max;  // "unlimited" is not
}

Check LimitsCheck(const Ctx& c) {
  absl::StatusOr<std::string> text = c.host.Read(c.proc + "/limits");
  if (!text.ok()) {
    return Make(c, "limits", CheckStatus::kWarn,
                absl::StrCat("cannot read QEMU's limits: ", text.status().message()));
  }
  auto core = Limit(*text, "Max core file size");
  auto files = Limit(*text, "Max open files");
  auto procs = Limit(*text, "Max processes");
  bool per_vm = c.uid && vmm::IsVmUid(*c.uid);
  auto pair = [](const auto& l) { return l ? absl::StrCat(l->first, "/", l->second) : "?"; };
  std::vector<std::string> wrong;
  if (!core || core->first != "0" || core->second != "0") {
    wrong.push_back(absl::StrCat("core dumps allowed (Max core file size ", pair(core), ")"));
  }
  if (!files || !AtMost(files->second, kJailMaxFiles)) {
    wrong.push_back(absl::StrCat("open files up to ", files ? files->second : "?",
                                 " (the jail's: ", kJailMaxFiles, ")"));
  }
  if (per_vm && (!procs || !AtMost(procs->second, kJailMaxProcesses))) {
    wrong.push_back(absl::StrCat("processes up to ", procs ? procs->second : "?",
                                 " for its per-VM uid (the jail's: ", kJailMaxProcesses, ")"));
  }
  std::string summary = absl::StrCat("core ", pair(core), ", open files ", pair(files),
                                     per_vm ? absl::StrCat(", processes ", pair(procs)) : "");
  Check out = wrong.empty()
                  ? Make(c, "limits", CheckStatus::kPass,
                         absl::StrCat("no core dumps; ", summary,
                                      per_vm ? " (the process limit is its uid's alone)" : ""))
                  : Make(c, "limits", CheckStatus::kWarn,
                         absl::StrCat("QEMU lacks the jail's limits: ", absl::StrJoin(wrong, "; ")),
                         "recreate the sandbox: abox-jail sets them before QEMU starts");
  out.value = summary;
  return out;
}

// The uid the four values of a `.uid` check's value ("u/u/u/u") agree on.
std::optional<uid_t> AgreedUid(const std::string& value) {
  std::vector<std::string> parts = absl::StrSplit(value, '/');
  uint32_t uid = 0;
  if (parts.size() != 4 || !absl::SimpleAtoi(parts[0], &uid) ||
      std::count(parts.begin(), parts.end(), parts[0]) != 4) {
    return std::nullopt;
  }
  return uid;
}

}  // namespace

std::vector<Check> JailChecks(const HostView& host, const SandboxFacts& f,
                              const std::string& status) {
  Ctx c{host, f, absl::StrCat("/proc/", f.vmm_pid)};
  std::vector<std::string> uids = absl::StrSplit(HostView::StatusField(status, "Uid").value_or(""),
                                                 absl::ByAnyChar(" \t"), absl::SkipEmpty());
  if (uids.size() == 4) {
    c.uid = AgreedUid(absl::StrJoin(uids, "/"));
  }
  absl::StatusOr<std::string> vm_user = host.ReadLink(c.proc + "/ns/user");
  absl::StatusOr<std::string> host_user = host.ReadLink("/proc/self/ns/user");
  c.own_userns = vm_user.ok() && host_user.ok() && *vm_user != *host_user;
  return {UidCheck(c, uids), NamespaceCheck(c), RootCheck(c), LimitsCheck(c)};
}

void FailSharedVmUids(std::vector<InspectedSandbox>& sandboxes) {
  // uid -> (sandbox index, its .uid check) of every QEMU that runs as that per-VM uid.
  std::map<uid_t, std::vector<std::pair<size_t, Check*>>> by_uid;
  for (size_t i = 0; i < sandboxes.size(); ++i) {
    std::string name = absl::StrCat("sandbox.", sandboxes[i].facts.id, ".uid");
    for (Check& check : sandboxes[i].checks) {
      std::optional<uid_t> uid = AgreedUid(check.value);
      if (check.name == name && uid && vmm::IsVmUid(*uid)) {
        by_uid[*uid].emplace_back(i, &check);
      }
    }
  }
  auto who = [&](size_t i) {
    const SandboxFacts& f = sandboxes[i].facts;
    return f.name.empty() ? f.id : absl::StrCat(f.name, " (", f.id, ")");
  };
  for (const auto& [uid, holders] : by_uid) {
    if (holders.size() < 2) {
      continue;
    }
    for (const auto& [i, check] : holders) {
      std::vector<std::string> others;
      for (const auto& [j, unused] : holders) {
        if (j != i) {
          others.push_back(who(j));
        }
      }
      const SandboxFacts& f = sandboxes[i].facts;
      check->status = CheckStatus::kFail;
      check->reason = absl::StrCat(
          f.name.empty() ? f.id : f.name, ": QEMU runs as per-VM uid ", uid,
          ", as the QEMU of sandbox ", absl::StrJoin(others, ", "),
          " does: abox leases each running QEMU a uid of its own, so one could signal the other");
      check->fix =
          "recreate one of the sandboxes so that its QEMU leases another uid, and report this as "
          "a bug (the leases are under /run/abox/vm-uids)";
    }
  }
}

}  // namespace abox::cli
