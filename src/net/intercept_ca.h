// The certificate authority the egress proxy terminates TLS with, for the hosts a secret is
// bound to (issue 15), and the leaf certificates it issues.
//
// One CA per install, kept under `$ABOX_HOME/ca/` (ca.key, ca.crt) and installed in every
// guest's trust store. Whoever holds its key can impersonate any host to every abox guest,
// so it is created 0600 in a 0700 directory, written atomically, and refused (never
// repaired) when it is readable by others, a symlink, or damaged: guests already trust the
// certificate, so silently making a new one would break them, and silently accepting a loose
// key would hide a compromise.
//
// Leaves: ECDSA P-256, SAN dNSName = the host only, serverAuth, 7 days. All leaves of one
// InterceptCa share one key pair, made in memory when the CA is loaded (never written): a leaf
// then costs one signature instead of a key generation, and the key is no more exposed than
// the CA key that sits beside it in aboxd's memory.
//
// The install CA has pathlen:0 and no nameConstraints: its key can vouch for any name to a
// guest that trusts it. CreateConstrained makes the alternative the issue welcomes: a CA for one
// sandbox, held in memory only, whose nameConstraints permit just the secret's bound domains, so
// its key is useless for any other name. It is a root of its own, not an intermediate below the
// install CA: a guest trusting the install CA would accept anything that CA signs anyway, and
// pathlen:0 forbids intermediates.
//
// Thread safety: an InterceptCa is immutable once made; IssueLeaf may be called from
// any thread. Trust boundary: `host` comes from the guest (SNI) via the proxy's checks, and is
// validated again here; the files under `dir` belong to the user.
#pragma once

#include <openssl/x509.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "src/net/x509_builder.h"

namespace abox::net {

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

// `host` as a leaf names it (NormalizeHostName), or InvalidArgument "no interception
// certificate for <host>: <why>" for an IP literal or what NormalizeHostName refuses.
[[nodiscard]] absl::StatusOr<std::string> NormalizeCertificateHost(absl::string_view host);

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

  // A CA kept in memory only whose certificate carries critical nameConstraints: permitted
  // dNSName subtrees `domains` (each permits the name and every name below it, as RFC 5280
  // defines a DNS subtree) and no IP address at all. For one sandbox whose bound hosts are
  // known; the caller installs its certificate in that guest instead of the install CA's.
  // InvalidArgument for an empty list, more than 256 domains, or a domain IssueLeaf would
  // refuse as a host.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<InterceptCa>> CreateConstrained(
      const std::vector<std::string>& domains, absl::Time now = absl::Now());

  InterceptCa(const InterceptCa&) = delete;
  InterceptCa& operator=(const InterceptCa&) = delete;

  // The CA certificate in PEM, for a guest's trust store.
  [[nodiscard]] const std::string& CertificatePem() const { return cert_pem_; }
  [[nodiscard]] X509* certificate() const { return cert_.get(); }
  [[nodiscard]] absl::Time not_after() const { return not_after_; }
  // The permitted domains of a constrained CA (normalised); empty for the install CA.
  [[nodiscard]] const std::vector<std::string>& permitted_domains() const {
    return permitted_domains_;
  }

  // The CA's private key, for tests that forge what a thief of the key could sign.
  [[nodiscard]] EVP_PKEY* key_for_testing() const { return key_.get(); }

  // A leaf for `host` valid from now - kCertBackdate to now + kLeafValidity (never past the
  // CA's own notAfter). InvalidArgument when `host` is not a DNS name (empty, an IP literal,
  // > 253 characters, a label that is not letters, digits and inner hyphens), or, for a
  // constrained CA, outside its permitted domains.
  [[nodiscard]] absl::StatusOr<InterceptLeaf> IssueLeaf(absl::string_view host,
                                                        absl::Time now) const;

 private:
  InterceptCa(X509Ptr cert, EvpPkeyPtr key, EvpPkeyPtr leaf_key, std::string cert_pem,
              absl::Time not_after, std::vector<std::string> permitted_domains);
  // The rest of construction, which can fail: the leaf key, not_after, the PEM.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<InterceptCa>> Finish(
      X509Ptr cert, EvpPkeyPtr key, std::vector<std::string> permitted_domains);

  X509Ptr cert_;
  EvpPkeyPtr key_;
  EvpPkeyPtr leaf_key_;
  std::string cert_pem_;
  absl::Time not_after_;
  std::vector<std::string> permitted_domains_;
};

}  // namespace abox::net
