#include "src/net/tls_stream.h"

#include <openssl/err.h>
#include <openssl/x509_vfy.h>

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "src/base/status_macros.h"
#include "src/net/address_filter.h"

namespace abox::net {
namespace {

// A record's worth of plaintext per SSL_write: the write BIO then holds one record at a time.
constexpr size_t kPlainChunk = size_t{16} * 1024;
constexpr unsigned char kAlpnHttp11[] = {8, 'h', 't', 't', 'p', '/', '1', '.', '1'};

// The reason of the first error OpenSSL queued on this thread (or `fallback`); clears the queue.
std::string TakeSslError(absl::string_view fallback) {
  unsigned long code = ERR_get_error();  // NOLINT(google-runtime-int): OpenSSL's type
  ERR_clear_error();
  const char* reason = code != 0 ? ERR_reason_error_string(code) : nullptr;
  return reason != nullptr ? std::string(reason) : std::string(fallback);
}

}  // namespace

absl::StatusOr<std::shared_ptr<const UpstreamTrust>> UpstreamTrust::Create(
    const std::vector<std::string>& extra_ca_files) {
  SslCtxPtr ctx(SSL_CTX_new(TLS_client_method()));
  if (!ctx) {
    return OpenSslError("SSL_CTX_new");
  }
  // TLS 1.0/1.1 are obsolete (RFC 8996); renegotiation could change the peer mid-stream.
  if (SSL_CTX_set_min_proto_version(ctx.get(), TLS1_2_VERSION) != 1) {
    return OpenSslError("SSL_CTX_set_min_proto_version");
  }
  SSL_CTX_set_options(ctx.get(), SSL_OP_NO_RENEGOTIATION);
  // A missing system store is not an error here: verification then fails per connection, with
  // the reason ("unable to get local issuer certificate").
  if (SSL_CTX_set_default_verify_paths(ctx.get()) != 1) {
    ERR_clear_error();
  }
  for (const std::string& file : extra_ca_files) {
    if (SSL_CTX_load_verify_locations(ctx.get(), file.c_str(), nullptr) != 1) {
      return absl::InvalidArgumentError(absl::StrCat("cannot load the CA certificates in ", file,
                                                     ": ", TakeSslError("no certificate found"),
                                                     " (expected PEM certificates)"));
    }
  }
  SSL_CTX_set_verify(ctx.get(), SSL_VERIFY_PEER, nullptr);
  return std::shared_ptr<const UpstreamTrust>(new UpstreamTrust(std::move(ctx)));
}

TlsStream::TlsStream(TunnelStream& inner, SslPtr ssl, BIO* rbio, BIO* wbio, std::string server_name)
    : inner_(inner),
      server_name_(std::move(server_name)),
      ssl_(std::move(ssl)),
      rbio_(rbio),
      wbio_(wbio),
      read_buf_(kTlsCipherChunk, '\0') {}

TlsStream::~TlsStream() = default;

absl::StatusOr<std::unique_ptr<TlsStream>> TlsStream::Make(TunnelStream& inner, SSL_CTX* ctx,
                                                           std::string server_name) {
  SslPtr ssl(SSL_new(ctx));
  if (!ssl) {
    return OpenSslError("SSL_new");
  }
  BIO* rbio = BIO_new(BIO_s_mem());
  BIO* wbio = BIO_new(BIO_s_mem());
  if (rbio == nullptr || wbio == nullptr) {
    BIO_free(rbio);
    BIO_free(wbio);
    return OpenSslError("BIO_new");
  }
  SSL_set_bio(ssl.get(), rbio, wbio);  // ssl owns both from here
  return std::unique_ptr<TlsStream>(
      new TlsStream(inner, std::move(ssl), rbio, wbio, std::move(server_name)));
}

absl::StatusOr<std::unique_ptr<TlsStream>> TlsStream::Server(TunnelStream& inner, SSL_CTX* ctx,
                                                             absl::string_view already_read,
                                                             absl::Time handshake_deadline) {
  ABOX_ASSIGN_OR_RETURN(std::unique_ptr<TlsStream> stream, Make(inner, ctx, ""));
  SSL_set_accept_state(stream->ssl_.get());
  if (!already_read.empty() &&
      BIO_write(stream->rbio_, already_read.data(), static_cast<int>(already_read.size())) !=
          static_cast<int>(already_read.size())) {
    return OpenSslError("BIO_write");
  }
  ABOX_RETURN_IF_ERROR(stream->Handshake(handshake_deadline));
  return stream;
}

absl::StatusOr<std::unique_ptr<TlsStream>> TlsStream::Client(TunnelStream& inner,
                                                             const UpstreamTrust& trust,
                                                             std::string server_name,
                                                             absl::Time handshake_deadline) {
  if (server_name.empty()) {
    return absl::InvalidArgumentError("TLS to an upstream needs its name, to verify it");
  }
  ABOX_ASSIGN_OR_RETURN(std::unique_ptr<TlsStream> stream,
                        Make(inner, trust.ctx(), std::move(server_name)));
  const std::string& name = stream->server_name_;
  SSL* ssl = stream->ssl_.get();
  SSL_set_connect_state(ssl);
  // RFC 6066: SNI carries host names only. SSL_set1_host (OpenSSL 3) checks an IP literal
  // against the certificate's IP addresses instead of its DNS names.
  if (!IpAddress::Parse(name).has_value() && SSL_set_tlsext_host_name(ssl, name.c_str()) != 1) {
    return OpenSslError("SSL_set_tlsext_host_name");
  }
  if (SSL_set1_host(ssl, name.c_str()) != 1) {
    return OpenSslError("SSL_set1_host");
  }
  // Only HTTP/1.1: the proxy's filters parse HTTP/1.1, not h2 frames. (Returns 0 on success.)
  if (SSL_set_alpn_protos(ssl, kAlpnHttp11, sizeof(kAlpnHttp11)) != 0) {
    return OpenSslError("SSL_set_alpn_protos");
  }
  ABOX_RETURN_IF_ERROR(stream->Handshake(handshake_deadline));
  stream->peer_verified_ =
      SSL_get0_peer_certificate(ssl) != nullptr && SSL_get_verify_result(ssl) == X509_V_OK;
  return stream;
}

absl::Status TlsStream::HandshakeError(const std::string& reason) const {
  if (!server_name_.empty()) {
    long verify = SSL_get_verify_result(ssl_.get());  // NOLINT(google-runtime-int)
    if (verify != X509_V_OK) {
      return absl::UnavailableError(
          absl::StrCat("upstream certificate for ", server_name_,
                       " did not verify: ", X509_verify_cert_error_string(verify)));
    }
    return absl::UnavailableError(
        absl::StrCat("TLS handshake with ", server_name_, " failed: ", reason));
  }
  return absl::UnavailableError(absl::StrCat("TLS handshake with the guest failed: ", reason));
}

absl::Status TlsStream::Handshake(absl::Time deadline) {
  // Single-threaded: the stream is not shared until its factory returns.
  for (;;) {
    ERR_clear_error();
    int ret;
    int err = SSL_ERROR_NONE;
    std::string reason;
    {
      std::lock_guard<std::mutex> lock(ssl_mu_);
      ret = SSL_do_handshake(ssl_.get());
      if (ret != 1) {
        err = SSL_get_error(ssl_.get(), ret);
        reason = TakeSslError("connection closed");
      }
    }
    // What OpenSSL wrote goes out first, an alert on failure included (best effort then).
    absl::Status flushed = Flush(/*wait=*/true);
    if (ret == 1) {
      return flushed;
    }
    if (err != SSL_ERROR_WANT_READ) {
      return HandshakeError(reason);
    }
    ABOX_RETURN_IF_ERROR(flushed);
    absl::StatusOr<bool> fed = FeedCiphertext(deadline);
    if (!fed.ok()) {
      if (absl::IsDeadlineExceeded(fed.status())) {
        return absl::DeadlineExceededError(
            server_name_.empty() ? "TLS handshake with the guest timed out"
                                 : absl::StrCat("TLS handshake with ", server_name_, " timed out"));
      }
      return base::Annotate(fed.status(), "during the TLS handshake");
    }
    if (!*fed) {
      return HandshakeError("the peer closed the connection");
    }
  }
}

absl::StatusOr<bool> TlsStream::FeedCiphertext(absl::Time deadline) {
  if (inner_eof_) {
    return false;
  }
  ABOX_ASSIGN_OR_RETURN(size_t n, inner_.Read(read_buf_.data(), read_buf_.size(), deadline));
  if (n == 0) {
    inner_eof_ = true;
    return false;
  }
  std::lock_guard<std::mutex> lock(ssl_mu_);
  if (BIO_write(rbio_, read_buf_.data(), static_cast<int>(n)) != static_cast<int>(n)) {
    return OpenSslError("BIO_write");
  }
  return true;
}

void TlsStream::DrainLocked(std::string* out) {
  size_t pending = BIO_ctrl_pending(wbio_);
  if (pending == 0) {
    return;
  }
  size_t at = out->size();
  out->resize(at + pending);
  int got = BIO_read(wbio_, out->data() + at, static_cast<int>(pending));
  out->resize(at + static_cast<size_t>(std::max(got, 0)));
}

absl::Status TlsStream::Flush(bool wait) {
  std::unique_lock<std::mutex> write_lock(write_mu_, std::defer_lock);
  if (wait) {
    write_lock.lock();
  } else if (!write_lock.try_lock()) {
    return absl::OkStatus();
  }
  std::string out;
  {
    std::lock_guard<std::mutex> lock(ssl_mu_);
    DrainLocked(&out);
  }
  return out.empty() ? absl::OkStatus() : inner_.Write(out);
}

absl::StatusOr<size_t> TlsStream::Read(char* buf, size_t len, absl::Time deadline) {
  if (len == 0) {
    return 0;
  }
  for (;;) {
    ERR_clear_error();
    size_t got = 0;
    int ret;
    int err = SSL_ERROR_NONE;
    bool has_output;
    std::string reason;
    {
      std::lock_guard<std::mutex> lock(ssl_mu_);
      ret = SSL_read_ex(ssl_.get(), buf, len, &got);
      if (ret != 1) {
        err = SSL_get_error(ssl_.get(), ret);
        reason = TakeSslError("unknown error");
      }
      has_output = BIO_ctrl_pending(wbio_) > 0;
    }
    // Reading may make OpenSSL answer (a KeyUpdate, an alert): sent before going on. An
    // alert before a fatal error is best effort: it does not wait behind a stalled Write.
    bool fatal = ret != 1 && err != SSL_ERROR_WANT_READ && err != SSL_ERROR_ZERO_RETURN;
    if (has_output) {
      absl::Status flushed = Flush(/*wait=*/!fatal);
      if (!flushed.ok() && !fatal) {
        return flushed;
      }
    }
    if (ret == 1) {
      return got;
    }
    if (err == SSL_ERROR_ZERO_RETURN) {
      return 0;  // close_notify
    }
    if (err != SSL_ERROR_WANT_READ) {
      return absl::DataLossError(absl::StrCat("TLS: ", reason));
    }
    ABOX_ASSIGN_OR_RETURN(bool fed, FeedCiphertext(deadline));
    if (!fed) {
      // EOF without close_notify: the peer (or a middlebox) may have cut the data short. The
      // proxy passes it on as EOF, as a plain TCP proxy would, and records the fact.
      truncated_.store(true);
      return 0;
    }
  }
}

absl::Status TlsStream::Write(absl::string_view data) {
  std::lock_guard<std::mutex> write_lock(write_mu_);
  std::string out;
  while (!data.empty()) {
    size_t chunk = std::min(data.size(), kPlainChunk);
    out.clear();
    {
      std::lock_guard<std::mutex> lock(ssl_mu_);
      ERR_clear_error();
      size_t written = 0;
      // With a memory BIO as sink, a write never waits: it succeeds whole or fails.
      if (SSL_write_ex(ssl_.get(), data.data(), chunk, &written) != 1) {
        return absl::DataLossError(absl::StrCat("TLS: ", TakeSslError("write failed")));
      }
      chunk = written;
      DrainLocked(&out);
    }
    ABOX_RETURN_IF_ERROR(inner_.Write(out));
    data.remove_prefix(chunk);
  }
  return absl::OkStatus();
}

void TlsStream::CloseWrite() {
  {
    std::lock_guard<std::mutex> write_lock(write_mu_);
    std::string out;
    {
      std::lock_guard<std::mutex> lock(ssl_mu_);
      ERR_clear_error();
      // 0 means "sent ours, theirs not yet seen": the read side goes on regardless.
      SSL_shutdown(ssl_.get());
      ERR_clear_error();
      DrainLocked(&out);
    }
    if (!out.empty()) {
      // A failure here shows on the next Read or in the peer's view: nothing to report to.
      (void)inner_.Write(out);
    }
  }
  inner_.CloseWrite();
}

void TlsStream::Reset(absl::string_view reason) { inner_.Reset(reason); }

std::string TlsStream::negotiated_alpn() const {
  const unsigned char* data = nullptr;
  unsigned int len = 0;
  std::lock_guard<std::mutex> lock(ssl_mu_);
  SSL_get0_alpn_selected(ssl_.get(), &data, &len);
  return data == nullptr ? std::string() : std::string(reinterpret_cast<const char*>(data), len);
}

}  // namespace abox::net
