// abox doctor's checks against fake /proc and /sys trees in a scratch root.
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "src/cli/doctor_check.h"
#include "src/cli/doctor_checks.h"

namespace abox::cli {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;

class FakeHost {
 public:
  FakeHost() {
    root_ = fs::path(::testing::TempDir()) / absl::StrCat("doctor-", ::getpid(), "-", counter_++);
    fs::remove_all(root_);
    fs::create_directories(root_);
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
  }
  ~FakeHost() { fs::remove_all(root_); }

  void File(const std::string& path, const std::string& data, mode_t mode = 0600) {
    fs::path p = root_ / fs::path(path).relative_path();
    fs::create_directories(p.parent_path());
    std::ofstream(p) << data;
    ::chmod(p.c_str(), mode);
  }
  void Dir(const std::string& path, mode_t mode) {
    fs::path p = root_ / fs::path(path).relative_path();
    fs::create_directories(p);
    ::chmod(p.c_str(), mode);
  }
  void Link(const std::string& path, const std::string& target) {
    fs::path p = root_ / fs::path(path).relative_path();
    fs::create_directories(p.parent_path());
    fs::create_symlink(target, p);
  }
  // A QEMU as abox starts it today: uid 65534, seccomp, no_new_privs, no capabilities, the
  // host's namespaces, PATH and LANG only, its own files.
  void Qemu(int pid, const std::string& run_dir) {
    std::string proc = absl::StrCat("/proc/", pid);
    File(proc + "/status",
         "Name:\tqemu-system-x86\nUid:\t65534\t65534\t65534\t65534\nCapEff:\t0000000000000000\n"
         "NoNewPrivs:\t1\nSeccomp:\t2\n");
    File(proc + "/environ", std::string("PATH=/usr/bin\0LANG=C.UTF-8\0", 27));
    File(proc + "/cmdline", std::string("qemu-system-x86_64\0-nic\0none\0-M\0microvm\0", 41));
    File(proc + "/cgroup", "0::/user.slice\n");
    for (const char* ns : {"mnt", "net", "pid", "user"}) {
      Link(absl::StrCat(proc, "/ns/", ns), absl::StrCat(ns, ":[4026531840]"));
      Link(absl::StrCat("/proc/self/ns/", ns), absl::StrCat(ns, ":[4026531840]"));
    }
    Link(proc + "/fd/0", "/dev/null");
    Link(proc + "/fd/3", "socket:[1234]");
    Link(proc + "/fd/4", run_dir + "/overlay.qcow2");
    Link(proc + "/fd/5", "/home/u/abox/images/default/rootfs.ext4");
    Link(proc + "/fd/6", "anon_inode:[eventfd]");
  }

  HostView& view() { return *view_; }

  std::string qemu_version = "QEMU emulator version 7.2.22\n";
  std::string qemu_help = "-sandbox on[,obsolete=allow|deny]\n";
  uint64_t free_bytes = uint64_t{50} << 30;

