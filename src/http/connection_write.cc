// The write half of Connection: serializing responses and streams, the write queue, and how a
// connection ends (keep-alive, close, linger).
#include <sys/socket.h>

#include <algorithm>
#include <sstream>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "boost/asio/write.hpp"
#include "boost/beast/http/empty_body.hpp"
#include "boost/beast/http/write.hpp"
#include "spdlog/spdlog.h"
#include "src/api/errors.h"
#include "src/http/connection.h"
#include "src/http/stream_format.h"

namespace abox::http::internal {
namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using ErrorCode = boost::system::error_code;

// After an early error response: how much unread input to drain, and for how long, before
// closing (closing with unread input makes the kernel send RST, which can destroy the error
// response before the client reads it).
constexpr size_t kMaxLingerBytes = 4 << 20;
constexpr std::chrono::milliseconds kLingerTime{2000};

// Handler-supplied headers go on the wire: refuse anything that could split the response or
// make Beast throw (it throws on over-long fields).
bool ValidHeader(const std::string& name, const std::string& value) {
  return !name.empty() && name.size() <= 256 && value.size() <= 8192 &&
         std::all_of(name.begin(), name.end(),
                     [](char c) { return absl::ascii_isalnum(c) || c == '-' || c == '_'; }) &&
         value.find_first_of(std::string_view("\r\n\0", 3)) == std::string::npos;
}

template <class Header>
void AddHeaders(Header& header, const HttpHeaders& headers, absl::string_view route) {
  for (const auto& [name, value] : headers) {
    if (ValidHeader(name, value)) {
      header.set(name, value);
    } else {
      spdlog::error("http: {} set an invalid header \"{}\"; dropped", std::string(route), name);
    }
  }
}

}  // namespace

void Connection::RejectBusy() {
  std::string body = api::ErrorBody(
      api::kTooManyConnections,
      absl::StrCat(core_.options.name, " already has ", core_.options.max_connections,
                   " open connections; close idle clients and retry"));
  std::string response = absl::StrCat(
      "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nContent-Length: ",
      body.size(), "\r\nConnection: close\r\n\r\n", body);
  // Best effort on a fresh socket whose send buffer is empty; never blocks.
  (void)::send(socket_.native_handle(), response.data(), response.size(),
               MSG_NOSIGNAL | MSG_DONTWAIT);
  Close("too many connections");
}

std::string Connection::SerializeWhole(int status, absl::string_view content_type, std::string body,
                                       const HttpHeaders& headers) const {
  if (status < 200 || status > 599) {
    spdlog::error("http: {} answered with status {}; sending 500", route_, status);
    status = 500;
  }
  bhttp::response<bhttp::string_body> response{static_cast<bhttp::status>(status), version_};
  AddHeaders(response, headers, route_);
  if (!content_type.empty()) {
    response.set(bhttp::field::content_type,
                 beast::string_view(content_type.data(), content_type.size()));
  }
  response.keep_alive(keep_alive_ && !draining_);
  if (status == 204 || status == 304) {
    body.clear();  // no body allowed (Beast would throw from prepare_payload)
  } else {
    response.content_length(body.size());
  }
  std::ostringstream out;
  if (head_) {
    out << response.base();  // the Content-Length of the GET, without its body
  } else {
    response.body() = std::move(body);
    out << response;
  }
  return std::move(out).str();
}

void Connection::SendWhole(uint64_t seq, int status, std::string content_type, std::string body,
                           HttpHeaders headers) {
  if (seq != seq_ || phase_ != Phase::kHandling) {
    return;  // a stale responder, or the connection closed meanwhile
  }
  phase_ = Phase::kWriting;
  spdlog::debug("http: {} -> {}", route_, status);
  Enqueue(SerializeWhole(status, content_type, std::move(body), headers), nullptr, true);
}

void Connection::StartStream(uint64_t seq, StreamKind kind, int status, HttpHeaders headers) {
  if (seq != seq_ || phase_ != Phase::kHandling) {
    return;
  }
  phase_ = Phase::kStreaming;
  stream_kind_ = kind;
  chunked_ = version_ >= 11 && !head_;
  if (!chunked_ && !head_) {
    keep_alive_ = false;  // HTTP/1.0: the end of the body is the end of the connection
  }
  if (status < 200 || status > 599 || status == 204 || status == 304) {
    status = 200;
  }
  bhttp::response<bhttp::empty_body> response{static_cast<bhttp::status>(status), version_};
  AddHeaders(response, headers, route_);
  response.set(bhttp::field::content_type,
               kind == StreamKind::kSse ? "text/event-stream" : "application/x-ndjson");
  response.set(bhttp::field::cache_control, "no-cache");
  response.keep_alive(keep_alive_ && !draining_);
  if (chunked_) {
    response.chunked(true);
  }
  std::ostringstream out;
  out << response.base();
  spdlog::debug("http: {} -> {} (stream)", route_, status);
  Enqueue(std::move(out).str(), nullptr, false);
  if (kind == StreamKind::kSse) {
    Arm(keepalive_timer_, core_.options.sse_keepalive, &Connection::OnKeepalive);
  }
}

