// The read half of Connection: requests in, dispatch to handlers, disconnect detection, close
// and timers. The write half is connection_write.cc.
#include "src/http/connection.h"

#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "boost/asio/post.hpp"
#include "boost/beast/http/error.hpp"
#include "boost/beast/http/read.hpp"
#include "spdlog/spdlog.h"
#include "src/api/errors.h"
#include "src/http/auth.h"

namespace abox::http::internal {
namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using ErrorCode = boost::system::error_code;

std::string ToString(beast::string_view s) { return {s.data(), s.size()}; }

bool IsQuietReadError(const ErrorCode& ec) {
  return ec == bhttp::error::end_of_stream || ec == net::error::eof ||
         ec == net::error::operation_aborted || ec == net::error::connection_reset ||
         ec == net::error::bad_descriptor;
}

}  // namespace

Connection::Connection(ServerCore& core, Socket socket, Peer peer)
    : core_(core),
      socket_(std::move(socket)),
      peer_(peer),
      read_timer_(socket_.get_executor()),
      write_timer_(socket_.get_executor()),
      keepalive_timer_(socket_.get_executor()) {
  // A new connection awaits its first request from the start, before its first read runs: in a
  // burst of accepts, the ones not yet reading must be candidates for eviction too.
  SetAwaitingRequest(true);
}

Connection::~Connection() { core_.Unregister(this); }

void Connection::Start() {
  net::post(socket_.get_executor(), [self = shared_from_this()] { self->ReadRequest(); });
}

void Connection::Post(std::function<void()> fn) {
  net::post(socket_.get_executor(), std::move(fn));
}

void Connection::Shutdown() {
  net::post(socket_.get_executor(), [self = shared_from_this()] {
    self->draining_ = true;
    switch (self->phase_) {
      case Phase::kReading:
        self->Close("");
        break;
      case Phase::kStreaming:
        self->Close("server stopping");
        break;
      default:
        break;  // the response in flight goes out with "Connection: close"
    }
  });
}

void Connection::ForceClose(std::string why) {
  net::post(socket_.get_executor(),
            [self = shared_from_this(), why = std::move(why)] { self->Close(why); });
}

std::optional<int64_t> Connection::AwaitingRequestSince() const {
  int64_t since = awaiting_since_.load(std::memory_order_relaxed);
  if (since == kNotAwaiting) {
    return std::nullopt;
  }
  return since;
}

void Connection::SetAwaitingRequest(bool awaiting) {
  awaiting_since_.store(
      awaiting ? std::chrono::steady_clock::now().time_since_epoch().count() : kNotAwaiting,
      std::memory_order_relaxed);
}

void Connection::ReadRequest() {
  phase_ = Phase::kReading;
  head_ = false;
  parser_.emplace();
  parser_->header_limit(static_cast<uint32_t>(core_.options.max_header_bytes));
  parser_->body_limit(core_.options.max_body_bytes);
  // One deadline for waiting and the whole head, however the bytes trickle in: an idle
  // keep-alive connection and a client dribbling a header byte a second are both closed by it.
  SetAwaitingRequest(true);
  Arm(read_timer_, core_.options.request_head_timeout, &Connection::OnHeadTimeout);
  if (monitoring_) {
    resume_after_monitor_ = true;  // its bytes (or EOF) come first
    return;
  }
  bhttp::async_read_header(
      socket_, buffer_, *parser_,
      [self = shared_from_this()](ErrorCode ec, size_t /*n*/) { self->OnHeader(ec); });
}

void Connection::OnHeader(ErrorCode ec) {
  if (phase_ != Phase::kReading) {
    return;
  }
  SetAwaitingRequest(false);
  if (ec) {
    OnReadError(ec);
    return;
  }
  Arm(read_timer_, core_.options.read_timeout, &Connection::OnReadTimeout);
  const auto& message = parser_->get();
  head_ = message.method() == bhttp::verb::head;
  if (peer_.transport == Transport::kTcp && !core_.options.tcp_without_token) {
    auto it = message.find(bhttp::field::authorization);
    std::optional<absl::string_view> authorization;
    if (it != message.end()) {
      authorization = absl::string_view(it->value().data(), it->value().size());
    }
    if (absl::Status s =
            CheckBearerToken(authorization, core_.options.tcp_bearer_token, core_.options.name);
        !s.ok()) {
      FailRequest(
          s, {{"WWW-Authenticate", absl::StrCat("Bearer realm=\"", core_.options.name, "\"")}});
      return;
    }
  }
  auto expect = message.find(bhttp::field::expect);
  if (expect != message.end() && message.version() >= 11 &&
      absl::EqualsIgnoreCase(ToString(expect->value()), "100-continue")) {
    Enqueue("HTTP/1.1 100 Continue\r\n\r\n", nullptr, false);
  }
  bhttp::async_read(socket_, buffer_, *parser_,
                    [self = shared_from_this()](ErrorCode ec, size_t /*n*/) { self->OnBody(ec); });
}

void Connection::OnBody(ErrorCode ec) {
  if (phase_ != Phase::kReading) {
    return;
  }
  if (ec) {
    OnReadError(ec);
    return;
  }
  Disarm(read_timer_);
  Dispatch();
}

void Connection::OnReadError(ErrorCode ec) {
  if (IsQuietReadError(ec)) {
    Close("");
  } else if (ec == bhttp::error::body_limit) {
    FailRequest(api::PayloadTooLargeError(absl::StrCat("request body is larger than ",
                                                       core_.options.max_body_bytes,
                                                       " bytes; send less per request")));
  } else if (ec == bhttp::error::header_limit) {
    FailRequest(absl::InvalidArgumentError(absl::StrCat("request headers are larger than ",
                                                        core_.options.max_header_bytes, " bytes")));
  } else {
    FailRequest(absl::InvalidArgumentError(absl::StrCat("malformed HTTP request: ", ec.message())));
  }
}

