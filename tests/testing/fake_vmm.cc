#include "tests/testing/fake_vmm.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <map>
#include <utility>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "src/base/io.h"
#include "src/base/status_macros.h"
#include "src/base/unique_fd.h"
#include "src/base/unix_socket.h"
#include "src/vmm/qemu_launch.h"
#include "src/vmm/qemu_vmm.h"
#include "src/vmm/shim_protocol.h"
#include "tests/testing/fake_vm_instance.h"

namespace abox::testing {

struct FakeVmm::Counters {
  std::mutex mu;
  FakeVmmCalls calls;  // guarded by mu

  void Count(int FakeVmmCalls::*field) {
    std::lock_guard<std::mutex> lock(mu);
    ++(calls.*field);
  }
};

namespace {

using std::chrono::milliseconds;

constexpr char kKillAllReason[] = "killed by FakeVmm::KillAll";

// One spelling per directory, so "/a/b/" and "/a/b" name the same VM.
std::string NormalizeRunDir(const std::string& run_dir) {
  std::string s = std::filesystem::path(run_dir).lexically_normal().string();
  while (s.size() > 1 && s.back() == '/') {
    s.pop_back();
  }
  return s;
}

// vmm::ValidateVmSpec without its image checks: the real validator (same rules, same messages)
// on a copy whose absolute or empty image paths name a file that exists (this test binary).
// A relative path stays and is rejected as QemuVmm rejects it.
absl::Status ValidateExceptImageFiles(const vmm::VmSpec& spec) {
  vmm::VmSpec copy = spec;
  for (std::string* path : {&copy.kernel, &copy.initrd, &copy.rootfs}) {
    if (path->empty() || (*path)[0] == '/') {
      *path = "/proc/self/exe";
    }
  }
  return vmm::ValidateVmSpec(copy);
}

// Every fake VM of the process, by run_dir. Never destroyed: VM threads may still run at exit.
class Registry final {
 public:
  static Registry& Get() {
    static auto* registry = new Registry;
    return *registry;
  }

  absl::Status Add(std::shared_ptr<FakeVmInstance> vm) {
    std::lock_guard<std::mutex> lock(mu_);
    const std::string& key = vm->params().run_dir;
    if (!vms_.emplace(key, std::move(vm)).second) {
      return absl::AlreadyExistsError(absl::StrCat("a fake VM already runs in ", key));
    }
    return absl::OkStatus();
  }

  // By run_dir (starts with '/') or id; nullptr if none. kFailedPrecondition if the id is
  // ambiguous.
  absl::StatusOr<std::shared_ptr<FakeVmInstance>> Find(const std::string& run_dir_or_id) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!run_dir_or_id.empty() && run_dir_or_id[0] == '/') {
      auto it = vms_.find(NormalizeRunDir(run_dir_or_id));
      return it == vms_.end() ? nullptr : it->second;
    }
    std::shared_ptr<FakeVmInstance> found;
    for (const auto& [run_dir, vm] : vms_) {
      if (vm->params().id == run_dir_or_id) {
        if (found) {
          return absl::FailedPreconditionError(
              absl::StrCat("several fake VMs have the id ", run_dir_or_id, "; name the run_dir"));
        }
        found = vm;
      }
    }
    return found;
  }

  void Remove(const FakeVmInstance* vm) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = vms_.find(vm->params().run_dir);
    if (it != vms_.end() && it->second.get() == vm) {
      vms_.erase(it);
    }
  }

  std::vector<std::shared_ptr<FakeVmInstance>> All() {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<std::shared_ptr<FakeVmInstance>> all;
    for (const auto& [run_dir, vm] : vms_) {
      all.push_back(vm);
    }
    return all;
  }

  std::vector<std::shared_ptr<FakeVmInstance>> TakeAll() {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<std::shared_ptr<FakeVmInstance>> all;
    for (auto& [run_dir, vm] : vms_) {
      all.push_back(std::move(vm));
    }
    vms_.clear();
    return all;
  }

 private:
  Registry() = default;
  std::mutex mu_;
  std::map<std::string, std::shared_ptr<FakeVmInstance>> vms_;  // guarded by mu_
};

}  // namespace

