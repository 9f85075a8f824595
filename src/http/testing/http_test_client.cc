#include "src/http/testing/http_test_client.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "boost/asio/buffer.hpp"
#include "boost/beast/http/parser.hpp"
#include "boost/beast/http/string_body.hpp"
#include "src/base/io.h"
#include "src/base/status_macros.h"

namespace abox::http::httptest {
namespace {

namespace bhttp = boost::beast::http;

absl::Status SetTimeout(int fd) {
  timeval tv{};
  tv.tv_sec = kClientTimeout.count();
  if (::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) != 0 ||
      ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) != 0) {
    return base::ErrnoError("setsockopt(SO_RCVTIMEO)");
  }
  return absl::OkStatus();
}

absl::StatusOr<base::UniqueFd> Connect(int family, const sockaddr* addr, socklen_t len) {
  base::UniqueFd fd(::socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd) {
    return base::ErrnoError("socket");
  }
  ABOX_RETURN_IF_ERROR(SetTimeout(fd.get()));
  int r;
  do {
    r = ::connect(fd.get(), addr, len);
  } while (r != 0 && errno == EINTR);
  if (r != 0) {
    return base::ErrnoError("connect");
  }
  return fd;
}

Response ToResponse(const bhttp::response<bhttp::string_body>& message) {
  Response out;
  out.status = static_cast<int>(message.result_int());
  for (const auto& field : message) {
    out.headers.emplace_back(std::string(field.name_string()), std::string(field.value()));
  }
  out.body = message.body();
  out.keep_alive = message.keep_alive();
  out.chunked = message.chunked();
  return out;
}

}  // namespace

std::optional<std::string> Response::Header(absl::string_view name) const {
  for (const auto& [key, value] : headers) {
    if (absl::EqualsIgnoreCase(key, name)) {
      return value;
    }
  }
  return std::nullopt;
}

nlohmann::json Response::Json() const { return nlohmann::json::parse(body, nullptr, false); }

absl::StatusOr<std::unique_ptr<HttpTestClient>> HttpTestClient::ConnectUnix(
    const std::string& path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof(addr.sun_path)) {
    return absl::InvalidArgumentError("socket path too long for the test client");
  }
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  ABOX_ASSIGN_OR_RETURN(base::UniqueFd fd,
                        Connect(AF_UNIX, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)));
  return std::unique_ptr<HttpTestClient>(new HttpTestClient(std::move(fd)));
}

absl::StatusOr<std::unique_ptr<HttpTestClient>> HttpTestClient::ConnectTcp(uint16_t port) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ABOX_ASSIGN_OR_RETURN(base::UniqueFd fd,
                        Connect(AF_INET, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)));
  return std::unique_ptr<HttpTestClient>(new HttpTestClient(std::move(fd)));
}

absl::Status HttpTestClient::WriteRaw(absl::string_view bytes) {
  while (!bytes.empty()) {
    ssize_t n = ::send(fd_.get(), bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) {
        continue;
      }
      return base::ErrnoError("send");
    }
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return absl::OkStatus();
}

absl::Status HttpTestClient::Send(absl::string_view method, absl::string_view target,
                                  absl::string_view body, const Headers& headers) {
  std::string request = absl::StrCat(method, " ", target, " HTTP/1.1\r\n");
  bool has_host = false;
  for (const auto& [name, value] : headers) {
    has_host = has_host || absl::EqualsIgnoreCase(name, "host");
  }
  if (!has_host) {
    absl::StrAppend(&request, "Host: aboxd\r\n");
  }
  bool has_length = false;
  for (const auto& [name, value] : headers) {
    absl::StrAppend(&request, name, ": ", value, "\r\n");
    has_length = has_length || absl::EqualsIgnoreCase(name, "content-length") ||
                 absl::EqualsIgnoreCase(name, "transfer-encoding");
  }
  if (!has_length && (!body.empty() || method == "POST" || method == "PUT")) {
    absl::StrAppend(&request, "Content-Length: ", body.size(), "\r\n");
  }
  absl::StrAppend(&request, "\r\n", body);
  return WriteRaw(request);
}

