#include "src/daemon/lifecycle/background_tasks.h"

#include <thread>

namespace abox::daemon {

bool BackgroundTasks::Spawn(std::function<void()> task) {
  {
    std::lock_guard lock(state_->mu);
    if (state_->closed) {
      return false;
    }
    ++state_->running;
  }
  std::thread([state = state_, task = std::move(task)]() mutable {
    task();
    task = nullptr;  // what it holds goes before Close() may return
    std::lock_guard lock(state->mu);
    --state->running;
    state->idle.notify_all();
  }).detach();
  return true;
}

void BackgroundTasks::Close() {
  std::unique_lock lock(state_->mu);
  state_->closed = true;
  state_->idle.wait(lock, [&] { return state_->running == 0; });
}

}  // namespace abox::daemon
