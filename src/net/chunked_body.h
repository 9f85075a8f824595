// Reads a body in chunked transfer coding (RFC 9112 7.1) piece by piece, for both directions
// of the proxy: the request stream forwards the pieces unchanged (and shows the chunk data to
// an inspector), the response scrubber re-frames the data it scrubbed. One reader, so that the
// two directions cannot disagree on where a chunked body ends.
//
// Strict: a chunk-size line is hex digits (at most 15), then CRLF or extensions of visible
// characters; chunk data must be followed by CRLF; trailers are field lines ending in CRLF,
// then an empty line. Bounded: a size line at most kMaxChunkLineSize bytes, the trailer section
// at most kMaxTrailerSize; nothing else is buffered (chunk data is handed out as it comes).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "src/net/http_request_head.h"

namespace abox::net {

// Most bytes of one chunk-size line (with extensions) and of a trailer section.
inline constexpr size_t kMaxChunkLineSize = 4096;
inline constexpr size_t kMaxTrailerSize = kMaxRequestHeadSize;

class ChunkedBodyReader final {
 public:
  enum class Part : uint8_t {
    kSizeLine,   // the size line of a chunk with data, CRLF included
    kData,       // chunk data (some or all of one chunk's)
    kDataEnd,    // the CRLF after a chunk's data
    kLastChunk,  // the last-chunk line ("0", extensions, CRLF)
    kTrailers,   // the trailer fields and the final CRLF: the body has ended
  };
  struct Piece {
    Part part = Part::kData;
    absl::string_view bytes;  // valid until the next call
  };
  struct Options {
    // Starts every error message: "refused HTTP request: ", "bad chunked response body: ".
    std::string error_prefix;
    // Accept whitespace between the size and ';' (RFC 9112's BWS): servers send it; a client's
    // request with it is refused, as some servers would read the size differently.
    bool whitespace_before_extension = false;
  };

  explicit ChunkedBodyReader(Options options) : options_(std::move(options)) {}

  // Takes bytes from the front of `*data` and returns the next piece, or nullopt once `*data`
  // is used up without completing one (a partial line is kept). InvalidArgument on bad
  // framing; every later call returns it again.
  [[nodiscard]] absl::StatusOr<std::optional<Piece>> Next(absl::string_view* data);

  // The trailer section has been returned: bytes after it are not this body's.
  bool done() const { return state_ == State::kDone; }

 private:
  enum class State : uint8_t { kSizeLine, kData, kDataEnd, kTrailers, kDone };

  absl::Status Error(absl::string_view why);
  absl::StatusOr<std::optional<Piece>> SizeLine(absl::string_view* data);
  absl::StatusOr<std::optional<Piece>> Trailers(absl::string_view* data);

  Options options_;
  State state_ = State::kSizeLine;
  uint64_t remaining_ = 0;  // kData: bytes left in this chunk
  std::string line_;        // the size line, CRLF or trailer section read so far
  std::string piece_;       // the bytes of the last line piece handed out
  absl::Status error_;
};

// Appends `data` as one chunk ("<hex size>\r\n<data>\r\n"); nothing for empty data (an empty
// chunk would be read as the last one).
void AppendChunk(absl::string_view data, std::string* out);

}  // namespace abox::net
