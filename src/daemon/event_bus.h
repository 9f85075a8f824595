// Lifecycle events: recorded in the events table (for replay) and pushed to live listeners
// (the SSE streams of GET /v1/events).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"
#include "src/store/event_repo.h"

namespace abox::daemon {

// Thread-safe. Listeners run under the bus's lock, on the publisher's thread: they must not
// block or publish (an http::Stream write only queues).
class EventBus final {
 public:
  using Listener = std::function<void(const store::Event&)>;

  explicit EventBus(store::EventRepo& repo) : repo_(&repo) {}

  // Records the event and hands it to every listener. Failures to record are logged, never
  // returned: an event is a side effect of something that already happened.
  void Publish(absl::string_view sandbox_id, absl::string_view type,
               nlohmann::json payload = nlohmann::json::object());

  // Registers `listener`; with `replay_after` it first gets the kept events with a larger seq
  // (no gap, no duplicate with what follows). `missed` is set when retention dropped some of
  // them. Returns a handle for Unsubscribe().
  absl::StatusOr<uint64_t> Subscribe(Listener listener, std::optional<int64_t> replay_after,
                                     bool* missed);
  void Unsubscribe(uint64_t handle);

 private:
  store::EventRepo* repo_;
  std::mutex mu_;
  std::map<uint64_t, Listener> listeners_;
  uint64_t next_ = 1;
};

}  // namespace abox::daemon