// The Vm handle: one owner's view of a FakeVmInstance, with the QemuVm semantics for
// finished / detached handles. Not thread-safe (the contract).
class FakeVm final : public vmm::Vm {
 public:
  FakeVm(std::shared_ptr<FakeVmInstance> vm, std::shared_ptr<FakeVmm::Counters> counters)
      : vm_(std::move(vm)), counters_(std::move(counters)) {}
  ~FakeVm() override {
    if (!finished_ && !detached_) {
      (void)End("SIGKILL");
    }
  }

  [[nodiscard]] const std::string& id() const override { return vm_->params().id; }
  [[nodiscard]] pid_t pid() const override { return ::getpid(); }
  [[nodiscard]] const std::string& run_dir() const override { return vm_->params().run_dir; }
  [[nodiscard]] std::string agent_socket_path() const override {
    return vmm::RunDirPath(run_dir(), vmm::kAgentSocket);
  }
  [[nodiscard]] std::string console_log_path() const override {
    return vmm::RunDirPath(run_dir(), vmm::kConsoleLog);
  }
  [[nodiscard]] vmm::Accel accel() const override { return vm_->params().accel; }
  [[nodiscard]] const std::string& accel_note() const override { return vm_->params().accel_note; }

  [[nodiscard]] bool IsRunning() override { return !finished_ && !detached_ && vm_->running(); }
  absl::Status WaitExit(milliseconds timeout) override {
    if (!IsRunning() || vm_->WaitExit(timeout)) {
      return absl::OkStatus();
    }
    return absl::DeadlineExceededError(
        absl::StrCat("VM ", id(), " still running after ", timeout.count(), " ms"));
  }
  [[nodiscard]] std::string exit_reason() override {
    if (IsRunning()) {
      return "";
    }
    if (!stopped_by_.empty()) {
      return absl::StrCat("stopped by the host (", stopped_by_, ")");
    }
    return vm_->exit_reason();
  }

  absl::Status Stop(milliseconds grace) override {
    counters_->Count(&FakeVmmCalls::stop);
    if (finished_ || detached_) {
      return absl::OkStatus();
    }
    if (IsRunning() && !WaitExit(grace).ok()) {
      return End("quit");
    }
    return End("");
  }
  absl::Status Kill() override {
    counters_->Count(&FakeVmmCalls::kill);
    if (finished_ || detached_) {
      return absl::OkStatus();
    }
    return End(IsRunning() ? "SIGKILL" : "");
  }
  // The fake's guest is a host process: it has no state to save.
  absl::Status Pause() override { return Unsupported("pause"); }
  absl::Status Resume() override { return Unsupported("resume"); }
  absl::Status SaveState(int /*fd*/, bool /*skip_shared_memory*/,
                         milliseconds /*timeout*/) override {
    return Unsupported("save the state of");
  }
  [[nodiscard]] std::string disk_path() const override {
    return vmm::RunDirPath(run_dir(), vmm::kOverlayFile);
  }

  absl::Status Detach() override {
    counters_->Count(&FakeVmmCalls::detach);
    if (vm_->params().tie_to_caller) {
      return absl::FailedPreconditionError(
          absl::StrCat("VM ", id(), " is tied to this process (tie_to_caller) and cannot detach"));
    }
    if (!finished_ && !detached_) {
      vm_->set_attached(false);
    }
    detached_ = true;
    return absl::OkStatus();
  }

 private:
  static absl::Status Unsupported(const char* what) {
    return absl::UnimplementedError(absl::StrCat("the fake VMM cannot ", what, " a VM"));
  }
  // Ends the VM (`stopped_by`: how the host ended it, "" if it had ended by itself), drops it
  // from the registry and removes its run_dir.
  absl::Status End(const std::string& stopped_by) {
    stopped_by_ = stopped_by;
    if (!stopped_by.empty()) {
      vm_->End(absl::StrCat("stopped by the host (", stopped_by, ")"));
    }
    vm_->End("");  // joins the thread of a VM that ended by itself
    Registry::Get().Remove(vm_.get());
    finished_ = true;
    if (!vm_->ClaimCleanup()) {
      return absl::OkStatus();  // KillAll removed it already
    }
    return vmm::RemoveRunDir(run_dir());
  }

  std::shared_ptr<FakeVmInstance> vm_;
  std::shared_ptr<FakeVmm::Counters> counters_;
  bool finished_ = false;
  bool detached_ = false;
  std::string stopped_by_;
};

