#include "src/daemon/lifecycle/live_sandbox.h"

#include "absl/strings/str_cat.h"
#include "src/base/status_macros.h"

namespace abox::daemon {

void LiveSandbox::Adopt(std::unique_ptr<runtime::Sandbox> sandbox) {
  std::lock_guard lock(mu_);
  sandbox_ = std::move(sandbox);
}

bool LiveSandbox::BeginStop() {
  std::lock_guard lock(mu_);
  if (sandbox_ == nullptr || stopping_) {
    return false;
  }
  stopping_ = true;
  return true;
}

LiveSandbox::ToolLease::~ToolLease() {
  if (owner_ != nullptr) {
    owner_->ReleaseLease();
  }
}

void LiveSandbox::ReleaseLease() {
  std::lock_guard lock(mu_);
  --leases_;
  leases_idle_.notify_all();
}

std::variant<LiveSandbox::ToolLease, LiveSandbox::LeaseRefusal> LiveSandbox::LeaseTools(int max) {
  std::lock_guard lock(mu_);
  if (leases_ >= max) {
    return LeaseRefusal::kBusy;
  }
  if (stopping_ || sandbox_ == nullptr) {
    return LeaseRefusal::kNotServing;
  }
  ++leases_;
  return ToolLease(this, sandbox_.get());
}

absl::StatusOr<std::shared_ptr<LiveExec>> LiveSandbox::Launch(const LaunchFn& launch) {
  std::lock_guard lock(mu_);
  if (stopping_ || sandbox_ == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("sandbox ", id_, " is stopping: it runs no more commands"));
  }
  absl::StatusOr<std::shared_ptr<LiveExec>> live = launch(sandbox_->agent());
  if (live.ok()) {
    execs_[(*live)->id()] = *live;  // busy now: the reaper keeps it from idling out
  }
  return live;
}

std::shared_ptr<LiveExec> LiveSandbox::FindExec(const std::string& exec_id) {
  std::lock_guard lock(mu_);
  auto it = execs_.find(exec_id);
  return it == execs_.end() ? nullptr : it->second;
}

std::shared_ptr<LiveExec> LiveSandbox::TakeExec(const std::string& exec_id) {
  std::lock_guard lock(mu_);
  auto it = execs_.find(exec_id);
  if (it == execs_.end()) {
    return nullptr;
  }
  std::shared_ptr<LiveExec> exec = std::move(it->second);
  execs_.erase(it);
  return exec;
}

int LiveSandbox::running_execs() {
  std::lock_guard lock(mu_);
  int n = 0;
  for (const auto& [id, exec] : execs_) {
    n += exec->done() ? 0 : 1;
  }
  return n;
}

int64_t LiveSandbox::VmPid() {
  std::lock_guard lock(mu_);
  return sandbox_ == nullptr ? 0 : sandbox_->vm().pid();
}

std::vector<std::string> LiveSandbox::ConsoleLogPaths() {
  std::lock_guard lock(mu_);
  if (sandbox_ == nullptr) {
    return {};
  }
  std::string current = sandbox_->vm().console_log_path();
  return {current + ".1", current};
}

std::string LiveSandbox::FailureReport() {
  std::lock_guard lock(mu_);
  return sandbox_ == nullptr ? "" : sandbox_->FailureReport();
}

absl::Status LiveSandbox::TearDown(const std::string& reason, bool detach) {
  return EndVm(reason, detach);
}

int LiveSandbox::generation() {
  std::lock_guard lock(mu_);
  return generation_;
}

absl::Status LiveSandbox::Replace(const std::string& reason, const StartFn& start) {
  ABOX_RETURN_IF_ERROR(EndVm(reason, /*detach=*/false));
  ABOX_ASSIGN_OR_RETURN(std::unique_ptr<runtime::Sandbox> fresh, start());
  std::lock_guard lock(mu_);
  sandbox_ = std::move(fresh);
  stopping_ = false;
  return absl::OkStatus();
}

absl::Status LiveSandbox::EndVm(const std::string& reason, bool detach) {
  std::map<std::string, std::shared_ptr<LiveExec>> execs;
  runtime::Sandbox* sandbox = nullptr;
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    // Copied, not taken: until each is recorded as ended, a /wait or a reader must still find
    // it live (a lookup that found neither it nor its final record would answer "running").
    execs = execs_;
    sandbox = sandbox_.get();
  }
  for (auto& [id, exec] : execs) {
    exec->SetInterruptReason(reason);
  }
  if (sandbox != nullptr) {
    // Ends every command: their streams reset and the pumps record them as interrupted.
    sandbox->agent().Fail(absl::CancelledError(reason));
  }
  for (auto& [id, exec] : execs) {
    exec->Join();
  }
  {
    std::lock_guard lock(mu_);
    for (const auto& [id, exec] : execs) {
      execs_.erase(id);
    }
  }
  {
    // Workspace operations using the agent end quickly once it failed; wait for them.
    std::unique_lock lock(mu_);
    leases_idle_.wait(lock, [&] { return leases_ == 0; });
  }
  absl::Status status;
  if (sandbox != nullptr) {
    status = detach ? sandbox->Detach() : sandbox->Destroy();
  }
  std::lock_guard lock(mu_);
  sandbox_.reset();
  ++generation_;  // what the old VM's agent still reports is about a VM that is gone
  return status;
}

absl::StatusOr<std::shared_ptr<LiveSandbox>> Registry::Add(const std::string& id) {
  std::lock_guard lock(mu_);
  auto [it, inserted] = live_.emplace(id, nullptr);
  if (!inserted) {
    return absl::AlreadyExistsError(absl::StrCat("sandbox ", id, " is already live"));
  }
  it->second = std::make_shared<LiveSandbox>(id);
  return it->second;
}

std::shared_ptr<LiveSandbox> Registry::Find(const std::string& id) {
  std::lock_guard lock(mu_);
  auto it = live_.find(id);
  return it == live_.end() ? nullptr : it->second;
}

void Registry::Remove(const std::string& id) {
  std::lock_guard lock(mu_);
  live_.erase(id);
}

std::vector<std::shared_ptr<LiveSandbox>> Registry::All() {
  std::lock_guard lock(mu_);
  std::vector<std::shared_ptr<LiveSandbox>> all;
  all.reserve(live_.size());
  for (const auto& [id, live] : live_) {
    all.push_back(live);
  }
  return all;
}

int Registry::size() {
  std::lock_guard lock(mu_);
  return static_cast<int>(live_.size());
}

}  // namespace abox::daemon
