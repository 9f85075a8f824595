#include "src/net/intercept_ca.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <openssl/bio.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <system_error>
#include <utility>

#include "absl/cleanup/cleanup.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "src/base/io.h"
#include "src/base/status_macros.h"
#include "src/net/host_name.h"

namespace abox::net {
namespace {

// Both files are small PEM; anything larger is not ours.
constexpr size_t kMaxCaFileSize = size_t{64} * 1024;
constexpr char kInstallCaName[] = "abox local interception CA";
constexpr char kConstrainedCaName[] = "abox sandbox interception CA";
constexpr size_t kMaxPermittedDomains = 256;

struct BioFree {
  void operator()(BIO* bio) const { BIO_free(bio); }
};
using BioPtr = std::unique_ptr<BIO, BioFree>;

absl::Status Damaged(const std::string& path, const std::string& dir, absl::string_view why) {
  ERR_clear_error();
  return absl::FailedPreconditionError(absl::StrFormat(
      "%s is damaged (%s). abox does not replace it on its own: running sandboxes trust this "
      "CA. Restore it from a backup, or remove %s (rm -r %s) to make a new CA and recreate the "
      "sandboxes made before",
      path, why, dir, dir));
}

// "<prefix> (<hostname>)", the host name cut to printable ASCII and to fit the 64-character
// limit of a CN.
std::string CaCommonName(absl::string_view prefix) {
  char host[256] = {};
  if (::gethostname(host, sizeof(host) - 1) != 0) {
    host[0] = '\0';
  }
  std::string clean;
  for (const char* p = host; *p != '\0'; ++p) {
    clean.push_back(*p > 0x20 && *p < 0x7f ? *p : '?');
  }
  size_t room = kMaxCommonNameLength - prefix.size() - 3;
  return absl::StrCat(prefix, " (", clean.substr(0, room), ")");
}

// A self-signed CA certificate for `key`; `name_constraints` (OpenSSL config syntax) when not
// empty.
absl::StatusOr<X509Ptr> MakeCaCertificate(EVP_PKEY* key, absl::Time now,
                                          absl::string_view cn_prefix,
                                          const std::string& name_constraints) {
  X509Ptr cert(X509_new());
  if (!cert || X509_set_version(cert.get(), 2) != 1) {
    return OpenSslError("X509_new");
  }
  ABOX_RETURN_IF_ERROR(SetRandomSerial(cert.get()));
  ABOX_RETURN_IF_ERROR(
      SetValidity(cert.get(), now - kCertBackdate, now - kCertBackdate + kInterceptCaValidity));
  ABOX_RETURN_IF_ERROR(AddCommonName(X509_get_subject_name(cert.get()), CaCommonName(cn_prefix)));
  if (X509_set_issuer_name(cert.get(), X509_get_subject_name(cert.get())) != 1 ||
      X509_set_pubkey(cert.get(), key) != 1) {
    return OpenSslError("X509_set_pubkey");
  }
  // pathlen:0: this CA signs leaves only, never another CA.
  ABOX_RETURN_IF_ERROR(
      AddExtension(cert.get(), cert.get(), NID_basic_constraints, "critical,CA:TRUE,pathlen:0"));
  ABOX_RETURN_IF_ERROR(
      AddExtension(cert.get(), cert.get(), NID_key_usage, "critical,keyCertSign,cRLSign"));
  ABOX_RETURN_IF_ERROR(AddExtension(cert.get(), cert.get(), NID_subject_key_identifier, "hash"));
  if (!name_constraints.empty()) {
    ABOX_RETURN_IF_ERROR(
        AddExtension(cert.get(), cert.get(), NID_name_constraints, name_constraints));
  }
  if (X509_sign(cert.get(), key, EVP_sha256()) == 0) {
    return OpenSslError("X509_sign");
  }
  return cert;
}

// Opens `path` without following a symlink and checks it is a regular file of this user with
// none of `forbidden` mode bits. NotFound when absent; FailedPrecondition, naming the command to
// run, otherwise.
absl::StatusOr<std::string> ReadCaFile(const std::string& path, mode_t forbidden,
                                       absl::string_view chmod) {
  base::UniqueFd fd(::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  if (!fd) {
    if (errno == ELOOP) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "%s is a symlink: abox reads its CA only from a regular file it wrote. Replace the "
          "link with the file itself (cp --remove-destination \"$(readlink -f %s)\" %s)",
          path, path, path));
    }
    return base::ErrnoError(absl::StrCat("open(", path, ")"));
  }
  struct stat st = {};
  if (::fstat(fd.get(), &st) != 0) {
    return base::ErrnoError(absl::StrCat("fstat(", path, ")"));
  }
  if (!S_ISREG(st.st_mode)) {
    return absl::FailedPreconditionError(absl::StrCat(path, " is not a regular file"));
  }
  if (st.st_uid != ::geteuid()) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "%s is owned by uid %d, not by this user (uid %d): abox trusts only its own CA files. "
        "Fix the owner (chown %d %s)",
        path, st.st_uid, ::geteuid(), ::geteuid(), path));
  }
  if ((st.st_mode & forbidden) != 0) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "%s has mode %04o: other users could read or change what every sandbox trusts. "
        "Restrict it (chmod %s %s), and if someone else may have read the key, remove the "
        "directory to make a new CA",
        path, st.st_mode & 07777, chmod, path));
  }
  auto data = base::ReadAllFd(fd.get(), kMaxCaFileSize);
  if (!data.ok()) {
    return base::Annotate(data.status(), absl::StrCat("reading ", path));
  }
  return data;
}

