// Real microVMs under TCG (ctest label e2e). The guest is the kernel of the installed image
// ($ABOX_HOME/images/default/vmlinux, or $ABOX_TEST_KERNEL) with an initramfs made here around
// testing/test_init.c, whose /init prints "hello from abox test init" and obeys
// abox_test=hello|spam|sleep (power off / print 4000 "spam line NNNNN" lines then power off /
// wait forever). The rootfs is a blank sparse file.
#include <fcntl.h>
#include <sched.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "src/base/host_layout.h"
#include "src/base/io.h"
#include "src/base/unix_socket.h"
#include "src/image/initramfs.h"
#include "src/vmm/bounded_log.h"
#include "src/vmm/jail.h"
#include "src/vmm/qemu_vm.h"
#include "src/vmm/qemu_vmm.h"
#include "src/vmm/shim_protocol.h"

namespace abox::vmm {
namespace {

using nlohmann::json;
using std::chrono::milliseconds;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr milliseconds kBoot(60000);

std::string Env(const char* name) {
  const char* v = std::getenv(name);  // NOLINT(concurrency-mt-unsafe)
  return v != nullptr ? v : "";
}

// Gone: no such process, or a zombie waiting for a reaper that is not us.
bool ProcessGone(pid_t pid) {
  if (::kill(pid, 0) != 0 && errno == ESRCH) {
    return true;
  }
  absl::StatusOr<std::string> stat = base::ReadFile(absl::StrCat("/proc/", pid, "/stat"), 4096);
  if (!stat.ok()) {
    return true;
  }
  size_t paren = stat->rfind(')');
  return paren != std::string::npos && paren + 2 < stat->size() && (*stat)[paren + 2] == 'Z';
}

// Waits (bounded) for `done`; returns its last value.
template <typename F>
bool Eventually(F done, milliseconds limit = milliseconds(20000)) {
  auto deadline = std::chrono::steady_clock::now() + limit;
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) {
      return false;
    }
    std::this_thread::sleep_for(milliseconds(50));
  }
  return true;
}

class QemuVmmE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "/vmm_e2e_XXXXXX";
    ASSERT_NE(::mkdtemp(dir_.data()), nullptr);
    rootfs_ = dir_ + "/rootfs.img";
    std::filesystem::resize_file((std::ofstream(rootfs_), rootfs_), 64 << 20);
    absl::StatusOr<std::unique_ptr<QemuVmm>> vmm = QemuVmm::Create({});
    ASSERT_TRUE(vmm.ok()) << vmm.status();
    vmm_ = *std::move(vmm);
    kernel_ = Env("ABOX_TEST_KERNEL");
    if (kernel_.empty()) {
      absl::StatusOr<base::HostLayout> paths = base::ResolveHostLayout();
      ASSERT_TRUE(paths.ok()) << paths.status();
      kernel_ = (paths->ImageDir("default") / "vmlinux").string();
    }
    ASSERT_TRUE(std::filesystem::exists(kernel_))
        << kernel_ << " is missing: build the image first (abox image build)";
    absl::StatusOr<std::string> init = base::ReadFile(ABOX_VMM_TEST_INIT);
    ASSERT_TRUE(init.ok()) << init.status();
    initrd_ = dir_ + "/initramfs.cpio";
    using Entry = image::CpioEntry;
    ASSERT_TRUE(image::WriteCpio(
                    initrd_, {Entry{.path = "dev", .type = Entry::Type::kDirectory, .mode = 0755},
                              Entry{.path = "dev/console",
                                    .type = Entry::Type::kCharDevice,
                                    .mode = 0600,
                                    .dev_major = 5,
                                    .dev_minor = 1},
                              Entry{.path = "init", .mode = 0755, .data = *init}})
                    .ok());
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  VmSpec Spec(const std::string& name, const std::string& mode, bool tie = true) {
    VmSpec s;
    s.id = name;
    s.run_dir = absl::StrCat(dir_, "/", name);
    s.kernel = kernel_;
    s.initrd = initrd_;
    s.rootfs = rootfs_;
    s.cpus = 1;
    s.memory_mib = 256;
    s.accel = Accel::kTcg;
    s.kernel_cmdline_extra = absl::StrCat("abox_test=", mode);
    s.tie_to_caller = tie;
    return s;
  }

  std::string dir_;
  std::string rootfs_;
  std::string kernel_;
  std::string initrd_;
  std::unique_ptr<QemuVmm> vmm_;
};

