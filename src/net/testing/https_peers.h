// HTTPS/1.1 at both ends of a proxy that terminates TLS (header-only, for the proxy's tests and
// bench/intercept_bench.cc; links OpenSSL::SSL): a loopback HTTPS server that records the
// plaintext each connection sent and answers every request, keeping the connection alive, and a
// guest-side TLS client that verifies what it is shown against one CA and reads HTTP replies.
#pragma once

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>

#include <atomic>
#include <cstdlib>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "src/net/testing/socket_tunnel.h"
#include "src/net/testing/tls_peers.h"

namespace abox::net::testing {

// HttpsUpstream answers each request with "echo:" and this header's value (or "ok" without it),
// so a test can make the upstream send a secret's value back.
inline constexpr char kEchoHeader[] = "X-Echo";

// The value of header `name` in a request or response head; nullopt when absent.
inline std::optional<std::string> HeaderValue(absl::string_view head, absl::string_view name) {
  for (size_t at = head.find("\r\n"); at != absl::string_view::npos;
       at = head.find("\r\n", at + 2)) {
    absl::string_view line = head.substr(at + 2);
    line = line.substr(0, line.find("\r\n"));
    size_t colon = line.find(':');
    if (colon != absl::string_view::npos && absl::EqualsIgnoreCase(line.substr(0, colon), name)) {
      return std::string(absl::StripAsciiWhitespace(line.substr(colon + 1)));
    }
  }
  return std::nullopt;
}

// Reads HTTP/1.1 messages from a byte source: heads, then bodies framed by Content-Length,
// chunked (decoded, trailers dropped) or, for a response, the end of the stream.
class HttpReader final {
 public:
  // `read` returns the bytes read (0 at EOF, < 0 on error).
  explicit HttpReader(std::function<long(char*, size_t)> read) : read_(std::move(read)) {}

  // The next head including its blank line; nullopt at EOF or error before one completed.
  std::optional<std::string> ReadHead() {
    size_t end;
    while ((end = buf_.find("\r\n\r\n")) == std::string::npos) {
      if (!Fill()) {
        return std::nullopt;
      }
    }
    return Take(end + 4);
  }

  // The body that follows `head`: the raw bytes as sent (`raw`) and decoded (the return value).
  std::optional<std::string> ReadBody(absl::string_view head, bool response,
                                      std::string* raw = nullptr) {
    std::string scratch;
    std::string& wire = raw != nullptr ? *raw : scratch;
    std::optional<std::string> te = HeaderValue(head, "Transfer-Encoding");
    if (te && absl::EqualsIgnoreCase(*te, "chunked")) {
      std::string body;
      for (;;) {
        std::optional<std::string> line = ReadLine();
        if (!line) {
          return std::nullopt;
        }
        wire += *line;
        size_t size = 0;
        if (!absl::SimpleHexAtoi(line->substr(0, line->find_first_of(";\r")), &size)) {
          return std::nullopt;
        }
        if (size == 0) {
          for (;;) {  // trailers, up to the blank line
            std::optional<std::string> trailer = ReadLine();
            if (!trailer) {
              return std::nullopt;
            }
            wire += *trailer;
            if (*trailer == "\r\n") {
              return body;
            }
          }
        }
        std::optional<std::string> data = ReadExactly(size + 2);
        if (!data) {
          return std::nullopt;
        }
        wire += *data;
        body += data->substr(0, size);
      }
    }
    std::optional<std::string> length = HeaderValue(head, "Content-Length");
    size_t size = 0;
    if (length && absl::SimpleAtoi(*length, &size)) {
      std::optional<std::string> body = ReadExactly(size);
      if (body) {
        wire += *body;
      }
      return body;
    }
    if (!response) {
      return std::string();
    }
    while (Fill()) {
    }
    wire += buf_;
    return Take(buf_.size());
  }

  // Everything up to EOF.
  std::string ReadToEof() {
    while (Fill()) {
    }
    return Take(buf_.size());
  }