 private:
  static inline int counter_ = 0;
  fs::path root_;
  std::unique_ptr<HostView> view_;
};

const Check* Find(const std::vector<Check>& checks, const std::string& name) {
  for (const Check& c : checks) {
    if (c.name == name) {
      return &c;
    }
  }
  return nullptr;
}

SandboxFacts Facts() {
  return {.id = "abc123",
          .name = "box",
          .vmm_pid = 4242,
          .run_dir = "/home/u/abox/sandboxes/abc123",
          .image_dirs = {"/home/u/abox/images"},
          .egress_mode = "allowlist"};
}

TEST(DoctorSandboxTest, TodaysQemuPassesSeccompAndWarnsAboutTheMissingJail) {
  FakeHost host;
  host.Qemu(4242, "/home/u/abox/sandboxes/abc123");
  std::vector<Check> checks = SandboxChecks(host.view(), Facts());
  for (const char* pass :
       {"seccomp", "no_new_privs", "capabilities", "environment", "descriptors", "network"}) {
    const Check* c = Find(checks, absl::StrCat("sandbox.abc123.", pass));
    ASSERT_NE(c, nullptr) << pass;
    EXPECT_EQ(c->status, CheckStatus::kPass) << pass << ": " << c->reason;
  }
  for (const char* warn : {"uid", "namespaces", "cgroup"}) {
    const Check* c = Find(checks, absl::StrCat("sandbox.abc123.", warn));
    ASSERT_NE(c, nullptr) << warn;
    EXPECT_EQ(c->status, CheckStatus::kWarn) << warn;
    EXPECT_THAT(c->reason, HasSubstr("issue 17")) << warn;
  }
  EXPECT_THAT(Find(checks, "sandbox.abc123.namespaces")->reason, HasSubstr("mnt, net, pid, user"));
  EXPECT_THAT(Find(checks, "sandbox.abc123.uid")->reason, HasSubstr("65534"));
  EXPECT_EQ(Find(checks, "sandbox.abc123.uid")->value, "65534/65534/65534/65534");
  EXPECT_EQ(Find(checks, "sandbox.abc123.seccomp")->value, "2");
  EXPECT_EQ(Find(checks, "sandbox.abc123.no_new_privs")->value, "1");
  EXPECT_EQ(Find(checks, "sandbox.abc123.process")->value, "4242");
  EXPECT_EQ(Find(checks, "egress.abc123.mode")->status, CheckStatus::kPass);
}

TEST(DoctorSandboxTest, OwnNamespacesAndCgroupLimitsPass) {
  FakeHost jailed;
  jailed.Qemu(4242, "/home/u/abox/sandboxes/abc123");
  jailed.File("/proc/self/cgroup", "0::/\n");
  jailed.File("/proc/4242/cgroup", "0::/abox/abc123\n");
  jailed.File("/sys/fs/cgroup/abox/abc123/memory.max", "1073741824\n");
  jailed.File("/sys/fs/cgroup/abox/abc123/pids.max", "512\n");
  SandboxFacts f = Facts();
  f.vmm_pid = 5151;
  jailed.File("/proc/5151/status", "Name:\tqemu\nUid:\t70000\t70000\t70000\t70000\nSeccomp:\t2\n");
  jailed.File("/proc/5151/cgroup", "0::/abox/abc123\n");
  for (const char* ns : {"mnt", "net", "pid", "user"}) {
    jailed.Link(absl::StrCat("/proc/5151/ns/", ns), absl::StrCat(ns, ":[4026532999]"));
  }
  std::vector<Check> checks = SandboxChecks(jailed.view(), f);
  EXPECT_EQ(Find(checks, "sandbox.abc123.namespaces")->status, CheckStatus::kPass);
  EXPECT_EQ(Find(checks, "sandbox.abc123.cgroup")->status, CheckStatus::kPass);
  EXPECT_THAT(Find(checks, "sandbox.abc123.cgroup")->reason, HasSubstr("pids.max 512"));
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

DaemonFacts Daemon() {
  DaemonFacts f;
  f.socket_path = "/run/user/1000/abox/aboxd.sock";
  f.home = "/home/u/abox";
  f.health = api::Health{.status = "ok", .pid = 77, .sandboxes = 1, .accel = "tcg"};
  return f;
}

TEST(DoctorDaemonTest, LoopbackListenerOwnerOnlyFilesPass) {
  FakeHost host;
  host.Dir("/run/user/1000/abox", 0700);
  host.File("/run/user/1000/abox/aboxd.sock", "", 0600);
  host.Dir("/home/u/abox", 0700);
  host.File("/home/u/abox/state.db", "", 0600);
  host.File("/home/u/abox/tcp-token", "t", 0600);
  host.Link("/proc/77/fd/3", "socket:[555]");
  host.Link("/proc/77/fd/4", "socket:[556]");
  host.File("/proc/77/net/tcp",
            "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  "
            "timeout inode\n"
            "   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000 "
            "       0 555 1 0000000000000000 100 0 0 10 0\n"
            "   1: 00000000:0016 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0 "
            "       0 999 1 0000000000000000 100 0 0 10 0\n");
  absl::StatusOr<std::vector<std::string>> listeners = TcpListeners(host.view(), 77);
  ASSERT_TRUE(listeners.ok()) << listeners.status();
  EXPECT_THAT(*listeners, ::testing::ElementsAre("127.0.0.1:8080"));  // not sshd's 999
  std::vector<Check> checks = DaemonChecks(host.view(), Daemon());
  for (const Check& c : checks) {
    EXPECT_EQ(c.status, CheckStatus::kPass) << c.name << ": " << c.reason;
  }
  EXPECT_THAT(Find(checks, "daemon.tcp")->reason, HasSubstr("127.0.0.1:8080"));
}

TEST(DoctorDaemonTest, WildcardListenerAndOpenFilesFail) {
  FakeHost host;
  host.Dir("/run/user/1000/abox", 0755);
  host.Dir("/home/u/abox", 0777);
  host.File("/home/u/abox/state.db", "", 0644);
  host.Link("/proc/77/fd/3", "socket:[555]");
  host.File("/proc/77/net/tcp6",
            "  sl local_address remote_address st tx rx tr tm retr uid timeout inode\n"
            "   0: 00000000000000000000000000000000:1F90 00000000000000000000000000000000:0000 "
            "0A 00000000:00000000 00:00000000 00000000 1000 0 555 1\n");
  std::vector<Check> checks = DaemonChecks(host.view(), Daemon());
  for (const char* fail :
       {"daemon.socket_dir", "daemon.home", "daemon.state_files", "daemon.tcp"}) {
    EXPECT_EQ(Find(checks, fail)->status, CheckStatus::kFail) << fail;
  }
  EXPECT_THAT(Find(checks, "daemon.tcp")->reason, HasSubstr("[0:0:0:0:0:0:0:0]:8080"));
}

TEST(DoctorDaemonTest, ADaemonNotRunningIsAWarningWithTheCommandToStartIt) {
  FakeHost host;
  DaemonFacts f = Daemon();
  f.health.reset();
  f.not_running = true;
  std::vector<Check> checks = DaemonChecks(host.view(), f);
  const Check* running = Find(checks, "daemon.running");
  EXPECT_EQ(running->status, CheckStatus::kWarn);
  EXPECT_THAT(running->fix, HasSubstr("abox daemon start"));
  EXPECT_EQ(Find(checks, "daemon.tcp")->status, CheckStatus::kInfo);
}

TEST(DoctorSecretsTest, TheCaKeyMustBeTheUsersAlone) {
  FakeHost host;
  EXPECT_EQ(CaKeyCheck(host.view(), "/home/u/abox").status, CheckStatus::kInfo);
  host.Dir("/home/u/abox/ca", 0700);
  host.File("/home/u/abox/ca/ca.key", "k", 0600);
  Check ok = CaKeyCheck(host.view(), "/home/u/abox");
  EXPECT_EQ(ok.status, CheckStatus::kPass) << ok.reason;
  EXPECT_EQ(ok.name, "secrets.ca_key");
  host.File("/home/u/abox/ca/ca.key", "k", 0640);
  Check loose = CaKeyCheck(host.view(), "/home/u/abox");
  EXPECT_EQ(loose.status, CheckStatus::kFail);
  EXPECT_THAT(loose.fix, HasSubstr("chmod 600 /home/u/abox/ca/ca.key"));
}

TEST(DoctorSecretsTest, TheValueFileMustBeTheUsersAlone) {
  FakeHost host;
  EXPECT_EQ(SecretFileCheck(host.view(), "/home/u/abox").status, CheckStatus::kInfo);
  host.Dir("/home/u/abox/secrets", 0700);
  host.File("/home/u/abox/secrets/values.json", "{}", 0600);
  Check ok = SecretFileCheck(host.view(), "/home/u/abox");
  EXPECT_EQ(ok.status, CheckStatus::kPass) << ok.reason;
  EXPECT_EQ(ok.category, "secrets");
  host.File("/home/u/abox/secrets/values.json", "{}", 0644);
  Check loose = SecretFileCheck(host.view(), "/home/u/abox");
  EXPECT_EQ(loose.status, CheckStatus::kFail);
  EXPECT_THAT(loose.fix, HasSubstr("chmod 600 /home/u/abox/secrets/values.json"));
  host.File("/home/u/abox/secrets/values.json", "{}", 0600);
  host.Dir("/home/u/abox/secrets", 0755);
  EXPECT_EQ(SecretFileCheck(host.view(), "/home/u/abox").status, CheckStatus::kFail);
}

TEST(DoctorHostTest, NoKvmDeviceAndNoSeccompAndLittleDisk) {
  FakeHost host;
  host.qemu_help = "-accel ...\n";
  host.free_bytes = 100 << 20;
  host.File("/proc/sys/user/max_user_namespaces", "0\n");
  std::vector<Check> checks = HostChecks(host.view(), {.home = "/home/u/abox"});
  EXPECT_EQ(Find(checks, "host.kvm")->status, CheckStatus::kWarn);
  EXPECT_THAT(Find(checks, "host.kvm")->reason, HasSubstr("no /dev/kvm"));
  EXPECT_EQ(Find(checks, "host.qemu")->status, CheckStatus::kPass);
  EXPECT_EQ(Find(checks, "host.qemu_seccomp")->status, CheckStatus::kFail);
  EXPECT_EQ(Find(checks, "host.userns")->status, CheckStatus::kWarn);
  EXPECT_EQ(Find(checks, "host.cgroups")->status, CheckStatus::kWarn);
  EXPECT_EQ(Find(checks, "host.disk")->status, CheckStatus::kFail);
}

TEST(DoctorHostTest, KvmUsesTheProbesVerdict) {
  FakeHost host;
  host.File("/dev/kvm", "", 0666);
  host.File("/proc/sys/user/max_user_namespaces", "15000\n");
  HostCheckOptions o{.home = "/home/u/abox"};
  o.kvm_verdict = [] { return vmm::KvmVerdict{.usable = false, .detail = "probe boot hung"}; };
  std::vector<Check> checks = HostChecks(host.view(), o);
  EXPECT_EQ(Find(checks, "host.kvm")->status, CheckStatus::kWarn);
  EXPECT_THAT(Find(checks, "host.kvm")->reason, HasSubstr("probe boot hung"));
  EXPECT_EQ(Find(checks, "host.userns")->status, CheckStatus::kPass);
  o.kvm_verdict = [] { return vmm::KvmVerdict{.usable = true, .detail = "reached the panic"}; };
  EXPECT_EQ(Find(HostChecks(host.view(), o), "host.kvm")->status, CheckStatus::kPass);
  o.kvm_verdict = [] { return std::optional<vmm::KvmVerdict>(); };
  EXPECT_EQ(Find(HostChecks(host.view(), o), "host.kvm")->status, CheckStatus::kInfo);
}

TEST(DoctorReportTest, JsonTextAndExitCode) {
  DoctorReport report;
  report.checks = {{"host", "host.a", CheckStatus::kPass, "fine", ""},
                   {"host", "host.b", CheckStatus::kWarn, "hmm", "do this"}};
  report.risks = ResidualRisks(report.checks, 0);
  EXPECT_EQ(DoctorExitCode(report), 0);
  nlohmann::json j = DoctorJson(report);
  EXPECT_EQ(j["summary"]["pass"], 1);
  EXPECT_EQ(j["summary"]["warn"], 1);
  EXPECT_EQ(j["summary"]["fail"], 0);
  EXPECT_EQ(j["checks"][1]["fix"], "do this");
  EXPECT_EQ(j["checks"][1]["status"], "warn");
  EXPECT_FALSE(j["risks"].empty());
  std::string text = DoctorText(report);
  EXPECT_THAT(text, HasSubstr("HOST"));
  EXPECT_THAT(text, HasSubstr("-> do this"));
  EXPECT_THAT(text, HasSubstr("1 passed, 1 warnings, 0 failed"));
  EXPECT_THAT(text, HasSubstr("RESIDUAL RISKS"));
  report.checks.push_back({"daemon", "daemon.x", CheckStatus::kFail, "bad", "fix"});
  EXPECT_EQ(DoctorExitCode(report), 1);
}

}  // namespace
}  // namespace abox::cli