// Makes `dir` 0700 when absent; refuses a symlink, someone else's directory or one open to
// group/other.
absl::Status EnsurePrivateDirectory(const std::string& dir) {
  struct stat st = {};
  if (::lstat(dir.c_str(), &st) != 0) {
    if (errno != ENOENT) {
      return base::ErrnoError(absl::StrCat("lstat(", dir, ")"));
    }
    std::filesystem::path parent = std::filesystem::path(dir).parent_path();
    std::error_code ec;
    if (!parent.empty()) {
      std::filesystem::create_directories(parent, ec);
    }
    if (ec) {
      return absl::InternalError(
          absl::StrCat("create_directories(", parent.string(), "): ", ec.message()));
    }
    if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
      return base::ErrnoError(absl::StrCat("mkdir(", dir, ")"));
    }
    if (::lstat(dir.c_str(), &st) != 0) {
      return base::ErrnoError(absl::StrCat("lstat(", dir, ")"));
    }
  }
  if (S_ISLNK(st.st_mode)) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "%s is a symlink: abox keeps its CA key only in a real directory. Remove the link "
        "(rm %s) or move the directory it points to there",
        dir, dir));
  }
  if (!S_ISDIR(st.st_mode)) {
    return absl::FailedPreconditionError(absl::StrCat(dir, " is not a directory"));
  }
  if (st.st_uid != ::geteuid()) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "%s is owned by uid %d, not by this user (uid %d). Fix the owner (chown %d %s)", dir,
        st.st_uid, ::geteuid(), ::geteuid(), dir));
  }
  if ((st.st_mode & 077) != 0) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "%s has mode %04o: other users could reach the CA key. Restrict it (chmod 700 %s)", dir,
        st.st_mode & 07777, dir));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::string> NormalizeCertificateHost(absl::string_view host) {
  std::string literal(host);
  unsigned char addr[16];
  if (::inet_pton(AF_INET, literal.c_str(), addr) == 1 ||
      ::inet_pton(AF_INET6, literal.c_str(), addr) == 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("no interception certificate for ", QuoteForLog(host),
                     ": it is an IP address, and secrets are bound to host names only"));
  }
  auto normalized = NormalizeHostName(host);
  if (!normalized.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("no interception certificate for ",
                                                   QuoteForLog(host), ": ",
                                                   normalized.status().message()));
  }
  return normalized;
}

InterceptCa::InterceptCa(X509Ptr cert, EvpPkeyPtr key, EvpPkeyPtr leaf_key, std::string cert_pem,
                         absl::Time not_after, std::vector<std::string> permitted_domains)
    : cert_(std::move(cert)),
      key_(std::move(key)),
      leaf_key_(std::move(leaf_key)),
      cert_pem_(std::move(cert_pem)),
      not_after_(not_after),
      permitted_domains_(std::move(permitted_domains)) {}

absl::StatusOr<std::unique_ptr<InterceptCa>> InterceptCa::Finish(
    X509Ptr cert, EvpPkeyPtr key, std::vector<std::string> permitted_domains) {
  ABOX_ASSIGN_OR_RETURN(EvpPkeyPtr leaf_key, NewP256Key());
  ABOX_ASSIGN_OR_RETURN(absl::Time not_after, NotAfter(cert.get()));
  ABOX_ASSIGN_OR_RETURN(std::string pem, CertificateToPem(cert.get()));
  return std::unique_ptr<InterceptCa>(new InterceptCa(std::move(cert), std::move(key),
                                                      std::move(leaf_key), std::move(pem),
                                                      not_after, std::move(permitted_domains)));
}

