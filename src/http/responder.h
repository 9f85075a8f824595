// How a handler answers: one whole response, or a stream (NDJSON lines over chunked transfer, or
// server-sent events). Both are small copyable handles; every method is thread-safe and never
// blocks, so a handler may keep a copy and answer later from any thread (an exec waiter, a
// worker). Writes are queued for the connection's I/O strand.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"
#include "src/http/request.h"

namespace abox::http {

namespace internal {
class ResponseState;
}  // namespace internal

// Runs on the connection's I/O thread once the bytes of a write were handed to the kernel (use
// it to re-credit a producer so that a slow client slows it down). Never runs when the stream
// was cancelled first. Must not block.
using SentCallback = std::function<void()>;

// One server-sent event. `data` may span lines (each becomes a `data:` line); newlines in
// `event` and `id` are dropped (they would end the field). Empty `event`/`id` are omitted.
struct SseEvent {
  std::string id;
  std::string event;
  std::string data;
};

// A streaming response in progress. When the last copy of the handle goes away the stream is
// finished. A stream is cancelled when the client disconnects (a read sees EOF or a write
// fails), when it falls more than max_stream_buffer_bytes behind, or when the server stops;
// writes then return false and OnCancel callbacks run.
class Stream final {
 public:
  Stream() = default;  // inert: every write returns false

  // NDJSON streams: writes `line` + '\n' (the line must not contain '\n').
  bool WriteLine(absl::string_view line, SentCallback on_sent = nullptr);
  // NDJSON streams: writes value.dump() + '\n'.
  bool WriteJson(const nlohmann::json& value, SentCallback on_sent = nullptr);
  // SSE streams: writes one event.
  bool WriteEvent(const SseEvent& event, SentCallback on_sent = nullptr);
  // Ends the response (last chunk); the connection may then serve the next request.
  void Finish();

  [[nodiscard]] bool cancelled() const;
  // Runs `callback` once when the stream is cancelled: on the I/O thread, or right away on the
  // caller's thread when it already is. Must not block. Callbacks are dropped, never run, once
  // the stream is finished.
  void OnCancel(std::function<void()> callback);

 private:
  friend class Responder;
  explicit Stream(std::shared_ptr<internal::ResponseState> state) : state_(std::move(state)) {}
  std::shared_ptr<internal::ResponseState> state_;
};

// The answer to one request. Only the first response call takes effect; later ones are
// ignored (and logged). If every copy is dropped without a response, the client gets a 500
// "internal" error naming the route, so a buggy handler cannot hang a connection.
class Responder final {
 public:
  explicit Responder(std::shared_ptr<internal::ResponseState> state) : state_(std::move(state)) {}

  // A whole response with a JSON body (application/json).
  void Json(int status, const nlohmann::json& body, HttpHeaders headers = {});
  // A whole response with any body and content type ("" for none, e.g. with 204).
  void Send(int status, std::string content_type, std::string body, HttpHeaders headers = {});
  // The JSON error for `status` through the api::errors table.
  void Error(const absl::Status& status, HttpHeaders headers = {});

  // Starts a chunked `application/x-ndjson` response.
  Stream StartNdjson(int status = 200, HttpHeaders headers = {});
  // Starts a `text/event-stream` response; the server adds `:keepalive` comments when idle.
  Stream StartSse(HttpHeaders headers = {});

  // Whether a response was started.
  [[nodiscard]] bool responded() const;
  // Whether the client went away (or the server is stopping) before the response was done.
  [[nodiscard]] bool cancelled() const;
  // As Stream::OnCancel: lets a long handler give up when nobody is waiting any more.
  // Dropped once a whole response was sent.
  void OnCancel(std::function<void()> callback);

 private:
  std::shared_ptr<internal::ResponseState> state_;
};

}  // namespace abox::http