void Connection::Dispatch() {
  auto& message = parser_->get();
  version_ = message.version();
  keep_alive_ = message.keep_alive();
  Request request;
  request.method = ToString(message.method_string());
  request.target = ToString(message.target());
  absl::Status target_ok = SplitTarget(request.target, &request.path, &request.query);
  for (const auto& field : message) {
    request.headers.emplace_back(ToString(field.name_string()), ToString(field.value()));
  }
  request.body = std::move(message.body());
  request.peer = peer_;
  route_ = absl::StrCat(request.method, " ", request.path);

  ++seq_;
  auto state = std::make_shared<ResponseState>(weak_from_this(), core_.loop, seq_, route_);
  state_ = state;
  phase_ = Phase::kHandling;
  StartMonitor();
  Responder responder(std::move(state));
  if (!target_ok.ok()) {
    responder.Error(target_ok);
    return;
  }
  absl::StatusOr<Router::Match> match = core_.router.Find(request.method, request.path);
  if (!match.ok()) {
    HttpHeaders headers;
    if (api::ErrorKindOf(match.status()).http_status == 405) {
      headers.emplace_back("Allow", absl::StrJoin(core_.router.AllowedMethods(request.path), ", "));
    }
    responder.Error(match.status(), std::move(headers));
    return;
  }
  request.params = std::move(match->params);
  const Handler* handler = match->handler;  // the router is immutable and outlives workers
  if (match->options.blocking) {
    net::post(*core_.workers,
              [handler, request = std::move(request), responder = std::move(responder)]() mutable {
                (*handler)(request, responder);
              });
  } else {
    (*handler)(request, responder);
  }
}

void Connection::StartMonitor() {
  // With bytes of a next (pipelined) request already buffered, stop: the next ReadRequest must
  // parse them at once instead of waiting for this read. (Such a client's disconnect is then
  // seen only when a write fails.)
  if (monitoring_ || phase_ == Phase::kClosed || buffer_.size() > 0) {
    return;
  }
  monitoring_ = true;
  socket_.async_read_some(
      buffer_.prepare(4096),
      [self = shared_from_this()](ErrorCode ec, size_t n) { self->OnMonitor(ec, n); });
}

void Connection::OnMonitor(ErrorCode ec, size_t n) {
  monitoring_ = false;
  if (phase_ == Phase::kClosed) {
    return;
  }
  if (ec) {
    // EOF or reset while a response is pending: the client is gone; cancel it.
    Close(resume_after_monitor_ ? "" : "client disconnected");
    return;
  }
  buffer_.commit(n);
  if (resume_after_monitor_) {
    resume_after_monitor_ = false;
    bhttp::async_read_header(
        socket_, buffer_, *parser_,
        [self = shared_from_this()](ErrorCode ec, size_t /*n*/) { self->OnHeader(ec); });
    return;
  }
  if (phase_ == Phase::kHandling || phase_ == Phase::kWriting || phase_ == Phase::kStreaming) {
    StartMonitor();
  }
}

void Connection::FailRequest(const absl::Status& status, const HttpHeaders& headers) {
  Disarm(read_timer_);
  if (parser_.has_value() && parser_->is_header_done()) {
    version_ = parser_->get().version();
  }
  keep_alive_ = false;
  linger_ = true;
  phase_ = Phase::kWriting;
  route_ = "(unparsed request)";
  api::ErrorResponse error = api::ErrorResponseFor(status);
  spdlog::debug("http: rejected request: {} {}", error.http_status, std::string(status.message()));
  Enqueue(SerializeWhole(error.http_status, "application/json", std::move(error.body), headers),
          nullptr, true);
}

void Connection::Close(absl::string_view why) {
  if (phase_ == Phase::kClosed) {
    return;
  }
  phase_ = Phase::kClosed;
  SetAwaitingRequest(false);
  if (!why.empty()) {
    spdlog::debug("http: closing connection ({}): {}", route_, std::string(why));
  }
  Disarm(read_timer_);
  Disarm(write_timer_);
  Disarm(keepalive_timer_);
  queue_.clear();
  queued_bytes_ = 0;
  ErrorCode ignored;
  socket_.shutdown(net::socket_base::shutdown_both, ignored);
  socket_.close(ignored);
  core_.Unregister(this);
  // Last, since cancel callbacks may call back into responders (their posts then find us
  // closed and do nothing).
  if (std::shared_ptr<ResponseState> state = state_.lock()) {
    state_.reset();
    state->Cancel();
  }
}

void Connection::Arm(net::steady_timer& timer, std::chrono::milliseconds after,
                     TimerCallback on_expiry) {
  timer.expires_after(after);
  timer.async_wait([self = shared_from_this(), &timer, on_expiry](ErrorCode ec) {
    // Re-armed or disarmed timers have a later expiry: their stale completions are ignored.
    if (ec || self->phase_ == Phase::kClosed || timer.expiry() > std::chrono::steady_clock::now()) {
      return;
    }
    ((*self).*on_expiry)();
  });
}

void Connection::Disarm(net::steady_timer& timer) {
  timer.expires_at(std::chrono::steady_clock::time_point::max());
}

void Connection::OnReadTimeout() { Close(phase_ == Phase::kLingering ? "" : "read timed out"); }

void Connection::OnHeadTimeout() { Close("no complete request head in time (idle)"); }

void Connection::OnWriteTimeout() { Close("client stopped reading (write timed out)"); }

}  // namespace abox::http::internal
