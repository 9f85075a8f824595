#include "tests/testing/fake_vmm.h"

#include <sys/stat.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "src/base/io.h"
#include "src/base/unix_socket.h"
#include "src/proto/frame.h"
#include "src/runtime/agent_client.h"
#include "src/runtime/sandbox.h"
#include "src/vmm/shim_protocol.h"

namespace abox::testing {
namespace {

using std::chrono::milliseconds;
using ::testing::HasSubstr;
using ::testing::SizeIs;
using namespace std::chrono_literals;

constexpr absl::Duration kReady = absl::Seconds(20);

struct RunResult {
  std::string out;
  std::string err;
  proto::ExitInfo exit;
};

absl::StatusOr<std::unique_ptr<runtime::AgentClient>> Connect(vmm::Vm& vm) {
  absl::StatusOr<base::UniqueFd> fd = base::ConnectUnixSocket(vm.agent_socket_path());
  if (!fd.ok()) {
    return fd.status();
  }
  absl::StatusOr<std::unique_ptr<runtime::AgentClient>> client =
      runtime::AgentClient::Create(*std::move(fd), {});
  if (!client.ok()) {
    return client.status();
  }
  if (absl::Status s = (*client)->WaitReady(kReady); !s.ok()) {
    return s;
  }
  return client;
}

proto::ExecRequest Shell(std::string command) {
  proto::ExecRequest request;
  request.shell = std::move(command);
  return request;
}

absl::StatusOr<RunResult> RunShell(runtime::AgentClient& client, std::string command) {
  absl::StatusOr<std::unique_ptr<runtime::Exec>> exec = client.StartExec(Shell(std::move(command)));
  if (!exec.ok()) {
    return exec.status();
  }
  RunResult result;
  while (std::optional<runtime::Exec::Chunk> chunk = (*exec)->ReadOutput()) {
    (chunk->is_stderr ? result.err : result.out) += chunk->data;
  }
  absl::StatusOr<proto::ExitInfo> exit = (*exec)->Wait();
  if (!exit.ok()) {
    return exit.status();
  }
  result.exit = *exit;
  return result;
}

// Waits (up to 20 s) for the client to notice that its connection is gone.
absl::Status WaitForFailure(runtime::AgentClient& client) {
  for (int i = 0; i < 2000 && client.failure().ok(); ++i) {
    std::this_thread::sleep_for(10ms);
  }
  return client.failure();
}

int CountEntries(const char* dir) {
  int n = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator(dir)) {
    ++n;
  }
  return n;
}

bool Exists(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0;
}

class FakeVmmTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = absl::StrCat(::testing::TempDir(), "fake_vmm_test.XXXXXX");
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    EXPECT_TRUE(FakeVmm::KillAll().ok());
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  vmm::VmSpec Spec(const std::string& id, bool tie_to_caller = true) {
    vmm::VmSpec spec;
    spec.id = id;
    spec.run_dir = absl::StrCat(dir_, "/", id);
    spec.tie_to_caller = tie_to_caller;
    return spec;
  }

  std::string dir_;
};

TEST_F(FakeVmmTest, StartVmServesTheRealAgentOnTheAgentSocket) {
  FakeVmm vmm;
  absl::StatusOr<std::unique_ptr<vmm::Vm>> vm = vmm.StartVm(Spec("vm1"));
  ASSERT_TRUE(vm.ok()) << vm.status();
  EXPECT_EQ((*vm)->id(), "vm1");
  EXPECT_TRUE((*vm)->IsRunning());
  EXPECT_EQ((*vm)->exit_reason(), "");
  struct stat st {};
  ASSERT_EQ(::stat((*vm)->run_dir().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  EXPECT_EQ((*vm)->agent_socket_path(), absl::StrCat(dir_, "/vm1/agent.sock"));
  absl::StatusOr<vmm::VmState> state = vmm::ReadVmState((*vm)->run_dir());
  ASSERT_TRUE(state.ok()) << state.status();
  EXPECT_EQ(state->id, "vm1");
  EXPECT_EQ(state->phase, vmm::VmPhase::kRunning);

  absl::StatusOr<std::unique_ptr<runtime::AgentClient>> client = Connect(**vm);
  ASSERT_TRUE(client.ok()) << client.status();
  absl::StatusOr<RunResult> r = RunShell(**client, "echo hello; echo oops >&2; exit 3");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->out, "hello\n");
  EXPECT_EQ(r->err, "oops\n");
  EXPECT_EQ(r->exit.exit_code, 3);
  // "In the VM" is this host, as this user.
  r = RunShell(**client, "id -u");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->out, absl::StrCat(::getuid(), "\n"));

  absl::StatusOr<std::string> console = base::ReadFile((*vm)->console_log_path());
  ASSERT_TRUE(console.ok()) << console.status();
  EXPECT_THAT(*console, HasSubstr("fake VM vm1: booting (accel tcg"));
  EXPECT_THAT(*console, HasSubstr("host connected (connection 1)"));
}

