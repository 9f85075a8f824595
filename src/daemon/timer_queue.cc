#include "src/daemon/timer_queue.h"

#include "absl/time/clock.h"

namespace abox::daemon {

TimerQueue::TimerQueue() : thread_([this] { Run(); }) {}

TimerQueue::~TimerQueue() { Stop(); }

uint64_t TimerQueue::RunAfter(absl::Duration delay, Job job) {
  std::lock_guard lock(mu_);
  uint64_t handle = next_handle_++;
  if (!stopping_) {
    jobs_.emplace(absl::Now() + delay, std::make_pair(handle, std::move(job)));
    cv_.notify_one();
  }
  return handle;
}

bool TimerQueue::Cancel(uint64_t handle) {
  std::lock_guard lock(mu_);
  for (auto it = jobs_.begin(); it != jobs_.end(); ++it) {
    if (it->second.first == handle) {
      jobs_.erase(it);
      return true;
    }
  }
  return false;
}

void TimerQueue::Stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    jobs_.clear();
    cv_.notify_one();
  }
  if (thread_.joinable()) {
    thread_.join();
  }
}

void TimerQueue::Run() {
  std::unique_lock lock(mu_);
  while (!stopping_) {
    if (jobs_.empty()) {
      cv_.wait(lock);
      continue;
    }
    absl::Time now = absl::Now();
    auto first = jobs_.begin();
    if (first->first > now) {
      cv_.wait_for(lock, absl::ToChronoNanoseconds(first->first - now));
      continue;
    }
    Job job = std::move(first->second.second);
    jobs_.erase(first);
    lock.unlock();
    job();
    lock.lock();
  }
}

}  // namespace abox::daemon
