#include "src/net/intercept_ca.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <ctime>
#include <filesystem>
#include <system_error>
#include <utility>

#include "absl/cleanup/cleanup.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "src/base/io.h"
#include "src/base/status_macros.h"
#include "src/net/host_name.h"

namespace abox::net {
namespace {

// Both files are small PEM; anything larger is not ours.
constexpr size_t kMaxCaFileSize = 64 * 1024;
// RFC 5280 ub-common-name.
constexpr size_t kMaxCommonName = 64;
constexpr char kCaNamePrefix[] = "abox local interception CA (";

struct BioFree {
  void operator()(BIO* bio) const { BIO_free(bio); }
};
using BioPtr = std::unique_ptr<BIO, BioFree>;

// The first queued OpenSSL error (the queue is cleared), as "what: reason".
absl::Status OpenSslError(absl::string_view what) {
  unsigned long code = ERR_get_error();  // NOLINT(google-runtime-int): OpenSSL's type
  char reason[256] = "unknown error";
  if (code != 0) {
    ERR_error_string_n(code, reason, sizeof(reason));
  }
  ERR_clear_error();
  return absl::InternalError(absl::StrCat(what, ": ", reason));
}

absl::Status Damaged(const std::string& path, const std::string& dir, absl::string_view why) {
  ERR_clear_error();
  return absl::FailedPreconditionError(absl::StrFormat(
      "%s is damaged (%s). abox does not replace it on its own: running sandboxes trust this "
      "CA. Restore it from a backup, or remove %s (rm -r %s) to make a new CA and recreate the "
      "sandboxes made before",
      path, why, dir, dir));
}

absl::StatusOr<std::string> ToPem(X509* cert) {
  BioPtr bio(BIO_new(BIO_s_mem()));
  if (!bio || PEM_write_bio_X509(bio.get(), cert) != 1) {
    return OpenSslError("PEM_write_bio_X509");
  }
  char* data = nullptr;
  long len = BIO_get_mem_data(bio.get(), &data);  // NOLINT(google-runtime-int)
  return std::string(data, static_cast<size_t>(len));
}

absl::StatusOr<std::string> KeyToPem(EVP_PKEY* key) {
  BioPtr bio(BIO_new(BIO_s_mem()));
  if (!bio ||
      PEM_write_bio_PrivateKey(bio.get(), key, nullptr, nullptr, 0, nullptr, nullptr) != 1) {
    return OpenSslError("PEM_write_bio_PrivateKey");
  }
  char* data = nullptr;
  long len = BIO_get_mem_data(bio.get(), &data);  // NOLINT(google-runtime-int)
  std::string pem(data, static_cast<size_t>(len));
  OPENSSL_cleanse(data, static_cast<size_t>(len));
  return pem;
}

absl::StatusOr<EvpPkeyPtr> NewP256Key() {
  EvpPkeyPtr key(EVP_EC_gen("P-256"));
  if (!key) {
    return OpenSslError("EVP_EC_gen(P-256)");
  }
  return key;
}

bool IsP256(EVP_PKEY* key) {
  char group[64] = {};
  size_t len = 0;
  return EVP_PKEY_is_a(key, "EC") == 1 &&
         EVP_PKEY_get_group_name(key, group, sizeof(group), &len) == 1 &&
         absl::string_view(group, len) == "prime256v1";
}

absl::Status SetRandomSerial(X509* cert) {
  unsigned char bytes[16];
  if (RAND_bytes(bytes, sizeof(bytes)) != 1) {
    return OpenSslError("RAND_bytes");
  }
  bytes[0] |= 0x01;  // never zero (RFC 5280: positive)
  BIGNUM* bn = BN_bin2bn(bytes, sizeof(bytes), nullptr);
  absl::Cleanup free_bn = [bn] { BN_free(bn); };
  if (bn == nullptr || BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(cert)) == nullptr) {
    return OpenSslError("serial number");
  }
  return absl::OkStatus();
}

absl::Status SetValidity(X509* cert, absl::Time not_before, absl::Time not_after) {
  if (ASN1_TIME_set(X509_getm_notBefore(cert), absl::ToTimeT(not_before)) == nullptr ||
      ASN1_TIME_set(X509_getm_notAfter(cert), absl::ToTimeT(not_after)) == nullptr) {
    return OpenSslError("ASN1_TIME_set");
  }
  return absl::OkStatus();
}

absl::StatusOr<absl::Time> NotAfter(X509* cert) {
  struct tm tm = {};
  if (ASN1_TIME_to_tm(X509_get0_notAfter(cert), &tm) != 1) {
    return OpenSslError("ASN1_TIME_to_tm");
  }
  return absl::FromTM(tm, absl::UTCTimeZone());
}

// Adds the v3 extension `nid` = `value` (OpenSSL's config syntax), with `issuer` for
// authorityKeyIdentifier.
absl::Status AddExtension(X509* cert, X509* issuer, int nid, const std::string& value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_nconf_nid(nullptr, &ctx, nid, value.c_str());
  if (ext == nullptr) {
    return OpenSslError(absl::StrCat("extension ", OBJ_nid2sn(nid), "=", value));
  }
  int added = X509_add_ext(cert, ext, -1);
  X509_EXTENSION_free(ext);
  if (added != 1) {
    return OpenSslError("X509_add_ext");
  }
  return absl::OkStatus();
}

absl::Status AddCommonName(X509_NAME* name, const std::string& cn) {
  if (X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8,
                                 reinterpret_cast<const unsigned char*>(cn.data()),
                                 static_cast<int>(cn.size()), -1, 0) != 1) {
    return OpenSslError("X509_NAME_add_entry_by_txt(CN)");
  }
  return absl::OkStatus();
}

