// The client of aboxd's HTTP API (docs/openapi.yaml) over its unix socket.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "nlohmann/json.hpp"
#include "src/base/unique_fd.h"
#include "src/client/http_connection.h"
#include "src/client/stream_parsers.h"

namespace abox::client {

// A successful (2xx) answer.
struct ApiResponse {
  int status = 0;
  std::string content_type;
  std::string body;     // raw
  nlohmann::json json;  // the parsed body when it is JSON; null otherwise (e.g. 204, text/plain)
};

// Owns one keep-alive connection to aboxd, opened on first use and reopened transparently when
// the daemon closed it between requests (idle timeout, restart). Non-2xx answers come back as an
// absl::Status built from the API's JSON error body (see api_error.h), with the daemon's message
// verbatim; failures to reach the daemon are kUnavailable and name the socket.
//
// Thread safety: one thread at a time, except Cancel(). Use one ApiClient per thread (e.g. one
// for an output stream, one for posting stdin). Trust boundary: see HttpConnection.
class ApiClient final {
 public:
  // No I/O besides creating the cancel descriptor.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<ApiClient>> Create(std::string socket_path);
  ApiClient(const ApiClient&) = delete;
  ApiClient& operator=(const ApiClient&) = delete;
  ~ApiClient();

  // Whole request/response exchanges. `target` is an escaped origin-form target (api_paths.h).
  [[nodiscard]] absl::StatusOr<ApiResponse> Get(absl::string_view target);
  // POST with a JSON body; a null `body` sends none (for actions such as .../stop).
  [[nodiscard]] absl::StatusOr<ApiResponse> Post(absl::string_view target,
                                                 const nlohmann::json& body);
  // POST with a raw application/octet-stream body (e.g. an exec's stdin).
  [[nodiscard]] absl::StatusOr<ApiResponse> PostBytes(absl::string_view target,
                                                      absl::string_view bytes);
  // PUT with a JSON body (replaces a resource, e.g. an egress policy).
  [[nodiscard]] absl::StatusOr<ApiResponse> Put(absl::string_view target,
                                                const nlohmann::json& body);
  [[nodiscard]] absl::StatusOr<ApiResponse> Delete(absl::string_view target);

  // Streaming GETs. Each calls its callback per line / event as it arrives and returns OK when the
  // response ended or the callback returned false (the connection is then closed, which tells
  // the daemon that this reader left). An error answer, a malformed line, or a connection that
  // breaks before the response ended are errors. The timeout (set_timeout) covers only the
  // connection and the response header: a stream may stay quiet for as long as it likes.
  using NdjsonFn = std::function<bool(const nlohmann::json& line)>;
  [[nodiscard]] absl::Status StreamNdjson(absl::string_view target, const NdjsonFn& on_line);
  using SseFn = std::function<bool(const SseEvent& event)>;
  // `last_event_id`, when not empty, is sent as Last-Event-ID (resume after that event).
  [[nodiscard]] absl::Status StreamSse(absl::string_view target, const SseFn& on_event,
                                       absl::string_view last_event_id = "");

  // Makes the current and every later call of this client fail with kCancelled, promptly. Safe
  // from any thread (e.g. a signal-handling thread ending a stream).
  void Cancel();

  // Bounds each whole exchange (connect, send, header and body) by `timeout`; the default,
  // absl::InfiniteDuration(), waits as long as the daemon takes (booting a sandbox can be slow).
  void set_timeout(absl::Duration timeout) { timeout_ = timeout; }

  [[nodiscard]] const std::string& socket_path() const { return socket_path_; }

 private:
  ApiClient(std::string socket_path, base::UniqueFd cancel_fd)
      : socket_path_(std::move(socket_path)), cancel_fd_(std::move(cancel_fd)) {}

  [[nodiscard]] absl::StatusOr<ApiResponse> Exchange(HttpRequest request);
  // Sends `request` and reads the response head, on the kept connection when it is still good
  // (retrying once on a fresh one when it turns out closed and retrying is safe), else on a new
  // one.
  [[nodiscard]] absl::StatusOr<HttpResponseHead> Send(const HttpRequest& request,
                                                      absl::Time deadline);
  // Reads a whole body (bounded) after `head`, and turns an error answer into its status.
  [[nodiscard]] absl::StatusOr<ApiResponse> Finish(const HttpRequest& request,
                                                   const HttpResponseHead& head,
                                                   absl::Time deadline);
  // Streams the body after a 200 head through `feed` until it ends or `feed` returns false.
  [[nodiscard]] absl::Status StreamBody(
      const HttpRequest& request,
      const std::function<absl::StatusOr<bool>(absl::string_view bytes)>& feed,
      const std::function<bool()>& finish);
  // Prefixes errors about the transport with the request and the socket.
  [[nodiscard]] absl::Status Describe(const HttpRequest& request, const absl::Status& status) const;
  [[nodiscard]] absl::Time Deadline() const;

  std::string socket_path_;
  base::UniqueFd cancel_fd_;
  absl::Duration timeout_ = absl::InfiniteDuration();
  std::unique_ptr<HttpConnection> connection_;
};

}  // namespace abox::client
