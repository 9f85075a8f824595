// Lifecycle events: recorded in the events table (for replay) and pushed to live listeners
// (the SSE streams of GET /v1/events).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "nlohmann/json.hpp"
#include "src/store/event_repo.h"

namespace abox::daemon {

// Thread-safe. Events are recorded and delivered in the order they were published, by one
// thread of the bus, so that publishing costs a request no SQLite write. Listeners run on that
// thread under the bus's lock: they must not block or publish (an http::Stream write only
// queues).
class EventBus final {
 public:
  using Listener = std::function<void(const store::Event&)>;

  explicit EventBus(store::EventRepo& repo);
  EventBus(const EventBus&) = delete;
  EventBus& operator=(const EventBus&) = delete;
  // Records and delivers every event published so far, then stops the thread.
  ~EventBus();

  // Queues the event for recording and delivery. Failures to record are logged, never
  // returned: an event is a side effect of something that already happened.
  void Publish(absl::string_view sandbox_id, absl::string_view type,
               nlohmann::json payload = nlohmann::json::object());
  // Waits until every event published before the call was recorded and delivered (tests).
  void Flush();

  // Registers `listener`; with `replay_after` it first gets the kept events with a larger seq
  // (no gap, no duplicate with what follows). `missed` is set when retention dropped some of
  // them. Returns a handle for Unsubscribe().
  absl::StatusOr<uint64_t> Subscribe(Listener listener, std::optional<int64_t> replay_after,
                                     bool* missed);
  void Unsubscribe(uint64_t handle);

 private:
  struct Pending {
    std::string sandbox_id;
    std::string type;
    nlohmann::json payload;
    absl::Time time;
  };
  void Run();
  void Deliver(Pending event);  // under mu_

  store::EventRepo* repo_;
  std::mutex mu_;  // listeners and recording
  std::map<uint64_t, Listener> listeners_;
  uint64_t next_ = 1;

  std::mutex queue_mu_;
  std::condition_variable queue_cv_;
  std::deque<Pending> queue_;  // guarded by queue_mu_
  uint64_t published_ = 0;     // guarded by queue_mu_
  uint64_t delivered_ = 0;     // guarded by queue_mu_
  bool stopping_ = false;      // guarded by queue_mu_
  std::thread thread_;
};

}  // namespace abox::daemon