 private:
  bool Fill() {
    char chunk[16384];
    long n = read_(chunk, sizeof(chunk));
    if (n <= 0) {
      return false;
    }
    buf_.append(chunk, static_cast<size_t>(n));
    return true;
  }
  std::string Take(size_t n) {
    std::string out = buf_.substr(0, n);
    buf_.erase(0, n);
    return out;
  }
  std::optional<std::string> ReadLine() {
    size_t end;
    while ((end = buf_.find("\r\n")) == std::string::npos) {
      if (!Fill()) {
        return std::nullopt;
      }
    }
    return Take(end + 2);
  }
  std::optional<std::string> ReadExactly(size_t n) {
    while (buf_.size() < n) {
      if (!Fill()) {
        return std::nullopt;
      }
    }
    return Take(n);
  }

  std::function<long(char*, size_t)> read_;
  std::string buf_;
};

struct HttpReply {
  int status = 0;
  std::string head;
  std::string body;  // decoded
};

// An HTTPS server on 127.0.0.1 (one connection at a time): per connection, picks the server
// context for the client's SNI (`contexts`, so one server can stand for several hosts or show
// a certificate that must not verify), then answers every request (head plus body) with
// 200 and "echo:<X-Echo value>" until the client closes. What each connection sent after its
// handshake is recorded before its answer goes out.
class HttpsUpstream final {
 public:
  using ContextFor = std::function<SSL_CTX*(const std::string& sni)>;

  explicit HttpsUpstream(ContextFor contexts)
      : contexts_(std::move(contexts)),
        ctx_(SSL_CTX_new(TLS_server_method())),
        server_([this](base::UniqueFd fd) { Serve(fd.get()); }) {
    SSL_CTX_set_tlsext_servername_callback(ctx_.get(), OnServerName);
    SSL_CTX_set_tlsext_servername_arg(ctx_.get(), this);
  }
  // Always shows `ctx`'s certificate.
  explicit HttpsUpstream(SSL_CTX* ctx) : HttpsUpstream([ctx](const std::string&) { return ctx; }) {}

  uint16_t port() const { return server_.port(); }
  int accepted() const { return server_.accepted(); }
  int handshakes() const { return handshakes_.load(); }
  // The plaintext each handshaken connection sent, in order.
  std::vector<std::string> received() {
    std::lock_guard<std::mutex> lock(mu_);
    return received_;
  }
  // Every connection's plaintext, concatenated.
  std::string all_received() {
    std::lock_guard<std::mutex> lock(mu_);
    std::string all;
    for (const std::string& r : received_) {
      all += r;
    }
    return all;
  }

 private:
  static int OnServerName(SSL* ssl, int* /*alert*/, void* arg) {
    auto* self = static_cast<HttpsUpstream*>(arg);
    const char* sni = SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name);
    SSL_CTX* ctx = self->contexts_(sni != nullptr ? sni : "");
    if (ctx == nullptr) {
      return SSL_TLSEXT_ERR_ALERT_FATAL;
    }
    SSL_set_SSL_CTX(ssl, ctx);
    return SSL_TLSEXT_ERR_OK;
  }

  void Serve(int fd) {
    // As web servers do: a response is not held back waiting for the ACK of the session tickets
    // sent before it (Nagle against delayed ACK would add ~40 ms to a first response).
    int one = 1;
    (void)::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    SslPtr ssl(SSL_new(ctx_.get()));
    SSL_set_fd(ssl.get(), fd);
    if (SSL_accept(ssl.get()) != 1) {
      ERR_clear_error();
      return;
    }
    ++handshakes_;
    size_t index;
    {
      std::lock_guard<std::mutex> lock(mu_);
      index = received_.size();
      received_.emplace_back();
    }
    HttpReader reader([&](char* buf, size_t len) -> long {
      return SSL_read(ssl.get(), buf, static_cast<int>(len));
    });
    for (;;) {
      std::optional<std::string> head = reader.ReadHead();
      if (!head) {
        break;
      }
      std::string raw = *head;
      std::optional<std::string> body = reader.ReadBody(*head, /*response=*/false, &raw);
      {
        std::lock_guard<std::mutex> lock(mu_);
        received_[index] += raw;
      }
      if (!body) {
        break;
      }
      std::optional<std::string> echo = HeaderValue(*head, kEchoHeader);
      std::string answer = echo ? absl::StrCat("echo:", *echo) : "ok";
      std::string reply =
          absl::StrCat("HTTP/1.1 200 OK\r\nContent-Length: ", answer.size(), "\r\n\r\n", answer);
      if (SSL_write(ssl.get(), reply.data(), static_cast<int>(reply.size())) <= 0) {
        break;
      }
    }
    SSL_shutdown(ssl.get());
    ERR_clear_error();
  }