absl::StatusOr<std::unique_ptr<InterceptCa>> InterceptCa::LoadOrCreate(const std::string& dir,
                                                                       absl::Time now) {
  ABOX_RETURN_IF_ERROR(EnsurePrivateDirectory(dir));
  const std::string key_path = (std::filesystem::path(dir) / kInterceptCaKeyFile).string();
  const std::string cert_path = (std::filesystem::path(dir) / kInterceptCaCertFile).string();
  auto key_pem = ReadCaFile(key_path, 077, "600");
  auto cert_pem = ReadCaFile(cert_path, 022, "644");
  absl::Cleanup wipe = [&key_pem] {
    if (key_pem.ok()) {
      OPENSSL_cleanse(key_pem->data(), key_pem->size());
    }
  };
  const bool key_absent = absl::IsNotFound(key_pem.status());
  const bool cert_absent = absl::IsNotFound(cert_pem.status());

  if (key_absent && cert_absent) {
    ABOX_ASSIGN_OR_RETURN(EvpPkeyPtr key, NewP256Key());
    ABOX_ASSIGN_OR_RETURN(X509Ptr cert, MakeCaCertificate(key.get(), now, kInstallCaName, ""));
    ABOX_ASSIGN_OR_RETURN(std::string new_key_pem, PrivateKeyToPem(key.get()));
    absl::Status written = base::WriteFileAtomic(key_path, new_key_pem, 0600);
    OPENSSL_cleanse(new_key_pem.data(), new_key_pem.size());
    ABOX_RETURN_IF_ERROR(written);
    ABOX_ASSIGN_OR_RETURN(std::string pem, CertificateToPem(cert.get()));
    ABOX_RETURN_IF_ERROR(base::WriteFileAtomic(cert_path, pem, 0644));
    return Finish(std::move(cert), std::move(key), {});
  }
  if (key_absent || cert_absent) {
    ABOX_RETURN_IF_ERROR(key_absent ? cert_pem.status() : key_pem.status());
    const std::string& missing = key_absent ? key_path : cert_path;
    return Damaged(missing, dir,
                   absl::StrCat("missing, while ", key_absent ? cert_path : key_path,
                                " exists: an interrupted first start or a partial copy"));
  }
  ABOX_RETURN_IF_ERROR(key_pem.status());
  ABOX_RETURN_IF_ERROR(cert_pem.status());

  BioPtr key_bio(BIO_new_mem_buf(key_pem->data(), static_cast<int>(key_pem->size())));
  EvpPkeyPtr key(PEM_read_bio_PrivateKey(key_bio.get(), nullptr, nullptr, nullptr));
  if (!key) {
    return Damaged(key_path, dir, "not a PEM private key");
  }
  if (!IsP256(key.get())) {
    return Damaged(key_path, dir, "not an ECDSA P-256 key");
  }
  BioPtr cert_bio(BIO_new_mem_buf(cert_pem->data(), static_cast<int>(cert_pem->size())));
  X509Ptr cert(PEM_read_bio_X509(cert_bio.get(), nullptr, nullptr, nullptr));
  if (!cert) {
    return Damaged(cert_path, dir, "not a PEM certificate");
  }
  if (X509_check_private_key(cert.get(), key.get()) != 1) {
    return Damaged(cert_path, dir, absl::StrCat("its public key is not the one of ", key_path));
  }
  if (X509_check_ca(cert.get()) != 1 || X509_verify(cert.get(), key.get()) != 1) {
    return Damaged(cert_path, dir, "not a self-signed CA certificate");
  }
  ABOX_ASSIGN_OR_RETURN(absl::Time not_after, NotAfter(cert.get()));
  if (not_after <= now + kLeafValidity) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "%s expires on %s: remove %s (rm -r %s) to make a new CA, and recreate the sandboxes "
        "made before",
        cert_path, absl::FormatTime(not_after), dir, dir));
  }
  return Finish(std::move(cert), std::move(key), {});
}

