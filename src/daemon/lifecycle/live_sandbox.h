// The live side of the sandboxes aboxd runs: one LiveSandbox per sandbox from its create until
// it is torn down (its VM, its running execs, the workspace operations using its agent), and
// the registry that finds them by id.
#pragma once

#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "src/daemon/services/live_exec.h"
#include "src/runtime/sandbox.h"

namespace abox::daemon {

// Thread-safe.
class LiveSandbox final {
 public:
  explicit LiveSandbox(std::string id) : id_(std::move(id)) {}
  LiveSandbox(const LiveSandbox&) = delete;
  LiveSandbox& operator=(const LiveSandbox&) = delete;

  [[nodiscard]] const std::string& id() const { return id_; }

  // The booted VM becomes this sandbox's (the boot pipeline's last step).
  void Adopt(std::unique_ptr<runtime::Sandbox> sandbox);
  // Marks it stopping if it is serving; false if it was not (booting, or already stopping).
  [[nodiscard]] bool BeginStop();

  // A workspace operation's hold on the agent: while one is held, teardown waits (after it
  // failed the agent, so the holder's guest calls end quickly).
  class ToolLease final {
   public:
    ToolLease(ToolLease&& other) noexcept : owner_(other.owner_), sandbox_(other.sandbox_) {
      other.owner_ = nullptr;
    }
    ToolLease& operator=(ToolLease&&) = delete;
    ~ToolLease();
    [[nodiscard]] runtime::Sandbox& sandbox() { return *sandbox_; }

   private:
    friend class LiveSandbox;
    ToolLease(LiveSandbox* owner, runtime::Sandbox* sandbox) : owner_(owner), sandbox_(sandbox) {}
    LiveSandbox* owner_;
    runtime::Sandbox* sandbox_;
  };
  enum class LeaseRefusal { kNotServing, kBusy };
  // A lease if it is serving and fewer than `max` are held; else why not.
  [[nodiscard]] std::variant<ToolLease, LeaseRefusal> LeaseTools(int max);

  // Starts a command through the agent, registered as this sandbox's, unless it stopped.
  // `launch` runs under the sandbox's lock, so no exec slips in after a teardown took the list.
  using LaunchFn =
      std::function<absl::StatusOr<std::shared_ptr<LiveExec>>(runtime::AgentClient& agent)>;
  [[nodiscard]] absl::StatusOr<std::shared_ptr<LiveExec>> Launch(const LaunchFn& launch);
  // The running exec with this id, or null.
  [[nodiscard]] std::shared_ptr<LiveExec> FindExec(const std::string& exec_id);
  // Forgets an exec that ended and returns it (null if a teardown took it already).
  [[nodiscard]] std::shared_ptr<LiveExec> TakeExec(const std::string& exec_id);
  [[nodiscard]] int running_execs();

  // The VMM process of its VM (0 while it has none).
  [[nodiscard]] int64_t VmPid();
  // The VM's console log files (older first), empty while booting.
  [[nodiscard]] std::vector<std::string> ConsoleLogPaths();
  // Why it failed (runtime::Sandbox::FailureReport), for an agent failure.
  [[nodiscard]] std::string FailureReport();

  // Teardown, in order: marks it stopping and takes its execs; fails the agent with `reason`
  // (ending every command); joins the execs; waits for the tool leases; then destroys or
  // detaches the VM and forgets it. Returns the VM's teardown status.
  absl::Status TearDown(const std::string& reason, bool detach);

  // Swaps the VM (a checkpoint restore): the teardown above with `reason` (the VM is
  // destroyed), then `start` makes the new one, which serves from then on. When `start` fails
  // the sandbox is left stopping with no VM (the caller records it failed).
  using StartFn = std::function<absl::StatusOr<std::unique_ptr<runtime::Sandbox>>()>;
  absl::Status Replace(const std::string& reason, const StartFn& start);
  // Counts the VMs this sandbox had: a failure reported by an earlier one is stale.
  [[nodiscard]] int generation();

 private:
  void ReleaseLease();
  // TearDown without forgetting that it may serve again.
  absl::Status EndVm(const std::string& reason, bool detach);

  const std::string id_;
  std::mutex mu_;                              // guards the fields below
  std::unique_ptr<runtime::Sandbox> sandbox_;  // null while booting and after teardown
  std::map<std::string, std::shared_ptr<LiveExec>> execs_;
  bool stopping_ = false;
  int leases_ = 0;
  std::condition_variable leases_idle_;
  int generation_ = 0;
};

// id -> LiveSandbox. Thread-safe.
class Registry final {
 public:
  // Registers a new live sandbox (a create's, or a recovered one); kAlreadyExists if the id is.
  [[nodiscard]] absl::StatusOr<std::shared_ptr<LiveSandbox>> Add(const std::string& id);
  [[nodiscard]] std::shared_ptr<LiveSandbox> Find(const std::string& id);
  void Remove(const std::string& id);
  [[nodiscard]] std::vector<std::shared_ptr<LiveSandbox>> All();
  [[nodiscard]] int size();

 private:
  std::mutex mu_;
  std::map<std::string, std::shared_ptr<LiveSandbox>> live_;
};

}  // namespace abox::daemon
