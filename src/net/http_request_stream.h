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
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "src/net/http_request_head.h"

namespace abox::net {

// Most bytes of one chunk-size line (with extensions) and of a trailer section.
inline constexpr size_t kMaxChunkLineSize = 4096;
inline constexpr size_t kMaxTrailerSize = kMaxRequestHeadSize;

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

class HttpRequestStream final {
 public:
  // Called for each complete request head (after CheckRequestFraming passed) with its exact
  // bytes: returns the bytes to send upstream for it (usually `raw` itself), or an error to
  // refuse it (the stream stops before it).
  using OnHead = std::function<absl::StatusOr<std::string>(const HttpRequestHead& head,
                                                           absl::string_view raw)>;

  explicit HttpRequestStream(OnHead on_head);
  HttpRequestStream(const HttpRequestStream&) = delete;
  HttpRequestStream& operator=(const HttpRequestStream&) = delete;
  ~HttpRequestStream();

  // Consumes guest bytes and appends to `*up` what may go upstream. Not OK: the stream stopped
  // at a refused or malformed request; `*up` holds everything before that request, and every
  // later call returns the same error and appends nothing. Work is linear in the bytes fed.
  [[nodiscard]] absl::Status Feed(absl::string_view data, std::string* up);

  // Requests whose heads were accepted so far.
  [[nodiscard]] uint64_t requests() const { return requests_; }

 private:
  enum class State : uint8_t { kHead, kBody, kChunkLine, kChunkData, kChunkDataEnd, kTrailers };

  absl::Status Step(absl::string_view& data, std::string* up);
  absl::Status HeadBytes(absl::string_view& data, std::string* up);
  absl::Status ChunkLine(absl::string_view& data, std::string* up);
  absl::Status Trailers(absl::string_view& data, std::string* up);
  absl::Status Stop(absl::Status status);

  OnHead on_head_;
  State state_ = State::kHead;
  std::unique_ptr<HttpRequestHeadParser> head_;
  uint64_t remaining_ = 0;  // kBody, kChunkData: bytes left
  std::string line_;        // kChunkLine, kChunkDataEnd, kTrailers: the bytes of this part
  uint64_t requests_ = 0;
  absl::Status stopped_;
};

}  // namespace abox::net
