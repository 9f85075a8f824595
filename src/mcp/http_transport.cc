#include "src/mcp/http_transport.h"

#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "src/base/status_macros.h"
#include "src/mcp/json_rpc.h"

namespace abox::mcp {
namespace {

// JSON-RPC's "server error" range: refusals that are not about the message itself.
constexpr int kServerError = -32000;

// An HTTP error whose body is a JSON-RPC error without an id, as the spec allows.
void Refuse(http::Responder& responder, int status, int code, absl::string_view message) {
  responder.Json(status, ErrorMessage(nullptr, code, message));
}

bool IsJsonContentType(const std::optional<std::string>& type) {
  return type.has_value() &&
         absl::StartsWithIgnoreCase(absl::StripLeadingAsciiWhitespace(*type), "application/json");
}

}  // namespace

absl::StatusOr<std::unique_ptr<HttpTransport>> HttpTransport::Create(HttpTransportOptions options,
                                                                     ServerInfo info,
                                                                     SessionFactory factory) {
  if (options.no_auth != options.bearer_token.empty()) {
    return absl::InvalidArgumentError(
        "the HTTP transport needs a bearer token, or no token with no_auth (tests only)");
  }
  if (options.max_sessions < 1 || options.idle_timeout <= absl::ZeroDuration() ||
      options.sweep_interval <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        "max_sessions, idle_timeout and sweep_interval must be positive");
  }
  http::ServerOptions server_options;
  server_options.name = "abox-mcp";
  server_options.tcp_port = options.listen.port;
  server_options.tcp_bearer_token = options.bearer_token;
  server_options.tcp_without_token = options.no_auth;
  server_options.max_body_bytes = kMaxLineBytes;  // as stdio's longest line
  server_options.worker_threads = options.worker_threads;
  server_options.stop_grace = std::chrono::milliseconds(2000);

  std::unique_ptr<HttpTransport> transport(
      new HttpTransport(std::move(options), std::move(info), std::move(factory)));
  HttpTransport* self = transport.get();
  http::Router router;
  // Blocking: DELETE waits for the session's calls and kills its commands through aboxd.
  ABOX_RETURN_IF_ERROR(router.Add(
      "POST", "/mcp", [self](http::Request& req, http::Responder& res) { self->Post(req, res); },
      {.blocking = true}));
  ABOX_RETURN_IF_ERROR(
      router.Add("DELETE", "/mcp",
                 [self](http::Request& req, http::Responder& res) { self->Delete(req, res); },
                 {.blocking = true}));
  ABOX_ASSIGN_OR_RETURN(transport->server_,
                        http::Server::Create(std::move(server_options), std::move(router)));
  return transport;
}

HttpTransport::HttpTransport(HttpTransportOptions options, ServerInfo info, SessionFactory factory)
    : options_(std::move(options)), info_(std::move(info)), factory_(std::move(factory)) {}

HttpTransport::~HttpTransport() { Stop(); }

absl::Status HttpTransport::Start() {
  ABOX_RETURN_IF_ERROR(server_->Start());
  sweeper_ = std::thread([this] { SweepLoop(); });
  return absl::OkStatus();
}

void HttpTransport::Stop() {
  if (server_ == nullptr) {
    return;
  }
  server_->Stop();  // from here on no handler runs
  std::map<std::string, std::shared_ptr<HttpSession>> sessions;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    sessions.swap(sessions_);
  }
  wake_.notify_all();
  if (sweeper_.joinable()) {
    sweeper_.join();
  }
  for (auto& [id, session] : sessions) {
    session->End();
  }
}

uint16_t HttpTransport::port() const { return server_->tcp_port(); }

size_t HttpTransport::session_count() {
  std::lock_guard<std::mutex> lock(mu_);
  return sessions_.size();
}

void HttpTransport::ExpireIdle() {
  absl::Time cutoff = options_.clock() - options_.idle_timeout;
  std::vector<std::shared_ptr<HttpSession>> expired;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = sessions_.begin(); it != sessions_.end();) {
      if (it->second->IdleSince(cutoff)) {
        expired.push_back(std::move(it->second));
        it = sessions_.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (const auto& session : expired) {
    session->End();  // outside mu_: killing its commands waits on aboxd
  }
}

void HttpTransport::SweepLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    wake_.wait_for(lock, absl::ToChronoMilliseconds(options_.sweep_interval));
    if (stopping_) {
      break;
    }
    lock.unlock();
    ExpireIdle();
    lock.lock();
  }
}

