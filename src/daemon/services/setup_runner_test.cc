// SetupRunner alone, on a VM booted by BootVm over the fake VMM: commands in order, the first
// failure named with its exit and output, the setup's timeout.
#include "src/daemon/services/setup_runner.h"

#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "src/daemon/lifecycle/vm_booter.h"
#include "src/daemon/testing/service_fixture.h"

namespace abox::daemon {
namespace {

using ::testing::HasSubstr;

class SetupRunnerTest : public testing::ServiceTest {
 protected:
  void SetUp() override {
    ServiceTest::SetUp();
    // A sandbox record for the exec history, and a VM of its own for the runner.
    id_ = Ready();
    BootRequest boot;
    boot.vm_id = "5e7500000001";
    boot.files = *d().context().options.image_files;
    boot.boot_timeout = absl::Seconds(10);
    absl::StatusOr<BootedVm> vm = BootVm(d().vmm(), d().context().layout, boot);
    ASSERT_TRUE(vm.ok()) << vm.status();
    vm_ = std::move(vm->vm);
  }
  void TearDown() override {
    if (vm_) {
      (void)vm_->Destroy();
    }
    ServiceTest::TearDown();
  }
  absl::Status Run(std::vector<std::string> commands, int64_t timeout_seconds = 0) {
    api::SetupSpec setup;
    setup.commands = std::move(commands);
    setup.timeout_seconds = timeout_seconds;
    return d().setup().Run(id_, *vm_, setup, {});
  }

  std::string id_;
  std::unique_ptr<runtime::Sandbox> vm_;
};

TEST_F(SetupRunnerTest, RunsEveryCommandInOrderAndRecordsThemAsExecs) {
  std::string marker = absl::StrCat(home_.path(), "/order");
  absl::Status s = Run({"echo one >> " + marker, "echo two >> " + marker});
  ASSERT_TRUE(s.ok()) << s;
  absl::StatusOr<std::vector<store::ExecRecord>> history = d().execs().List(id_, 10);
  ASSERT_TRUE(history.ok());
  EXPECT_EQ(history->size(), 2u);
  std::ifstream in(marker);
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(all, "one\ntwo\n");  // the fake VM's guest is this host
}

TEST_F(SetupRunnerTest, RootCommandsRunFirstAsRootThenTheAgentsAsAgent) {
  std::string marker = absl::StrCat(home_.path(), "/order");
  api::SetupSpec setup;
  setup.root_commands = {"echo system >> " + marker};
  setup.commands = {"echo project >> " + marker};
  absl::Status s = d().setup().Run(id_, *vm_, setup, {});
  ASSERT_TRUE(s.ok()) << s;
  std::ifstream in(marker);
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(all, "system\nproject\n");
  absl::StatusOr<std::vector<store::ExecRecord>> history = d().execs().List(id_, 10);
  ASSERT_TRUE(history.ok());
  ASSERT_EQ(history->size(), 2u);
  std::map<std::string, std::string> user_of;
  for (const store::ExecRecord& e : *history) {
    user_of[e.shell] = e.user;
  }
  EXPECT_EQ(user_of["echo system >> " + marker], "root");
  EXPECT_EQ(user_of["echo project >> " + marker], "agent");
}

TEST_F(SetupRunnerTest, TheFirstFailingCommandEndsItNamingItsExitAndOutput) {
  absl::Status s = Run({"true", "echo broken-dependency; exit 7", "echo never"});
  EXPECT_EQ(s.code(), absl::StatusCode::kAborted);
  EXPECT_THAT(s.message(), HasSubstr("setup command \"echo broken-dependency; exit 7\""));
  EXPECT_THAT(s.message(), HasSubstr("exited with code 7"));
  EXPECT_THAT(s.message(), HasSubstr("broken-dependency"));
  absl::StatusOr<std::vector<store::ExecRecord>> history = d().execs().List(id_, 10);
  ASSERT_TRUE(history.ok());
  EXPECT_EQ(history->size(), 2u) << "a command after the failing one ran";
}

TEST_F(SetupRunnerTest, ACommandStillRunningWhenTheSetupsTimeRunsOutFailsIt) {
  absl::Status s = Run({"sleep 600"}, /*timeout_seconds=*/1);
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(s.message(), HasSubstr("setup timed out: command \"sleep 600\""));
  EXPECT_THAT(s.message(), HasSubstr("setup.timeout_seconds"));
}

}  // namespace
}  // namespace abox::daemon