FakeVmm::FakeVmm(FakeVmmOptions options)
    : check_image_files_(options.check_image_files), counters_(std::make_shared<Counters>()) {
  knobs_.boot_delay = options.boot_delay;
  knobs_.start_latency = options.start_latency;
  knobs_.accel_note = std::move(options.accel_note);
  knobs_.oom_counter_path = std::move(options.oom_counter_path);
}

FakeVmm::~FakeVmm() = default;

absl::StatusOr<std::unique_ptr<vmm::Vm>> FakeVmm::StartVm(const vmm::VmSpec& spec) {
  counters_->Count(&FakeVmmCalls::start_vm);
  Knobs knobs;
  {
    std::lock_guard<std::mutex> lock(mu_);
    knobs.boot_delay = knobs_.boot_delay;
    knobs.start_latency = knobs_.start_latency;
    knobs.accel_note = knobs_.accel_note;
    knobs.oom_counter_path = knobs_.oom_counter_path;
  }
  if (knobs.start_latency.count() > 0) {
    std::this_thread::sleep_for(knobs.start_latency);
  }
  ABOX_RETURN_IF_ERROR(check_image_files_ ? vmm::ValidateVmSpec(spec)
                                          : ValidateExceptImageFiles(spec));
  if (spec.restore_state_fd >= 0 || spec.memory_file) {
    return absl::UnimplementedError("the fake VMM cannot restore a saved state");
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!knobs_.start_failures.empty()) {
      absl::Status failure = std::move(knobs_.start_failures.front());
      knobs_.start_failures.pop_front();
      return failure;
    }
  }

  FakeVmInstance::Params params;
  params.id = spec.id;
  params.run_dir = NormalizeRunDir(spec.run_dir);
  params.tie_to_caller = spec.tie_to_caller;
  params.accel = spec.accel == vmm::Accel::kKvm ? vmm::Accel::kKvm : vmm::Accel::kTcg;
  params.accel_note = knobs.accel_note;
  params.boot_delay = knobs.boot_delay;
  params.console_limit = spec.console_log_limit_bytes;
  params.oom_counter_path = knobs.oom_counter_path;
  const std::string& run_dir = params.run_dir;

  ABOX_RETURN_IF_ERROR(vmm::MakeRunDir(run_dir));
  absl::Cleanup undo = [&] { (void)vmm::RemoveRunDir(run_dir); };
  std::string console_path = vmm::RunDirPath(run_dir, vmm::kConsoleLog);
  base::UniqueFd console(
      ::open(console_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600));
  if (!console) {
    return base::ErrnoError(absl::StrCat("open(", console_path, ")"));
  }
  ABOX_ASSIGN_OR_RETURN(base::UniqueFd listen,
                        base::ListenUnixSocket(vmm::RunDirPath(run_dir, vmm::kAgentSocket)));
  ABOX_ASSIGN_OR_RETURN(base::Pipe stop, base::MakePipe(O_NONBLOCK));

  auto vm = std::make_shared<FakeVmInstance>(params);
  ABOX_RETURN_IF_ERROR(vmm::WriteVmState(run_dir, vm->InitialState()));
  vm->set_attached(true);
  ABOX_RETURN_IF_ERROR(Registry::Get().Add(vm));
  vm->Start(std::move(listen), std::move(stop), std::move(console),
            absl::StrCat("fake VM ", spec.id, ": booting (accel ", vmm::AccelName(params.accel),
                         ", cpus ", spec.cpus, ", memory ", spec.memory_mib, " MiB)"));
  std::move(undo).Cancel();
  return std::make_unique<FakeVm>(std::move(vm), counters_);
}

