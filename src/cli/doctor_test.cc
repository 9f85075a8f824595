// abox doctor's host, daemon and secrets checks and its report, against fake /proc and /sys trees
// in a scratch root.
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
using ::testing::HasSubstr;

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
