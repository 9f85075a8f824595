// GET /v1/events: lifecycle events as server-sent events, with replay.
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "src/api/errors.h"
#include "src/api/event.h"
#include "src/api/wire.h"
#include "src/base/status_macros.h"
#include "src/daemon/handlers/query.h"
#include "src/daemon/handlers/services.h"
#include "src/daemon/resource_views.h"

namespace abox::daemon {

absl::Status AddEventRoutes(http::Router& router, Services& services) {
  SandboxService* sandboxes = services.sandboxes;
  EventBus* events = services.events;
  return router.Add(
      "GET", "/v1/events",
      [sandboxes, events](http::Request& req, http::Responder& res) {
        absl::Status query = CheckQuery(req, {"since", "sandbox"});
        absl::StatusOr<int64_t> since = QueryInt(req, "since", -1, 0, INT64_MAX);
        if (!query.ok() || !since.ok()) {
          return res.Error(!query.ok() ? query : since.status());
        }
        std::optional<int64_t> replay_after;
        if (*since >= 0) {
          replay_after = *since;
        } else if (std::optional<std::string> last = req.Header("Last-Event-ID")) {
          int64_t seq = 0;
          if (!absl::SimpleAtoi(*last, &seq) || seq < 0) {
            return res.Error(api::FieldError(
                "Last-Event-ID",
                absl::StrCat("Last-Event-ID must be an event seq, got \"", *last, "\"")));
          }
          replay_after = seq;
        }
        std::string sandbox_id;
        if (std::optional<std::string> ref = req.Query("sandbox")) {
          absl::StatusOr<SandboxView> view = sandboxes->Get(*ref);
          if (!view.ok()) {
            return res.Error(view.status());
          }
          sandbox_id = view->record.id;
        }
        http::Stream stream = res.StartSse();
        bool missed = false;
        absl::StatusOr<uint64_t> handle = events->Subscribe(
            [stream, sandbox_id](const store::Event& e) mutable {
              if (!sandbox_id.empty() && e.sandbox_id != sandbox_id) {
                return;
              }
              stream.WriteEvent({std::to_string(e.seq), e.type, api::Dump(EventJson(e))});
            },
            replay_after, &missed);
        if (!handle.ok()) {
          return stream.Finish();
        }
        if (missed) {
          // Written after the replay; the client should re-list to resynchronise.
          stream.WriteEvent({"", api::kMissedEvent, api::Dump(api::MissedEventJson())});
        }
        uint64_t id = *handle;
        stream.OnCancel([events, id] { events->Unsubscribe(id); });
      },
      {.blocking = true});
}

}  // namespace abox::daemon
