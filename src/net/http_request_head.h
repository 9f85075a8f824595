// Recognises an HTTP/1.x request at the start of a guest connection and finds the destination
// the egress policy decides by: the CONNECT target, or the Host header.
//
// Trust boundary: every byte comes from the guest. The head is bounded (kMaxRequestHeadSize);
// anything two HTTP implementations could read differently (obs-fold, bare CR or LF, NUL,
// whitespace before ':', two Host headers, a Host that disagrees with an absolute-form target)
// is refused, because the proxy forwards the bytes unchanged and the upstream server must see
// the same destination the policy saw.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace abox::net {

inline constexpr size_t kMaxRequestHeadSize = size_t{16} * 1024;
inline constexpr size_t kMaxRequestHeaders = 100;
inline constexpr size_t kMaxMethodLength = 20;

enum class HttpSniffResult : uint8_t {
  kNeedMore,  // a prefix of a request head so far
  kHttp,      // a complete, acceptable request head
  kNotHttp,   // the first line is not an HTTP/1.x request line: try another protocol
  kInvalid,   // an HTTP/1.x request, but malformed or ambiguous: refuse (reason says why)
};

struct HttpHeader {
  std::string name;   // as sent
  std::string value;  // optional whitespace trimmed
};

struct HttpDestination {
  // A normalised host name, or an IP address in canonical text (no brackets).
  std::string host;
  uint16_t port = 80;
  bool is_ip_literal = false;
};

struct HttpRequestHead {
  std::string method;
  std::string target;
  int minor_version = 1;  // HTTP/1.<minor_version>
  std::vector<HttpHeader> headers;
  HttpDestination destination;
  size_t head_size = 0;  // bytes up to and including the blank line

  bool is_connect() const { return method == "CONNECT"; }
};

struct HttpSniff {
  HttpSniffResult result = HttpSniffResult::kNeedMore;
  HttpRequestHead head;  // set when result == kHttp
  std::string reason;    // why, when kNotHttp or kInvalid
};

// Incremental parser for one connection. Work per Feed is proportional to the new bytes (the
// head is parsed once, when its blank line arrives). Not thread-safe.
class HttpRequestHeadParser final {
 public:
  HttpRequestHeadParser() = default;
  HttpRequestHeadParser(const HttpRequestHeadParser&) = delete;
  HttpRequestHeadParser& operator=(const HttpRequestHeadParser&) = delete;

  // Appends `data` and reports. Once the result is not kNeedMore it is final: later calls
  // return it again and no longer buffer.
  const HttpSniff& Feed(absl::string_view data);
  // Everything fed until the result became final, to forward unchanged.
  const std::string& bytes() const { return buffer_; }

 private:
  HttpSniff Step();

  std::string buffer_;
  size_t scanned_ = 0;           // bytes checked for line structure
  size_t request_line_end_ = 0;  // offset after the request line's LF; 0 until seen
  size_t line_start_ = 0;        // start of the line being scanned
  HttpSniff state_;
};

// The header lines of a complete head (`block`: every line ends in CRLF, no bare CR or LF, no
// NUL, as the head scanner checked), strictly: no obs-fold, a token before ':', no whitespace
// before it, no control bytes in values (trimmed). Appends to `*headers`; InvalidArgument
// saying which line is wrong, or when there are more than `max_headers`.
[[nodiscard]] absl::Status ParseHeaderLines(absl::string_view block, size_t max_headers,
                                            std::vector<HttpHeader>* headers);

// One-shot form: parses `bytes` as if fed at once.
HttpSniff ParseHttpRequestHead(absl::string_view bytes);

}  // namespace abox::net
