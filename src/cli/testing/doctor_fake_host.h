// A scratch root for abox doctor's checks (HostView): fake /proc and /sys trees, a QEMU as its
// jail leaves it (or without it), and lookups in the checks' results.
#pragma once

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "src/cli/doctor_check.h"
#include "src/cli/doctor_checks.h"
#include "src/vmm/jail.h"
#include "src/vmm/shim_protocol.h"

namespace abox::cli::doctor_testing {

// abox's first per-VM uid (src/vmm/jail.h), as a /proc/<pid>/status field.
inline constexpr uid_t kVmUid = vmm::kVmUidBase + 1;

// A /proc/<pid>/limits text.
inline std::string LimitsText(const std::string& core, const std::string& files,
                              const std::string& procs) {
  std::string out =
      absl::StrFormat("%-26s%-21s%-21s%-10s\n", "Limit", "Soft Limit", "Hard Limit", "Units");
  auto row = [&](const char* name, const std::string& soft_hard, const char* units) {
    std::vector<std::string> v = absl::StrSplit(soft_hard, ' ');
    absl::StrAppend(&out, absl::StrFormat("%-26s%-21s%-21s%-10s\n", name, v[0], v[1], units));
  };
  row("Max cpu time", "unlimited unlimited", "seconds");
  row("Max core file size", core, "bytes");
  row("Max processes", procs, "processes");
  row("Max open files", files, "files");
  row("Max locked memory", "8388608 8388608", "bytes");
  return out;
}

class FakeHost {
 public:
  FakeHost() {
    root_ = std::filesystem::path(::testing::TempDir()) /
            absl::StrCat("doctor-", ::getpid(), "-", counter_++);
    std::filesystem::remove_all(root_);
    std::filesystem::create_directories(root_);
    view_ = std::make_unique<HostView>(root_);
    view_->euid = ::geteuid();
    view_->run = [this](const std::vector<std::string>& argv) -> absl::StatusOr<std::string> {
      if (argv.size() > 1 && argv[1] == "--version") {
        return qemu_version;
      }
      return qemu_help;
    };
    view_->free_bytes = [this](const std::string&) -> absl::StatusOr<uint64_t> {
      return free_bytes;
    };
    for (const char* ns : kNamespaces) {
      Link(absl::StrCat("/proc/self/ns/", ns), absl::StrCat(ns, ":[4026531840]"));
    }
  }
  ~FakeHost() { std::filesystem::remove_all(root_); }

  void File(const std::string& path, const std::string& data, mode_t mode = 0600) {
    std::filesystem::path p = root_ / std::filesystem::path(path).relative_path();
    std::filesystem::create_directories(p.parent_path());
    std::ofstream(p) << data;
    ::chmod(p.c_str(), mode);
  }
  void Dir(const std::string& path, mode_t mode) {
    std::filesystem::path p = root_ / std::filesystem::path(path).relative_path();
    std::filesystem::create_directories(p);
    ::chmod(p.c_str(), mode);
  }
  void Link(const std::string& path, const std::string& target) {
    std::filesystem::path p = root_ / std::filesystem::path(path).relative_path();
    std::filesystem::create_directories(p.parent_path());
    std::filesystem::remove(p);
    std::filesystem::create_symlink(target, p);
  }
  void Remove(const std::string& path) {
    std::filesystem::remove_all(root_ / std::filesystem::path(path).relative_path());
  }

