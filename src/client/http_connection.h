// One HTTP/1.1 connection to aboxd's unix socket: Boost.Beast's serializer and parser over an Asio
// local stream socket, with every wait bounded by a deadline and interruptible through a cancel
// descriptor. No Boost types leak out of this header.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace abox::client {

using HttpHeaders = std::vector<std::pair<std::string, std::string>>;

struct HttpRequest {
  std::string method;  // "GET", "POST", "DELETE"
  std::string target;  // origin form, already escaped: "/v1/sandboxes?label=a%3Db"
  HttpHeaders headers;
  std::string body;
};

// A response's status line and header; the body is read separately.
struct HttpResponseHead {
  int status = 0;
  HttpHeaders headers;
  // The first header `name` (case-insensitive), "" when absent.
  [[nodiscard]] std::string Header(absl::string_view name) const;
};

// Not thread-safe: one request at a time, from one thread. Cancellation is the exception: the
// owner of `cancel_fd` may make it readable from any thread, and every wait of this connection
// then ends with kCancelled (for good: the descriptor stays readable).
//
// Trust boundary: only a server of the same user is talked to (Connect); its bytes are still
// parsed defensively (bounded header, bounded whole bodies, errors instead of crashes on
// malformed input).
class HttpConnection final {
 public:
  // Connects to the unix socket at `path` through /proc/self/fd/<dir>/<name> (so paths longer
  // than sun_path work too), refusing a directory that is not the user's own with mode 0700 and
  // a server that runs as another uid, before sending anything (socket_trust.h). When nothing
  // listens there (no directory, no socket, ECONNREFUSED) the error carries the
  // IsNothingListening() mark. `cancel_fd` must outlive the connection.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<HttpConnection>> Connect(
      const std::string& path, int cancel_fd, absl::Time deadline);
  ~HttpConnection();
  HttpConnection(const HttpConnection&) = delete;
  HttpConnection& operator=(const HttpConnection&) = delete;

  // Sends a whole request (Host, Content-Length added).
  [[nodiscard]] absl::Status Write(const HttpRequest& request, absl::Time deadline);
  // Reads the next response's status line and header.
  [[nodiscard]] absl::StatusOr<HttpResponseHead> ReadHead(absl::Time deadline);
  // Appends the next piece of the current response's body to `*out`. Returns false once the body
  // is complete (nothing appended then), true when bytes were appended.
  [[nodiscard]] absl::StatusOr<bool> ReadBodySome(std::string* out, absl::Time deadline);
  // Reads the rest of the body into `*out`, failing with kResourceExhausted beyond `limit` bytes.
  [[nodiscard]] absl::Status ReadBodyAll(std::string* out, size_t limit, absl::Time deadline);

  // Whether the connection can carry another request: the last response was complete and
  // keep-alive, and the server has neither closed the connection nor sent anything since.
  [[nodiscard]] bool Reusable();

  class Impl;

 private:
  explicit HttpConnection(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Whether `status` says that nothing listens on the socket (no socket file, or a stale one whose
// daemon died): the cue for starting aboxd.
[[nodiscard]] bool IsNothingListening(const absl::Status& status);

}  // namespace abox::client
