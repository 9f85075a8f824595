// Internal: one accepted HTTP/1.1 connection (Beast on an Asio strand).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "boost/asio/generic/stream_protocol.hpp"
#include "boost/asio/steady_timer.hpp"
#include "boost/beast/core/flat_buffer.hpp"
#include "boost/beast/http/parser.hpp"
#include "boost/beast/http/string_body.hpp"
#include "src/http/request.h"
#include "src/http/response_state.h"
#include "src/http/server_core.h"

namespace abox::http::internal {

// Owns the socket of one client and serves its requests one at a time (keep-alive, pipelined
// bytes kept for the next request). While a request is being handled or streamed it keeps a
// read pending, so that a client disconnect is seen at once and cancels the response.
//
// Threading: everything runs on the connection's strand. Start/Shutdown/ForceClose and the
// ResponseSink::Post entry may be called from any thread; they post onto the strand.
//
// Trust boundary: the peer's bytes are untrusted even from the right uid (a confused agent):
// header and body sizes, read and write times, and queued stream bytes are all bounded.
class Connection final : public ResponseSink, public std::enable_shared_from_this<Connection> {
 public:
  using Socket = boost::asio::generic::stream_protocol::socket;

  Connection(ServerCore& core, Socket socket, Peer peer);
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;
  ~Connection() override;

  // Begins reading requests.
  void Start();
  // Server stopping: close when idle, cancel a stream, finish a response in flight first.
  void Shutdown();
  // Closes now, cancelling whatever is in flight; `why` goes to the debug log.
  void ForceClose(std::string why);
  // When it began waiting for the request head it has not completed yet (steady clock ticks);
  // nullopt while a request is handled or answered. Thread-safe.
  [[nodiscard]] std::optional<int64_t> AwaitingRequestSince() const;
  // At max_connections: answers 503 without reading and closes (on the accepting thread).
  void RejectBusy();

  // ResponseSink.
  void Post(std::function<void()> fn) override;
  void SendWhole(uint64_t seq, int status, std::string content_type, std::string body,
                 HttpHeaders headers) override;
  void StartStream(uint64_t seq, StreamKind kind, int status, HttpHeaders headers) override;
  void StreamWrite(uint64_t seq, std::string bytes, SentCallback on_sent) override;
  void FinishStream(uint64_t seq) override;

 private:
  enum class Phase { kReading, kHandling, kWriting, kStreaming, kLingering, kClosed };
  struct Pending {
    std::string bytes;
    SentCallback on_sent;
    bool ends_response = false;
  };
  using TimerCallback = void (Connection::*)();

  void ReadRequest();
  void OnHeader(boost::system::error_code ec);
  void OnBody(boost::system::error_code ec);
  void OnReadError(boost::system::error_code ec);
  void Dispatch();
  void StartMonitor();
  void OnMonitor(boost::system::error_code ec, size_t n);

  // Answers with an error before any handler ran, then closes (draining unread input).
  void FailRequest(const absl::Status& status, const HttpHeaders& headers = {});
  std::string SerializeWhole(int status, absl::string_view content_type, std::string body,
                             const HttpHeaders& headers) const;
  void Enqueue(std::string bytes, SentCallback on_sent, bool ends_response);
  void WriteNext();
  void OnWrite(boost::system::error_code ec);
  void ResponseDone();

  void Linger();
  void DiscardInput();
  void Close(absl::string_view why);

  void Arm(boost::asio::steady_timer& timer, std::chrono::milliseconds after,
           TimerCallback on_expiry);
  static void Disarm(boost::asio::steady_timer& timer);
  void OnReadTimeout();
  void OnHeadTimeout();
  void SetAwaitingRequest(bool awaiting);
  void OnWriteTimeout();
  void OnKeepalive();

  ServerCore& core_;
  Socket socket_;
  const Peer peer_;
  boost::asio::steady_timer read_timer_;
  boost::asio::steady_timer write_timer_;
  boost::asio::steady_timer keepalive_timer_;
  boost::beast::flat_buffer buffer_;
  std::optional<boost::beast::http::request_parser<boost::beast::http::string_body>> parser_;

  Phase phase_ = Phase::kReading;
  uint64_t seq_ = 0;                    // the current request's number
  std::weak_ptr<ResponseState> state_;  // the current request's response, until done
  std::string route_;                   // "GET /v1/x" for logs
  unsigned version_ = 11;
  bool keep_alive_ = true;
  bool draining_ = false;  // server stopping: no further requests
  bool linger_ = false;    // input left unread: drain before close
  bool chunked_ = false;
  bool head_ = false;  // HEAD request: headers only, no body
  StreamKind stream_kind_ = StreamKind::kNdjson;
  bool monitoring_ = false;            // a read is pending while handling/streaming
  bool resume_after_monitor_ = false;  // ReadRequest waits for that read
  std::deque<Pending> queue_;
  size_t queued_bytes_ = 0;
  bool writing_ = false;
  size_t discarded_ = 0;
  // Steady-clock ticks since the head wait began; kNotAwaiting otherwise. Read by the acceptor.
  static constexpr int64_t kNotAwaiting = -1;
  std::atomic<int64_t> awaiting_since_{kNotAwaiting};
  char discard_[4096];
};

}  // namespace abox::http::internal