TEST_F(QemuVmmE2eTest, BootsLogsTheConsoleAndCleansUp) {
  VmSpec spec = Spec("hello", "hello");
  absl::StatusOr<std::unique_ptr<Vm>> vm = vmm_->StartVm(spec);
  ASSERT_TRUE(vm.ok()) << vm.status();
  EXPECT_EQ((*vm)->accel(), Accel::kTcg);
  ASSERT_TRUE((*vm)->WaitExit(kBoot).ok());
  EXPECT_EQ((*vm)->exit_reason(), "guest powered off");
  EXPECT_THAT(ReadLogTail((*vm)->console_log_path(), 1 << 20),
              HasSubstr("hello from abox test init (mode=hello)"));
  EXPECT_TRUE(std::filesystem::exists(spec.run_dir + "/overlay.qcow2"));
  ASSERT_TRUE((*vm)->Stop(milliseconds(0)).ok());
  EXPECT_FALSE(std::filesystem::exists(spec.run_dir));
}

TEST_F(QemuVmmE2eTest, ConsoleLogStaysWithinItsLimit) {
  VmSpec spec = Spec("spam", "spam");
  spec.console_log_limit_bytes = 16384;
  absl::StatusOr<std::unique_ptr<Vm>> vm = vmm_->StartVm(spec);
  ASSERT_TRUE(vm.ok()) << vm.status();
  ASSERT_TRUE((*vm)->WaitExit(kBoot).ok());
  std::string log = (*vm)->console_log_path();
  EXPECT_LE(std::filesystem::file_size(log) + std::filesystem::file_size(log + ".1"), 16384u);
  EXPECT_THAT(ReadLogTail(log, 16384), HasSubstr("spam line 03999"));
}

TEST_F(QemuVmmE2eTest, QmpAnswersAndTheVmHasNoNetwork) {
  VmSpec spec = Spec("qmp", "sleep");
  absl::StatusOr<std::unique_ptr<Vm>> vm = vmm_->StartVm(spec);
  ASSERT_TRUE(vm.ok()) << vm.status();
  auto* qemu_vm = dynamic_cast<QemuVm*>(vm->get());
  ASSERT_NE(qemu_vm, nullptr);
  absl::StatusOr<QmpClient> qmp = qemu_vm->ConnectQmp(milliseconds(5000));
  ASSERT_TRUE(qmp.ok()) << qmp.status();
  absl::StatusOr<json> status = qmp->Execute("query-status", nullptr, milliseconds(5000));
  ASSERT_TRUE(status.ok());
  EXPECT_EQ((*status)["status"], "running");
  absl::StatusOr<json> net =
      qmp->Execute("human-monitor-command", {{"command-line", "info network"}}, milliseconds(5000));
  ASSERT_TRUE(net.ok());
  EXPECT_EQ(*net, "");
  absl::StatusOr<json> qtree =
      qmp->Execute("human-monitor-command", {{"command-line", "info qtree"}}, milliseconds(5000));
  ASSERT_TRUE(qtree.ok() && qtree->is_string());
  EXPECT_THAT(qtree->get<std::string>(), Not(HasSubstr("net")));
  EXPECT_THAT(qtree->get<std::string>(), HasSubstr("org.abox.agent.0"));
  qmp = absl::UnavailableError("closed");  // QEMU serves one QMP client at a time
  EXPECT_TRUE(base::ConnectUnixSocket((*vm)->agent_socket_path()).ok());
  if (::geteuid() == 0) {
    absl::StatusOr<std::string> proc =
        base::ReadFile(absl::StrCat("/proc/", (*vm)->pid(), "/status"));
    ASSERT_TRUE(proc.ok());
    // A uid of abox's per-VM range (jail.h), not a shared one.
    size_t at = proc->find("\nUid:\t");
    ASSERT_NE(at, std::string::npos) << *proc;
    uid_t n = 0;
    ASSERT_TRUE(absl::SimpleAtoi(proc->substr(at + 6, proc->find('\t', at + 6) - at - 6), &n));
    EXPECT_TRUE(IsVmUid(n)) << n;
    EXPECT_THAT(*proc, HasSubstr(absl::StrCat("Uid:\t", n, "\t", n, "\t", n, "\t", n)));
  }
  pid_t pid = (*vm)->pid();
  ASSERT_TRUE((*vm)->Stop(milliseconds(0)).ok());
  EXPECT_EQ((*vm)->exit_reason(), "stopped by the host (QMP quit)");
  EXPECT_TRUE(ProcessGone(pid));
  EXPECT_FALSE(std::filesystem::exists(spec.run_dir));
}