  // A QEMU in its jail as abox starts it as root: a per-VM uid, seccomp, no_new_privs, no
  // capabilities; its own mnt, pid, net, ipc, uts and cgroup namespaces (the host's user one);
  // the jail's root; its limits; PATH and LANG only; its own files.
  void Qemu(int pid, const std::string& run_dir, uid_t uid = kVmUid) {
    std::string proc = absl::StrCat("/proc/", pid);
    File(proc + "/status",
         absl::StrCat("Name:\tqemu-system-x86\nUid:\t", uid, "\t", uid, "\t", uid, "\t", uid,
                      "\nCapEff:\t0000000000000000\nNoNewPrivs:\t1\n"
                      "Seccomp:\t2\n"));
    File(proc + "/environ", std::string("PATH=/usr/bin\0LANG=C.UTF-8\0", 27));
    File(proc + "/cmdline", std::string("qemu-system-x86_64\0-nic\0none\0-M\0microvm\0", 41));
    File(proc + "/cgroup", "0::/user.slice\n");
    File(proc + "/limits", LimitsText("0 0", "4096 4096", "256 256"));
    for (const char* ns : kNamespaces) {
      bool user = std::string(ns) == "user";
      Link(absl::StrCat(proc, "/ns/", ns),
           absl::StrCat(ns, ":[", user ? 4026531840 : 4026532000 + pid, "]"));
    }
    JailRoot(pid);
    Link(proc + "/fd/0", "/dev/null");
    Link(proc + "/fd/3", "socket:[1234]");
    Link(proc + "/fd/4", run_dir + "/overlay.qcow2");
    Link(proc + "/fd/5", "/home/u/abox/images/default/rootfs.ext4");
    Link(proc + "/fd/6", "anon_inode:[eventfd]");
  }
  // The jail's root: the merged-/usr links, /dev, /etc with ld.so.cache, /proc and /usr.
  void JailRoot(int pid) {
    std::string root = absl::StrCat("/proc/", pid, "/root");
    Remove(root);
    File(root + "/dev/null", "");
    File(root + "/etc/ld.so.cache", "");
    Link(root + "/lib", "usr/lib");
    Link(root + "/lib64", "usr/lib64");
    Dir(root + "/proc", 0555);
    Dir(root + "/usr/bin", 0755);
  }
  // What a QEMU without its jail sees as its root: the host's.
  void HostRoot(int pid) {
    std::string root = absl::StrCat("/proc/", pid, "/root");
    JailRoot(pid);
    for (const char* dir : {"home/u/abox/sandboxes/abc123", "tmp", "var/lib", "root", "boot"}) {
      Dir(absl::StrCat(root, "/", dir), 0755);
    }
    File(root + "/etc/passwd", "root:x:0:0::/root:/bin/sh\n");
  }
  // QEMU's `names` namespaces made the host's.
  void ShareNamespaces(int pid, const std::vector<std::string>& names) {
    for (const std::string& ns : names) {
      Link(absl::StrCat("/proc/", pid, "/ns/", ns), absl::StrCat(ns, ":[4026531840]"));
    }
  }
  // The shim's state.json in `run_dir`, with its `privileges` text.
  void State(const std::string& run_dir, const std::string& privileges) {
    vmm::VmState state;
    state.id = "abc123";
    state.qemu_pid = 4242;
    state.privileges = privileges;
    File(run_dir + "/state.json", vmm::VmStateToJson(state));
  }

  HostView& view() { return *view_; }

  std::string qemu_version = "QEMU emulator version 7.2.22\n";
  std::string qemu_help = "-sandbox on[,obsolete=allow|deny]\n";
  uint64_t free_bytes = uint64_t{50} << 30;

 private:
  static constexpr const char* kNamespaces[] = {"mnt", "pid",    "net", "ipc",
                                                "uts", "cgroup", "user"};
  static inline int counter_ = 0;
  std::filesystem::path root_;
  std::unique_ptr<HostView> view_;
};

inline const Check* Find(const std::vector<Check>& checks, const std::string& name) {
  for (const Check& c : checks) {
    if (c.name == name) {
      return &c;
    }
  }
  return nullptr;
}

// The check `name` of `checks`, which must be there.
inline Check Get(const std::vector<Check>& checks, const std::string& name) {
  const Check* c = Find(checks, name);
  EXPECT_NE(c, nullptr) << name;
  return c == nullptr ? Check{} : *c;
}

inline bool HasRisk(const std::vector<Risk>& risks, const std::string& part) {
  return std::any_of(risks.begin(), risks.end(),
                     [&](const Risk& r) { return absl::StrContains(r.risk, part); });
}

}  // namespace abox::cli::doctor_testing