TEST_F(FakeVmmTest, AccelIsKvmOnlyWhenAskedAndTheNoteIsConfigurable) {
  FakeVmm vmm({.accel_note = "KVM unavailable: using TCG"});
  vmm::VmSpec spec = Spec("auto");
  auto vm = vmm.StartVm(spec);
  ASSERT_TRUE(vm.ok()) << vm.status();
  EXPECT_EQ((*vm)->accel(), vmm::Accel::kTcg);
  EXPECT_EQ((*vm)->accel_note(), "KVM unavailable: using TCG");

  vmm.set_accel_note("");
  spec = Spec("kvm");
  spec.accel = vmm::Accel::kKvm;
  vm = vmm.StartVm(spec);
  ASSERT_TRUE(vm.ok()) << vm.status();
  EXPECT_EQ((*vm)->accel(), vmm::Accel::kKvm);
  EXPECT_EQ((*vm)->accel_note(), "");
}

TEST_F(FakeVmmTest, RejectsBadSpecsLikeTheRealVmm) {
  FakeVmm vmm;
  vmm::VmSpec spec = Spec("bad/id");
  spec.run_dir = absl::StrCat(dir_, "/bad");
  EXPECT_EQ(vmm.StartVm(spec).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(Exists(spec.run_dir));

  spec = Spec("rel");
  spec.run_dir = "relative/dir";
  EXPECT_THAT(vmm.StartVm(spec).status().message(), HasSubstr("must be an absolute path"));

  spec = Spec("relkernel");
  spec.kernel = "vmlinux";
  EXPECT_THAT(vmm.StartVm(spec).status().message(),
              HasSubstr("guest kernel path must be absolute"));
  spec = Spec("tiny");
  spec.memory_mib = 8;
  EXPECT_THAT(vmm.StartVm(spec).status().message(), HasSubstr("memory_mib must be"));

  spec = Spec("busy");
  ASSERT_EQ(::mkdir(spec.run_dir.c_str(), 0755), 0);
  ASSERT_TRUE(base::WriteFileAtomic(spec.run_dir + "/keep", "x").ok());
  EXPECT_EQ(vmm.StartVm(spec).status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_TRUE(Exists(spec.run_dir + "/keep"));  // not ours: left alone

  // An existing empty directory is taken (and made private).
  spec = Spec("empty");
  ASSERT_EQ(::mkdir(spec.run_dir.c_str(), 0755), 0);
  auto vm = vmm.StartVm(spec);
  ASSERT_TRUE(vm.ok()) << vm.status();
  struct stat st {};
  ASSERT_EQ(::stat(spec.run_dir.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);

  FakeVmm strict({.check_image_files = true});
  spec = Spec("files");
  spec.kernel = absl::StrCat(dir_, "/no-such-kernel");
  EXPECT_THAT(strict.StartVm(spec).status().message(), HasSubstr("guest kernel"));
  EXPECT_EQ(strict.calls().start_vm, 1);
}

TEST_F(FakeVmmTest, FailStartVmFailsTheNextCallsAndCreatesNothing) {
  FakeVmm vmm;
  vmm.FailStartVm(absl::UnavailableError("QEMU fell over"), 2);
  for (int i = 0; i < 2; ++i) {
    absl::StatusOr<std::unique_ptr<vmm::Vm>> vm = vmm.StartVm(Spec("vm"));
    EXPECT_EQ(vm.status(), absl::UnavailableError("QEMU fell over"));
    EXPECT_FALSE(Exists(Spec("vm").run_dir));
  }
  EXPECT_THAT(FakeVmm::LiveVms(), SizeIs(0));
  auto vm = vmm.StartVm(Spec("vm"));
  ASSERT_TRUE(vm.ok()) << vm.status();
  EXPECT_EQ(vmm.calls().start_vm, 3);
}

TEST_F(FakeVmmTest, DetachedVmOutlivesItsVmmAndAnotherVmmAttachesAndReconnects) {
  std::string run_dir;
  pid_t sleeper = 0;
  {
    FakeVmm first;
    auto vm = first.StartVm(Spec("keep", /*tie_to_caller=*/false));
    ASSERT_TRUE(vm.ok()) << vm.status();
    run_dir = (*vm)->run_dir();
    auto client = Connect(**vm);
    ASSERT_TRUE(client.ok()) << client.status();
    auto r = RunShell(**client, "echo one");
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->out, "one\n");
    // A command still running when the daemon goes away.
    auto exec = (*client)->StartExec(Shell("echo $$; exec sleep 1000"));
    ASSERT_TRUE(exec.ok()) << exec.status();
    std::optional<runtime::Exec::Chunk> chunk = (*exec)->ReadOutput();
    ASSERT_TRUE(chunk.has_value());
    ASSERT_TRUE(absl::SimpleAtoi(absl::StripTrailingAsciiWhitespace(chunk->data), &sleeper));
    ASSERT_EQ(::kill(sleeper, 0), 0);
    exec->reset();
    client->reset();
    ASSERT_TRUE((*vm)->Detach().ok());
    EXPECT_FALSE((*vm)->IsRunning());  // this handle no longer watches it
    EXPECT_EQ(first.calls().detach, 1);
  }
  std::optional<FakeVmInfo> info = FakeVmm::Find(run_dir);
  ASSERT_TRUE(info.has_value());
  EXPECT_TRUE(info->running);
  EXPECT_FALSE(info->attached);
  EXPECT_EQ(info->id, "keep");

  FakeVmm second;
  auto vm = second.Attach(run_dir + "/");
  ASSERT_TRUE(vm.ok()) << vm.status();
  EXPECT_EQ((*vm)->id(), "keep");
  EXPECT_TRUE((*vm)->IsRunning());
  EXPECT_EQ(second.Attach(run_dir).status().code(), absl::StatusCode::kFailedPrecondition);
  auto client = Connect(**vm);
  ASSERT_TRUE(client.ok()) << client.status();
  // The guest ended the previous host's commands before it answered the new hello.
  EXPECT_EQ(::kill(sleeper, 0), -1);
  EXPECT_EQ(errno, ESRCH);
  auto r = RunShell(**client, "echo two");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->out, "two\n");
  EXPECT_EQ(FakeVmm::Find("keep")->connections, 2);

  client->reset();
  ASSERT_TRUE((*vm)->Stop(0ms).ok());
  EXPECT_FALSE(Exists(run_dir));
  EXPECT_EQ(second.calls().attach, 2);
  EXPECT_EQ(second.calls().stop, 1);
  EXPECT_THAT(FakeVmm::LiveVms(), SizeIs(0));
}

TEST_F(FakeVmmTest, SandboxAttachGetsPastTheStaleTailOfThePreviousSessionByReconnecting) {
  // A daemon killed with -9 and restarted within milliseconds: the guest may not have seen the
  // disconnect and still sends what it held of the old session, here the header of a frame
  // whose 64 KiB payload never comes. The first handshake waits in vain; the reconnect, which
  // the guest does notice, starts clean.
  std::string run_dir;
  {
    FakeVmm first;
    auto vm = first.StartVm(Spec("stale", /*tie_to_caller=*/false));
    ASSERT_TRUE(vm.ok()) << vm.status();
    run_dir = (*vm)->run_dir();
    ASSERT_TRUE((*vm)->Detach().ok());
  }
  std::string frame =
      proto::EncodeFrame(proto::FrameType::kStdout, 1, 0, std::string(proto::kMaxPayload, 'x'));
  ASSERT_TRUE(FakeVmm::LeaveStaleBytes(run_dir, frame.substr(0, proto::kHeaderSize + 10)).ok());
  FakeVmm second;
  base::HostLayout layout{.home = dir_ + "/home", .cache_dir = dir_ + "/cache"};
  std::atomic<int> failures = 0;
  auto sandbox = runtime::Sandbox::Attach(
      second, "stale", run_dir, absl::Seconds(30), [&](const absl::Status&) { ++failures; },
      nullptr, layout);
  ASSERT_TRUE(sandbox.ok()) << sandbox.status();
  EXPECT_EQ(FakeVmm::Find(run_dir)->connections, 2);
  EXPECT_EQ(failures, 0) << "a failed handshake attempt was reported as the sandbox failing";
  auto r = RunShell((*sandbox)->agent(), "echo attached");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->out, "attached\n");
  EXPECT_TRUE((*sandbox)->Destroy().ok());
}

