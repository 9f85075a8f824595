// Incremental parsers for aboxd's streaming bodies: NDJSON lines and server-sent events. They
// take the body in whatever pieces the socket delivers and hand out whole lines / events.
#pragma once

#include <cstddef>
#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace abox::client {

// Splits bytes into lines at '\n' (a '\r' before it is dropped). Not thread-safe.
class LineSplitter final {
 public:
  // Lines longer than `max_line_bytes` are an error (kResourceExhausted).
  explicit LineSplitter(size_t max_line_bytes = kDefaultMaxLineBytes)
      : max_line_bytes_(max_line_bytes) {}

  // Called per line without its terminator; returns false to stop.
  using LineFn = std::function<bool(absl::string_view line)>;

  // Feeds the next bytes. Returns false when `on_line` asked to stop (the rest of `bytes` is
  // dropped), true otherwise.
  [[nodiscard]] absl::StatusOr<bool> Feed(absl::string_view bytes, const LineFn& on_line);
  // At the end of the body: a last line without '\n' is handed out too. Returns like Feed().
  [[nodiscard]] bool Finish(const LineFn& on_line);

  static constexpr size_t kDefaultMaxLineBytes = 64 << 20;

 private:
  size_t max_line_bytes_;
  std::string partial_;
};

// One server-sent event.
struct SseEvent {
  std::string id;     // the last `id:` seen in the stream (carried over, as the SSE spec says)
  std::string event;  // `event:`, "message" when absent
  std::string data;   // `data:` lines joined with '\n'
};

// Parses text/event-stream: fields `id`, `event`, `data` (one optional space after the colon),
// comments (":keepalive") and unknown fields ignored, a blank line dispatches the event (events
// without data are not dispatched). Not thread-safe.
class SseParser final {
 public:
  using EventFn = std::function<bool(const SseEvent& event)>;

  // Feeds the next bytes; returns false when `on_event` asked to stop.
  [[nodiscard]] absl::StatusOr<bool> Feed(absl::string_view bytes, const EventFn& on_event);

 private:
  bool Line(absl::string_view line, const EventFn& on_event);

  LineSplitter lines_;
  std::string last_id_;
  std::string event_;
  std::string data_;
  bool has_data_ = false;
};

}  // namespace abox::client
