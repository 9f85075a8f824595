#include "src/daemon/lifecycle/reaper.h"

#include "absl/strings/str_cat.h"
#include "spdlog/spdlog.h"

namespace abox::daemon {

std::string ExpiryReasonText(const store::ExpiredSandbox& e) {
  return e.reason == store::ExpiryReason::kTtl
             ? absl::StrCat("its TTL of ", e.sandbox.ttl_seconds, "s passed")
             : absl::StrCat("it was idle for ", e.sandbox.idle_timeout_seconds, "s");
}

void Reaper::Start() {
  alive_ = std::make_shared<bool>(true);
  Schedule();
}

void Reaper::Schedule() {
  std::weak_ptr<bool> alive = alive_;
  ctx_->timers->RunAfter(ctx_->options.reap_interval, [this, alive] {
    if (alive.expired()) {
      return;
    }
    ReapNow();
    Schedule();
  });
}

void Reaper::ReapNow() {
  // A sandbox with a command running is not idle: keep its last_active_at fresh.
  for (const std::shared_ptr<LiveSandbox>& live : ctx_->registry->All()) {
    if (live->running_execs() > 0) {
      ctx_->recorder->Note(ctx_->sandboxes->Touch(live->id()),
                           absl::StrCat("reaper: recording activity of ", live->id()));
    }
  }
  absl::StatusOr<std::vector<store::ExpiredSandbox>> expired =
      ctx_->sandboxes->Expired(ctx_->clock->Now());
  if (!expired.ok()) {
    ctx_->recorder->Note(expired.status(), "reaper");
    return;
  }
  for (const store::ExpiredSandbox& e : *expired) {
    if (e.sandbox.state != SandboxState::kReady && e.sandbox.state != SandboxState::kPaused) {
      continue;  // still booting: checked again once ready
    }
    stop_(e.sandbox.id, ExpiryReasonText(e),
          e.reason == store::ExpiryReason::kTtl ? "ttl" : "idle");
  }
}

}  // namespace abox::daemon