void Connection::StreamWrite(uint64_t seq, std::string bytes, SentCallback on_sent) {
  if (seq != seq_ || phase_ != Phase::kStreaming || bytes.empty() || head_) {
    return;
  }
  if (queued_bytes_ + bytes.size() > core_.options.max_stream_buffer_bytes) {
    spdlog::warn("http: {}: client fell {} bytes behind; closing its stream", route_,
                 queued_bytes_);
    Close("client too slow");
    return;
  }
  Enqueue(chunked_ ? ChunkFrame(bytes) : std::move(bytes), std::move(on_sent), false);
  if (stream_kind_ == StreamKind::kSse) {
    Arm(keepalive_timer_, core_.options.sse_keepalive, &Connection::OnKeepalive);
  }
}

void Connection::FinishStream(uint64_t seq) {
  if (seq != seq_ || phase_ != Phase::kStreaming) {
    return;
  }
  Disarm(keepalive_timer_);
  phase_ = Phase::kWriting;
  Enqueue(chunked_ ? std::string(kLastChunk) : std::string(), nullptr, true);
}

void Connection::OnKeepalive() {
  if (phase_ != Phase::kStreaming || stream_kind_ != StreamKind::kSse || head_) {
    return;
  }
  Enqueue(chunked_ ? ChunkFrame(kSseKeepalive) : std::string(kSseKeepalive), nullptr, false);
  Arm(keepalive_timer_, core_.options.sse_keepalive, &Connection::OnKeepalive);
}

void Connection::Enqueue(std::string bytes, SentCallback on_sent, bool ends_response) {
  queued_bytes_ += bytes.size();
  queue_.push_back({std::move(bytes), std::move(on_sent), ends_response});
  if (!writing_) {
    WriteNext();
  }
}

void Connection::WriteNext() {
  if (queue_.empty() || phase_ == Phase::kClosed) {
    writing_ = false;
    Disarm(write_timer_);
    return;
  }
  writing_ = true;
  Arm(write_timer_, core_.options.write_timeout, &Connection::OnWriteTimeout);
  net::async_write(socket_, net::buffer(queue_.front().bytes),
                   [self = shared_from_this()](ErrorCode ec, size_t /*n*/) { self->OnWrite(ec); });
}

void Connection::OnWrite(ErrorCode ec) {
  if (phase_ == Phase::kClosed) {
    return;
  }
  if (ec) {
    Close(absl::StrCat("write failed: ", ec.message()));
    return;
  }
  Pending done = std::move(queue_.front());
  queue_.pop_front();
  queued_bytes_ -= done.bytes.size();
  if (done.on_sent) {
    done.on_sent();
  }
  if (done.ends_response) {
    writing_ = false;
    Disarm(write_timer_);
    ResponseDone();
    return;
  }
  WriteNext();
}

void Connection::ResponseDone() {
  if (phase_ == Phase::kClosed) {
    return;
  }
  state_.reset();  // complete: closing later must not cancel it
  if (linger_) {
    Linger();
  } else if (!keep_alive_ || draining_) {
    Close("");
  } else {
    ReadRequest();
  }
}

void Connection::Linger() {
  phase_ = Phase::kLingering;
  ErrorCode ignored;
  socket_.shutdown(net::socket_base::shutdown_send, ignored);
  Arm(read_timer_, kLingerTime, &Connection::OnReadTimeout);
  DiscardInput();
}

void Connection::DiscardInput() {
  socket_.async_read_some(net::buffer(discard_),
                          [self = shared_from_this()](ErrorCode ec, size_t n) {
                            if (self->phase_ != Phase::kLingering) {
                              return;
                            }
                            self->discarded_ += n;
                            if (ec || self->discarded_ > kMaxLingerBytes) {
                              self->Close("");
                            } else {
                              self->DiscardInput();
                            }
                          });
}

}  // namespace abox::http::internal
