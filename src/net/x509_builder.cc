#include "src/net/x509_builder.h"

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509v3.h>

#include <ctime>

#include "absl/cleanup/cleanup.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace abox::net {
namespace {

struct BioFree {
  void operator()(BIO* bio) const { BIO_free(bio); }
};
using BioPtr = std::unique_ptr<BIO, BioFree>;

}  // namespace

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

absl::StatusOr<std::string> CertificateToPem(X509* cert) {
  BioPtr bio(BIO_new(BIO_s_mem()));
  if (!bio || PEM_write_bio_X509(bio.get(), cert) != 1) {
    return OpenSslError("PEM_write_bio_X509");
  }
  char* data = nullptr;
  long len = BIO_get_mem_data(bio.get(), &data);  // NOLINT(google-runtime-int)
  return std::string(data, static_cast<size_t>(len));
}

absl::StatusOr<std::string> PrivateKeyToPem(EVP_PKEY* key) {
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

}  // namespace abox::net
