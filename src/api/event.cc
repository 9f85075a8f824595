#include "src/api/event.h"

#include "src/api/wire.h"
#include "src/base/status_macros.h"

namespace abox::api {

nlohmann::json ToJson(const Event& e) {
  nlohmann::json j = {{"seq", e.seq}, {"type", e.type}, {"payload", e.payload}};
  if (e.time) {
    j["time"] = FormatApiTime(*e.time);
  }
  if (!e.sandbox_id.empty()) {
    j["sandbox_id"] = e.sandbox_id;
  }
  return j;
}

absl::StatusOr<Event> DecodeEvent(const nlohmann::json& value) {
  AnswerReader r(value);
  Event e;
  r.Int("seq", &e.seq);
  r.Time("time", &e.time);
  r.String("type", &e.type);
  r.String("sandbox_id", &e.sandbox_id);
  if (r.Has("payload")) {
    r.Json("payload", &e.payload);
  }
  ABOX_RETURN_IF_ERROR(r.status());
  return e;
}

nlohmann::json MissedEventJson() {
  return {{"message", "older events were dropped by retention: re-list the sandboxes"}};
}

}  // namespace abox::api