TEST_F(FakeVmmTest, SandboxAttachGivesUpWithTheReasonWhenNoHandshakeSucceeds) {
  std::string run_dir;
  {
    FakeVmm first;
    auto vm = first.StartVm(Spec("mute", /*tie_to_caller=*/false));
    ASSERT_TRUE(vm.ok()) << vm.status();
    run_dir = (*vm)->run_dir();
    ASSERT_TRUE((*vm)->Detach().ok());
  }
  // A frame before the guest's hello, on every connection the deadline allows.
  std::string junk = proto::EncodeFrame(proto::FrameType::kStdout, 1, 0, "old output");
  ASSERT_TRUE(FakeVmm::LeaveStaleBytes(run_dir, junk).ok());
  FakeVmm second;
  base::HostLayout layout{.home = dir_ + "/home", .cache_dir = dir_ + "/cache"};
  std::atomic<int> failures = 0;
  // A deadline too short for a second attempt: one handshake, refused, and the reason.
  auto sandbox = runtime::Sandbox::Attach(
      second, "mute", run_dir, absl::Milliseconds(500), [&](const absl::Status&) { ++failures; },
      nullptr, layout);
  ASSERT_FALSE(sandbox.ok());
  EXPECT_THAT(sandbox.status().message(), HasSubstr("did not answer again"));
  EXPECT_THAT(sandbox.status().message(), HasSubstr("before the handshake"));
  EXPECT_FALSE(FakeVmm::Find(run_dir).has_value()) << "a sandbox that did not answer is stopped";
  EXPECT_EQ(failures, 0);
}

