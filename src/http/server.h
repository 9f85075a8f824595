// aboxd's HTTP/1.1 server: Boost.Beast on Asio, a unix socket for the user (peer uid checked on
// every connection) and an optional loopback TCP port behind a bearer token.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "src/http/listen_socket.h"
#include "src/http/router.h"

namespace abox::http {

struct ServerOptions {
  // Who this server is, in logs and the WWW-Authenticate realm.
  std::string name = "aboxd";
  // Required unless tcp_port is set (then "" means TCP only). Parent directories are created
  // 0700; the socket is 0600.
  std::string unix_socket_path;
  // The only uid the unix socket serves (SO_PEERCRED). Default: the daemon's effective uid.
  std::optional<uid_t> allowed_uid;
  // Also listen on 127.0.0.1:<port> (0 = pick a free port, see Server::tcp_port()); every TCP
  // request must carry "Authorization: Bearer <tcp_bearer_token>" (at least 16 bytes).
  std::optional<uint16_t> tcp_port;
  std::string tcp_bearer_token;
  // TEST ONLY: serve TCP without a bearer token (tcp_bearer_token must then be empty). For
  // abox-mcp --no-auth, so that the MCP conformance suite (which cannot send headers) can run.
  bool tcp_without_token = false;

  size_t max_body_bytes = 1 << 20;     // larger bodies: 413 payload_too_large
  size_t max_header_bytes = 16 << 10;  // larger headers: 400 bad_request
  // A connection must send a complete request head (request line and headers) within this long
  // of being accepted or of its previous response; otherwise it is closed. This is what ends
  // idle keep-alive connections and clients that dribble a header byte at a time.
  std::chrono::milliseconds request_head_timeout{5'000};
  // Reading a request's body once its head is in.
  std::chrono::milliseconds read_timeout{30'000};
  // Each write of a response or stream chunk; a client that stops reading is cut off after it.
  std::chrono::milliseconds write_timeout{30'000};
  // An idle SSE stream gets a ":keepalive" comment this often.
  std::chrono::milliseconds sse_keepalive{15'000};
  // Open connections, both listeners together. At the limit a new connection closes the one
  // that has waited longest without sending a complete request head; only when every
  // connection is busy with a request does the new one get 503 too_many_connections.
  size_t max_connections = 256;
  // Bytes a stream may have queued for a slow client before it is cancelled.
  size_t max_stream_buffer_bytes = 8 << 20;
  int io_threads = 1;      // threads running the event loop
  int worker_threads = 4;  // threads for RouteOptions::blocking handlers
  // Stop() lets in-flight requests finish for this long before closing their connections.
  std::chrono::milliseconds stop_grace{5'000};
};

// Owns the listening sockets, the event loop with its I/O threads, the worker pool and every
// connection.
//
// Threading: connections live on the I/O threads, each on its own strand. A handler runs on
// the I/O thread (RouteOptions::blocking = false; it must return quickly) or on a worker. A
// handler that waits for something long (an exec's output, events) does not block either:
// it keeps its Responder / Stream and writes from the producer's thread when data arrives;
// writes are posted to the connection's strand and never block. Disconnects and Stop() cancel
// the response (Responder::OnCancel), which is how an exec stream learns nobody is listening.
//
// Trust boundary: unix-socket peers with another uid are refused at accept (logged), before a
// byte is read; TCP peers are refused per request without the bearer token. Every request is
// bounded in header and body size and in time (the head within request_head_timeout), and a
// crowd of idle or half-open connections gives way to a new one. Handlers see only requests that
// passed both.
//
// Create(), Start(), Stop() and the destructor must be called from one thread (not an I/O or
// worker thread).
class Server final {
 public:
  // Checks the options, prepares the socket directory, refuses when another daemon is live on
  // the socket, replaces a stale one, and listens (unix, then TCP). No threads yet.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<Server>> Create(ServerOptions options,
                                                                      Router router);
  // The same for a caller that took the socket's lock earlier (aboxd does, before it opens its
  // state): `lock` must be for options.unix_socket_path; the server keeps it until Stop().
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<Server>> Create(ServerOptions options,
                                                                      Router router,
                                                                      UnixSocketLock lock);
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;
  // Stop()s.
  ~Server();

  // Starts the I/O threads and the worker pool and begins accepting.
  [[nodiscard]] absl::Status Start();
  // Stops accepting, cancels streams, lets other in-flight requests finish within stop_grace,
  // closes every connection, joins all threads (waiting for blocking handlers to return) and
  // removes the socket file. Responders kept by handlers become inert. Idempotent.
  void Stop();

  // The TCP port actually bound (0 without TCP).
  [[nodiscard]] uint16_t tcp_port() const;
  // The absolute path of the unix socket.
  [[nodiscard]] const std::string& socket_path() const;
  // Connections open right now.
  [[nodiscard]] size_t connection_count() const;

  class Impl;

 private:
  explicit Server(std::unique_ptr<Impl> impl);
  // Listens (on the locked unix socket when there is one, then TCP) with checked options.
  static absl::StatusOr<std::unique_ptr<Server>> Listen(ServerOptions options, Router router,
                                                        std::optional<UnixSocketLock> lock);
  std::unique_ptr<Impl> impl_;
};

}  // namespace abox::http
