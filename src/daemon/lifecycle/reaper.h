// TTL and idle timeouts: every reap_interval, sandboxes running a command count as active, and
// those whose TTL or idle timeout passed (by the injected clock) are stopped.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "src/daemon/lifecycle/sandbox_context.h"

namespace abox::daemon {

// Why `expired` is due, for a person ("its TTL of 60s passed").
[[nodiscard]] std::string ExpiryReasonText(const store::ExpiredSandbox& expired);

// Thread-safe.
class Reaper final {
 public:
  // Stops one sandbox: id, reason text, "ttl" or "idle".
  using StopFn = std::function<void(const std::string&, const std::string&, const std::string&)>;
  Reaper(SandboxContext& ctx, StopFn stop) : ctx_(&ctx), stop_(std::move(stop)) {}
  ~Reaper() { Stop(); }

  // Checks every reap_interval on the timer thread until Stop().
  void Start();
  void Stop() { alive_.reset(); }
  // One check now (the timer calls it; tests call it after moving the fake clock).
  void ReapNow();

 private:
  void Schedule();

  SandboxContext* ctx_;
  StopFn stop_;
  std::shared_ptr<bool> alive_;
};

}  // namespace abox::daemon
