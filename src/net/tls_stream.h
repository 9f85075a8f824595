// TLS over a TunnelStream, for the connections the egress proxy terminates (hosts a secret is
// bound to): the server end towards the guest, presenting a leaf of the interception CA, and
// the client end towards the real upstream, verifying its certificate. Plaintext flows through
// the proxy's filters in between (SpliceStreams).
//
// Trust boundary: both peers are untrusted. The guest may send anything instead of a
// ClientHello; the upstream must prove its name with a certificate that chains to the host's
// trust store (or an extra CA a test or the user names), or the connection fails before a
// byte of plaintext, and so before a secret, is sent.
//
// Memory: ciphertext moves through OpenSSL memory BIOs in bounded steps (one inner Read of at
// most kTlsCipherChunk, one record of plaintext per SSL_write), so a connection buffers a few
// records at most, whatever the peers do.
#pragma once

#include <openssl/ssl.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "src/net/tunnel.h"
#include "src/net/x509_builder.h"

namespace abox::net {

// The most ciphertext one inner Read asks for: a TLS record (16 KiB of plaintext plus the
// largest expansion TLS 1.2 allows) fits.
inline constexpr size_t kTlsCipherChunk = size_t{16} * 1024 + 2048;

// How the proxy verifies upstream certificates: the host's default trust store plus optional
// extra CA files, in one client SSL_CTX made once and shared by every connection (immutable
// once made, so safe from any thread).
class UpstreamTrust final {
 public:
  // The context: TLS 1.2+, no renegotiation, SSL_VERIFY_PEER against the default verify paths
  // and each PEM file in `extra_ca_files` (all its certificates). InvalidArgument naming the
  // file when one cannot be loaded.
  [[nodiscard]] static absl::StatusOr<std::shared_ptr<const UpstreamTrust>> Create(
      const std::vector<std::string>& extra_ca_files);
  UpstreamTrust(const UpstreamTrust&) = delete;
  UpstreamTrust& operator=(const UpstreamTrust&) = delete;

  // For SSL_new; owned by this object.
  [[nodiscard]] SSL_CTX* ctx() const { return ctx_.get(); }

 private:
  explicit UpstreamTrust(SslCtxPtr ctx) : ctx_(std::move(ctx)) {}

  SslCtxPtr ctx_;
};

// Thread safety: one thread may Read while another Writes (SpliceStreams does); Reset and
// CloseWrite may be called from any thread. Two concurrent Reads, or two concurrent Writes, are
// not supported. The inner stream must outlive this one and is used by it alone.
//
// Locking: the SSL object is not safe for concurrent use, so `ssl_mu_` guards it; it is never
// held while blocking on the inner stream. Ciphertext must reach the inner stream in the order
// OpenSSL produced it (records carry sequence numbers), so whoever drains the write BIO and
// writes the result to the inner stream holds `write_mu_` for both steps. Lock order: write_mu_
// before ssl_mu_; inner.Write is called holding write_mu_ only, inner.Read holding neither. So a
// Read whose record makes OpenSSL answer (a KeyUpdate) waits while a Write hands its ciphertext
// to the inner stream; an alert before a fatal read error does not wait (it is dropped).
class TlsStream final : public TunnelStream {
 public:
  // The server end on `inner` (the guest's tunnel) with `ctx` (LeafCache::Entry::server_ctx).
  // `already_read` is ciphertext the proxy read while sniffing (the ClientHello), fed to
  // OpenSSL before anything is read from `inner`. Returns once the handshake is complete;
  // kDeadlineExceeded at `handshake_deadline`, kUnavailable saying why when the guest's bytes
  // are not an acceptable TLS handshake or it closed first.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<TlsStream>> Server(
      TunnelStream& inner, SSL_CTX* ctx, absl::string_view already_read,
      absl::Time handshake_deadline);

