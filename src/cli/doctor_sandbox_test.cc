// abox doctor's sandbox checks against fake /proc trees in a scratch root: each running QEMU's
// jail (uid, namespaces, root, limits), seccomp, privileges, environment, descriptors, network,
// and the residual risks they leave.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "src/cli/doctor_check.h"
#include "src/cli/doctor_checks.h"
#include "src/cli/testing/doctor_fake_host.h"

namespace abox::cli {
namespace {

using ::abox::cli::doctor_testing::FakeHost;
using ::abox::cli::doctor_testing::Find;
using ::abox::cli::doctor_testing::Get;
using ::abox::cli::doctor_testing::HasRisk;
using ::abox::cli::doctor_testing::kVmUid;
using ::abox::cli::doctor_testing::LimitsText;
using ::testing::HasSubstr;
using ::testing::Not;

SandboxFacts Facts() {
  return {.id = "abc123",
          .name = "box",
          .vmm_pid = 4242,
          .run_dir = "/home/u/abox/sandboxes/abc123",
          .image_dirs = {"/home/u/abox/images"},
          .egress_mode = "allowlist"};
}

TEST(DoctorSandboxTest, AJailedQemuPassesEveryConfinementCheckButTheCgroup) {
  FakeHost host;
  host.view().euid = 0;
  host.Qemu(4242, "/home/u/abox/sandboxes/abc123");
  std::vector<Check> checks = SandboxChecks(host.view(), Facts());
  for (const char* pass : {"uid", "namespaces", "root", "limits", "seccomp", "no_new_privs",
                           "capabilities", "environment", "descriptors", "network"}) {
    Check c = Get(checks, absl::StrCat("sandbox.abc123.", pass));
    EXPECT_EQ(c.status, CheckStatus::kPass) << pass << ": " << c.reason;
  }
  Check uid = Get(checks, "sandbox.abc123.uid");
  EXPECT_THAT(uid.reason, HasSubstr("uid 2047541249, a per-VM uid of abox's range (0x7a0b0000"));
  EXPECT_EQ(uid.value, "2047541249/2047541249/2047541249/2047541249");
  EXPECT_THAT(Get(checks, "sandbox.abc123.namespaces").reason,
              HasSubstr("own mnt, pid, net, ipc, uts, cgroup namespaces (the host's user"));
  EXPECT_EQ(Get(checks, "sandbox.abc123.root").value, "dev etc lib lib64 proc usr");
  EXPECT_THAT(Get(checks, "sandbox.abc123.root").reason, HasSubstr("not the host's file system"));
  EXPECT_EQ(Get(checks, "sandbox.abc123.limits").value,
            "core 0/0, open files 4096/4096, processes 256/256");
  Check cgroup = Get(checks, "sandbox.abc123.cgroup");
  EXPECT_EQ(cgroup.status, CheckStatus::kWarn);
  EXPECT_THAT(cgroup.reason,
              HasSubstr("abox does not set per-VM cgroup limits yet (decision 0021)"));
  for (const Check& c : checks) {
    EXPECT_THAT(c.reason, Not(HasSubstr("issue 17"))) << c.name;
    EXPECT_THAT(c.reason, Not(HasSubstr("not built"))) << c.name;
  }
  EXPECT_EQ(Get(checks, "sandbox.abc123.seccomp").value, "2");
  EXPECT_EQ(Get(checks, "sandbox.abc123.no_new_privs").value, "1");
  EXPECT_EQ(Get(checks, "sandbox.abc123.process").value, "4242");
  EXPECT_EQ(Get(checks, "egress.abc123.mode").status, CheckStatus::kPass);
}

TEST(DoctorSandboxTest, AQemuWithoutItsJailWarnsSayingWhyAndWhatToDo) {
  FakeHost host;
  host.view().euid = 0;
  host.Qemu(4242, "/home/u/abox/sandboxes/abc123", 65534);
  host.ShareNamespaces(4242, {"mnt", "pid", "net", "ipc", "uts", "cgroup"});
  host.HostRoot(4242);
  host.State("/home/u/abox/sandboxes/abc123",
             "uid 65534, gid 65534; jail off (ABOX_JAIL=off): no namespaces");
  std::vector<Check> checks = SandboxChecks(host.view(), Facts());
  for (const char* warn : {"uid", "namespaces", "root"}) {
    Check c = Get(checks, absl::StrCat("sandbox.abc123.", warn));
    EXPECT_EQ(c.status, CheckStatus::kWarn) << warn << ": " << c.reason;
    EXPECT_THAT(c.reason, HasSubstr("aboxd runs with ABOX_JAIL=off")) << warn;
    EXPECT_THAT(c.fix, HasSubstr("unset ABOX_JAIL in aboxd's environment")) << warn;
    EXPECT_THAT(c.fix, Not(HasSubstr("unprivileged user namespaces"))) << warn;  // root
  }
  EXPECT_THAT(Get(checks, "sandbox.abc123.uid").reason,
              HasSubstr("uid 65534, not root but not a uid of its own"));
  EXPECT_EQ(Get(checks, "sandbox.abc123.uid").value, "65534/65534/65534/65534");
  Check ns = Get(checks, "sandbox.abc123.namespaces");
  EXPECT_THAT(ns.reason, HasSubstr("shares the host's mnt, pid, net, ipc, uts, cgroup namespaces"));
  EXPECT_THAT(ns.reason, HasSubstr("file system, processes, network"));
  Check root = Get(checks, "sandbox.abc123.root");
  EXPECT_THAT(root.reason, HasSubstr("QEMU sees the host's file system: its root has boot, home, "
                                     "root, tmp, var; its run dir /home/u/abox/sandboxes/abc123; "
                                     "/etc with passwd"));
  EXPECT_EQ(Get(checks, "sandbox.abc123.limits").status, CheckStatus::kPass);  // still set

  // The shim's state.json saying the host refused namespaces (or no state.json) changes why.
  host.State("/home/u/abox/sandboxes/abc123",
             "uid 65534, gid 65534; QEMU runs without its own namespaces and root: the host "
             "refused them (clone(new namespaces): Operation not permitted)");
  EXPECT_THAT(Get(SandboxChecks(host.view(), Facts()), "sandbox.abc123.namespaces").reason,
              HasSubstr("the host refused new namespaces (the sandbox's state.json says why)"));
  host.Remove("/home/u/abox/sandboxes/abc123/state.json");
  EXPECT_THAT(Get(SandboxChecks(host.view(), Facts()), "sandbox.abc123.root").reason,
              HasSubstr("the host refused new namespaces, or aboxd runs with ABOX_JAIL=off"));
}

TEST(DoctorSandboxTest, NotRootQemuPassesAsYourUidInAUserNamespaceOfItsOwn) {
  FakeHost host;
  host.view().euid = 1000;
  host.Qemu(4242, "/home/u/abox/sandboxes/abc123", 1000);
  host.Link("/proc/4242/ns/user", "user:[4026532777]");
  host.File("/proc/4242/limits", LimitsText("0 0", "4096 4096", "63357 63357"));
  std::vector<Check> checks = SandboxChecks(host.view(), Facts());
  Check uid = Get(checks, "sandbox.abc123.uid");
  EXPECT_EQ(uid.status, CheckStatus::kPass) << uid.reason;
  EXPECT_THAT(uid.reason, HasSubstr("your uid 1000 outside, root of a user namespace of its own "
                                    "that maps only your uid, with no capabilities"));
  Check ns = Get(checks, "sandbox.abc123.namespaces");
  EXPECT_EQ(ns.status, CheckStatus::kPass) << ns.reason;
  EXPECT_THAT(ns.reason, HasSubstr("own mnt, pid, net, ipc, uts, cgroup, user namespaces"));
  Check limits = Get(checks, "sandbox.abc123.limits");
  EXPECT_EQ(limits.status, CheckStatus::kPass) << limits.reason;  // no process limit: not per-VM
  EXPECT_EQ(limits.value, "core 0/0, open files 4096/4096");
}

TEST(DoctorSandboxTest, NotRootQemuWithoutAUserNamespaceWarns) {
  FakeHost host;
  host.view().euid = 1000;
  host.Qemu(4242, "/home/u/abox/sandboxes/abc123", 1000);  // the host's user namespace
  host.State("/home/u/abox/sandboxes/abc123",
             "your own uid 1000; QEMU runs without its own namespaces and root: the host refused "
             "them (clone(new namespaces): Operation not permitted)");
  std::vector<Check> checks = SandboxChecks(host.view(), Facts());
  Check uid = Get(checks, "sandbox.abc123.uid");
  EXPECT_EQ(uid.status, CheckStatus::kWarn);
  EXPECT_THAT(uid.reason, HasSubstr("your own uid 1000 in the host's user namespace"));
  EXPECT_THAT(uid.reason, HasSubstr("the host refused new namespaces"));
  EXPECT_THAT(uid.fix, HasSubstr("allow unprivileged user namespaces"));
  Check ns = Get(checks, "sandbox.abc123.namespaces");
  EXPECT_EQ(ns.status, CheckStatus::kWarn);
  EXPECT_THAT(ns.reason, HasSubstr("shares the host's user namespaces: it sees the host's uids"));
  EXPECT_THAT(ns.fix, HasSubstr("kernel.unprivileged_userns_clone=1"));
}

TEST(DoctorSandboxTest, OwnNamespacesAndCgroupLimitsPass) {
  FakeHost jailed;
  jailed.view().euid = 0;
  jailed.Qemu(4242, "/home/u/abox/sandboxes/abc123");
  jailed.File("/proc/4242/cgroup", "0::/abox/abc123\n");
  jailed.File("/sys/fs/cgroup/abox/abc123/memory.max", "1073741824\n");
  jailed.File("/sys/fs/cgroup/abox/abc123/pids.max", "512\n");
  jailed.Remove("/proc/4242/ns/cgroup");  // a kernel without cgroup namespaces
  jailed.Remove("/proc/self/ns/cgroup");
  std::vector<Check> checks = SandboxChecks(jailed.view(), Facts());
  Check ns = Get(checks, "sandbox.abc123.namespaces");
  EXPECT_EQ(ns.status, CheckStatus::kPass) << ns.reason;
  EXPECT_THAT(ns.reason, HasSubstr("own mnt, pid, net, ipc, uts namespaces"));
  EXPECT_EQ(Get(checks, "sandbox.abc123.cgroup").status, CheckStatus::kPass);
  EXPECT_THAT(Get(checks, "sandbox.abc123.cgroup").reason, HasSubstr("pids.max 512"));
  jailed.Remove("/proc/4242/ns/mnt");
  EXPECT_THAT(Get(SandboxChecks(jailed.view(), Facts()), "sandbox.abc123.namespaces").reason,
              HasSubstr("cannot read QEMU's mnt namespaces"));
}

TEST(DoctorSandboxTest, TwoQemusOnOnePerVmUidBothFailNamingTheOther) {
  FakeHost host;
  host.view().euid = 0;
  std::vector<InspectedSandbox> sandboxes;
  int pid = 4242;
  for (const char* id : {"abc123", "def456", "ghi789"}) {
    SandboxFacts f = Facts();
    f.id = id;
    f.name = absl::StrCat("box-", id);
    f.vmm_pid = pid;
    f.run_dir = absl::StrCat("/home/u/abox/sandboxes/", id);
    host.Qemu(pid++, f.run_dir, std::string(id) == "ghi789" ? kVmUid + 1 : kVmUid);
    sandboxes.push_back({f, SandboxChecks(host.view(), f)});
  }
  for (const InspectedSandbox& s : sandboxes) {
    EXPECT_EQ(Get(s.checks, absl::StrCat("sandbox.", s.facts.id, ".uid")).status,
              CheckStatus::kPass);
  }
  FailSharedVmUids(sandboxes);
  Check a = Get(sandboxes[0].checks, "sandbox.abc123.uid");
  Check b = Get(sandboxes[1].checks, "sandbox.def456.uid");
  EXPECT_EQ(a.status, CheckStatus::kFail);
  EXPECT_EQ(b.status, CheckStatus::kFail);
  EXPECT_THAT(a.reason, HasSubstr("box-abc123: QEMU runs as per-VM uid 2047541249, as the QEMU "
                                  "of sandbox box-def456 (def456) does"));
  EXPECT_THAT(b.reason, HasSubstr("as the QEMU of sandbox box-abc123 (abc123) does"));
  EXPECT_THAT(a.fix, HasSubstr("report this as a bug"));
  Check c = Get(sandboxes[2].checks, "sandbox.ghi789.uid");
  EXPECT_EQ(c.status, CheckStatus::kPass) << c.reason;
  std::vector<Check> all = sandboxes[0].checks;
  std::vector<Risk> risks = ResidualRisks(all, 0);
  EXPECT_TRUE(HasRisk(risks, "two QEMUs run as one per-VM uid"));
  EXPECT_FALSE(HasRisk(risks, "runs as root"));
}

TEST(DoctorSandboxTest, TheRootMustBeTheJailsSmallOne) {
  FakeHost host;
  host.view().euid = 0;
  host.Qemu(4242, "/home/u/abox/sandboxes/abc123");
  auto root = [&] { return Get(SandboxChecks(host.view(), Facts()), "sandbox.abc123.root"); };
  host.Dir("/proc/4242/root/opt/qemu/bin", 0755);  // a QEMU of its own outside /usr
  EXPECT_EQ(root().status, CheckStatus::kPass) << root().reason;
  host.Dir("/proc/4242/root/srv", 0755);
  EXPECT_EQ(root().status, CheckStatus::kWarn);
  EXPECT_THAT(root().reason, HasSubstr("its root has srv"));
  host.Remove("/proc/4242/root/srv");
  host.Dir("/proc/4242/root/data", 0755);  // a second unknown directory
  EXPECT_THAT(root().reason, HasSubstr("its root has data, opt"));
  host.Remove("/proc/4242/root/data");
  host.File("/proc/4242/root/etc/shadow", "");
  EXPECT_THAT(root().reason, HasSubstr("/etc with shadow"));
  host.Remove("/proc/4242/root/etc/shadow");
  EXPECT_EQ(root().status, CheckStatus::kPass);
  host.Remove("/proc/4242/root");
  EXPECT_EQ(root().status, CheckStatus::kWarn);
  EXPECT_THAT(root().reason, HasSubstr("cannot list QEMU's root"));
}

TEST(DoctorSandboxTest, AQemuBesideTheHomeOutsideUsrPassesButTheRunDirInSightDoesNot) {
  FakeHost host;
  host.view().euid = 0;
  SandboxFacts f = Facts();
  f.run_dir = "/work/abox/sandboxes/abc123";
  host.Qemu(4242, f.run_dir);
  host.Dir("/proc/4242/root/work/qemu/bin", 0755);  // $ABOX_HOME is under /work too
  EXPECT_EQ(Get(SandboxChecks(host.view(), f), "sandbox.abc123.root").status, CheckStatus::kPass);
  host.Dir("/proc/4242/root/work/abox/sandboxes/abc123", 0755);
  Check seen = Get(SandboxChecks(host.view(), f), "sandbox.abc123.root");
  EXPECT_EQ(seen.status, CheckStatus::kWarn);
  EXPECT_THAT(seen.reason, HasSubstr("its run dir /work/abox/sandboxes/abc123"));
}

TEST(DoctorSandboxTest, TheLimitsMustBeTheJails) {
  FakeHost host;
  host.view().euid = 0;
  host.Qemu(4242, "/home/u/abox/sandboxes/abc123");
  auto limits = [&] { return Get(SandboxChecks(host.view(), Facts()), "sandbox.abc123.limits"); };
  EXPECT_EQ(limits().status, CheckStatus::kPass) << limits().reason;
  EXPECT_THAT(limits().reason, HasSubstr("the process limit is its uid's alone"));
  host.File("/proc/4242/limits", LimitsText("0 unlimited", "1024 1048576", "unlimited unlimited"));
  Check loose = limits();
  EXPECT_EQ(loose.status, CheckStatus::kWarn);
  EXPECT_THAT(loose.reason, HasSubstr("core dumps allowed (Max core file size 0/unlimited)"));
  EXPECT_THAT(loose.reason, HasSubstr("open files up to 1048576 (the jail's: 4096)"));
  EXPECT_THAT(loose.reason, HasSubstr("processes up to unlimited for its per-VM uid"));
  EXPECT_EQ(loose.value,
            "core 0/unlimited, open files 1024/1048576, processes unlimited/unlimited");
  EXPECT_FALSE(loose.fix.empty());
  host.File("/proc/4242/limits", LimitsText("0 0", "4096 4096", "257 257"));
  EXPECT_THAT(limits().reason, HasSubstr("processes up to 257"));
  host.Remove("/proc/4242/limits");
  EXPECT_THAT(limits().reason, HasSubstr("cannot read QEMU's limits"));
}

TEST(DoctorSandboxTest, RisksTheJailRemovesAreListedOnlyWhenARunningQemuShowsThem) {
  FakeHost host;
  host.view().euid = 0;
  host.Qemu(4242, "/home/u/abox/sandboxes/abc123");
  std::vector<Risk> jailed = ResidualRisks(SandboxChecks(host.view(), Facts()), 0);
  EXPECT_TRUE(HasRisk(jailed, "no per-VM cgroup limits"));
  EXPECT_TRUE(HasRisk(jailed, "the host's /usr (read-only) and the kernel's global /proc files"));
  for (const char* gone : {"namespaces", "file system", "share one uid", "your own uid", "root",
                           "no secrets brokering"}) {
    EXPECT_FALSE(HasRisk(jailed, gone)) << gone;
  }
  for (const Risk& r : jailed) {
    EXPECT_THAT(r.because, Not(HasSubstr("issue 17"))) << r.risk;
    EXPECT_THAT(r.because, Not(HasSubstr("not wired"))) << r.risk;
  }
  const Risk* cgroup = nullptr;
  for (const Risk& r : jailed) {
    cgroup = absl::StrContains(r.risk, "cgroup") ? &r : cgroup;
  }
  ASSERT_NE(cgroup, nullptr);
  EXPECT_THAT(cgroup->because, HasSubstr("abox does not set them yet"));

  host.Qemu(4242, "/home/u/abox/sandboxes/abc123", 65534);
  host.ShareNamespaces(4242, {"mnt", "net"});
  host.HostRoot(4242);
  std::vector<Risk> unjailed = ResidualRisks(SandboxChecks(host.view(), Facts()), 0);
  EXPECT_TRUE(HasRisk(unjailed, "QEMU shares the host's namespaces"));
  EXPECT_TRUE(HasRisk(unjailed, "QEMU sees the host's file system"));
  EXPECT_TRUE(HasRisk(unjailed, "QEMUs share one uid"));
}

TEST(DoctorSandboxTest, SecretsStrayFilesRootAndNoFilterFail) {
  FakeHost host;
  host.Qemu(4242, "/home/u/abox/sandboxes/abc123");
  host.File("/proc/4242/status",
            "Name:\tqemu-system-x86\nUid:\t0\t0\t0\t0\nCapEff:\t000001ffffffffff\n"
            "NoNewPrivs:\t0\nSeccomp:\t0\n");
  host.File("/proc/4242/environ",
            std::string("PATH=/bin\0ANTHROPIC_API_KEY=sk-x\0SSH_AUTH_SOCK=/tmp/a\0", 51));
  host.File("/proc/4242/cmdline", std::string("qemu\0-netdev\0user,id=n\0", 23));
  host.Link("/proc/4242/fd/9", "/home/u/.ssh/id_ed25519");
  std::vector<Check> checks = SandboxChecks(host.view(), Facts());
  for (const char* fail : {"uid", "seccomp", "no_new_privs", "capabilities", "environment",
                           "descriptors", "network"}) {
    const Check* c = Find(checks, absl::StrCat("sandbox.abc123.", fail));
    ASSERT_NE(c, nullptr) << fail;
    EXPECT_EQ(c->status, CheckStatus::kFail) << fail << ": " << c->reason;
    EXPECT_FALSE(c->fix.empty()) << fail;
  }
  EXPECT_THAT(Find(checks, "sandbox.abc123.uid")->reason, HasSubstr("uids 0/0/0/0"));
  EXPECT_TRUE(HasRisk(ResidualRisks(checks, 0), "a QEMU runs as root"));
  EXPECT_THAT(Find(checks, "sandbox.abc123.environment")->reason,
              HasSubstr("ANTHROPIC_API_KEY, SSH_AUTH_SOCK"));
  EXPECT_THAT(Find(checks, "sandbox.abc123.environment")->reason, Not(HasSubstr("sk-x")));
  EXPECT_THAT(Find(checks, "sandbox.abc123.descriptors")->reason,
              HasSubstr("9 -> /home/u/.ssh/id_ed25519"));
}

TEST(DoctorSandboxTest, QemuIsAskedOverQmpForNetworkDevices) {
  FakeHost host;
  host.Qemu(4242, "/home/u/abox/sandboxes/abc123");
  std::vector<std::string> asked;
  std::string network;
  host.view().qmp_hmp = [&](const std::string& socket,
                            const std::string& command) -> absl::StatusOr<std::string> {
    asked.push_back(absl::StrCat(socket, " ", command));
    return command == "info network" ? network : "bus: main-system-bus\n  dev: virtio-mmio\n";
  };
  std::vector<Check> ok_checks = SandboxChecks(host.view(), Facts());
  const Check* ok = Find(ok_checks, "sandbox.abc123.network");
  EXPECT_EQ(ok->status, CheckStatus::kPass);
  EXPECT_THAT(ok->reason, HasSubstr("QMP's `info network` is empty"));
  EXPECT_THAT(asked, ::testing::ElementsAre("/home/u/abox/sandboxes/abc123/qmp.sock info network",
                                            "/home/u/abox/sandboxes/abc123/qmp.sock info qtree"));
  network = "net0: index=0,type=user\n";
  std::vector<Check> nic_checks = SandboxChecks(host.view(), Facts());
  const Check* nic = Find(nic_checks, "sandbox.abc123.network");
  EXPECT_EQ(nic->status, CheckStatus::kFail);
  EXPECT_THAT(nic->reason, HasSubstr("net0"));
  host.view().qmp_hmp = [](const std::string&, const std::string&) -> absl::StatusOr<std::string> {
    return absl::UnavailableError("connect(qmp.sock): Connection refused");
  };
  std::vector<Check> unasked_checks = SandboxChecks(host.view(), Facts());
  const Check* unasked = Find(unasked_checks, "sandbox.abc123.network");
  EXPECT_EQ(unasked->status, CheckStatus::kPass);  // argv still says -nic none
  EXPECT_THAT(unasked->reason, HasSubstr("QMP not asked: connect(qmp.sock)"));
}

TEST(DoctorSandboxTest, AGoneOrReusedPidIsAFailure) {
  FakeHost host;
  std::vector<Check> gone = SandboxChecks(host.view(), Facts());
  EXPECT_EQ(Find(gone, "sandbox.abc123.process")->status, CheckStatus::kFail);
  host.File("/proc/4242/status", "Name:\tbash\n");
  std::vector<Check> reused = SandboxChecks(host.view(), Facts());
  EXPECT_EQ(Find(reused, "sandbox.abc123.process")->status, CheckStatus::kFail);
  EXPECT_THAT(Find(reused, "sandbox.abc123.process")->reason, HasSubstr("bash"));
  EXPECT_EQ(Find(reused, "sandbox.abc123.seccomp"), nullptr);
}

TEST(DoctorSandboxTest, SecretLookingNames) {
  for (const char* name : {"OPENAI_API_KEY", "GITHUB_TOKEN", "AWS_PROFILE", "SSH_AUTH_SOCK",
                           "db_password", "CLIENT_SECRET"}) {
    EXPECT_TRUE(SecretLookingVariable(name)) << name;
  }
  for (const char* name : {"PATH", "LANG", "HOME", "TERM"}) {
    EXPECT_FALSE(SecretLookingVariable(name)) << name;
  }
}

}  // namespace
}  // namespace abox::cli