absl::StatusOr<std::unique_ptr<vmm::Vm>> FakeVmm::Attach(const std::string& run_dir) {
  counters_->Count(&FakeVmmCalls::attach);
  std::string key = NormalizeRunDir(run_dir);
  absl::StatusOr<vmm::VmState> state = vmm::ReadVmState(key);
  if (!state.ok()) {
    return base::Annotate(state.status(), absl::StrCat("no VM to attach in ", run_dir));
  }
  if (state->tie_to_caller) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the VM in ", run_dir, " is tied to the process that started it and cannot be attached"));
  }
  ABOX_ASSIGN_OR_RETURN(std::shared_ptr<FakeVmInstance> vm, Registry::Get().Find(key));
  if (vm) {
    if (!vm->TryAttach()) {
      return absl::FailedPreconditionError(
          absl::StrCat("fake VM ", vm->params().id, " in ", key,
                       " is still owned by a Vm that was not detached"));
    }
    return std::make_unique<FakeVm>(std::move(vm), counters_);
  }
  // No fake VM serves this run_dir in this process: a VM that died while nobody watched.
  FakeVmInstance::Params params;
  params.id = state->id;
  params.run_dir = key;
  params.tie_to_caller = false;
  params.accel = state->accel;
  params.accel_note = state->accel_note;
  std::string reason = state->phase == vmm::VmPhase::kExited && !state->exit_reason.empty()
                           ? state->exit_reason
                           : "the VM is gone (no fake VM serves this run_dir in this process)";
  return std::make_unique<FakeVm>(
      std::make_shared<FakeVmInstance>(std::move(params), std::move(reason)), counters_);
}

void FakeVmm::FailStartVm(const absl::Status& status, int times) {
  std::lock_guard<std::mutex> lock(mu_);
  for (int i = 0; i < times; ++i) {
    knobs_.start_failures.push_back(status);
  }
}

void FakeVmm::set_boot_delay(milliseconds delay) {
  std::lock_guard<std::mutex> lock(mu_);
  knobs_.boot_delay = delay;
}

void FakeVmm::set_start_latency(milliseconds latency) {
  std::lock_guard<std::mutex> lock(mu_);
  knobs_.start_latency = latency;
}

void FakeVmm::set_accel_note(std::string note) {
  std::lock_guard<std::mutex> lock(mu_);
  knobs_.accel_note = std::move(note);
}

FakeVmmCalls FakeVmm::calls() const {
  std::lock_guard<std::mutex> lock(counters_->mu);
  return counters_->calls;
}

absl::Status FakeVmm::Crash(const std::string& run_dir_or_id, const std::string& reason) {
  ABOX_ASSIGN_OR_RETURN(std::shared_ptr<FakeVmInstance> vm, Registry::Get().Find(run_dir_or_id));
  if (!vm) {
    return absl::NotFoundError(absl::StrCat("no fake VM ", run_dir_or_id));
  }
  if (!vm->running()) {
    return absl::FailedPreconditionError(
        absl::StrCat("fake VM ", run_dir_or_id, " has exited already: ", vm->exit_reason()));
  }
  vm->End(reason);
  return absl::OkStatus();
}

absl::Status FakeVmm::AppendConsole(const std::string& run_dir_or_id, const std::string& line) {
  ABOX_ASSIGN_OR_RETURN(std::shared_ptr<FakeVmInstance> vm, Registry::Get().Find(run_dir_or_id));
  if (!vm) {
    return absl::NotFoundError(absl::StrCat("no fake VM ", run_dir_or_id));
  }
  vm->Console(line);
  return absl::OkStatus();
}

absl::Status FakeVmm::LeaveStaleBytes(const std::string& run_dir_or_id, std::string bytes) {
  ABOX_ASSIGN_OR_RETURN(std::shared_ptr<FakeVmInstance> vm, Registry::Get().Find(run_dir_or_id));
  if (!vm) {
    return absl::NotFoundError(absl::StrCat("no fake VM ", run_dir_or_id));
  }
  vm->LeaveStaleBytes(std::move(bytes));
  return absl::OkStatus();
}

std::optional<FakeVmInfo> FakeVmm::Find(const std::string& run_dir_or_id) {
  absl::StatusOr<std::shared_ptr<FakeVmInstance>> vm = Registry::Get().Find(run_dir_or_id);
  if (!vm.ok() || !*vm) {
    return std::nullopt;
  }
  return (*vm)->Info();
}

std::vector<FakeVmInfo> FakeVmm::LiveVms() {
  std::vector<FakeVmInfo> infos;
  for (const std::shared_ptr<FakeVmInstance>& vm : Registry::Get().All()) {
    infos.push_back(vm->Info());
  }
  return infos;
}

absl::Status FakeVmm::KillAll() {
  absl::Status first;
  for (const std::shared_ptr<FakeVmInstance>& vm : Registry::Get().TakeAll()) {
    vm->End(kKillAllReason);
    if (vm->ClaimCleanup()) {
      first.Update(vmm::RemoveRunDir(vm->params().run_dir));
    }
  }
  return first;
}

}  // namespace abox::testing