bool HttpTransport::CheckCaller(const http::Request& request, http::Responder& responder) {
  for (const absl::Status& check :
       {CheckHost(request.Header("Host"), port()), CheckOrigin(request.Header("Origin"))}) {
    if (!check.ok()) {
      Refuse(responder, 403, kServerError, check.message());
      return false;
    }
  }
  return true;
}

std::shared_ptr<HttpSession> HttpTransport::FindSession(const http::Request& request,
                                                        http::Responder& responder) {
  std::optional<std::string> id = request.Header("Mcp-Session-Id");
  if (!id.has_value()) {
    Refuse(responder, 400, kInvalidRequest,
           "Bad Request: no Mcp-Session-Id header; send the one initialize answered with "
           "(or initialize first)");
    return nullptr;
  }
  if (absl::Status version = CheckProtocolVersion(request.Header("MCP-Protocol-Version"));
      !version.ok()) {
    Refuse(responder, 400, kInvalidRequest, absl::StrCat("Bad Request: ", version.message()));
    return nullptr;
  }
  std::lock_guard<std::mutex> lock(mu_);
  auto it = sessions_.find(*id);
  if (it == sessions_.end()) {
    Refuse(responder, 404, kInvalidRequest,
           "Session not found: it ended or never existed; start a new one with initialize");
    return nullptr;
  }
  return it->second;
}

void HttpTransport::Post(http::Request& request, http::Responder& responder) {
  if (!CheckCaller(request, responder)) {
    return;
  }
  if (!IsJsonContentType(request.Header("Content-Type"))) {
    Refuse(responder, 415, kInvalidRequest,
           "Unsupported Media Type: POST one JSON-RPC message as Content-Type: application/json");
    return;
  }
  ParsedLine parsed = ParseLine(request.body);
  if (parsed.error) {
    responder.Json(400, ErrorMessage(parsed.error->id, parsed.error->code, parsed.error->message));
    return;
  }
  const Incoming& in = *parsed.message;
  if (in.kind == Incoming::Kind::kRequest && in.method == "initialize") {
    if (request.Header("Mcp-Session-Id").has_value()) {
      Refuse(responder, 400, kInvalidRequest,
             "Bad Request: initialize opens a new session; send it without Mcp-Session-Id");
      return;
    }
    Initialize(in, responder);
    return;
  }
  std::shared_ptr<HttpSession> session = FindSession(request, responder);
  if (session == nullptr) {
    return;
  }
  session->Touch(options_.clock());
  if (in.kind == Incoming::Kind::kRequest) {
    // tools/call may report progress before its answer, and may take long (the stream's
    // keepalive comments hold the connection): an event stream, when the client takes one.
    bool sse = in.method == "tools/call" && AcceptsEventStream(request.Header("Accept"));
    session->HandleRequest(in, responder, sse, {});
    return;
  }
  session->HandleNotification(in);
  responder.Send(202, "", "");
}

void HttpTransport::Initialize(const Incoming& in, http::Responder& responder) {
  ExpireIdle();
  absl::StatusOr<std::string> id = NewSessionId();
  if (!id.ok()) {
    Refuse(responder, 500, kInternalError, id.status().message());
    return;
  }
  auto session = std::make_shared<HttpSession>(*id, info_, factory_(), options_.clock());
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_ || sessions_.size() >= options_.max_sessions) {
      Refuse(responder, 503, kServerError,
             absl::StrCat("Service Unavailable: ", options_.max_sessions,
                          " sessions are open; end unused ones (HTTP DELETE with their "
                          "Mcp-Session-Id) or wait for idle ones to expire"));
      return;  // the session is released unused
    }
    sessions_[*id] = session;
  }
  session->HandleRequest(in, responder, /*sse=*/false, {{"Mcp-Session-Id", *id}});
}

void HttpTransport::Delete(http::Request& request, http::Responder& responder) {
  if (!CheckCaller(request, responder)) {
    return;
  }
  std::shared_ptr<HttpSession> session = FindSession(request, responder);
  if (session == nullptr) {
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    sessions_.erase(session->id());
  }
  session->End();  // its calls cancelled, its commands killed
  responder.Send(204, "", "");
}

}  // namespace abox::mcp
