// Follows the upstream -> guest direction of an intercepted HTTP/1.1 connection response by
// response, so that each response's head and body can be scrubbed (a secret's real value
// echoed by the upstream is replaced by its placeholder before the guest sees it).
//
// Framing (RFC 9112 6.3): no body for a response to HEAD, for 1xx, 204 and 304; an interim 1xx
// (100 Continue, 103 Early Hints) is followed by the final response to the same request; after
// 101 Switching Protocols the bytes are no longer HTTP and flow (scrubbed) until the end;
// otherwise chunked, Content-Length, or until the upstream closes. What the stream must know of
// each request (HEAD or not, HTTP/1.0 or 1.1) the request side tells it, in order.
//
// When the scrubber may change lengths (a value and its placeholder differ in size), a
// Content-Length body is re-framed as it flows: as chunked for an HTTP/1.1 request, and for an
// HTTP/1.0 one (which cannot read chunked) as ending at close (Content-Length dropped,
// `Connection: close`; the request side asks the upstream to close too). Nothing is buffered
// beyond a head and what the scrubber holds back, so Server-Sent Events keep flowing.
//
// Trust boundary: the upstream's bytes are untrusted: heads are bounded (kMaxResponseHeadSize,
// kMaxResponseHeaders) and parsed strictly; ambiguous framing (Content-Length with
// Transfer-Encoding, several Content-Length) is refused rather than guessed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "src/net/http_request_head.h"
#include "src/net/value_scrubber.h"

namespace abox::net {

inline constexpr size_t kMaxResponseHeadSize = size_t{64} * 1024;
inline constexpr size_t kMaxResponseHeaders = 256;
// Requests sent and not yet answered (pipelining): more is refused on the request side.
inline constexpr size_t kMaxPendingResponses = 10000;

struct HttpResponseHead {
  int minor_version = 1;  // HTTP/1.<minor_version>
  int status = 0;
  std::string reason;
  std::vector<HttpHeader> headers;
  size_t head_size = 0;  // bytes up to and including the blank line
};

// Parses a complete response head (status line to blank line, nothing after): InvalidArgument
// saying what is wrong (bare CR or LF, NUL, a bad status line or header line).
[[nodiscard]] absl::StatusOr<HttpResponseHead> ParseHttpResponseHead(absl::string_view bytes);

// What the response stream must know of the request a response answers.
struct PendingRequest {
  bool is_head = false;   // HEAD: the response has no body, whatever its headers say
  int minor_version = 1;  // 0: the client cannot read a chunked body
};

struct ResponseFraming {
  enum class Kind : uint8_t {
    kNone,      // no body (also every interim 1xx)
    kLength,    // Content-Length
    kChunked,   // Transfer-Encoding ending in chunked
    kClose,     // until the upstream closes
    kSwitched,  // 101: not HTTP any more, until the upstream closes
  };
  Kind kind = Kind::kNone;
  uint64_t length = 0;  // kLength
};

// The framing of `head` answering `request`, or InvalidArgument for framing the proxy refuses
// to guess at.
[[nodiscard]] absl::StatusOr<ResponseFraming> CheckResponseFraming(const HttpResponseHead& head,
                                                                   const PendingRequest& request);

// Sees each final response as the upstream sent it, for accounting (the model broker reads
// token usage from bodies): heads, body bytes de-framed (chunk data only, before scrubbing),
// and ends. Interim 1xx heads are not shown. Called from inside Feed / Finish.
class ResponseObserver {
 public:
  virtual ~ResponseObserver() = default;

  virtual void OnResponseHead(const HttpResponseHead& head, const PendingRequest& request) = 0;
  virtual void OnResponseBody(absl::string_view data) = 0;
  // The body ended (at once for a response without one; at Finish for one ending at close).
  // Not called for a response cut short by an error.
  virtual void OnResponseEnd() = 0;
};

// Not thread-safe: the caller serialises ExpectResponse (request side) and Feed.
class HttpResponseStream final {
 public:
  // Chooses the transform of one response (head and body): a scrubber, or nullopt to pass the
  // response unchanged. Called at every head, interim ones too.
  using ChooseScrubber = std::function<std::optional<ValueScrubber>(const HttpResponseHead& head,
                                                                    const PendingRequest& request)>;

  // `choose` may be empty: every response passes unchanged (but is still followed).
  explicit HttpResponseStream(ChooseScrubber choose);
  HttpResponseStream(const HttpResponseStream&) = delete;
  HttpResponseStream& operator=(const HttpResponseStream&) = delete;
  ~HttpResponseStream();

  // Optional (null: none); not owned, must outlive the stream. Set before the first Feed.
  void set_observer(ResponseObserver* observer) { observer_ = observer; }

  // A request went upstream: its response comes after those of the requests before it. False
  // (nothing recorded) when kMaxPendingResponses are already waiting.
  [[nodiscard]] bool ExpectResponse(PendingRequest request);

  // Consumes upstream bytes and appends what the guest gets to `*down`. InvalidArgument on a
  // malformed response (every later call returns it again); `*down` then holds everything
  // before it. A response without a pending request is followed as if it answered a GET.
  [[nodiscard]] absl::Status Feed(absl::string_view data, std::string* down);
  // The upstream closed: appends what a body ending at close still held. InvalidArgument when
  // it closed in the middle of a head or a framed body (what the scrubber held is dropped: it
  // could be the start of a value).
  [[nodiscard]] absl::Status Finish(std::string* down);

  // Final responses whose heads were seen.
  uint64_t responses() const { return responses_; }
  // Values replaced so far, in heads and bodies.
  uint64_t replacements() const;
  // Requests whose responses have not begun.
  size_t pending() const { return pending_.size(); }

 private:
  enum class State : uint8_t { kHead, kLength, kChunked, kUntilClose, kEnded };
  enum class Reframe : uint8_t { kNone, kToChunked, kToClose };

  absl::Status Step(absl::string_view& data, std::string* down);
  absl::Status HeadBytes(absl::string_view& data, std::string* down);
  absl::Status StartResponse(const HttpResponseHead& head, std::string* down);
  void Body(absl::string_view data, std::string* down);
  void EndLengthBody(std::string* down);
  void CountBody();
  absl::Status Stop(absl::Status status);

  // Tells the observer (if any) that the current response ended.
  void EndObserved();

  ChooseScrubber choose_;
  ResponseObserver* observer_ = nullptr;
  std::deque<PendingRequest> pending_;
  State state_ = State::kHead;
  std::string head_;  // kHead: the bytes of the head so far
  uint64_t remaining_ = 0;
  Reframe reframe_ = Reframe::kNone;
  std::optional<ValueScrubber> scrubber_;  // kLength, kUntilClose
  std::optional<ChunkedScrubber> chunked_;
  std::string scratch_;
  uint64_t responses_ = 0;
  uint64_t replacements_ = 0;  // of the responses (and heads) done
  absl::Status stopped_;
};

}  // namespace abox::net