// A host that refuses the jail's namespaces (no unprivileged user namespaces, a container that
// forbids them) still gets its VM, without them, and state.json says so. Flags the kernel
// refuses (a new user namespace sharing the caller's filesystem attributes: EINVAL) stand in
// for that host.
TEST_F(QemuVmmE2eTest, AHostThatRefusesTheNamespacesGetsQemuWithoutThemAndSaysSo) {
  QemuVmmOptions options;
  options.jail_namespaces = CLONE_NEWUSER | CLONE_NEWNS | CLONE_FS;
  absl::StatusOr<std::unique_ptr<QemuVmm>> refusing = QemuVmm::Create(options);
  ASSERT_TRUE(refusing.ok()) << refusing.status();
  VmSpec spec = Spec("refused", "sleep");
  absl::StatusOr<std::unique_ptr<Vm>> vm = (*refusing)->StartVm(spec);
  ASSERT_TRUE(vm.ok()) << vm.status();
  absl::StatusOr<VmState> state = ReadVmState(spec.run_dir);
  ASSERT_TRUE(state.ok()) << state.status();
  EXPECT_THAT(state->privileges, HasSubstr("QEMU runs without its own namespaces and root: the "
                                           "host refused them"));
  std::error_code ec;
  EXPECT_EQ(std::filesystem::read_symlink(absl::StrCat("/proc/", (*vm)->pid(), "/ns/mnt"), ec),
            std::filesystem::read_symlink("/proc/self/ns/mnt", ec));
  absl::StatusOr<std::string> proc =
      base::ReadFile(absl::StrCat("/proc/", (*vm)->pid(), "/status"));
  ASSERT_TRUE(proc.ok());
  EXPECT_THAT(*proc, HasSubstr("NoNewPrivs:\t1"));  // what it keeps without the namespaces
  EXPECT_THAT(*proc, HasSubstr("Seccomp:\t2"));
  pid_t pid = (*vm)->pid();
  ASSERT_TRUE((*vm)->Stop(milliseconds(0)).ok());
  EXPECT_TRUE(ProcessGone(pid));
  EXPECT_FALSE(std::filesystem::exists(spec.run_dir));
}

TEST_F(QemuVmmE2eTest, DestroyingTheHandleKillsAndCleansUp) {
  VmSpec spec = Spec("drop", "sleep");
  absl::StatusOr<std::unique_ptr<Vm>> vm = vmm_->StartVm(spec);
  ASSERT_TRUE(vm.ok()) << vm.status();
  pid_t pid = (*vm)->pid();
  vm->reset();
  EXPECT_TRUE(Eventually([&] { return ProcessGone(pid); }));
  EXPECT_FALSE(std::filesystem::exists(spec.run_dir));
}

TEST_F(QemuVmmE2eTest, TiedVmDiesWithACallerKilledBySigkill) {
  VmSpec spec = Spec("tied", "sleep");
  absl::StatusOr<base::Pipe> report = base::MakePipe();
  ASSERT_TRUE(report.ok());
  pid_t caller = ::fork();
  ASSERT_GE(caller, 0);
  if (caller == 0) {
    // The "CLI": starts a tied VM, reports QEMU's pid, then waits to be killed.
    absl::StatusOr<std::unique_ptr<Vm>> vm = vmm_->StartVm(spec);
    std::string msg = vm.ok() ? absl::StrCat((*vm)->pid(), "\n") : "0\n";
    (void)base::WriteAll(report->write.get(), msg);
    for (;;) {
      ::pause();
    }
  }
  report->write.reset();
  std::string line;
  char c = 0;
  while (::read(report->read.get(), &c, 1) == 1 && c != '\n') {
    line.push_back(c);
  }
  pid_t qemu_pid = std::atoi(line.c_str());
  ASSERT_GT(qemu_pid, 0) << "the caller could not start the VM";
  absl::StatusOr<VmState> state = ReadVmState(spec.run_dir);
  ASSERT_TRUE(state.ok()) << state.status();
  EXPECT_FALSE(ProcessGone(qemu_pid));

  ::kill(caller, SIGKILL);
  ::waitpid(caller, nullptr, 0);

  EXPECT_TRUE(Eventually([&] { return ProcessGone(qemu_pid); }));
  EXPECT_TRUE(Eventually([&] { return ProcessGone(state->shim_pid); }));
  EXPECT_TRUE(Eventually([&] { return !std::filesystem::exists(spec.run_dir); }));
}

