// Follows the guest -> upstream direction of a plain-HTTP connection request by request, so
// that EVERY request head on it is checked, not just the first: a second pipelined or
// kept-alive request naming another Host (or an absolute-form URI to another host) would
// otherwise reach any site the same upstream (a CDN) serves.
//
// Trust boundary: every byte comes from the guest. Bodies are followed by HTTP/1.1 framing
// (RFC 9112 6): Content-Length, or chunked (sizes, extensions, trailers), else no body (a GET
// without framing has none). Anything two implementations could frame differently is refused
// (the classic request-smuggling forms): Content-Length together with Transfer-Encoding, a
// Transfer-Encoding other than exactly "chunked", several Content-Length headers, a bad chunk
// line. So are requests after which the stream stops being HTTP/1.1 the proxy can follow:
// CONNECT (a tunnel inside the connection) and Upgrade (WebSocket, h2c): whether the upstream
// switched protocols is only visible in its response, and a server that ignores the Upgrade
// would read what follows as further requests.
//
// A request's body can be shown to a RequestBodyInspector (the head callback attaches one),
// which sees the body de-framed and may refuse it, or hold the request's bytes back until it
// has decided (a git push is checked before any of it reaches the forge).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "src/net/chunked_body.h"
#include "src/net/http_request_head.h"

namespace abox::net {

// Most bytes of one request an inspector may hold back (head and body so far).
inline constexpr size_t kMaxHeldRequestSize = size_t{1} << 20;

// How a request's body is delimited.
struct RequestFraming {
  enum class Kind : uint8_t { kNone, kLength, kChunked };
  Kind kind = Kind::kNone;
  uint64_t length = 0;  // kLength
};

// The framing of `head`, or why the proxy refuses the request: InvalidArgument for framing it
// cannot follow unambiguously (the smuggling defences above), PermissionDenied for CONNECT
// and Upgrade inside the stream. A CONNECT head itself is refused here too (the proxy handles
// the first CONNECT on its own; this is for the requests that follow).
[[nodiscard]] absl::StatusOr<RequestFraming> CheckRequestFraming(const HttpRequestHead& head);

// Watches the body of one request. Every call may refuse the request with an error: the stream
// stops there, and nothing of the request it held back is sent.
class RequestBodyInspector {
 public:
  virtual ~RequestBodyInspector() = default;

  // The next bytes of the body, de-framed (chunk data only). Called before they are sent.
  [[nodiscard]] virtual absl::Status OnBody(absl::string_view data) = 0;
  // Guest-chosen bytes of a chunked body that are not data: chunk-size lines (with their
  // extensions) and the trailer section.
  [[nodiscard]] virtual absl::Status OnFraming(absl::string_view bytes);
  // The body has ended (at once for a request without one). Held bytes are sent after this.
  [[nodiscard]] virtual absl::Status OnEnd();
  // While true, the request's bytes (from its head on) are held instead of sent upstream; once
  // false they are sent. Asked after each call above. More than kMaxHeldRequestSize held
  // refuses the request.
  virtual bool holding() const;
};

// What the stream does with an accepted request head.
struct RequestDecision {
  RequestDecision() = default;  // not an aggregate: keeps the two callback types apart

  std::string head;                                 // the bytes to send upstream for the head
  std::unique_ptr<RequestBodyInspector> inspector;  // optional
};

class HttpRequestStream final {
 public:
  // Called for each complete request head (after CheckRequestFraming passed) with its exact
  // bytes: returns the bytes to send upstream for it (usually `raw` itself), or an error to
  // refuse it (the stream stops before it).
  using OnHead = std::function<absl::StatusOr<std::string>(const HttpRequestHead& head,
                                                           absl::string_view raw)>;
  // The same, and may attach an inspector for the request's body.
  using OnRequest = std::function<absl::StatusOr<RequestDecision>(const HttpRequestHead& head,
                                                                  absl::string_view raw)>;

  explicit HttpRequestStream(OnHead on_head);
  explicit HttpRequestStream(OnRequest on_request);
  HttpRequestStream(const HttpRequestStream&) = delete;
  HttpRequestStream& operator=(const HttpRequestStream&) = delete;
  ~HttpRequestStream();

  // Consumes guest bytes and appends to `*up` what may go upstream. Not OK: the stream stopped
  // at a refused or malformed request; `*up` holds everything before that request (and of it
  // what no inspector held back), and every later call returns the same error and appends
  // nothing. Work is linear in the bytes fed.
  [[nodiscard]] absl::Status Feed(absl::string_view data, std::string* up);

  // Requests whose heads were accepted so far.
  [[nodiscard]] uint64_t requests() const { return requests_; }
  // Bytes held back for the current request's inspector.
  [[nodiscard]] size_t held() const { return held_.size(); }

 private:
  enum class State : uint8_t { kHead, kBody, kChunked };

  absl::Status Step(absl::string_view& data, std::string* up);
  absl::Status HeadBytes(absl::string_view& data, std::string* up);
  absl::Status Chunked(absl::string_view& data, std::string* up);
  // Sends `bytes` (or holds them, while the inspector holds).
  absl::Status Emit(absl::string_view bytes, std::string* up);
  // The request ended: tells the inspector, sends what it held.
  absl::Status EndRequest(std::string* up);
  absl::Status Stop(absl::Status status);

  OnRequest on_request_;
  State state_ = State::kHead;
  std::unique_ptr<HttpRequestHeadParser> head_;
  uint64_t remaining_ = 0;  // kBody: bytes left
  std::unique_ptr<ChunkedBodyReader> chunked_;
  std::unique_ptr<RequestBodyInspector> inspector_;
  std::string held_;
  uint64_t requests_ = 0;
  absl::Status stopped_;
};

}  // namespace abox::net
