// Small OpenSSL steps for making and encoding X.509 certificates (the interception CA and its
// leaves), each returning a Status that names the step and OpenSSL's reason, plus RAII owners.
#pragma once

#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <memory>
#include <string>

#include "absl/status/status.h"
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

// RFC 5280 ub-common-name.
inline constexpr size_t kMaxCommonNameLength = 64;

// InternalError "what: <the first queued OpenSSL error>"; clears OpenSSL's error queue.
[[nodiscard]] absl::Status OpenSslError(absl::string_view what);

// `cert` in PEM.
[[nodiscard]] absl::StatusOr<std::string> CertificateToPem(X509* cert);
// `key` in unencrypted PKCS#8 PEM (the caller wipes the string when done).
[[nodiscard]] absl::StatusOr<std::string> PrivateKeyToPem(EVP_PKEY* key);

// A fresh ECDSA P-256 key.
[[nodiscard]] absl::StatusOr<EvpPkeyPtr> NewP256Key();
bool IsP256(EVP_PKEY* key);

// A random positive 128-bit serial number.
[[nodiscard]] absl::Status SetRandomSerial(X509* cert);
[[nodiscard]] absl::Status SetValidity(X509* cert, absl::Time not_before, absl::Time not_after);
[[nodiscard]] absl::StatusOr<absl::Time> NotAfter(X509* cert);

// Adds the v3 extension `nid` = `value` in OpenSSL's config syntax ("critical,CA:TRUE"), with
// `issuer` as the source of authorityKeyIdentifier. `value` must not hold untrusted text that
// could add items (a ',' in a name).
[[nodiscard]] absl::Status AddExtension(X509* cert, X509* issuer, int nid,
                                        const std::string& value);
[[nodiscard]] absl::Status AddCommonName(X509_NAME* name, const std::string& cn);

}  // namespace abox::net
