// /v1/sandboxes/{id}/execs: start, list, get, output stream, stdin, signal, resize, wait.
#include <atomic>

#include "absl/strings/str_cat.h"
#include "src/api/exec.h"
#include "src/api/wire.h"
#include "src/base/status_macros.h"
#include "src/daemon/handlers/query.h"
#include "src/daemon/handlers/services.h"
#include "src/daemon/resource_views.h"

namespace abox::daemon {
namespace {

using http::Request;
using http::Responder;

constexpr char kExecPath[] = "/v1/sandboxes/{id}/execs/{exec}";
// GET .../execs?output=true stops adding output past this much (each exec keeps ≤ 1 MiB).
constexpr size_t kListOutputBudget = 16 << 20;

bool WantsSse(const Request& req) {
  std::optional<std::string> accept = req.Header("Accept");
  return accept && accept->find("text/event-stream") != std::string::npos;
}

// An OutputSink on a streaming response: NDJSON lines, or SSE events named by "type".
OutputSink SinkFor(http::Stream stream, bool sse) {
  OutputSink sink;
  sink.write = [stream, sse](const nlohmann::json& line,
                             std::function<void()> on_sent) mutable -> bool {
    if (sse) {
      http::SseEvent event;
      event.event = line.value("type", "output");
      if (line.contains("seq")) {
        event.id = std::to_string(line["seq"].get<int64_t>());
      }
      event.data = api::Dump(line);
      return stream.WriteEvent(event, std::move(on_sent));
    }
    return stream.WriteLine(api::Dump(line), std::move(on_sent));
  };
  sink.finish = [stream]() mutable { stream.Finish(); };
  return sink;
}

}  // namespace

absl::Status AddExecRoutes(http::Router& router, Services& services) {
  ExecService* execs = services.execs;
  TimerQueue* timers = services.timers;

  ABOX_RETURN_IF_ERROR(router.Add("POST", "/v1/sandboxes/{id}/execs",
                                  [execs](Request& req, Responder& res) {
                                    if (absl::Status s = CheckQuery(req, {}); !s.ok()) {
                                      return res.Error(s);
                                    }
                                    absl::StatusOr<api::ExecCreate> create =
                                        api::DecodeExecCreate(req.body);
                                    if (!create.ok()) {
                                      return res.Error(create.status());
                                    }
                                    absl::StatusOr<std::shared_ptr<LiveExec>> live =
                                        execs->Start(req.Param("id"), *create);
                                    if (!live.ok()) {
                                      return res.Error(live.status());
                                    }
                                    res.Json(201, ExecJson((*live)->started_record()));
                                  },
                                  {.blocking = true}));

  ABOX_RETURN_IF_ERROR(router.Add(
      "GET", "/v1/sandboxes/{id}/execs",
      [execs](Request& req, Responder& res) {
        absl::Status query = CheckQuery(req, {"limit", "output"});
        absl::StatusOr<int64_t> limit = QueryInt(req, "limit", 100, 1, 1000);
        absl::StatusOr<bool> output = QueryBool(req, "output", false);
        for (const absl::Status& s : {query, limit.status(), output.status()}) {
          if (!s.ok()) {
            return res.Error(s);
          }
        }
        absl::StatusOr<std::vector<store::ExecRecord>> records =
            execs->List(req.Param("id"), static_cast<int>(*limit));
        if (!records.ok()) {
          return res.Error(records.status());
        }
        nlohmann::json list = nlohmann::json::array();
        size_t budget = kListOutputBudget;
        for (const store::ExecRecord& e : *records) {
          if (*output && static_cast<size_t>(e.output_bytes) <= budget) {
            absl::StatusOr<store::ExecWithOutput> full = execs->Output(e.id);
            if (full.ok()) {
              budget -= static_cast<size_t>(e.output_bytes);
              list.push_back(ExecJson(*full));
              continue;
            }
          }
          nlohmann::json j = ExecJson(e);
          if (*output) {
            j["output_omitted"] = true;  // over the response's output budget: GET it alone
          }
          list.push_back(std::move(j));
        }
        res.Json(200, {{"execs", std::move(list)}});
      },
      {.blocking = true}));

  ABOX_RETURN_IF_ERROR(router.Add("GET", kExecPath,
                                  [execs](Request& req, Responder& res) {
                                    absl::Status query = CheckQuery(req, {"output"});
                                    absl::StatusOr<bool> output = QueryBool(req, "output", false);
                                    if (!query.ok() || !output.ok()) {
                                      return res.Error(!query.ok() ? query : output.status());
                                    }
                                    absl::StatusOr<ExecHandle> handle =
                                        execs->Find(req.Param("id"), req.Param("exec"));
                                    if (!handle.ok()) {
                                      return res.Error(handle.status());
                                    }
                                    if (!*output) {
                                      return res.Json(200, ExecJson(handle->record));
                                    }
                                    absl::StatusOr<store::ExecWithOutput> full =
                                        execs->Output(handle->record.id);
                                    if (!full.ok()) {
                                      return res.Error(full.status());
                                    }
                                    res.Json(200, ExecJson(*full));
                                  },
                                  {.blocking = true}));

  ABOX_RETURN_IF_ERROR(router.Add(
      "GET", absl::StrCat(kExecPath, "/output"),
      [execs](Request& req, Responder& res) {
        absl::Status query = CheckQuery(req, {"after"});
        absl::StatusOr<int64_t> after = QueryInt(req, "after", 0, 0, INT64_MAX);
        if (!query.ok() || !after.ok()) {
          return res.Error(!query.ok() ? query : after.status());
        }
        absl::StatusOr<ExecHandle> handle = execs->Find(req.Param("id"), req.Param("exec"));
        if (!handle.ok()) {
          return res.Error(handle.status());
        }
        bool sse = WantsSse(req);
        http::Stream stream = sse ? res.StartSse() : res.StartNdjson();
        OutputSink sink = SinkFor(stream, sse);
        if (handle->live == nullptr) {
          absl::StatusOr<store::ExecWithOutput> full = execs->Output(handle->record.id);
          if (full.ok()) {
            ReplayOutput(*full, *after, sink);
          }
          return stream.Finish();
        }
        absl::StatusOr<uint64_t> reader = handle->live->Attach(*after, sink);
        if (!reader.ok()) {
          return stream.Finish();
        }
        if (*reader != 0) {
          std::weak_ptr<LiveExec> weak = handle->live;
          uint64_t id = *reader;
          stream.OnCancel([weak, id] {
            if (auto live = weak.lock()) {
              live->Detach(id);
            }
          });
        }
      },
      {.blocking = true}));

  ABOX_RETURN_IF_ERROR(router.Add(
      "POST", absl::StrCat(kExecPath, "/stdin"),
      [execs](Request& req, Responder& res) {
        absl::Status query = CheckQuery(req, {"eof"});
        absl::StatusOr<bool> eof = QueryBool(req, "eof", false);
        if (!query.ok() || !eof.ok()) {
          return res.Error(!query.ok() ? query : eof.status());
        }
        absl::StatusOr<ExecHandle> handle = execs->Find(req.Param("id"), req.Param("exec"));
        if (!handle.ok()) {
          return res.Error(handle.status());
        }
        if (handle->live == nullptr) {
          return res.Error(absl::FailedPreconditionError(
              absl::StrCat("exec ", handle->record.id, " has ended: it takes no more stdin")));
        }
        Responder later = res;
        handle->live->WriteStdin(std::move(req.body), *eof, [later](absl::Status s) mutable {
          if (s.ok()) {
            later.Send(204, "", "");
          } else {
            later.Error(s);
          }
        });
      },
      {.blocking = true}));

  ABOX_RETURN_IF_ERROR(router.Add(
      "POST", absl::StrCat(kExecPath, "/signal"),
      [execs](Request& req, Responder& res) {
        if (absl::Status s = CheckQuery(req, {}); !s.ok()) {
          return res.Error(s);
        }
        absl::StatusOr<int> signal = api::DecodeSignalRequest(req.body);
        if (!signal.ok()) {
          return res.Error(signal.status());
        }
        absl::StatusOr<ExecHandle> handle = execs->Find(req.Param("id"), req.Param("exec"));
        if (!handle.ok()) {
          return res.Error(handle.status());
        }
        absl::Status sent = handle->live == nullptr ? absl::FailedPreconditionError(absl::StrCat(
                                                          "exec ", handle->record.id, " has ended"))
                                                    : handle->live->Signal(*signal);
        if (!sent.ok()) {
          return res.Error(sent);
        }
        res.Send(204, "", "");
      },
      {.blocking = true}));

  ABOX_RETURN_IF_ERROR(router.Add(
      "POST", absl::StrCat(kExecPath, "/resize"),
      [execs](Request& req, Responder& res) {
        if (absl::Status s = CheckQuery(req, {}); !s.ok()) {
          return res.Error(s);
        }
        absl::StatusOr<std::pair<int64_t, int64_t>> size = api::DecodePtySize(req.body);
        if (!size.ok()) {
          return res.Error(size.status());
        }
        absl::StatusOr<ExecHandle> handle = execs->Find(req.Param("id"), req.Param("exec"));
        if (!handle.ok()) {
          return res.Error(handle.status());
        }
        absl::Status done = handle->live == nullptr
                                ? absl::FailedPreconditionError(
                                      absl::StrCat("exec ", handle->record.id, " has ended"))
                                : handle->live->Resize(static_cast<int>(size->first),
                                                       static_cast<int>(size->second));
        if (!done.ok()) {
          return res.Error(done);
        }
        res.Send(204, "", "");
      },
      {.blocking = true}));

  ABOX_RETURN_IF_ERROR(router.Add(
      "GET", absl::StrCat(kExecPath, "/wait"),
      [execs, timers](Request& req, Responder& res) {
        absl::Status query = CheckQuery(req, {"timeout_ms"});
        absl::StatusOr<int64_t> timeout_ms = QueryInt(req, "timeout_ms", 3600000, 0, 3600000);
        if (!query.ok() || !timeout_ms.ok()) {
          return res.Error(!query.ok() ? query : timeout_ms.status());
        }
        absl::StatusOr<ExecHandle> handle = execs->Find(req.Param("id"), req.Param("exec"));
        if (!handle.ok()) {
          return res.Error(handle.status());
        }
        if (handle->live == nullptr) {
          return res.Json(200, ExecJson(handle->record));
        }
        struct Once {
          std::atomic<bool> answered{false};
          std::atomic<uint64_t> timer{0};
        };
        auto once = std::make_shared<Once>();
        std::string exec_id = handle->record.id;
        Responder later = res;
        uint64_t timer =
            timers->RunAfter(absl::Milliseconds(*timeout_ms), [once, later, exec_id]() mutable {
              if (!once->answered.exchange(true)) {
                later.Error(absl::DeadlineExceededError(
                    absl::StrCat("exec ", exec_id, " is still running: wait again, or signal it")));
              }
            });
        once->timer = timer;
        handle->live->OnDone([once, later, timers](const store::ExecRecord& done) mutable {
          if (!once->answered.exchange(true)) {
            timers->Cancel(once->timer);
            later.Json(200, ExecJson(done));
          }
        });
      },
      {.blocking = true}));
  return absl::OkStatus();
}

}  // namespace abox::daemon