  ContextFor contexts_;
  SslCtxPtr ctx_;
  std::atomic<int> handshakes_{0};
  std::mutex mu_;
  std::vector<std::string> received_;
  LoopbackServer server_;  // last: its thread uses the members above
};

// A TLS client on the guest's end of a tunnel (a blocking socket).
class GuestTls final {
 public:
  // Handshakes with SNI `sni`, verifying the server's certificate for `sni` against `ca` alone
  // (null: not verified). Null, with `*error` saying why, when the handshake fails.
  static std::unique_ptr<GuestTls> Connect(int fd, const std::string& sni, X509* ca,
                                           std::string* error) {
    SslCtxPtr ctx(SSL_CTX_new(TLS_client_method()));
    if (ca != nullptr) {
      X509_STORE_add_cert(SSL_CTX_get_cert_store(ctx.get()), ca);
      SSL_CTX_set_verify(ctx.get(), SSL_VERIFY_PEER, nullptr);
    } else {
      SSL_CTX_set_verify(ctx.get(), SSL_VERIFY_NONE, nullptr);
    }
    SslPtr ssl(SSL_new(ctx.get()));
    SSL_set_fd(ssl.get(), fd);
    SSL_set_tlsext_host_name(ssl.get(), sni.c_str());
    if (ca != nullptr) {
      SSL_set1_host(ssl.get(), sni.c_str());
    }
    if (SSL_connect(ssl.get()) != 1) {
      long verify = SSL_get_verify_result(ssl.get());
      *error = verify != X509_V_OK ? X509_verify_cert_error_string(verify) : "handshake failed";
      ERR_clear_error();
      return nullptr;
    }
    return std::unique_ptr<GuestTls>(new GuestTls(std::move(ctx), std::move(ssl)));
  }

  // The certificate the server showed (owned by the connection).
  X509* peer_certificate() const { return SSL_get0_peer_certificate(ssl_.get()); }

  // One SSL_write (one TLS record) per call, so a test controls how the proxy sees it split.
  bool Write(absl::string_view data) {
    return SSL_write(ssl_.get(), data.data(), static_cast<int>(data.size())) ==
           static_cast<int>(data.size());
  }
  // The next response; nullopt when the connection ended first.
  std::optional<HttpReply> ReadReply() {
    std::optional<std::string> head = reader_.ReadHead();
    if (!head) {
      return std::nullopt;
    }
    std::optional<std::string> body = reader_.ReadBody(*head, /*response=*/true);
    if (!body) {
      return std::nullopt;
    }
    HttpReply reply;
    reply.head = *head;
    reply.body = *body;
    size_t space = head->find(' ');
    if (space != std::string::npos) {
      (void)absl::SimpleAtoi(head->substr(space + 1, 3), &reply.status);
    }
    return reply;
  }
  // Everything the server sends until it closes.
  std::string ReadToEof() { return reader_.ReadToEof(); }
  void Close() { SSL_shutdown(ssl_.get()); }

 private:
  GuestTls(SslCtxPtr ctx, SslPtr ssl)
      : ctx_(std::move(ctx)), ssl_(std::move(ssl)), reader_([this](char* buf, size_t len) -> long {
          return SSL_read(ssl_.get(), buf, static_cast<int>(len));
        }) {}

  SslCtxPtr ctx_;
  SslPtr ssl_;
  HttpReader reader_;
};

}  // namespace abox::net::testing
