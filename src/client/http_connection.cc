#include "src/client/http_connection.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <limits>
#include <optional>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "boost/asio/io_context.hpp"
#include "boost/asio/local/stream_protocol.hpp"
#include "boost/beast/core/flat_buffer.hpp"
#include "boost/beast/http/buffer_body.hpp"
#include "boost/beast/http/error.hpp"
#include "boost/beast/http/parser.hpp"
#include "boost/beast/http/read.hpp"
#include "boost/beast/http/string_body.hpp"
#include "boost/beast/http/write.hpp"
#include "src/base/status_macros.h"
#include "src/base/unique_fd.h"
#include "src/base/version.h"
#include "src/client/socket_trust.h"

namespace abox::client {
namespace {

namespace asio = boost::asio;
namespace bhttp = boost::beast::http;
using boost::system::error_code;
using LocalSocket = asio::local::stream_protocol::socket;

constexpr uint32_t kMaxHeaderBytes = 64 << 10;

// poll() timeout for `deadline`: -1 for none, else milliseconds rounded up.
int PollTimeout(absl::Time deadline) {
  if (deadline == absl::InfiniteFuture()) {
    return -1;
  }
  absl::Duration left = deadline - absl::Now();
  if (left <= absl::ZeroDuration()) {
    return 0;
  }
  return static_cast<int>(std::min<int64_t>(
      absl::ToInt64Milliseconds(absl::Ceil(left, absl::Milliseconds(1))), 1 << 30));
}

// Waits until `fd` is ready for `events`, the cancel descriptor fires, or the deadline passes.
error_code WaitReady(int fd, short events, int cancel_fd, absl::Time deadline) {
  for (;;) {
    pollfd fds[2] = {{fd, events, 0}, {cancel_fd, POLLIN, 0}};
    int n = ::poll(fds, cancel_fd >= 0 ? 2 : 1, PollTimeout(deadline));
    if (n < 0) {
      if (errno == EINTR) {
        continue;
      }
      return {errno, boost::system::system_category()};
    }
    if (cancel_fd >= 0 && fds[1].revents != 0) {
      return asio::error::operation_aborted;
    }
    if (n > 0) {
      return {};  // ready, or an error/hangup that the next read or write reports
    }
    return asio::error::timed_out;
  }
}

// A SyncReadStream / SyncWriteStream for Beast over a non-blocking socket: every read and write
// first waits (poll) for readiness, the cancel descriptor or the deadline, so that no call blocks
// past its deadline and any of them can be cancelled from another thread.
class PollingStream final {
 public:
  PollingStream(LocalSocket& socket, int cancel_fd) : socket_(socket), cancel_fd_(cancel_fd) {}
  void set_deadline(absl::Time deadline) { deadline_ = deadline; }

  template <class Buffers>
  size_t read_some(const Buffers& buffers, error_code& ec) {
    for (;;) {
      size_t n = socket_.read_some(buffers, ec);
      if (ec != asio::error::would_block && ec != asio::error::try_again) {
        return n;
      }
      ec = WaitReady(socket_.native_handle(), POLLIN, cancel_fd_, deadline_);
      if (ec) {
        return 0;
      }
    }
  }
  template <class Buffers>
  size_t write_some(const Buffers& buffers, error_code& ec) {
    for (;;) {
      size_t n = socket_.write_some(buffers, ec);
      if (ec != asio::error::would_block && ec != asio::error::try_again) {
        return n;
      }
      ec = WaitReady(socket_.native_handle(), POLLOUT, cancel_fd_, deadline_);
      if (ec) {
        return 0;
      }
    }
  }
  // Beast's stream concepts require the throwing overloads too; this code always passes an
  // error_code, so they are never called.
  template <class Buffers>
  size_t read_some(const Buffers& /*buffers*/) {
    std::abort();
  }
  template <class Buffers>
  size_t write_some(const Buffers& /*buffers*/) {
    std::abort();
  }

 private:
  LocalSocket& socket_;
  int cancel_fd_;
  absl::Time deadline_ = absl::InfiniteFuture();
};

absl::Status FromErrorCode(const error_code& ec, absl::string_view what) {
  if (ec == asio::error::operation_aborted) {
    return absl::CancelledError(absl::StrCat(what, ": cancelled"));
  }
  if (ec == asio::error::timed_out) {
    return absl::DeadlineExceededError(absl::StrCat(what, ": timed out"));
  }
  if (ec == asio::error::eof || ec == bhttp::error::end_of_stream ||
      ec == bhttp::error::partial_message || ec == asio::error::connection_reset ||
      ec == asio::error::broken_pipe) {
    return absl::UnavailableError(absl::StrCat(what, ": aboxd closed the connection"));
  }
  if (ec.category() == bhttp::make_error_code(bhttp::error::need_more).category()) {
    return absl::DataLossError(
        absl::StrCat(what, ": malformed HTTP response (", ec.message(), ")"));
  }
  return absl::UnavailableError(absl::StrCat(what, ": ", ec.message()));
}

}  // namespace

class HttpConnection::Impl {
 public:
  explicit Impl(int cancel_fd) : stream(socket, cancel_fd) {}