absl::StatusOr<Response> HttpTestClient::Request(absl::string_view method, absl::string_view target,
                                                 absl::string_view body, const Headers& headers) {
  ABOX_RETURN_IF_ERROR(Send(method, target, body, headers));
  return ReadResponse();
}

absl::StatusOr<size_t> HttpTestClient::Fill() {
  char buf[16384];
  for (;;) {
    ssize_t n = ::recv(fd_.get(), buf, sizeof(buf), 0);
    if (n >= 0) {
      pending_.append(buf, static_cast<size_t>(n));
      return static_cast<size_t>(n);
    }
    if (errno == EINTR) {
      continue;
    }
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      return absl::DeadlineExceededError("no bytes from the server within the client timeout");
    }
    return base::ErrnoError("recv");
  }
}

absl::StatusOr<Response> HttpTestClient::ReadResponse() {
  bhttp::response_parser<bhttp::string_body> parser;
  parser.body_limit(64 << 20);
  for (;;) {
    if (!pending_.empty()) {
      boost::system::error_code ec;
      size_t used = parser.put(boost::asio::buffer(pending_), ec);
      pending_.erase(0, used);
      if (ec && ec != bhttp::error::need_more) {
        return absl::DataLossError(absl::StrCat("bad response: ", ec.message()));
      }
      if (parser.is_done()) {
        return ToResponse(parser.get());
      }
      if (used > 0 && !ec) {
        continue;
      }
    }
    ABOX_ASSIGN_OR_RETURN(size_t n, Fill());
    if (n == 0) {
      boost::system::error_code ec;
      parser.put_eof(ec);
      if (!ec && parser.is_done()) {
        return ToResponse(parser.get());
      }
      return absl::UnavailableError("the server closed the connection before a full response");
    }
  }
}

absl::StatusOr<Response> HttpTestClient::ReadHeader() {
  for (;;) {
    size_t end = pending_.find("\r\n\r\n");
    if (end != std::string::npos) {
      bhttp::response_parser<bhttp::string_body> parser;
      boost::system::error_code ec;
      parser.put(boost::asio::buffer(pending_.data(), end + 4), ec);
      if (ec && ec != bhttp::error::need_more) {
        return absl::DataLossError(absl::StrCat("bad response header: ", ec.message()));
      }
      if (!parser.is_header_done()) {
        return absl::DataLossError("incomplete response header");
      }
      pending_.erase(0, end + 4);
      return ToResponse(parser.get());
    }
    ABOX_ASSIGN_OR_RETURN(size_t n, Fill());
    if (n == 0) {
      return absl::UnavailableError("the server closed the connection before a header");
    }
  }
}

absl::StatusOr<std::string> HttpTestClient::ReadUntil(absl::string_view needle) {
  while (!absl::StrContains(pending_, needle)) {
    ABOX_ASSIGN_OR_RETURN(size_t n, Fill());
    if (n == 0) {
      return absl::UnavailableError(absl::StrCat("EOF before \"", needle, "\"; got: ", pending_));
    }
  }
  return pending_;
}

absl::StatusOr<std::string> HttpTestClient::ReadToEof() {
  for (;;) {
    absl::StatusOr<size_t> n = Fill();
    if (!n.ok() && n.status().code() != absl::StatusCode::kDeadlineExceeded &&
        absl::StrContains(n.status().message(), "reset")) {
      return pending_;  // ECONNRESET counts as closed
    }
    ABOX_RETURN_IF_ERROR(n.status());
    if (*n == 0) {
      return pending_;
    }
  }
}

bool HttpTestClient::ServerClosed() {
  absl::StatusOr<std::string> rest = ReadToEof();
  return rest.ok() && rest->empty();
}

}  // namespace abox::http::httptest