  // The client end on `inner` (the upstream socket): SNI `server_name` (unless it is an IP
  // literal), ALPN "http/1.1" only, the certificate verified by `trust` for `server_name`.
  // Returns once the handshake is complete; kUnavailable "upstream certificate for <name> did
  // not verify: <why>" when the chain or the name does not verify, kUnavailable for another
  // handshake failure, kDeadlineExceeded at `handshake_deadline`, InvalidArgument for an empty
  // `server_name`.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<TlsStream>> Client(
      TunnelStream& inner, const UpstreamTrust& trust, std::string server_name,
      absl::Time handshake_deadline);

  TlsStream(const TlsStream&) = delete;
  TlsStream& operator=(const TlsStream&) = delete;
  ~TlsStream() override;

  // The inner stream's.
  [[nodiscard]] const TunnelInfo& info() const override { return inner_.info(); }
  // Up to `len` bytes of plaintext; 0 at the peer's close_notify, or at the inner stream's EOF
  // without one (then truncated() is true); kDeadlineExceeded at `deadline` (the stream stays
  // usable); another error for a TLS failure or the inner stream's.
  [[nodiscard]] absl::StatusOr<size_t> Read(char* buf, size_t len, absl::Time deadline) override;
  // All of `data` as plaintext, one record at a time.
  [[nodiscard]] absl::Status Write(absl::string_view data) override;
  // Sends close_notify, then closes the inner stream's write side. Reading goes on.
  void CloseWrite() override;
  // Resets the inner stream (no alert: the connection is being aborted).
  void Reset(absl::string_view reason) override;

  // The protocol ALPN settled on ("http/1.1"), or "" for none.
  [[nodiscard]] std::string negotiated_alpn() const;
  // Client end: the upstream's certificate verified for the server name (always true once
  // Client returned). Server end: false (the guest presents no certificate).
  [[nodiscard]] bool peer_verified() const { return peer_verified_; }
  // The inner stream ended without a close_notify: what was read may be cut short.
  [[nodiscard]] bool truncated() const { return truncated_.load(); }

 private:
  struct SslFree {
    void operator()(SSL* ssl) const { SSL_free(ssl); }
  };
  using SslPtr = std::unique_ptr<SSL, SslFree>;

  TlsStream(TunnelStream& inner, SslPtr ssl, BIO* rbio, BIO* wbio, std::string server_name);

  // Makes the SSL and its memory BIOs for `ctx`. `server_name`: the upstream's, for a client.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<TlsStream>> Make(TunnelStream& inner,
                                                                       SSL_CTX* ctx,
                                                                       std::string server_name);
  // Runs SSL_do_handshake until done, feeding it from `inner_`.
  [[nodiscard]] absl::Status Handshake(absl::Time deadline);
  // The handshake's error in user terms (the verify result for a client).
  [[nodiscard]] absl::Status HandshakeError(const std::string& reason) const;
  // One inner Read into the read BIO. Returns false at the inner stream's EOF.
  [[nodiscard]] absl::StatusOr<bool> FeedCiphertext(absl::Time deadline);
  // Writes what OpenSSL queued in the write BIO to the inner stream. Takes write_mu_ (or, when
  // !wait and a Write holds it, does nothing), then ssl_mu_ to drain.
  [[nodiscard]] absl::Status Flush(bool wait);
  // Under ssl_mu_: moves the write BIO's contents to `out`.
  void DrainLocked(std::string* out);

  TunnelStream& inner_;
  // The client end's upstream name (for errors); empty for the server end.
  const std::string server_name_;
  std::mutex write_mu_;
  mutable std::mutex ssl_mu_;
  SslPtr ssl_;              // guarded by ssl_mu_
  BIO* const rbio_;         // owned by ssl_; guarded by ssl_mu_
  BIO* const wbio_;         // owned by ssl_; guarded by ssl_mu_
  std::string read_buf_;    // ciphertext from inner_; used by the one reader only
  bool inner_eof_ = false;  // used by the one reader only
  bool peer_verified_ = false;
  std::atomic<bool> truncated_{false};
};

}  // namespace abox::net
