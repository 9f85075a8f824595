// `abox doctor` against a real aboxd with one real VM: what it reports of that QEMU is what
// /proc says of it, and it never starts aboxd itself.
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "src/base/io.h"
#include "src/vmm/jail.h"
#include "tests/testing/abox_runner.h"
#include "tests/testing/aboxd_process.h"
#include "tests/testing/cli_home_test.h"

namespace abox::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

class DoctorTest : public CliHomeTest {
 protected:
  // The check named `name` of a `doctor --json` answer; null when absent.
  static nlohmann::json Check(const nlohmann::json& report, const std::string& name) {
    for (const nlohmann::json& c : report["checks"]) {
      if (c["name"] == name) {
        return c;
      }
    }
    return nullptr;
  }

  // The "Key:" field of /proc/<pid>/status.
  static std::string StatusField(const std::string& status, const std::string& key) {
    for (absl::string_view line : absl::StrSplit(status, '\n')) {
      if (absl::ConsumePrefix(&line, key + ":")) {
        return std::string(absl::StripAsciiWhitespace(line));
      }
    }
    return "";
  }
};

TEST_F(DoctorTest, ReportsTheRunningQemusConfinementAsProcShowsIt) {
  // No daemon: doctor says so (a warning, not a failure) and does not start one.
  AboxResult idle = Abox({"doctor", "--json", "--quick"});
  nlohmann::json before = nlohmann::json::parse(idle.out, nullptr, false);
  ASSERT_FALSE(before.is_discarded()) << idle.out << idle.err;
  EXPECT_EQ(Check(before, "daemon.running")["status"], "warn");
  EXPECT_THAT(Check(before, "daemon.running")["fix"].get<std::string>(),
              HasSubstr("abox daemon start"));
  EXPECT_NE(Check(before, "host.qemu"), nullptr);  // the host checks still ran
  EXPECT_NE(Abox({"daemon", "status"}).exit_code, 0) << "doctor started aboxd";

  AboxResult created = Abox({"create", "--name", "doctor-box"});
  ASSERT_EQ(created.exit_code, 0) << created.err;
  std::string id(absl::StripAsciiWhitespace(created.out));
  AboxResult inspect = Abox({"inspect", "--json", id});
  ASSERT_EQ(inspect.exit_code, 0) << inspect.err;
  int64_t pid = nlohmann::json::parse(inspect.out)["vmm_pid"].get<int64_t>();
  ASSERT_GT(pid, 0);

  AboxResult r = Abox({"doctor", "--json", "--quick"});
  nlohmann::json report = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_FALSE(report.is_discarded()) << r.out << r.err;
  int fails = report["summary"]["fail"].get<int>();
  EXPECT_EQ(r.exit_code, fails > 0 ? 1 : 0) << r.out;
  EXPECT_EQ(Check(report, "daemon.running")["status"], "pass");

  std::string prefix = absl::StrCat("sandbox.", id, ".");
  EXPECT_EQ(Check(report, prefix + "process")["value"], std::to_string(pid));
  // What doctor read is what /proc says of that QEMU now.
  absl::StatusOr<std::string> status = base::ReadFile(absl::StrCat("/proc/", pid, "/status"));
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_EQ(StatusField(*status, "Seccomp"), "2");
  EXPECT_EQ(Check(report, prefix + "seccomp")["value"], "2");
  EXPECT_EQ(Check(report, prefix + "seccomp")["status"], "pass");
  EXPECT_EQ(Check(report, prefix + "no_new_privs")["value"], "1");
  EXPECT_EQ(Check(report, prefix + "no_new_privs")["status"], "pass");
  EXPECT_EQ(Check(report, prefix + "capabilities")["status"], "pass");
  // QEMU's jail: a per-VM uid as root, else the caller's uid as root of its own user namespace.
  std::string uids = Check(report, prefix + "uid")["value"].get<std::string>();
  std::vector<std::string> uid = absl::StrSplit(StatusField(*status, "Uid"), '\t');
  EXPECT_EQ(uids, absl::StrJoin(uid, "/"));
  ASSERT_EQ(uid.size(), 4u) << *status;
  uint32_t qemu_uid = 0;
  ASSERT_TRUE(absl::SimpleAtoi(uid[0], &qemu_uid)) << *status;
  EXPECT_EQ(uids, absl::StrJoin(std::vector<std::string>(4, uid[0]), "/"));
  if (::geteuid() == 0) {
    EXPECT_TRUE(vmm::IsVmUid(qemu_uid)) << uids;
  } else {
    EXPECT_EQ(qemu_uid, ::geteuid()) << uids;
    EXPECT_NE(std::filesystem::read_symlink(absl::StrCat("/proc/", pid, "/ns/user")),
              std::filesystem::read_symlink("/proc/self/ns/user"));
  }
  EXPECT_EQ(Check(report, prefix + "uid")["status"], "pass") << Check(report, prefix + "uid");
  EXPECT_EQ(Check(report, prefix + "environment")["status"], "pass");
  EXPECT_EQ(Check(report, prefix + "descriptors")["status"], "pass")
      << Check(report, prefix + "descriptors");
  EXPECT_EQ(Check(report, prefix + "network")["status"], "pass");
  EXPECT_THAT(Check(report, prefix + "network")["reason"].get<std::string>(),
              HasSubstr("QMP's `info network` is empty"));  // QEMU itself was asked
  EXPECT_EQ(Check(report, prefix + "namespaces")["status"], "pass")
      << Check(report, prefix + "namespaces");
  // Its root is the jail's small tmpfs, as /proc/<pid>/root lists it, with no host directory.
  std::vector<std::string> root;
  std::error_code ec;
  for (const auto& e :
       std::filesystem::directory_iterator(absl::StrCat("/proc/", pid, "/root"), ec)) {
    root.push_back(e.path().filename().string());
  }
  ASSERT_FALSE(ec) << ec.message();
  std::sort(root.begin(), root.end());
  EXPECT_EQ(Check(report, prefix + "root")["value"], absl::StrJoin(root, " "));
  EXPECT_THAT(root, ::testing::IsSupersetOf({"dev", "etc", "proc", "usr"}));
  for (const char* host_only : {"home", "root", "tmp", "var", "run"}) {
    EXPECT_THAT(root, Not(::testing::Contains(host_only)));
  }
  EXPECT_EQ(Check(report, prefix + "root")["status"], "pass") << Check(report, prefix + "root");
  // Its limits: no core dumps, bounded open files (and processes for a per-VM uid).
  absl::StatusOr<std::string> limits = base::ReadFile(absl::StrCat("/proc/", pid, "/limits"));
  ASSERT_TRUE(limits.ok()) << limits.status();
  EXPECT_THAT(*limits, ::testing::ContainsRegex("Max core file size +0 +0 "));
  EXPECT_THAT(*limits, ::testing::ContainsRegex("Max open files +4096 +4096 "));
  EXPECT_EQ(Check(report, prefix + "limits")["status"], "pass") << Check(report, prefix + "limits");
  EXPECT_THAT(Check(report, prefix + "limits")["value"].get<std::string>(),
              HasSubstr("core 0/0, open files 4096/4096"));
  if (::geteuid() == 0) {
    EXPECT_THAT(*limits, ::testing::ContainsRegex("Max processes +256 +256 "));
    EXPECT_THAT(Check(report, prefix + "limits")["value"].get<std::string>(),
                HasSubstr("processes 256/256"));
  }
  // abox sets no per-VM cgroup limits yet: a residual risk on every host.
  std::string risks = report["risks"].dump();
  EXPECT_THAT(risks, HasSubstr("no per-VM cgroup limits"));
  EXPECT_THAT(risks, Not(HasSubstr("shares the host's namespaces")));
}

}  // namespace
}  // namespace abox::testing
