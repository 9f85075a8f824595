// `abox doctor` against a real aboxd with one real VM: what it reports of that QEMU is what
// /proc says of it, and it never starts aboxd itself.
#include <unistd.h>

#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "src/base/io.h"
#include "tests/testing/abox_runner.h"
#include "tests/testing/aboxd_process.h"
#include "tests/testing/cli_home_test.h"

namespace abox::testing {
namespace {

using ::testing::HasSubstr;

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
  std::string uids = Check(report, prefix + "uid")["value"].get<std::string>();
  EXPECT_EQ(uids, absl::StrJoin(absl::StrSplit(StatusField(*status, "Uid"), '\t'), "/"));
  EXPECT_FALSE(absl::StartsWith(uids, "0/")) << uids;
  EXPECT_EQ(Check(report, prefix + "uid")["status"], "warn");  // shared uid: no jail yet
  EXPECT_EQ(Check(report, prefix + "environment")["status"], "pass");
  EXPECT_EQ(Check(report, prefix + "descriptors")["status"], "pass")
      << Check(report, prefix + "descriptors");
  EXPECT_EQ(Check(report, prefix + "network")["status"], "pass");
  EXPECT_THAT(Check(report, prefix + "network")["reason"].get<std::string>(),
              HasSubstr("QMP's `info network` is empty"));  // QEMU itself was asked
  // The jail is not built: sharing the host's namespaces is a warning naming it, not a pass.
  EXPECT_EQ(Check(report, prefix + "namespaces")["status"], "warn");
  EXPECT_THAT(Check(report, prefix + "namespaces")["reason"].get<std::string>(),
              HasSubstr("issue 17"));
  EXPECT_FALSE(report["risks"].empty());
}

}  // namespace
}  // namespace abox::testing