TEST_F(QemuVmmE2eTest, QemuDiesWithAKilledShim) {
  VmSpec spec = Spec("shimkill", "sleep");
  absl::StatusOr<std::unique_ptr<Vm>> vm = vmm_->StartVm(spec);
  ASSERT_TRUE(vm.ok()) << vm.status();
  absl::StatusOr<VmState> state = ReadVmState(spec.run_dir);
  ASSERT_TRUE(state.ok());
  ::kill(state->shim_pid, SIGKILL);
  ASSERT_TRUE((*vm)->WaitExit(milliseconds(20000)).ok());
  EXPECT_TRUE(Eventually([&] { return ProcessGone(state->qemu_pid); }));
  EXPECT_THAT((*vm)->exit_reason(), HasSubstr("abox-shim died unexpectedly"));
  ASSERT_TRUE((*vm)->Stop(milliseconds(0)).ok());
  EXPECT_FALSE(std::filesystem::exists(spec.run_dir));
}

TEST_F(QemuVmmE2eTest, DetachedVmOutlivesItsHandleAndReattaches) {
  VmSpec spec = Spec("daemon", "sleep", /*tie=*/false);
  absl::StatusOr<std::unique_ptr<Vm>> vm = vmm_->StartVm(spec);
  ASSERT_TRUE(vm.ok()) << vm.status();
  pid_t pid = (*vm)->pid();
  ASSERT_TRUE((*vm)->Detach().ok());
  vm->reset();
  EXPECT_FALSE(ProcessGone(pid));

  absl::StatusOr<std::unique_ptr<Vm>> again = vmm_->Attach(spec.run_dir);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE((*again)->IsRunning());
  EXPECT_EQ((*again)->pid(), pid);
  EXPECT_EQ((*again)->id(), "daemon");
  ASSERT_TRUE((*again)->Stop(milliseconds(0)).ok());
  EXPECT_TRUE(Eventually([&] { return ProcessGone(pid); }));
  EXPECT_FALSE(std::filesystem::exists(spec.run_dir));
}

TEST_F(QemuVmmE2eTest, TiedVmCannotDetachOrBeAttached) {
  VmSpec spec = Spec("tied2", "sleep");
  absl::StatusOr<std::unique_ptr<Vm>> vm = vmm_->StartVm(spec);
  ASSERT_TRUE(vm.ok()) << vm.status();
  EXPECT_EQ((*vm)->Detach().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(vmm_->Attach(spec.run_dir).status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST_F(QemuVmmE2eTest, ABrokenKernelFailsWithQemusOwnError) {
  std::string kernel = dir_ + "/not-a-kernel";
  std::ofstream(kernel) << std::string(4096, 'z');
  std::string initrd = dir_ + "/initrd";
  std::ofstream(initrd) << "x";
  VmSpec spec = Spec("broken", "hello");
  spec.kernel = kernel;
  spec.initrd = initrd;
  absl::StatusOr<std::unique_ptr<Vm>> vm = vmm_->StartVm(spec);
  ASSERT_FALSE(vm.ok());
  EXPECT_EQ(vm.status().code(), absl::StatusCode::kFailedPrecondition);
  std::string message(vm.status().message());
  EXPECT_THAT(message, HasSubstr("QEMU exited during startup"));
  EXPECT_THAT(message, HasSubstr("linux kernel too old"));  // QEMU's stderr, quoted
  EXPECT_FALSE(std::filesystem::exists(spec.run_dir));
}

}  // namespace
}  // namespace abox::vmm
