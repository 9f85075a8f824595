// Real TLS at both ends of the proxy for tests (header-only, links OpenSSL::SSL): a TLS server
// on loopback with a self-signed certificate made in memory, and a client run on the guest's
// end of a tunnel. The proxy terminates TLS only for hosts a secret is bound to (none here), so a
// completed handshake through it proves the bytes were forwarded unchanged.
#pragma once

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <memory>
#include <optional>
#include <string>

#include "src/net/testing/socket_tunnel.h"

namespace abox::net::testing {

struct SslCtxFree {
  void operator()(SSL_CTX* ctx) const { SSL_CTX_free(ctx); }
};
struct SslFree {
  void operator()(SSL* ssl) const { SSL_free(ssl); }
};
using SslCtxPtr = std::unique_ptr<SSL_CTX, SslCtxFree>;
using SslPtr = std::unique_ptr<SSL, SslFree>;

// A server context with a fresh P-256 key and a self-signed certificate for `cn`.
inline SslCtxPtr MakeServerContext(const std::string& cn) {
  EVP_PKEY* key = EVP_EC_gen("P-256");
  X509* cert = X509_new();
  X509_set_version(cert, 2);
  ASN1_INTEGER_set(X509_get_serialNumber(cert), 1);
  X509_gmtime_adj(X509_getm_notBefore(cert), -60);
  X509_gmtime_adj(X509_getm_notAfter(cert), 3600);
  X509_set_pubkey(cert, key);
  X509_NAME* name = X509_get_subject_name(cert);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>(cn.c_str()), -1, -1, 0);
  X509_set_issuer_name(cert, name);
  X509_sign(cert, key, EVP_sha256());
  SslCtxPtr ctx(SSL_CTX_new(TLS_server_method()));
  SSL_CTX_use_certificate(ctx.get(), cert);
  SSL_CTX_use_PrivateKey(ctx.get(), key);
  X509_free(cert);
  EVP_PKEY_free(key);
  return ctx;
}

// A TLS server on 127.0.0.1: per connection, completes the handshake, records the SNI it saw,
// reads "ping" and answers "pong".
class FakeTlsUpstream final {
 public:
  explicit FakeTlsUpstream(const std::string& cn)
      : ctx_(MakeServerContext(cn)), server_([this](base::UniqueFd fd) { Serve(fd.get()); }) {}

  uint16_t port() const { return server_.port(); }
  int handshakes() const { return handshakes_.load(); }
  std::string last_sni() {
    std::lock_guard<std::mutex> lock(mu_);
    return last_sni_;
  }

 private:
  void Serve(int fd) {
    SslPtr ssl(SSL_new(ctx_.get()));
    SSL_set_fd(ssl.get(), fd);
    if (SSL_accept(ssl.get()) != 1) {
      return;
    }
    ++handshakes_;
    if (const char* sni = SSL_get_servername(ssl.get(), TLSEXT_NAMETYPE_host_name)) {
      std::lock_guard<std::mutex> lock(mu_);
      last_sni_ = sni;
    }
    char buf[4];
    if (SSL_read(ssl.get(), buf, 4) == 4 && std::string(buf, 4) == "ping") {
      SSL_write(ssl.get(), "pong", 4);
    }
    SSL_shutdown(ssl.get());
  }

  SslCtxPtr ctx_;
  std::atomic<int> handshakes_{0};
  std::mutex mu_;
  std::string last_sni_;
  LoopbackServer server_;  // last: its thread uses the members above
};

struct TlsExchange {
  bool handshake = false;
  std::string reply;  // what the server answered to "ping"
};

// Runs a TLS client on the guest's end `fd` (SNI = `sni` unless nullopt; certificates are not
// verified: the test is about what the proxy lets through), sends "ping", reads the reply.
inline TlsExchange RunTlsClient(int fd, const std::optional<std::string>& sni) {
  TlsExchange out;
  SslCtxPtr ctx(SSL_CTX_new(TLS_client_method()));
  SSL_CTX_set_verify(ctx.get(), SSL_VERIFY_NONE, nullptr);
  SslPtr ssl(SSL_new(ctx.get()));
  SSL_set_fd(ssl.get(), fd);
  if (sni) {
    SSL_set_tlsext_host_name(ssl.get(), sni->c_str());
  }
  if (SSL_connect(ssl.get()) != 1) {
    ERR_clear_error();
    return out;
  }
  out.handshake = true;
  if (SSL_write(ssl.get(), "ping", 4) == 4) {
    char buf[16];
    int n = SSL_read(ssl.get(), buf, sizeof(buf));
    if (n > 0) {
      out.reply.assign(buf, static_cast<size_t>(n));
    }
  }
  ERR_clear_error();
  return out;
}

}  // namespace abox::net::testing
