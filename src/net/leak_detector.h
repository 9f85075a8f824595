// Finds secret placeholders (or any other needles, e.g. a secret's real value) in a stream of
// bytes going to a host, whatever common encoding the sender wrapped them in, so that the
// egress proxy can block an exfiltration attempt: a prompt-injected agent that sends the
// placeholder of a secret bound to api.github.com to evil.example learns nothing by itself,
// but it is an attempt worth blocking and reporting, and the same code finds real values.
//
// Encodings found (each across chunk boundaries):
//   raw                      GHTOKEN_abc
//   percent-encoded          %47%48..., %4a or %4A, or only some bytes encoded (GH%54OKEN)
//   JSON-escaped             \u0047HTOKEN (any character, either hex case), \/ and friends
//   JSON-escaped, then percent-encoded inside the string
//   base64 and base64url     at each of the 3 alignments (so inside a longer base64 text, e.g.
//                            HTTP Basic "user:placeholder"), also in the percent- and
//                            JSON-decoded streams ("\/" for '/', "%2B" for '+')
// Not found: double percent-encoding, base64 with line breaks inside the needle, compression,
// any encoding a sender invents. This catches mistakes and lazy exfiltration, not a
// determined encoder: the protection is that the guest never holds the real value.
//
// Trust boundary: the bytes are the guest's. Memory is bounded: per stream a tail shorter than
// the longest pattern (needles are at most kMaxNeedleSize bytes, at most kMaxNeedles of them).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace abox::net {

// Shorter needles would match by chance (a base64 rendering of an 8-byte needle is ~10
// characters; fewer would appear in ordinary base64 data).
inline constexpr size_t kMinNeedleSize = 8;
inline constexpr size_t kMaxNeedleSize = 1024;
inline constexpr size_t kMaxNeedles = 256;

struct Needle {
  std::string name;   // what a report names ("GITHUB_TOKEN"): never the bytes themselves
  std::string bytes;  // what to look for
};

struct Leak {
  std::string name;      // the needle's name
  std::string encoding;  // "raw", "percent-encoded", "JSON-escaped", "base64", ...
};

// The precomputed patterns of a set of needles: immutable, shared by the detectors of many
// streams. Thread-safe (const after Create).
class LeakPatterns final {
 public:
  struct Pattern {
    size_t needle = 0;
    std::string bytes;
    absl::string_view form;  // "raw", "base64", "base64url"
  };

  // InvalidArgument when a needle is shorter than kMinNeedleSize or longer than kMaxNeedleSize,
  // has no name, or there are more than kMaxNeedles. Messages name needles, never their bytes.
  [[nodiscard]] static absl::StatusOr<std::shared_ptr<const LeakPatterns>> Create(
      std::vector<Needle> needles);

  const std::vector<Needle>& needles() const { return needles_; }
  const std::vector<Pattern>& patterns() const { return patterns_; }
  // Length of the longest pattern: a stream keeps one byte less than this as its tail.
  size_t max_pattern_size() const { return max_pattern_size_; }

 private:
  LeakPatterns() = default;

  std::vector<Needle> needles_;
  std::vector<Pattern> patterns_;
  size_t max_pattern_size_ = 0;
};

// One stream (a request body, a connection's bytes) fed in order. Not thread-safe; copyable.
class LeakDetector final {
 public:
  explicit LeakDetector(std::shared_ptr<const LeakPatterns> patterns);

  // Looks at the next bytes. Returns the first leak found; once found, every later call
  // returns it again (the caller blocks the stream).
  [[nodiscard]] std::optional<Leak> Feed(absl::string_view data);

  // The leak found so far, if any.
  const std::optional<Leak>& leak() const { return leak_; }

 private:
  // A decoding stage: percent (%XX) or JSON string escapes (\uXXXX, \n, \/, ...). Bytes that
  // are not a complete escape pass through unchanged.
  struct Decoder {
    enum class Kind : uint8_t { kPercent, kJson };
    Kind kind;
    std::string pending;  // an escape begun but not finished (at most 6 bytes)

    void Decode(absl::string_view in, std::string* out);
  };
  // The input seen through a chain of decoders, searched for every pattern.
  struct View {
    absl::string_view name;  // "", "percent-encoded", "JSON-escaped", ...
    std::vector<Decoder> decoders;
    std::string tail;  // last max_pattern_size - 1 decoded bytes
  };

  std::shared_ptr<const LeakPatterns> patterns_;
  std::vector<View> views_;
  std::optional<Leak> leak_;
};

}  // namespace abox::net
