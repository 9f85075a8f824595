// Internal: the shared state behind Responder and Stream, and the interface through which it
// reaches its connection (implemented by Connection; faked in tests).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "src/http/request.h"
#include "src/http/responder.h"

namespace abox::http::internal {

enum class StreamKind { kNdjson, kSse };

// A connection as seen by responses. Every method except Post runs on the connection's strand
// (ResponseState posts to it); `seq` names the request, so a stale handle cannot write into a
// later response on the same keep-alive connection.
class ResponseSink {
 public:
  virtual ~ResponseSink() = default;
  // Queues `fn` on the connection's strand. Thread-safe; called under LoopGuard.
  virtual void Post(std::function<void()> fn) = 0;
  virtual void SendWhole(uint64_t seq, int status, std::string content_type, std::string body,
                         HttpHeaders headers) = 0;
  virtual void StartStream(uint64_t seq, StreamKind kind, int status, HttpHeaders headers) = 0;
  // `bytes` is the payload of one write (an NDJSON line, a formatted event), not yet framed.
  virtual void StreamWrite(uint64_t seq, std::string bytes, SentCallback on_sent) = 0;
  virtual void FinishStream(uint64_t seq) = 0;
};

// Whether the server's event loop still exists. Posting happens under its mutex, so that no
// post from a handler thread can race the loop's destruction.
class LoopGuard final {
 public:
  // Runs `fn` under the mutex if the loop is alive; returns whether it ran.
  bool RunIfAlive(const std::function<void()>& fn) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!alive_) {
      return false;
    }
    fn();
    return true;
  }
  void Kill() {
    std::lock_guard<std::mutex> lock(mu_);
    alive_ = false;
  }

 private:
  std::mutex mu_;
  bool alive_ = true;
};

// Thread-safe. Owned by the Responder/Stream handles only (the connection keeps a weak_ptr to
// cancel it), so its destructor sees when the handler has let go.
class ResponseState final {
 public:
  ResponseState(std::weak_ptr<ResponseSink> sink, std::shared_ptr<LoopGuard> loop, uint64_t seq,
                std::string route);
  ResponseState(const ResponseState&) = delete;
  ResponseState& operator=(const ResponseState&) = delete;
  // No response yet: sends a 500. Open stream: finishes it.
  ~ResponseState();

  bool SendWhole(int status, std::string content_type, std::string body, HttpHeaders headers);
  bool StartStream(StreamKind kind, int status, HttpHeaders headers);
  bool StreamWrite(StreamKind kind, std::string bytes, SentCallback on_sent);
  void FinishStream();

  // Called by the connection (on its strand) when the client went away or the server stops.
  void Cancel();
  [[nodiscard]] bool cancelled() const;
  [[nodiscard]] bool responded() const;
  void OnCancel(std::function<void()> callback);

 private:
  enum class Phase { kNone, kWhole, kStreaming, kFinished };

  // Posts `fn` to the sink's strand if both the loop and the connection are alive.
  void PostToSink(std::function<void(ResponseSink&)> fn);

  const std::weak_ptr<ResponseSink> sink_;
  const std::shared_ptr<LoopGuard> loop_;
  const uint64_t seq_;
  const std::string route_;  // "GET /v1/x", for logs and the 500 message

  mutable std::mutex mu_;
  Phase phase_ = Phase::kNone;
  StreamKind kind_ = StreamKind::kNdjson;
  bool cancelled_ = false;
  std::vector<std::function<void()>> on_cancel_;
};

}  // namespace abox::http::internal
