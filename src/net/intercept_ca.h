// The certificate authority the egress proxy terminates TLS with, for the hosts a secret is
// bound to (issue 15), and the leaf certificates it issues.
//
// One CA per install, kept under `$ABOX_HOME/ca/` (ca.key, ca.crt) and installed in every
// guest's trust store. Its key is what a guest would need to impersonate any host to another
// abox guest, so it is created 0600 in a 0700 directory, written atomically, and refused (never
// repaired) when it is readable by others, a symlink, or damaged: guests already trust the
// certificate, so silently making a new one would break them, and silently accepting a loose
// key would hide a compromise.
//
// Leaves: ECDSA P-256, SAN dNSName = the host only, serverAuth, 7 days. All leaves of one
// InterceptCa share one key pair, made in memory when the CA is loaded (never written): a leaf
// then costs one signature instead of a key generation, and the key is no more exposed than
// the CA key that sits beside it in aboxd's memory. The CA has pathlen:0 and no
// nameConstraints (a per-sandbox constrained sub-CA is future work; see src/net/README.md).
//
// Thread safety: an InterceptCa is immutable after LoadOrCreate; IssueLeaf may be called from
// any thread. Trust boundary: `host` comes from the guest (SNI) via the proxy's checks, and is
// validated again here; the files under `dir` belong to the user.
#pragma once

#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace abox::net {

struct X509Free {
  void operator()(X509* cert) const { X509_free(cert); }
};
struct EvpPkeyFree {
  void operator()(EVP_PKEY* key) const { EVP_PKEY_free(key); }
};
struct SslCtxFree {
  void operator()(SSL_CTX* ctx) const { SSL_CTX_free(ctx); }
};
using X509Ptr = std::unique_ptr<X509, X509Free>;
using EvpPkeyPtr = std::unique_ptr<EVP_PKEY, EvpPkeyFree>;
using SslCtxPtr = std::unique_ptr<SSL_CTX, SslCtxFree>;

inline constexpr char kInterceptCaKeyFile[] = "ca.key";
inline constexpr char kInterceptCaCertFile[] = "ca.crt";
inline constexpr absl::Duration kInterceptCaValidity = absl::Hours(24 * 3650);
inline constexpr absl::Duration kLeafValidity = absl::Hours(24 * 7);
// notBefore is set this far in the past, so a guest whose clock lags a little accepts a cert.
inline constexpr absl::Duration kCertBackdate = absl::Hours(1);

// A leaf certificate for one host, with its key and the CA certificate that signed it.
struct InterceptLeaf {
  std::string host;  // normalised: lowercase, no trailing dot
  X509Ptr cert;
  EvpPkeyPtr key;  // shared by every leaf of one InterceptCa (a reference each)
  X509Ptr issuer;  // the CA certificate (a reference)
  absl::Time not_after;
};

class InterceptCa final {
 public:
  // Loads the CA kept in `dir`, or makes one there when neither file exists (creating `dir`
  // 0700 if needed). FailedPrecondition, saying what to run, when `dir`, the key or the
  // certificate is a symlink, not owned by this user, or open to group/other (the key must be
  // 0600-like, the directory 0700-like); when one file exists without the other; or when a
  // file does not parse, the key is not the certificate's, or the certificate is not a CA.
  // `now` dates a new certificate.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<InterceptCa>> LoadOrCreate(
      const std::string& dir, absl::Time now = absl::Now());

  InterceptCa(const InterceptCa&) = delete;
  InterceptCa& operator=(const InterceptCa&) = delete;

  // The CA certificate in PEM, for a guest's trust store.
  const std::string& CertificatePem() const { return cert_pem_; }
  X509* certificate() const { return cert_.get(); }
  absl::Time not_after() const { return not_after_; }

  // A leaf for `host` valid from now - kCertBackdate to now + kLeafValidity (never past the
  // CA's own notAfter). InvalidArgument when `host` is not a DNS name (empty, an IP literal,
  // > 253 characters, a label that is not letters, digits and inner hyphens).
  [[nodiscard]] absl::StatusOr<InterceptLeaf> IssueLeaf(absl::string_view host,
                                                        absl::Time now) const;

 private:
  InterceptCa(X509Ptr cert, EvpPkeyPtr key, EvpPkeyPtr leaf_key, std::string cert_pem,
              absl::Time not_after);

  X509Ptr cert_;
  EvpPkeyPtr key_;
  EvpPkeyPtr leaf_key_;
  std::string cert_pem_;
  absl::Time not_after_;
};

// A server-side SSL_CTX presenting `leaf` (the proxy's end of a terminated connection):
// TLS 1.2 and 1.3 only, no renegotiation; ALPN picks "http/1.1" when the client offers it and
// negotiates none otherwise (the proxy speaks HTTP/1.1 only). A caller wanting other ALPN
// replaces the callback with SSL_CTX_set_alpn_select_cb before sharing the context. Safe to
// share between threads once made (SSL_new per connection).
[[nodiscard]] absl::StatusOr<SslCtxPtr> MakeInterceptServerContext(const InterceptLeaf& leaf);

// `cert` in PEM.
[[nodiscard]] absl::StatusOr<std::string> CertificateToPem(X509* cert);

}  // namespace abox::net