// "abox local interception CA (<hostname>)", the host name cut to printable ASCII and to fit
// the 64-character limit of a CN.
std::string CaCommonName() {
  char host[256] = {};
  if (::gethostname(host, sizeof(host) - 1) != 0) {
    host[0] = '\0';
  }
  std::string clean;
  for (const char* p = host; *p != '\0'; ++p) {
    clean.push_back(*p > 0x20 && *p < 0x7f ? *p : '?');
  }
  size_t room = kMaxCommonName - (sizeof(kCaNamePrefix) - 1) - 1;
  return absl::StrCat(kCaNamePrefix, clean.substr(0, room), ")");
}

absl::StatusOr<X509Ptr> MakeCaCertificate(EVP_PKEY* key, absl::Time now) {
  X509Ptr cert(X509_new());
  if (!cert || X509_set_version(cert.get(), 2) != 1) {
    return OpenSslError("X509_new");
  }
  ABOX_RETURN_IF_ERROR(SetRandomSerial(cert.get()));
  ABOX_RETURN_IF_ERROR(
      SetValidity(cert.get(), now - kCertBackdate, now - kCertBackdate + kInterceptCaValidity));
  ABOX_RETURN_IF_ERROR(AddCommonName(X509_get_subject_name(cert.get()), CaCommonName()));
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
        "%s has mode %04o: other users could read or change the key every sandbox trusts. "
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

absl::StatusOr<std::string> CertificateToPem(X509* cert) { return ToPem(cert); }

InterceptCa::InterceptCa(X509Ptr cert, EvpPkeyPtr key, EvpPkeyPtr leaf_key, std::string cert_pem,
                         absl::Time not_after)
    : cert_(std::move(cert)),
      key_(std::move(key)),
      leaf_key_(std::move(leaf_key)),
      cert_pem_(std::move(cert_pem)),
      not_after_(not_after) {}

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
  ABOX_ASSIGN_OR_RETURN(EvpPkeyPtr leaf_key, NewP256Key());

  if (key_absent && cert_absent) {
    ABOX_ASSIGN_OR_RETURN(EvpPkeyPtr key, NewP256Key());
    ABOX_ASSIGN_OR_RETURN(X509Ptr cert, MakeCaCertificate(key.get(), now));
    ABOX_ASSIGN_OR_RETURN(std::string new_key_pem, KeyToPem(key.get()));
    absl::Status written = base::WriteFileAtomic(key_path, new_key_pem, 0600);
    OPENSSL_cleanse(new_key_pem.data(), new_key_pem.size());
    ABOX_RETURN_IF_ERROR(written);
    ABOX_ASSIGN_OR_RETURN(std::string pem, ToPem(cert.get()));
    ABOX_RETURN_IF_ERROR(base::WriteFileAtomic(cert_path, pem, 0644));
    ABOX_ASSIGN_OR_RETURN(absl::Time not_after, NotAfter(cert.get()));
    return std::unique_ptr<InterceptCa>(
        new InterceptCa(std::move(cert), std::move(key), std::move(leaf_key), pem, not_after));
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
  ABOX_ASSIGN_OR_RETURN(std::string pem, ToPem(cert.get()));
  return std::unique_ptr<InterceptCa>(
      new InterceptCa(std::move(cert), std::move(key), std::move(leaf_key), pem, not_after));
}

absl::StatusOr<InterceptLeaf> InterceptCa::IssueLeaf(absl::string_view host, absl::Time now) const {
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
  InterceptLeaf leaf;
  leaf.host = *std::move(normalized);
  leaf.not_after = std::min(now + kLeafValidity, not_after_);

  X509Ptr cert(X509_new());
  if (!cert || X509_set_version(cert.get(), 2) != 1) {
    return OpenSslError("X509_new");
  }
  ABOX_RETURN_IF_ERROR(SetRandomSerial(cert.get()));
  ABOX_RETURN_IF_ERROR(SetValidity(cert.get(), now - kCertBackdate, leaf.not_after));
  // The name is in the SAN, which clients check; a CN too when it fits (64 characters), else an
  // empty subject and a critical SAN (RFC 5280 4.2.1.6).
  const bool with_cn = leaf.host.size() <= kMaxCommonName;
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

namespace {

// ALPN: http/1.1 when offered, else none (the client then speaks HTTP/1.1 or gives up).
int SelectHttp11(SSL* /*ssl*/, const unsigned char** out, unsigned char* out_len,
                 const unsigned char* in, unsigned int in_len, void* /*arg*/) {
  static const unsigned char kHttp11[] = {8, 'h', 't', 't', 'p', '/', '1', '.', '1'};
  unsigned char* selected = nullptr;
  if (SSL_select_next_proto(&selected, out_len, kHttp11, sizeof(kHttp11), in, in_len) ==
      OPENSSL_NPN_NEGOTIATED) {
    *out = selected;
    return SSL_TLSEXT_ERR_OK;
  }
  return SSL_TLSEXT_ERR_NOACK;
}

}  // namespace

absl::StatusOr<SslCtxPtr> MakeInterceptServerContext(const InterceptLeaf& leaf) {
  SslCtxPtr ctx(SSL_CTX_new(TLS_server_method()));
  if (!ctx) {
    return OpenSslError("SSL_CTX_new");
  }
  // TLS 1.0/1.1 are obsolete (RFC 8996); renegotiation could change what the proxy checked.
  if (SSL_CTX_set_min_proto_version(ctx.get(), TLS1_2_VERSION) != 1) {
    return OpenSslError("SSL_CTX_set_min_proto_version");
  }
  SSL_CTX_set_options(ctx.get(), SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE);
  if (SSL_CTX_use_certificate(ctx.get(), leaf.cert.get()) != 1 ||
      SSL_CTX_use_PrivateKey(ctx.get(), leaf.key.get()) != 1 ||
      SSL_CTX_check_private_key(ctx.get()) != 1) {
    return OpenSslError(absl::StrCat("server certificate for ", leaf.host));
  }
  SSL_CTX_set_alpn_select_cb(ctx.get(), SelectHttp11, nullptr);
  return ctx;
}

}  // namespace abox::net
