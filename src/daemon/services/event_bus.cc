#include "src/daemon/services/event_bus.h"

#include "absl/time/clock.h"
#include "spdlog/spdlog.h"

namespace abox::daemon {

EventBus::EventBus(store::EventRepo& repo) : repo_(&repo), thread_([this] { Run(); }) {}

EventBus::~EventBus() {
  {
    std::lock_guard lock(queue_mu_);
    stopping_ = true;
    queue_cv_.notify_all();
  }
  thread_.join();
}

void EventBus::Publish(absl::string_view sandbox_id, absl::string_view type,
                       nlohmann::json payload) {
  std::lock_guard lock(queue_mu_);
  queue_.push_back({std::string(sandbox_id), std::string(type), std::move(payload), absl::Now()});
  ++published_;
  queue_cv_.notify_all();
}

void EventBus::Flush() {
  std::unique_lock lock(queue_mu_);
  uint64_t target = published_;
  queue_cv_.wait(lock, [&] { return delivered_ >= target; });
}

void EventBus::Run() {
  std::unique_lock lock(queue_mu_);
  for (;;) {
    queue_cv_.wait(lock, [&] { return !queue_.empty() || stopping_; });
    if (queue_.empty()) {
      return;  // stopping, and everything was delivered
    }
    std::deque<Pending> batch;
    batch.swap(queue_);
    lock.unlock();
    {
      std::lock_guard deliver(mu_);
      for (Pending& p : batch) {
        Deliver(std::move(p));
      }
    }
    lock.lock();
    delivered_ += batch.size();
    queue_cv_.notify_all();
  }
}

void EventBus::Deliver(Pending p) {
  absl::StatusOr<int64_t> seq = repo_->Append(p.sandbox_id, p.type, p.payload);
  if (!seq.ok()) {
    spdlog::warn("cannot record event {} for {}: {}", p.type, p.sandbox_id,
                 seq.status().ToString());
    return;
  }
  store::Event event;
  event.seq = *seq;
  event.time = p.time;
  event.sandbox_id = std::move(p.sandbox_id);
  event.type = std::move(p.type);
  event.payload = std::move(p.payload);
  for (auto& [handle, listener] : listeners_) {
    listener(event);
  }
}

absl::StatusOr<uint64_t> EventBus::Subscribe(Listener listener, std::optional<int64_t> replay_after,
                                             bool* missed) {
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
