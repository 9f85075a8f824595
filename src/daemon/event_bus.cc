#include "src/daemon/event_bus.h"

#include "absl/time/clock.h"
#include "spdlog/spdlog.h"

namespace abox::daemon {

void EventBus::Publish(absl::string_view sandbox_id, absl::string_view type,
                       nlohmann::json payload) {
  std::lock_guard lock(mu_);
  absl::StatusOr<int64_t> seq = repo_->Append(sandbox_id, type, payload);
  if (!seq.ok()) {
    spdlog::warn("cannot record event {} for {}: {}", std::string(type), std::string(sandbox_id),
                 seq.status().ToString());
    return;
  }
  store::Event event;
  event.seq = *seq;
  event.time = absl::Now();
  event.sandbox_id = std::string(sandbox_id);
  event.type = std::string(type);
  event.payload = std::move(payload);
  for (auto& [handle, listener] : listeners_) {
    listener(event);
  }
}

absl::StatusOr<uint64_t> EventBus::Subscribe(Listener listener,
                                             std::optional<int64_t> replay_after, bool* missed) {
  std::lock_guard lock(mu_);
  if (missed != nullptr) {
    *missed = false;
  }
  if (replay_after) {
    int64_t after = *replay_after;
    for (;;) {
      absl::StatusOr<store::EventBatch> batch = repo_->Since(after, 1000);
      if (!batch.ok()) {
        return batch.status();
      }
      if (batch->missed && missed != nullptr) {
        *missed = true;
      }
      for (const store::Event& e : batch->events) {
        listener(e);
        after = e.seq;
      }
      if (batch->events.size() < 1000) {
        break;
      }
    }
  }
  uint64_t handle = next_++;
  listeners_.emplace(handle, std::move(listener));
  return handle;
}

void EventBus::Unsubscribe(uint64_t handle) {
  std::lock_guard lock(mu_);
  listeners_.erase(handle);
}

}  // namespace abox::daemon
