#include "src/mcp/http_session.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace abox::mcp {

HttpSession::HttpSession(std::string id, const ServerInfo& info, SessionTools tools, absl::Time now)
    : id_(std::move(id)), last_used_(now), state_(std::move(tools.state)) {
  server_ = std::make_unique<Server>(
      info, std::move(tools.tools),
      [this](const std::string& line, const Route& route) { Deliver(line, route); });
}

HttpSession::~HttpSession() { End(); }

void HttpSession::HandleRequest(const Incoming& in, http::Responder responder, bool sse,
                                http::HttpHeaders headers) {
  std::string key = in.id.dump();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (ended_) {
      responder.Json(404, ErrorMessage(nullptr, kInvalidRequest,
                                       "the session has ended; start a new one with initialize"));
      return;
    }
    if (pending_.count(key) != 0) {
      responder.Json(200,
                     ErrorMessage(in.id, kInvalidRequest,
                                  "Invalid Request: this id is already in use by a request "
                                  "in flight"),
                     std::move(headers));
      return;
    }
    Pending& pending = pending_[key];
    pending.sse = sse;
    pending.id = in.id;
    if (sse) {
      pending.stream = responder.StartSse(std::move(headers));
    } else {
      pending.responder = std::move(responder);
      pending.headers = std::move(headers);
    }
  }
  // Unlocked: the answer may be delivered (Deliver takes mu_) before this returns.
  server_->HandleMessage(in);
}

void HttpSession::HandleNotification(const Incoming& in) {
  server_->HandleMessage(in);
  if (in.kind != Incoming::Kind::kNotification || in.method != "notifications/cancelled" ||
      !in.params.is_object()) {
    return;
  }
  auto request_id = in.params.find("requestId");
  if (request_id == in.params.end()) {
    return;
  }
  // The Server sends a cancelled call no answer; its HTTP response ends here instead.
  std::lock_guard<std::mutex> lock(mu_);
  auto it = pending_.find(request_id->dump());
  if (it != pending_.end()) {
    Abandon(it->second, 200, "cancelled by the client");
    pending_.erase(it);
  }
}

void HttpSession::End() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (ended_) {
      return;
    }
    ended_ = true;
  }
  server_->Shutdown();  // cancels the calls in flight and joins them; nothing is sent after it
  std::map<std::string, Pending> pending;
  {
    std::lock_guard<std::mutex> lock(mu_);
    pending.swap(pending_);
  }
  for (auto& [key, request] : pending) {
    Abandon(request, 404, "the session ended");
  }
  state_.reset();  // the commands this session started die with it
}

void HttpSession::Touch(absl::Time now) {
  std::lock_guard<std::mutex> lock(mu_);
  last_used_ = std::max(last_used_, now);
}

bool HttpSession::IdleSince(absl::Time cutoff) {
  std::lock_guard<std::mutex> lock(mu_);
  return pending_.empty() && last_used_ < cutoff;
}

void HttpSession::Deliver(const std::string& line, const Route& route) {
  if (route.request_id.is_null()) {
    // Not about any request (a log message): there is no standalone GET stream to carry it.
    return;
  }
  absl::string_view body = absl::StripSuffix(line, "\n");
  std::lock_guard<std::mutex> lock(mu_);
  auto it = pending_.find(route.request_id.dump());
  if (it == pending_.end()) {
    return;  // its response already ended (cancelled, or the session ended)
  }
  Pending& pending = it->second;
  if (pending.sse) {
    pending.stream.WriteEvent(http::SseEvent{"", "message", std::string(body)});
    if (route.final) {
      pending.stream.Finish();
      pending_.erase(it);
    }
  } else if (route.final) {
    pending.responder->Send(200, "application/json", std::string(body), std::move(pending.headers));
    pending_.erase(it);
  }
  // A progress notification for a request answered as plain JSON has nowhere to go: dropped.
}

void HttpSession::Abandon(Pending& pending, int status, absl::string_view why) {
  if (pending.sse) {
    pending.stream.Finish();  // the client sees the stream end without an answer
  } else if (pending.responder.has_value()) {
    pending.responder->Json(
        status, ErrorMessage(pending.id, kInvalidRequest, absl::StrCat("no answer: ", why)));
  }
}

}  // namespace abox::mcp
