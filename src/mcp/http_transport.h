// abox-mcp's Streamable HTTP transport (MCP 2025-06-18 / 2025-11-25): one endpoint, /mcp, on
// 127.0.0.1, served by the project's HTTP server (src/http). POST carries one JSON-RPC message:
// a request is answered as application/json, or, for tools/call, as a text/event-stream that
// carries its progress and then its answer; a notification or response gets 202. initialize
// opens a session (Mcp-Session-Id, 32 random bytes) with its own Server and tool state
// (http_session.h); DELETE ends one. GET (a standalone stream) is 405, as the spec allows.
//
// Trust boundary: every request is untrusted. Before an MCP message is read: the bearer token
// (the HTTP server, 401), the Host and Origin (403, against DNS rebinding), Content-Type (415),
// the body size (413, 4 MiB as stdio's line), the session (400 without, 404 unknown) and
// MCP-Protocol-Version (400). Sessions are bounded in number (503) and end after idling.
//
// Threads: handlers run on the HTTP server's workers; a sweeper thread ends idle sessions.
// Create / Start / Stop from one thread.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "src/http/request.h"
#include "src/http/responder.h"
#include "src/http/server.h"
#include "src/mcp/http_guard.h"
#include "src/mcp/http_session.h"
#include "src/mcp/server.h"

namespace abox::mcp {

struct HttpTransportOptions {
  ListenAddress listen;
  // Every request must carry "Authorization: Bearer <token>" (at least 16 bytes)...
  std::string bearer_token;
  // ...unless this TEST-ONLY switch is on (abox-mcp --no-auth, for the conformance suite).
  bool no_auth = false;
  size_t max_sessions = 16;  // more initialize requests get 503
  // A session with no request for this long ends (its commands are killed).
  absl::Duration idle_timeout = absl::Minutes(30);
  absl::Duration sweep_interval = absl::Seconds(30);
  std::function<absl::Time()> clock = [] { return absl::Now(); };
  int worker_threads = 4;
};

// Makes the tools of a new session.
using SessionFactory = std::function<SessionTools()>;

class HttpTransport final {
 public:
  // Checks the options and listens (no threads yet).
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<HttpTransport>> Create(
      HttpTransportOptions options, ServerInfo info, SessionFactory factory);
  HttpTransport(const HttpTransport&) = delete;
  HttpTransport& operator=(const HttpTransport&) = delete;
  // Stop()s.
  ~HttpTransport();

  // Starts serving and the idle sweeper.
  [[nodiscard]] absl::Status Start();
  // Stops serving, then ends every session (killing their commands). Idempotent.
  void Stop();

  // The port bound (the one asked for, or the free one picked for port 0).
  [[nodiscard]] uint16_t port() const;
  [[nodiscard]] size_t session_count();
  // Ends the sessions idle for longer than idle_timeout (the sweeper calls it).
  void ExpireIdle();

 private:
  HttpTransport(HttpTransportOptions options, ServerInfo info, SessionFactory factory);
  void Post(http::Request& request, http::Responder& responder);
  void Delete(http::Request& request, http::Responder& responder);
  // Host and Origin; answers and returns false when they are refused.
  bool CheckCaller(const http::Request& request, http::Responder& responder);
  // The session named by Mcp-Session-Id (with MCP-Protocol-Version checked); answers 400 / 404
  // and returns null otherwise.
  std::shared_ptr<HttpSession> FindSession(const http::Request& request,
                                           http::Responder& responder);
  void Initialize(const Incoming& in, http::Responder& responder);
  void SweepLoop();

  const HttpTransportOptions options_;
  const ServerInfo info_;
  const SessionFactory factory_;
  std::unique_ptr<http::Server> server_;

  std::mutex mu_;  // guards the members below
  std::condition_variable wake_;
  std::map<std::string, std::shared_ptr<HttpSession>> sessions_;
  bool stopping_ = false;
  std::thread sweeper_;
};

}  // namespace abox::mcp