TEST_F(FakeVmmTest, AttachRefusesTiedVmsAndDirsWithoutAVm) {
  FakeVmm vmm;
  auto tied = vmm.StartVm(Spec("tied"));
  ASSERT_TRUE(tied.ok()) << tied.status();
  EXPECT_EQ((*tied)->Detach().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(vmm.Attach((*tied)->run_dir()).status().code(), absl::StatusCode::kFailedPrecondition);
  absl::Status missing = vmm.Attach(dir_ + "/nothing").status();
  EXPECT_FALSE(missing.ok());
  EXPECT_THAT(missing.message(), HasSubstr("no VM to attach in"));
}

TEST_F(FakeVmmTest, AttachToAVmThatDiedMeanwhileReportsWhyAndStopCleansUp) {
  FakeVmm vmm;
  std::string run_dir = Spec("died").run_dir;
  {
    auto vm = vmm.StartVm(Spec("died", /*tie_to_caller=*/false));
    ASSERT_TRUE(vm.ok()) << vm.status();
    ASSERT_TRUE((*vm)->Detach().ok());
  }
  ASSERT_TRUE(FakeVmm::Crash(run_dir, "guest kernel panic").ok());
  auto vm = vmm.Attach(run_dir);
  ASSERT_TRUE(vm.ok()) << vm.status();
  EXPECT_FALSE((*vm)->IsRunning());
  EXPECT_EQ((*vm)->exit_reason(), "guest kernel panic");
  ASSERT_TRUE((*vm)->Stop(0ms).ok());
  EXPECT_FALSE(Exists(run_dir));
  EXPECT_FALSE(FakeVmm::Find(run_dir).has_value());
}

TEST_F(FakeVmmTest, AttachToARunDirNoFakeVmServesReportsItGone) {
  // A run_dir left by a VM of an earlier test process: state.json but no VM.
  std::string run_dir = Spec("orphan").run_dir;
  ASSERT_EQ(::mkdir(run_dir.c_str(), 0700), 0);
  vmm::VmState state;
  state.id = "orphan";
  state.phase = vmm::VmPhase::kRunning;
  state.tie_to_caller = false;
  ASSERT_TRUE(vmm::WriteVmState(run_dir, state).ok());
  FakeVmm vmm;
  auto vm = vmm.Attach(run_dir);
  ASSERT_TRUE(vm.ok()) << vm.status();
  EXPECT_EQ((*vm)->id(), "orphan");
  EXPECT_FALSE((*vm)->IsRunning());
  EXPECT_THAT((*vm)->exit_reason(), HasSubstr("the VM is gone"));
  ASSERT_TRUE((*vm)->Stop(0ms).ok());
  EXPECT_FALSE(Exists(run_dir));
}

TEST_F(FakeVmmTest, CrashEndsTheVmAndItsAgentConnection) {
  FakeVmm vmm;
  auto vm = vmm.StartVm(Spec("crashy"));
  ASSERT_TRUE(vm.ok()) << vm.status();
  auto client = Connect(**vm);
  ASSERT_TRUE(client.ok()) << client.status();
  auto exec = (*client)->StartExec(Shell("echo started; exec sleep 1000"));
  ASSERT_TRUE(exec.ok()) << exec.status();
  ASSERT_TRUE((*exec)->ReadOutput().has_value());

  ASSERT_TRUE(FakeVmm::Crash("crashy").ok());
  EXPECT_FALSE((*vm)->IsRunning());
  EXPECT_TRUE((*vm)->WaitExit(0ms).ok());
  EXPECT_EQ((*vm)->exit_reason(), "QEMU killed by signal 9 (SIGKILL)");
  EXPECT_FALSE(WaitForFailure(**client).ok());
  EXPECT_FALSE((*exec)->Wait().ok());
  EXPECT_FALSE((*client)->StartExec(Shell("true")).ok());
  // Nobody listens any more; the run_dir (and its console log) stays until Stop.
  EXPECT_EQ(base::ConnectUnixSocket((*vm)->agent_socket_path()).status().code(),
            absl::StatusCode::kUnavailable);
  auto state = vmm::ReadVmState((*vm)->run_dir());
  ASSERT_TRUE(state.ok()) << state.status();
  EXPECT_EQ(state->phase, vmm::VmPhase::kExited);
  EXPECT_EQ(state->exit_reason, "QEMU killed by signal 9 (SIGKILL)");
  auto console = base::ReadFile((*vm)->console_log_path());
  ASSERT_TRUE(console.ok()) << console.status();
  EXPECT_THAT(*console, HasSubstr("exited: QEMU killed by signal 9"));
  EXPECT_EQ(FakeVmm::Crash("crashy").code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(FakeVmm::Crash("nope").code(), absl::StatusCode::kNotFound);

  exec->reset();
  client->reset();
  ASSERT_TRUE((*vm)->Stop(5s).ok());
  EXPECT_FALSE(Exists((*vm)->run_dir()));
  EXPECT_EQ((*vm)->exit_reason(), "QEMU killed by signal 9 (SIGKILL)");
}

TEST_F(FakeVmmTest, StopRemovesTheRunDirAndIsIdempotent) {
  FakeVmm vmm;
  auto vm = vmm.StartVm(Spec("stop"));
  ASSERT_TRUE(vm.ok()) << vm.status();
  std::string run_dir = (*vm)->run_dir();
  EXPECT_EQ((*vm)->WaitExit(0ms).code(), absl::StatusCode::kDeadlineExceeded);
  ASSERT_TRUE((*vm)->Stop(0ms).ok());
  EXPECT_FALSE(Exists(run_dir));
  EXPECT_FALSE((*vm)->IsRunning());
  EXPECT_EQ((*vm)->exit_reason(), "stopped by the host (quit)");
  EXPECT_TRUE((*vm)->Stop(0ms).ok());
  EXPECT_TRUE((*vm)->Kill().ok());
  EXPECT_THAT(FakeVmm::LiveVms(), SizeIs(0));
  EXPECT_EQ(vmm.calls().stop, 2);
  EXPECT_EQ(vmm.calls().kill, 1);

  auto killed = vmm.StartVm(Spec("kill"));
  ASSERT_TRUE(killed.ok()) << killed.status();
  ASSERT_TRUE((*killed)->Kill().ok());
  EXPECT_EQ((*killed)->exit_reason(), "stopped by the host (SIGKILL)");
  EXPECT_FALSE(Exists((*killed)->run_dir()));
}

TEST_F(FakeVmmTest, StopWaitsForAGuestThatPowersOffWhenAsked) {
  FakeVmm vmm;
  auto vm = vmm.StartVm(Spec("poweroff"));
  ASSERT_TRUE(vm.ok()) << vm.status();
  auto client = Connect(**vm);
  ASSERT_TRUE(client.ok()) << client.status();
  (*client)->Shutdown();
  ASSERT_TRUE((*vm)->Stop(20s).ok());
  EXPECT_EQ((*vm)->exit_reason(), "guest powered off");
  EXPECT_FALSE(Exists((*vm)->run_dir()));
}

TEST_F(FakeVmmTest, DestroyingAVmThatWasNeitherStoppedNorDetachedKillsIt) {
  FakeVmm vmm;
  auto vm = vmm.StartVm(Spec("dropped", /*tie_to_caller=*/false));
  ASSERT_TRUE(vm.ok()) << vm.status();
  std::string run_dir = (*vm)->run_dir();
  vm->reset();
  EXPECT_FALSE(Exists(run_dir));
  EXPECT_FALSE(FakeVmm::Find(run_dir).has_value());
}

TEST_F(FakeVmmTest, KillAllEndsDetachedVmsAndHandlesSeeIt) {
  FakeVmm vmm;
  auto held = vmm.StartVm(Spec("held", /*tie_to_caller=*/false));
  ASSERT_TRUE(held.ok()) << held.status();
  {
    auto detached = vmm.StartVm(Spec("detached", /*tie_to_caller=*/false));
    ASSERT_TRUE(detached.ok()) << detached.status();
    ASSERT_TRUE((*detached)->Detach().ok());
  }
  EXPECT_THAT(FakeVmm::LiveVms(), SizeIs(2));
  ASSERT_TRUE(FakeVmm::KillAll().ok());
  EXPECT_THAT(FakeVmm::LiveVms(), SizeIs(0));
  EXPECT_FALSE(Exists(Spec("held").run_dir));
  EXPECT_FALSE(Exists(Spec("detached").run_dir));
  EXPECT_FALSE((*held)->IsRunning());
  EXPECT_EQ((*held)->exit_reason(), "killed by FakeVmm::KillAll");
  EXPECT_TRUE((*held)->Stop(0ms).ok());
}

TEST_F(FakeVmmTest, SlowBootLeavesTheHostWaitingForTheHelloAndStopEndsIt) {
  FakeVmm vmm({.boot_delay = std::chrono::hours(1)});
  auto vm = vmm.StartVm(Spec("slow"));
  ASSERT_TRUE(vm.ok()) << vm.status();
  absl::StatusOr<base::UniqueFd> fd = base::ConnectUnixSocket((*vm)->agent_socket_path());
  ASSERT_TRUE(fd.ok()) << fd.status();  // the socket is there at once, as QEMU's is
  auto client = runtime::AgentClient::Create(*std::move(fd), {});
  ASSERT_TRUE(client.ok()) << client.status();
  EXPECT_FALSE((*client)->WaitReady(absl::Milliseconds(200)).ok());
  ASSERT_TRUE((*vm)->Stop(0ms).ok());
  EXPECT_FALSE(WaitForFailure(**client).ok());
}

TEST_F(FakeVmmTest, ConcurrentStartsFromManyThreadsGetTheirOwnVms) {
  FakeVmm vmm;
  constexpr int kVms = 6;
  std::vector<std::unique_ptr<vmm::Vm>> vms(kVms);
  std::vector<absl::Status> errors(kVms);
  {
    std::vector<std::thread> threads;
    threads.reserve(kVms);
    for (int i = 0; i < kVms; ++i) {
      threads.emplace_back([&, i] {
        auto vm = vmm.StartVm(Spec(absl::StrCat("vm", i)));
        if (!vm.ok()) {
          errors[i] = vm.status();
          return;
        }
        vms[i] = *std::move(vm);
      });
    }
    for (std::thread& t : threads) {
      t.join();
    }
  }
  EXPECT_THAT(FakeVmm::LiveVms(), SizeIs(kVms));
  for (int i = 0; i < kVms; ++i) {
    ASSERT_TRUE(errors[i].ok()) << errors[i];
    auto client = Connect(*vms[i]);
    ASSERT_TRUE(client.ok()) << client.status();
    auto r = RunShell(**client, absl::StrCat("echo vm", i));
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->out, absl::StrCat("vm", i, "\n"));
  }
  EXPECT_EQ(vmm.calls().start_vm, kVms);
}

TEST_F(FakeVmmTest, AppendConsoleAddsLinesForFailureReports) {
  FakeVmm vmm;
  auto vm = vmm.StartVm(Spec("panic"));
  ASSERT_TRUE(vm.ok()) << vm.status();
  ASSERT_TRUE(FakeVmm::AppendConsole("panic", "Kernel panic - not syncing: test").ok());
  auto console = base::ReadFile((*vm)->console_log_path());
  ASSERT_TRUE(console.ok()) << console.status();
  EXPECT_THAT(*console, HasSubstr("Kernel panic - not syncing: test\n"));
  EXPECT_EQ(FakeVmm::AppendConsole("nope", "x").code(), absl::StatusCode::kNotFound);
}

TEST_F(FakeVmmTest, LeavesNoThreadsOrFdsBehind) {
  int fds_before = CountEntries("/proc/self/fd");
  int threads_before = CountEntries("/proc/self/task");
  {
    FakeVmm vmm;
    // Stopped after use.
    auto vm = vmm.StartVm(Spec("used"));
    ASSERT_TRUE(vm.ok()) << vm.status();
    {
      auto client = Connect(**vm);
      ASSERT_TRUE(client.ok()) << client.status();
      auto r = RunShell(**client, "echo x");
      ASSERT_TRUE(r.ok()) << r.status();
    }
    ASSERT_TRUE((*vm)->Stop(0ms).ok());
    vm->reset();
    // Crashed with a host connected, then stopped.
    vm = vmm.StartVm(Spec("crashed"));
    ASSERT_TRUE(vm.ok()) << vm.status();
    {
      auto client = Connect(**vm);
      ASSERT_TRUE(client.ok()) << client.status();
      ASSERT_TRUE(FakeVmm::Crash("crashed").ok());
      EXPECT_FALSE(WaitForFailure(**client).ok());
    }
    ASSERT_TRUE((*vm)->Kill().ok());
    vm->reset();
    // Detached, re-attached, dropped.
    vm = vmm.StartVm(Spec("moved", /*tie_to_caller=*/false));
    ASSERT_TRUE(vm.ok()) << vm.status();
    ASSERT_TRUE((*vm)->Detach().ok());
    vm->reset();
    vm = vmm.Attach(Spec("moved").run_dir);
    ASSERT_TRUE(vm.ok()) << vm.status();
    vm->reset();
  }
  EXPECT_THAT(FakeVmm::LiveVms(), SizeIs(0));
  EXPECT_EQ(CountEntries("/proc/self/fd"), fds_before);
  EXPECT_EQ(CountEntries("/proc/self/task"), threads_before);
}

}  // namespace
}  // namespace abox::testing
