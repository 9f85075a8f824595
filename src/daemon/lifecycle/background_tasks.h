// Threads for work that outlives the request that started it (the boot, sync and setup of a
// create), so that no server worker is held for it. Close() refuses new tasks and waits for
// the running ones: the daemon's shutdown calls it before the services go away.
#pragma once

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>

namespace abox::daemon {

// Thread-safe.
class BackgroundTasks final {
 public:
  BackgroundTasks() : state_(std::make_shared<State>()) {}
  BackgroundTasks(const BackgroundTasks&) = delete;
  BackgroundTasks& operator=(const BackgroundTasks&) = delete;
  ~BackgroundTasks() { Close(); }

  // Runs `task` on a thread of its own; false (and `task` not run) after Close().
  [[nodiscard]] bool Spawn(std::function<void()> task);
  // Refuses new tasks and waits until every running one returned. Idempotent.
  void Close();

 private:
  struct State {
    std::mutex mu;
    std::condition_variable idle;
    int running = 0;
    bool closed = false;
  };
  std::shared_ptr<State> state_;  // shared with the threads, which end after the last notify
};

}  // namespace abox::daemon