absl::StatusOr<std::unique_ptr<InterceptCa>> InterceptCa::CreateConstrained(
    const std::vector<std::string>& domains, absl::Time now) {
  if (domains.empty() || domains.size() > kMaxPermittedDomains) {
    return absl::InvalidArgumentError(absl::StrCat("a constrained interception CA needs 1 to ",
                                                   kMaxPermittedDomains, " domains, not ",
                                                   domains.size()));
  }
  std::vector<std::string> permitted;
  // Names are LDH only (NormalizeCertificateHost), so none can add an item to this list.
  std::string constraints = "critical";
  for (const std::string& domain : domains) {
    ABOX_ASSIGN_OR_RETURN(std::string name, NormalizeCertificateHost(domain));
    if (std::find(permitted.begin(), permitted.end(), name) == permitted.end()) {
      absl::StrAppend(&constraints, ",permitted;DNS:", name);
      permitted.push_back(std::move(name));
    }
  }
  // No iPAddress subtree would leave every IP SAN allowed (RFC 5280 4.2.1.10): exclude them all.
  absl::StrAppend(&constraints, ",excluded;IP:0.0.0.0/0.0.0.0,excluded;IP:::/::");
  ABOX_ASSIGN_OR_RETURN(EvpPkeyPtr key, NewP256Key());
  ABOX_ASSIGN_OR_RETURN(X509Ptr cert,
                        MakeCaCertificate(key.get(), now, kConstrainedCaName, constraints));
  return Finish(std::move(cert), std::move(key), std::move(permitted));
}

absl::StatusOr<InterceptLeaf> InterceptCa::IssueLeaf(absl::string_view host, absl::Time now) const {
  ABOX_ASSIGN_OR_RETURN(std::string name, NormalizeCertificateHost(host));
  if (!permitted_domains_.empty() &&
      std::none_of(permitted_domains_.begin(), permitted_domains_.end(),
                   [&](const std::string& domain) { return IsSubdomainOrSelf(name, domain); })) {
    return absl::InvalidArgumentError(absl::StrCat("no interception certificate for ", name,
                                                   ": this sandbox's CA is limited to ",
                                                   absl::StrJoin(permitted_domains_, ", ")));
  }
  InterceptLeaf leaf;
  leaf.host = std::move(name);
  leaf.not_after = std::min(now + kLeafValidity, not_after_);

  X509Ptr cert(X509_new());
  if (!cert || X509_set_version(cert.get(), 2) != 1) {
    return OpenSslError("X509_new");
  }
  ABOX_RETURN_IF_ERROR(SetRandomSerial(cert.get()));
  ABOX_RETURN_IF_ERROR(SetValidity(cert.get(), now - kCertBackdate, leaf.not_after));
  // The name is in the SAN, which clients check; a CN too when it fits (64 characters), else an
  // empty subject and a critical SAN (RFC 5280 4.2.1.6).
  const bool with_cn = leaf.host.size() <= kMaxCommonNameLength;
  if (with_cn) {
    ABOX_RETURN_IF_ERROR(AddCommonName(X509_get_subject_name(cert.get()), leaf.host));
  }
  if (X509_set_issuer_name(cert.get(), X509_get_subject_name(cert_.get())) != 1 ||
      X509_set_pubkey(cert.get(), leaf_key_.get()) != 1) {
    return OpenSslError("X509_set_pubkey");
  }
  ABOX_RETURN_IF_ERROR(
      AddExtension(cert.get(), cert_.get(), NID_basic_constraints, "critical,CA:FALSE"));
  ABOX_RETURN_IF_ERROR(
      AddExtension(cert.get(), cert_.get(), NID_key_usage, "critical,digitalSignature"));
  ABOX_RETURN_IF_ERROR(AddExtension(cert.get(), cert_.get(), NID_ext_key_usage, "serverAuth"));
  // The host is LDH only (checked above), so it cannot inject another name into this string.
  ABOX_RETURN_IF_ERROR(AddExtension(cert.get(), cert_.get(), NID_subject_alt_name,
                                    absl::StrCat(with_cn ? "" : "critical,", "DNS:", leaf.host)));
  ABOX_RETURN_IF_ERROR(
      AddExtension(cert.get(), cert_.get(), NID_authority_key_identifier, "keyid:always"));
  if (X509_sign(cert.get(), key_.get(), EVP_sha256()) == 0) {
    return OpenSslError("X509_sign");
  }
  leaf.cert = std::move(cert);
  EVP_PKEY_up_ref(leaf_key_.get());
  leaf.key.reset(leaf_key_.get());
  X509_up_ref(cert_.get());
  leaf.issuer.reset(cert_.get());
  return leaf;
}

}  // namespace abox::net
