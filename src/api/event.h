// The lifecycle events of GET /v1/events (server-sent events named by their type, with the
// event's seq as id), and the "missed" notice sent after a replay that retention cut short.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "nlohmann/json.hpp"

namespace abox::api {

struct Event {
  int64_t seq = 0;
  std::optional<absl::Time> time;
  std::string type;        // created, ready, stopped, exec_finished, ...
  std::string sandbox_id;  // empty for daemon-wide events
  // What the event is about; its fields depend on the type (free-form, passed through).
  nlohmann::json payload = nlohmann::json::object();

  friend bool operator==(const Event&, const Event&) = default;
};
[[nodiscard]] nlohmann::json ToJson(const Event& event);
// Tolerant of unknown fields; a known field of the wrong type is an error naming it.
[[nodiscard]] absl::StatusOr<Event> DecodeEvent(const nlohmann::json& value);

// The SSE event name of the notice that older events were dropped by retention.
inline constexpr char kMissedEvent[] = "missed";
// Its data: {"message": ...}.
[[nodiscard]] nlohmann::json MissedEventJson();

}  // namespace abox::api
