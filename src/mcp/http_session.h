// One MCP session of the Streamable HTTP transport (http_transport.h): its own Server, tools
// and tool state, and the HTTP responses waiting for its answers. Where stdio has one session
// per process, HTTP has one per Mcp-Session-Id, so everything the stdio process holds for its
// session (the commands it started, the sandboxes it created) lives here and dies with it.
//
// Threads: every method may be called from any thread (the HTTP server's workers; the Server's
// tool-call threads deliver answers through Deliver). Trust boundary: messages reach it parsed
// and checked by the transport.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "src/http/request.h"
#include "src/http/responder.h"
#include "src/mcp/json_rpc.h"
#include "src/mcp/server.h"

namespace abox::mcp {

// What one session serves: its tools and the state they share (abox's: ExecSessions and
// ToolEnv), made fresh per session. `state` is released after the session's Server stopped;
// releasing it ends what the session started (ExecSessions kills its commands).
struct SessionTools {
  std::vector<Tool> tools;
  std::shared_ptr<void> state;
};

class HttpSession final {
 public:
  HttpSession(std::string id, const ServerInfo& info, SessionTools tools, absl::Time now);
  HttpSession(const HttpSession&) = delete;
  HttpSession& operator=(const HttpSession&) = delete;
  // End()s.
  ~HttpSession();

  [[nodiscard]] const std::string& id() const { return id_; }

  // A request, answered on `responder`: as one application/json response, or with `sse` as a
  // text/event-stream that carries the request's progress notifications and then its answer.
  // `headers` go on the response (Mcp-Session-Id for initialize).
  void HandleRequest(const Incoming& in, http::Responder responder, bool sse,
                     http::HttpHeaders headers);
  // A notification or a response from the client: handled at once; the HTTP answer is 202. A
  // notifications/cancelled also ends the cancelled request's HTTP response.
  void HandleNotification(const Incoming& in);
  // Cancels the calls in flight and waits for them, ends their HTTP responses, and releases the
  // session's state (killing the commands it started). Blocks; idempotent.
  void End();

  // Records activity at `now`.
  void Touch(absl::Time now);
  // Whether the session was idle (no request waiting for its answer) since before `cutoff`.
  [[nodiscard]] bool IdleSince(absl::Time cutoff);

 private:
  struct Pending {
    std::optional<http::Responder> responder;  // JSON: answered once
    http::Stream stream;                       // SSE
    bool sse = false;
    http::HttpHeaders headers;
    nlohmann::json id;
  };
  // The Server's send function: routes each message to the response of its request.
  void Deliver(const std::string& line, const Route& route);
  // Ends the response of a request that will get no answer (cancelled, or the session ended).
  static void Abandon(Pending& pending, int status, absl::string_view why);

  const std::string id_;
  std::mutex mu_;                           // guards the members below
  std::map<std::string, Pending> pending_;  // by request id, dumped
  absl::Time last_used_;
  bool ended_ = false;

  std::shared_ptr<void> state_;     // released by End(), after server_ stopped
  std::unique_ptr<Server> server_;  // last: destroyed (stopped) first
};

}  // namespace abox::mcp