  asio::io_context io;
  LocalSocket socket{io};
  boost::beast::flat_buffer buffer;
  PollingStream stream;
  // The parser of the response being read (reset for each response).
  std::optional<bhttp::response_parser<bhttp::buffer_body>> parser;
  bool body_done = true;
};

HttpConnection::HttpConnection(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
HttpConnection::~HttpConnection() = default;

absl::StatusOr<std::unique_ptr<HttpConnection>> HttpConnection::Connect(const std::string& path,
                                                                        int cancel_fd,
                                                                        absl::Time deadline) {
  ABOX_ASSIGN_OR_RETURN(base::UniqueFd fd, ConnectToOwnServer(path, deadline));
  auto impl = std::make_unique<Impl>(cancel_fd);
  error_code ec;
  impl->socket.assign(asio::local::stream_protocol(), fd.get(), ec);
  if (ec) {
    return absl::InternalError(absl::StrCat("adopting the socket: ", ec.message()));
  }
  (void)fd.release();  // the socket owns it now
  impl->socket.non_blocking(true, ec);
  if (ec) {
    return absl::InternalError(absl::StrCat("non-blocking socket: ", ec.message()));
  }
  return std::unique_ptr<HttpConnection>(new HttpConnection(std::move(impl)));
}

absl::Status HttpConnection::Write(const HttpRequest& request, absl::Time deadline) {
  bhttp::verb verb = bhttp::string_to_verb(request.method);
  if (verb == bhttp::verb::unknown) {
    return absl::InvalidArgumentError(absl::StrCat("unknown HTTP method ", request.method));
  }
  bhttp::request<bhttp::string_body> message{verb, request.target, 11};
  message.set(bhttp::field::host, "localhost");
  message.set(bhttp::field::user_agent, absl::StrCat("abox/", kVersion));
  for (const auto& [name, value] : request.headers) {
    message.set(name, value);
  }
  message.body() = request.body;
  message.prepare_payload();
  impl_->stream.set_deadline(deadline);
  error_code ec;
  bhttp::write(impl_->stream, message, ec);
  if (ec) {
    return FromErrorCode(ec, "sending the request");
  }
  return absl::OkStatus();
}

absl::StatusOr<HttpResponseHead> HttpConnection::ReadHead(absl::Time deadline) {
  impl_->parser.emplace();
  impl_->parser->header_limit(kMaxHeaderBytes);
  // Streams are unbounded (whole bodies are capped by ReadBodyAll). Not boost::none: Beast 1.74
  // compares a Content-Length against the empty optional and rejects every sized body.
  impl_->parser->body_limit(std::numeric_limits<uint64_t>::max());
  impl_->body_done = false;
  impl_->stream.set_deadline(deadline);
  error_code ec;
  bhttp::read_header(impl_->stream, impl_->buffer, *impl_->parser, ec);
  if (ec) {
    impl_->parser.reset();
    return FromErrorCode(ec, "reading the response");
  }
  HttpResponseHead head;
  head.status = static_cast<int>(impl_->parser->get().result_int());
  for (const auto& field : impl_->parser->get()) {
    head.headers.emplace_back(std::string(field.name_string()), std::string(field.value()));
  }
  impl_->body_done = impl_->parser->is_done();
  return head;
}

absl::StatusOr<bool> HttpConnection::ReadBodySome(std::string* out, absl::Time deadline) {
  if (!impl_->parser) {
    return absl::FailedPreconditionError("no response is being read");
  }
  impl_->stream.set_deadline(deadline);
  char buf[64 << 10];
  while (!impl_->parser->is_done()) {
    auto& body = impl_->parser->get().body();
    body.data = buf;
    body.size = sizeof(buf);
    error_code ec;
    bhttp::read_some(impl_->stream, impl_->buffer, *impl_->parser, ec);
    if (ec == bhttp::error::need_buffer) {
      ec = {};
    }
    if (ec) {
      impl_->parser.reset();
      return FromErrorCode(ec, "reading the response body");
    }
    size_t n = sizeof(buf) - impl_->parser->get().body().size;
    if (n > 0) {
      out->append(buf, n);
      return true;
    }
  }
  impl_->body_done = true;
  return false;
}

absl::Status HttpConnection::ReadBodyAll(std::string* out, size_t limit, absl::Time deadline) {
  for (;;) {
    ABOX_ASSIGN_OR_RETURN(bool more, ReadBodySome(out, deadline));
    if (!more) {
      return absl::OkStatus();
    }
    if (out->size() > limit) {
      impl_->parser.reset();
      return absl::ResourceExhaustedError(
          absl::StrCat("the response body is larger than ", limit, " bytes"));
    }
  }
}

bool HttpConnection::Reusable() {
  if (!impl_->parser || !impl_->body_done || !impl_->parser->get().keep_alive() ||
      impl_->buffer.size() != 0) {
    return false;
  }
  // Between responses the server sends nothing: readable now means it closed the connection
  // (idle timeout, restart) or misbehaves. Either way, start afresh.
  pollfd p{impl_->socket.native_handle(), POLLIN, 0};
  int n;
  do {
    n = ::poll(&p, 1, 0);
  } while (n < 0 && errno == EINTR);
  return n == 0;
}

std::string HttpResponseHead::Header(absl::string_view name) const {
  for (const auto& [key, value] : headers) {
    if (absl::EqualsIgnoreCase(key, name)) {
      return value;
    }
  }
  return "";
}

bool IsNothingListening(const absl::Status& status) { return HasNothingListeningMark(status); }

}  // namespace abox::client
