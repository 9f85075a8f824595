// Replaces secrets' real values by their placeholders in a response body coming back from a
// host the secrets are bound to: defence in depth against an upstream that echoes a credential
// (an error page quoting the request, a debug endpoint) into the guest, where the agent could
// read it.
//
// Streaming and split-invariant: the output is the same however the body is cut into chunks,
// and the scrubber holds back only what it must, a suffix that could still be the start of a
// value, so a Server-Sent Events stream keeps flowing event by event.
//
// Trust boundary: the body comes from the upstream server (not the guest), but is still
// bounded: the held tail is shorter than the longest value, chunk-size lines and trailers are
// limited like the request side's.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "src/net/chunked_body.h"

namespace abox::net {

inline constexpr size_t kMaxScrubValueSize = 8192;
inline constexpr size_t kMaxScrubValues = 256;

struct ScrubPair {
  std::string value;        // the real value to hide
  std::string placeholder;  // what the guest sees instead
};

// An identity-encoded body (or any byte stream). Not thread-safe; copyable.
class ValueScrubber final {
 public:
  // InvalidArgument when a value is empty or longer than kMaxScrubValueSize, two values are
  // equal, or there are more than kMaxScrubValues. Messages never quote a value.
  [[nodiscard]] static absl::StatusOr<ValueScrubber> Create(std::vector<ScrubPair> pairs);

  // Appends to `*out` every byte of `data` (after earlier held bytes) that can no longer be
  // part of a value, with values replaced. Keeps the rest (a proper prefix of some value).
  void Feed(absl::string_view data, std::string* out);
  // The body ended: appends the held bytes.
  void Finish(std::string* out);

  // Bytes currently held back (always less than the longest value).
  size_t held() const { return pending_.size(); }
  // Values replaced so far.
  uint64_t replacements() const { return replacements_; }
  // Whether some value and its placeholder differ in length (a scrubbed body may then differ
  // in length from the original).
  bool changes_length() const { return changes_length_; }

 private:
  explicit ValueScrubber(std::vector<ScrubPair> pairs);

  // Emits from pending_ what is final; with `at_end`, everything.
  void Drain(bool at_end, std::string* out);
  // The pair matching at `pos` (longest first), or -1; `*undecided` when a longer value could
  // still match there once more bytes arrive.
  int MatchAt(absl::string_view text, size_t pos, bool at_end, bool* undecided) const;

  std::vector<ScrubPair> pairs_;
  std::string first_bytes_;  // each value's first byte, to skip positions quickly
  std::string pending_;
  uint64_t replacements_ = 0;
  bool changes_length_ = false;
};

// The same for a body in chunked transfer coding (RFC 9112 7.1): reads the upstream's chunks,
// scrubs their data and writes new chunks with sizes that match the scrubbed data. Chunk
// extensions are dropped; trailers are passed on, scrubbed too. Not thread-safe.
class ChunkedScrubber final {
 public:
  explicit ChunkedScrubber(ValueScrubber scrubber);

  // Consumes body bytes from `data` and appends the re-framed body to `*out`. Returns how many
  // bytes of `data` belonged to the body: fewer than data.size() only once done() (the rest is
  // the next response). InvalidArgument on bad framing (every later call returns it again).
  [[nodiscard]] absl::StatusOr<size_t> Feed(absl::string_view data, std::string* out);

  // The last chunk and the trailer section have been read and written.
  bool done() const { return reader_.done(); }
  const ValueScrubber& scrubber() const { return scrubber_; }
  // Optional: called with each piece of chunk data as the upstream sent it (before scrubbing).
  void ObserveData(std::function<void(absl::string_view)> on_data) {
    on_data_ = std::move(on_data);
  }

 private:
  ValueScrubber scrubber_;
  std::function<void(absl::string_view)> on_data_;
  ChunkedBodyReader reader_;
  std::string scratch_;
};

}  // namespace abox::net
