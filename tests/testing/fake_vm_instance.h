// Test-only, internal to the fake VMM (fake_vmm.cc): one fake VM, the thread that serves the
// real guest agent on its agent socket and the state its Vm handles share.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

#include "src/base/io.h"
#include "src/base/unique_fd.h"
#include "src/vmm/shim_protocol.h"
#include "src/vmm/vmm.h"
#include "tests/testing/fake_vmm.h"

namespace abox::testing {

// One fake VM: a thread that serves the agent socket, and the state every Vm handle of it
// shares. Thread-safe.
class FakeVmInstance final {
 public:
  struct Params {
    std::string id;
    std::string run_dir;
    bool tie_to_caller = true;
    vmm::Accel accel = vmm::Accel::kTcg;
    std::string accel_note;
    std::chrono::milliseconds boot_delay{0};
    uint64_t console_limit = 1 << 20;
    std::string oom_counter_path;  // FakeVmmOptions::oom_counter_path
  };

  // A VM that is not running and has no thread (Attach found only its run_dir).
  FakeVmInstance(Params params, std::string exit_reason)
      : p_(std::move(params)), running_(false), exit_reason_(std::move(exit_reason)) {}
  // A VM about to boot; Start() runs it.
  explicit FakeVmInstance(Params params) : p_(std::move(params)), running_(true) {}
  FakeVmInstance(const FakeVmInstance&) = delete;
  FakeVmInstance& operator=(const FakeVmInstance&) = delete;
  ~FakeVmInstance() { End("the fake VM was destroyed"); }

  [[nodiscard]] const Params& params() const { return p_; }

  // Writes `boot_line` to the console and starts the VM thread, which owns `listen`.
  void Start(base::UniqueFd listen, base::Pipe stop, base::UniqueFd console,
             const std::string& boot_line);

  // Ends the VM with `reason` unless it has ended already, and waits for its thread. The
  // agent's commands are killed and reaped by then.
  void End(const std::string& reason);

  bool running() {
    std::lock_guard<std::mutex> lock(mu_);
    return running_;
  }
  std::string exit_reason() {
    std::lock_guard<std::mutex> lock(mu_);
    return exit_reason_;
  }
  // Waits up to `timeout` for the VM to end; false if it is still running.
  bool WaitExit(std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return !running_; });
  }

  // Whether a Vm handle owns the VM; TryAttach claims it if none does.
  bool TryAttach() {
    std::lock_guard<std::mutex> lock(mu_);
    return !std::exchange(attached_, true);
  }
  void set_attached(bool attached) {
    std::lock_guard<std::mutex> lock(mu_);
    attached_ = attached;
  }
  // True for the first caller only: that one removes the run_dir.
  bool ClaimCleanup() {
    std::lock_guard<std::mutex> lock(mu_);
    return !std::exchange(cleaned_up_, true);
  }

  [[nodiscard]] vmm::VmState InitialState() const;

  FakeVmInfo Info();

  // Appends a line to console.log, within the spec's limit (beyond it lines are dropped).
  void Console(const std::string& line);
  // The next host connection first receives `bytes`, before the agent serves it.
  void LeaveStaleBytes(std::string bytes);

 private:
  // The VM thread: boot, then one Agent per host connection until the VM ends.
  void Serve(base::UniqueFd listen);

  // Returns why the VM ended by itself, or "" when End() stopped it.
  std::string ServeUntilEnd(int listen);
  // Milliseconds since the epoch (the VM state's times).
  static int64_t NowUnixMs();

  const Params p_;
  const int64_t started_at_ms_ = NowUnixMs();
  std::mutex mu_;
  std::condition_variable cv_;
  bool running_;                // guarded by mu_
  std::string exit_reason_;     // guarded by mu_
  std::string end_reason_;      // guarded by mu_; set by End()
  bool attached_ = false;       // guarded by mu_
  bool cleaned_up_ = false;     // guarded by mu_
  int connections_ = 0;         // guarded by mu_
  std::string stale_bytes_;     // guarded by mu_
  base::UniqueFd console_;      // guarded by mu_
  uint64_t console_bytes_ = 0;  // guarded by mu_
  base::Pipe stop_;             // set before the thread starts, closed by End() after the join
  std::mutex join_mu_;
  std::thread thread_;  // guarded by join_mu_
};

}  // namespace abox::testing
