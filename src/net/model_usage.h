// Reads token usage out of a model provider's responses as they stream past the broker, for
// the sandbox's usage records: Anthropic Messages (`message_start` / `message_delta` events, or
// a JSON body's `usage`) and OpenAI Responses (`response.completed` / `.incomplete` / `.failed`,
// or a JSON body's `usage`).
//
// Trust boundary: the bytes come from the provider (untrusted, but never the guest's): memory
// is bounded (an SSE event's data at most kMaxUsageEventSize, skipped beyond; a JSON body parsed
// only when at most kMaxUsageJsonSize); malformed JSON leaves the counts as they were. Reading
// never changes or holds back the bytes the guest gets.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"
#include "src/net/http_response_stream.h"
#include "src/net/model_routes.h"

namespace abox::net {

inline constexpr size_t kMaxUsageEventSize = size_t{1} << 20;
inline constexpr size_t kMaxUsageJsonSize = size_t{4} << 20;

struct ModelUsage {
  uint64_t input_tokens = 0;  // Anthropic: input + cache creation + cache reads
  uint64_t output_tokens = 0;
  bool seen = false;  // some usage was read
};

// One response's body. Not thread-safe.
class ModelUsageReader final {
 public:
  enum class Format : uint8_t { kIgnored, kEventStream, kJson };

  // Reads a body of `route_usage` (kNone: ignores it) answered with `head`: only a 2xx, by its
  // Content-Type (text/event-stream or application/json) and without a Content-Encoding.
  ModelUsageReader(ModelUsageKind route_usage, const HttpResponseHead& head);
  // For tests and fuzzing: a body of `format` directly.
  ModelUsageReader(ModelUsageKind route_usage, Format format);

  // The next body bytes (any split).
  void Feed(absl::string_view data);
  // The body ended: a JSON body is read now, an unterminated last event is read.
  void Finish();

  const ModelUsage& usage() const { return usage_; }
  Format format() const { return format_; }

 private:
  void FeedEventStream(absl::string_view data);
  void EndLine();
  void DispatchEvent();
  void ReadJson(absl::string_view text, bool is_event);

  ModelUsageKind kind_;
  Format format_;
  ModelUsage usage_;
  std::string line_;           // the SSE line being read (without its end)
  bool line_skipped_ = false;  // the line grew past the bound: dropped to its end
  bool after_cr_ = false;      // the last byte was CR (CRLF counts once)
  std::string data_;           // the event's data lines, joined by '\n'
  bool event_has_data_ = false;
  bool event_skipped_ = false;
  std::string json_;  // kJson: the body so far
  bool json_too_big_ = false;
};

}  // namespace abox::net
