// One thread that runs small jobs at given times: exec wait timeouts, the TTL / idle reaper,
// and work that must leave an I/O thread (a dead VM's cleanup).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <thread>

#include "absl/time/time.h"

namespace abox::daemon {

// Thread-safe. Jobs run one at a time on the queue's thread, in deadline order; a job may
// block for a while (it delays the next ones). Stop() (and the destructor) drops the jobs not
// yet run and joins the thread.
class TimerQueue final {
 public:
  using Job = std::function<void()>;

  TimerQueue();
  TimerQueue(const TimerQueue&) = delete;
  TimerQueue& operator=(const TimerQueue&) = delete;
  ~TimerQueue();

  // Runs `job` once `delay` has passed; returns a handle for Cancel(). After Stop() nothing
  // runs.
  uint64_t RunAfter(absl::Duration delay, Job job);
  // Runs `job` as soon as possible.
  uint64_t Post(Job job) { return RunAfter(absl::ZeroDuration(), std::move(job)); }
  // Drops a job that has not started. Returns whether it was dropped.
  bool Cancel(uint64_t handle);
  void Stop();

 private:
  void Run();

  std::mutex mu_;
  std::condition_variable cv_;
  std::multimap<absl::Time, std::pair<uint64_t, Job>> jobs_;
  uint64_t next_handle_ = 1;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace abox::daemon
