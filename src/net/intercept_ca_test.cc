#include "src/net/intercept_ca.h"

#include <openssl/x509v3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "src/base/io.h"
#include "src/net/x509_builder.h"

namespace abox::net {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

// 2027-01-01T00:00:00Z: every date below is checked against this.
const absl::Time kNow = absl::FromUnixSeconds(1798761600);

std::string FreshDir(const std::string& name) {
  auto dir = std::filesystem::path(::testing::TempDir()) /
             absl::StrCat("intercept_ca_test.", ::getpid()) / name;  // ctest runs tests in parallel
  std::filesystem::remove_all(dir);
  return (dir / "ca").string();
}

mode_t ModeOf(const std::string& path) {
  struct stat st = {};
  EXPECT_EQ(::lstat(path.c_str(), &st), 0) << path;
  return st.st_mode & 07777;
}

absl::Time TimeOf(const ASN1_TIME* t) {
  struct tm tm = {};
  EXPECT_EQ(ASN1_TIME_to_tm(t, &tm), 1);
  return absl::FromTM(tm, absl::UTCTimeZone());
}

bool ExtensionIsCritical(X509* cert, int nid) {
  int index = X509_get_ext_by_NID(cert, nid, -1);
  EXPECT_GE(index, 0) << OBJ_nid2sn(nid);
  return index >= 0 && X509_EXTENSION_get_critical(X509_get_ext(cert, index)) == 1;
}

std::string CommonName(X509* cert) {
  char cn[256] = {};
  int len = X509_NAME_get_text_by_NID(X509_get_subject_name(cert), NID_commonName, cn, sizeof(cn));
  return len < 0 ? "" : std::string(cn, static_cast<size_t>(len));
}

// X509_verify_cert of `leaf` against a store holding only `ca`, for `host` (any when empty), at
// `at`: X509_V_OK or the error.
int VerifyLeaf(X509* ca, X509* leaf, const std::string& host, absl::Time at) {
  X509_STORE* store = X509_STORE_new();
  X509_STORE_add_cert(store, ca);
  X509_STORE_CTX* ctx = X509_STORE_CTX_new();
  X509_STORE_CTX_init(ctx, store, leaf, nullptr);
  X509_STORE_CTX_set_purpose(ctx, X509_PURPOSE_SSL_SERVER);
  X509_VERIFY_PARAM* param = X509_STORE_CTX_get0_param(ctx);
  if (!host.empty()) {
    X509_VERIFY_PARAM_set1_host(param, host.c_str(), host.size());
  }
  X509_VERIFY_PARAM_set_time(param, absl::ToTimeT(at));
  int ok = X509_verify_cert(ctx);
  int error = X509_STORE_CTX_get_error(ctx);
  X509_STORE_CTX_free(ctx);
  X509_STORE_free(store);
  return ok == 1 ? X509_V_OK : (error == X509_V_OK ? -1 : error);
}

TEST(InterceptCaTest, CreatesAPrivateCaWithTheRequiredExtensions) {
  std::string dir = FreshDir("create");
  auto ca = InterceptCa::LoadOrCreate(dir, kNow);
  ASSERT_TRUE(ca.ok()) << ca.status();
  EXPECT_EQ(ModeOf(dir), 0700u);
  EXPECT_EQ(ModeOf(dir + "/ca.key"), 0600u);
  EXPECT_EQ(ModeOf(dir + "/ca.crt"), 0644u);

  X509* cert = (*ca)->certificate();
  EXPECT_THAT(CommonName(cert), StartsWith("abox local interception CA ("));
  EXPECT_LE(CommonName(cert).size(), 64u);
  EXPECT_EQ(X509_check_ca(cert), 1);
  auto* bc = static_cast<BASIC_CONSTRAINTS*>(
      X509_get_ext_d2i(cert, NID_basic_constraints, nullptr, nullptr));
  ASSERT_NE(bc, nullptr);
  EXPECT_TRUE(bc->ca);
  ASSERT_NE(bc->pathlen, nullptr);
  EXPECT_EQ(ASN1_INTEGER_get(bc->pathlen), 0);
  BASIC_CONSTRAINTS_free(bc);
  EXPECT_TRUE(ExtensionIsCritical(cert, NID_basic_constraints));
  EXPECT_EQ(X509_get_key_usage(cert), static_cast<uint32_t>(KU_KEY_CERT_SIGN | KU_CRL_SIGN));
  EXPECT_TRUE(ExtensionIsCritical(cert, NID_key_usage));
  EXPECT_NE(X509_get0_subject_key_id(cert), nullptr);
  EXPECT_EQ(TimeOf(X509_get0_notBefore(cert)), kNow - absl::Hours(1));
  EXPECT_EQ(TimeOf(X509_get0_notAfter(cert)), kNow - absl::Hours(1) + absl::Hours(24 * 3650));
  BIGNUM* serial = ASN1_INTEGER_to_BN(X509_get0_serialNumber(cert), nullptr);
  EXPECT_GE(BN_num_bits(serial), 64);  // 128 random bits: below 64 once in 2^64
  BN_free(serial);
  EXPECT_THAT((*ca)->CertificatePem(), StartsWith("-----BEGIN CERTIFICATE-----"));
  EXPECT_EQ(base::ReadFile(dir + "/ca.crt").value(), (*ca)->CertificatePem());
}

TEST(InterceptCaTest, SecondCallLoadsTheSameCa) {
  std::string dir = FreshDir("reload");
  auto first = InterceptCa::LoadOrCreate(dir, kNow);
  ASSERT_TRUE(first.ok()) << first.status();
  auto second = InterceptCa::LoadOrCreate(dir, kNow + absl::Hours(24));
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ((*first)->CertificatePem(), (*second)->CertificatePem());
  // A leaf from the reloaded CA chains to the certificate guests got from the first.
  auto leaf = (*second)->IssueLeaf("api.example.test", kNow);
  ASSERT_TRUE(leaf.ok()) << leaf.status();
  EXPECT_EQ(VerifyLeaf((*first)->certificate(), leaf->cert.get(), "api.example.test", kNow),
            X509_V_OK);
  // Two installs never share a CA.
  auto other = InterceptCa::LoadOrCreate(FreshDir("reload-other"), kNow);
  ASSERT_TRUE(other.ok());
  EXPECT_NE((*other)->CertificatePem(), (*first)->CertificatePem());
}

TEST(InterceptCaTest, RefusesAKeyOthersCanRead) {
  std::string dir = FreshDir("key-mode");
  ASSERT_TRUE(InterceptCa::LoadOrCreate(dir, kNow).ok());
  ASSERT_EQ(::chmod((dir + "/ca.key").c_str(), 0644), 0);
  auto ca = InterceptCa::LoadOrCreate(dir, kNow);
  EXPECT_EQ(ca.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(ca.status().message(), HasSubstr(absl::StrCat("chmod 600 ", dir, "/ca.key")));
  EXPECT_EQ(ModeOf(dir + "/ca.key"), 0644u);  // reported, not repaired
}

TEST(InterceptCaTest, RefusesADirectoryOthersCanEnter) {
  std::string dir = FreshDir("dir-mode");
  ASSERT_TRUE(InterceptCa::LoadOrCreate(dir, kNow).ok());
  ASSERT_EQ(::chmod(dir.c_str(), 0755), 0);
  auto ca = InterceptCa::LoadOrCreate(dir, kNow);
  EXPECT_EQ(ca.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(ca.status().message(), HasSubstr(absl::StrCat("chmod 700 ", dir)));
}

TEST(InterceptCaTest, RefusesASymlinkedKey) {
  std::string dir = FreshDir("key-link");
  ASSERT_TRUE(InterceptCa::LoadOrCreate(dir, kNow).ok());
  std::string elsewhere = dir + "/../moved.key";
  std::filesystem::rename(dir + "/ca.key", elsewhere);
  std::filesystem::create_symlink(elsewhere, dir + "/ca.key");
  auto ca = InterceptCa::LoadOrCreate(dir, kNow);
  EXPECT_EQ(ca.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(ca.status().message(), HasSubstr("is a symlink"));
}

TEST(InterceptCaTest, RefusesASymlinkedDirectory) {
  std::string real = FreshDir("dir-link-real");
  ASSERT_TRUE(InterceptCa::LoadOrCreate(real, kNow).ok());
  std::string dir = FreshDir("dir-link");
  std::filesystem::create_directories(std::filesystem::path(dir).parent_path());
  std::filesystem::create_directory_symlink(real, dir);
  auto ca = InterceptCa::LoadOrCreate(dir, kNow);
  EXPECT_EQ(ca.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(ca.status().message(), HasSubstr("is a symlink"));
}

TEST(InterceptCaTest, ReportsADamagedCertificateAndLeavesItInPlace) {
  std::string dir = FreshDir("damaged");
  ASSERT_TRUE(InterceptCa::LoadOrCreate(dir, kNow).ok());
  ASSERT_TRUE(base::WriteFileAtomic(dir + "/ca.crt", "-----BEGIN CERTIFICATE-----\nxx\n").ok());
  auto ca = InterceptCa::LoadOrCreate(dir, kNow);
  EXPECT_EQ(ca.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(ca.status().message(), HasSubstr("ca.crt is damaged (not a PEM certificate)"));
  EXPECT_THAT(ca.status().message(), HasSubstr(absl::StrCat("rm -r ", dir)));
  EXPECT_EQ(base::ReadFile(dir + "/ca.crt").value(), "-----BEGIN CERTIFICATE-----\nxx\n");
}

TEST(InterceptCaTest, ReportsADamagedKey) {
  std::string dir = FreshDir("damaged-key");
  ASSERT_TRUE(InterceptCa::LoadOrCreate(dir, kNow).ok());
  ASSERT_TRUE(base::WriteFileAtomic(dir + "/ca.key", "not a key", 0600).ok());
  auto ca = InterceptCa::LoadOrCreate(dir, kNow);
  EXPECT_EQ(ca.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(ca.status().message(), HasSubstr("ca.key is damaged (not a PEM private key)"));
}

TEST(InterceptCaTest, ReportsAKeyThatIsNotTheCertificates) {
  std::string dir = FreshDir("mismatch");
  std::string other = FreshDir("mismatch-other");
  ASSERT_TRUE(InterceptCa::LoadOrCreate(dir, kNow).ok());
  ASSERT_TRUE(InterceptCa::LoadOrCreate(other, kNow).ok());
  std::filesystem::copy_file(other + "/ca.key", dir + "/ca.key",
                             std::filesystem::copy_options::overwrite_existing);
  auto ca = InterceptCa::LoadOrCreate(dir, kNow);
  EXPECT_EQ(ca.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(ca.status().message(), HasSubstr("its public key is not the one of"));
}

TEST(InterceptCaTest, ReportsAMissingCertificateInsteadOfMakingANewCa) {
  std::string dir = FreshDir("missing");
  ASSERT_TRUE(InterceptCa::LoadOrCreate(dir, kNow).ok());
  std::filesystem::remove(dir + "/ca.crt");
  auto ca = InterceptCa::LoadOrCreate(dir, kNow);
  EXPECT_EQ(ca.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(ca.status().message(), HasSubstr("ca.crt is damaged (missing"));
  EXPECT_FALSE(std::filesystem::exists(dir + "/ca.crt"));
}

class InterceptLeafTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto ca = InterceptCa::LoadOrCreate(FreshDir("leaf"), kNow);
    ASSERT_TRUE(ca.ok()) << ca.status();
    ca_ = *std::move(ca);
  }
  std::unique_ptr<InterceptCa> ca_;
};

TEST_F(InterceptLeafTest, VerifiesAgainstTheCaForItsHostOnly) {
  auto leaf = ca_->IssueLeaf("api.example.test", kNow);
  ASSERT_TRUE(leaf.ok()) << leaf.status();
  X509* ca = ca_->certificate();
  EXPECT_EQ(VerifyLeaf(ca, leaf->cert.get(), "api.example.test", kNow), X509_V_OK);
  EXPECT_EQ(VerifyLeaf(ca, leaf->cert.get(), "other.example.test", kNow),
            X509_V_ERR_HOSTNAME_MISMATCH);
  EXPECT_EQ(VerifyLeaf(ca, leaf->cert.get(), "example.test", kNow), X509_V_ERR_HOSTNAME_MISMATCH);
  EXPECT_EQ(VerifyLeaf(ca, leaf->cert.get(), "api.example.test", kNow + absl::Hours(24 * 8)),
            X509_V_ERR_CERT_HAS_EXPIRED);
  // Another install's CA does not vouch for it.
  auto other = InterceptCa::LoadOrCreate(FreshDir("leaf-other"), kNow);
  ASSERT_TRUE(other.ok());
  EXPECT_NE(VerifyLeaf((*other)->certificate(), leaf->cert.get(), "api.example.test", kNow),
            X509_V_OK);
}

TEST_F(InterceptLeafTest, IsAServerCertificateForTheHostOnly) {
  auto leaf = ca_->IssueLeaf("API.Example.test.", kNow);
  ASSERT_TRUE(leaf.ok()) << leaf.status();
  X509* cert = leaf->cert.get();
  EXPECT_EQ(leaf->host, "api.example.test");
  EXPECT_EQ(X509_check_ca(cert), 0);
  EXPECT_EQ(X509_get_extended_key_usage(cert), static_cast<uint32_t>(XKU_SSL_SERVER));
  EXPECT_EQ(X509_get_key_usage(cert), static_cast<uint32_t>(KU_DIGITAL_SIGNATURE));
  auto* bc = static_cast<BASIC_CONSTRAINTS*>(
      X509_get_ext_d2i(cert, NID_basic_constraints, nullptr, nullptr));
  ASSERT_NE(bc, nullptr);
  EXPECT_FALSE(bc->ca);
  BASIC_CONSTRAINTS_free(bc);

  auto* names =
      static_cast<GENERAL_NAMES*>(X509_get_ext_d2i(cert, NID_subject_alt_name, nullptr, nullptr));
  ASSERT_NE(names, nullptr);
  ASSERT_EQ(sk_GENERAL_NAME_num(names), 1);
  const GENERAL_NAME* name = sk_GENERAL_NAME_value(names, 0);
  ASSERT_EQ(name->type, GEN_DNS);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(ASN1_STRING_get0_data(name->d.dNSName)),
                        static_cast<size_t>(ASN1_STRING_length(name->d.dNSName))),
            "api.example.test");
  GENERAL_NAMES_free(names);

  const ASN1_OCTET_STRING* aki = X509_get0_authority_key_id(cert);
  ASSERT_NE(aki, nullptr);
  EXPECT_EQ(ASN1_OCTET_STRING_cmp(aki, X509_get0_subject_key_id(ca_->certificate())), 0);
  EXPECT_EQ(TimeOf(X509_get0_notBefore(cert)), kNow - absl::Hours(1));
  EXPECT_EQ(TimeOf(X509_get0_notAfter(cert)), kNow + absl::Hours(24 * 7));
  EXPECT_EQ(leaf->not_after, kNow + absl::Hours(24 * 7));
  EXPECT_EQ(X509_cmp(leaf->issuer.get(), ca_->certificate()), 0);
}

TEST_F(InterceptLeafTest, LeavesOfOneCaShareAKeyButNotASerial) {
  auto a = ca_->IssueLeaf("a.example.test", kNow);
  auto b = ca_->IssueLeaf("a.example.test", kNow);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(EVP_PKEY_eq(a->key.get(), b->key.get()), 1);
  EXPECT_NE(ASN1_INTEGER_cmp(X509_get0_serialNumber(a->cert.get()),
                             X509_get0_serialNumber(b->cert.get())),
            0);
}

TEST_F(InterceptLeafTest, NamesALongHostInACriticalSanOnly) {
  std::string host = absl::StrCat(std::string(63, 'a'), ".", std::string(63, 'b'), ".test");
  auto leaf = ca_->IssueLeaf(host, kNow);
  ASSERT_TRUE(leaf.ok()) << leaf.status();
  EXPECT_EQ(CommonName(leaf->cert.get()), "");
  EXPECT_TRUE(ExtensionIsCritical(leaf->cert.get(), NID_subject_alt_name));
  EXPECT_EQ(VerifyLeaf(ca_->certificate(), leaf->cert.get(), host, kNow), X509_V_OK);
}

TEST_F(InterceptLeafTest, RefusesWhatIsNotAHostName) {
  std::string too_long;
  while (too_long.size() < 254) {
    absl::StrAppend(&too_long, "abcdefghi.");
  }
  too_long = too_long.substr(0, 250) + ".com";
  for (const std::string& bad :
       {std::string(""), std::string("192.0.2.1"), std::string("2001:db8::1"), std::string("[::1]"),
        std::string("a_b.example.test"), std::string("-a.example.test"),
        std::string("*.example.test"), std::string("a..example.test"),
        std::string("a.example.test,DNS:evil.test"), too_long}) {
    auto leaf = ca_->IssueLeaf(bad, kNow);
    EXPECT_EQ(leaf.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(leaf.status().message(), HasSubstr("no interception certificate for")) << bad;
  }
  EXPECT_THAT(ca_->IssueLeaf("192.0.2.1", kNow).status().message(), HasSubstr("IP address"));
}

// What a thief of a constrained CA's key could sign: a leaf for `san` ("DNS:x", "IP:x").
X509Ptr ForgeLeaf(const InterceptCa& ca, const std::string& san) {
  X509Ptr cert(X509_new());
  X509_set_version(cert.get(), 2);
  EXPECT_TRUE(SetRandomSerial(cert.get()).ok());
  EXPECT_TRUE(SetValidity(cert.get(), kNow - absl::Hours(1), kNow + absl::Hours(24)).ok());
  X509_set_issuer_name(cert.get(), X509_get_subject_name(ca.certificate()));
  auto key = NewP256Key();
  EXPECT_TRUE(key.ok());
  X509_set_pubkey(cert.get(), key->get());
  EXPECT_TRUE(AddExtension(cert.get(), ca.certificate(), NID_subject_alt_name, san).ok());
  EXPECT_TRUE(AddExtension(cert.get(), ca.certificate(), NID_ext_key_usage, "serverAuth").ok());
  EXPECT_NE(X509_sign(cert.get(), ca.key_for_testing(), EVP_sha256()), 0);
  return cert;
}

TEST(ConstrainedInterceptCaTest, IssuesLeavesForItsDomainsOnly) {
  auto ca =
      InterceptCa::CreateConstrained({"api.example.test", "Example.ORG", "example.org"}, kNow);
  ASSERT_TRUE(ca.ok()) << ca.status();
  EXPECT_THAT((*ca)->permitted_domains(),
              ::testing::ElementsAre("api.example.test", "example.org"));
  X509* cert = (*ca)->certificate();
  EXPECT_THAT(CommonName(cert), StartsWith("abox sandbox interception CA ("));
  EXPECT_TRUE(ExtensionIsCritical(cert, NID_name_constraints));
  EXPECT_EQ(X509_check_ca(cert), 1);

  for (const std::string host : {"api.example.test", "example.org", "www.example.org"}) {
    auto leaf = (*ca)->IssueLeaf(host, kNow);
    ASSERT_TRUE(leaf.ok()) << leaf.status();
    EXPECT_EQ(VerifyLeaf(cert, leaf->cert.get(), host, kNow), X509_V_OK) << host;
  }
  auto refused = (*ca)->IssueLeaf("example.test", kNow);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(refused.status().message(), HasSubstr("limited to api.example.test, example.org"));
}

TEST(ConstrainedInterceptCaTest, LeafForceSignedOutsideItsDomainsFailsVerification) {
  auto ca = InterceptCa::CreateConstrained({"api.example.test"}, kNow);
  ASSERT_TRUE(ca.ok()) << ca.status();
  X509* cert = (*ca)->certificate();
  X509Ptr allowed = ForgeLeaf(**ca, "DNS:api.example.test");
  EXPECT_EQ(VerifyLeaf(cert, allowed.get(), "api.example.test", kNow), X509_V_OK);
  X509Ptr other = ForgeLeaf(**ca, "DNS:bank.example");
  EXPECT_EQ(VerifyLeaf(cert, other.get(), "bank.example", kNow), X509_V_ERR_PERMITTED_VIOLATION);
  X509Ptr parent = ForgeLeaf(**ca, "DNS:example.test");
  EXPECT_EQ(VerifyLeaf(cert, parent.get(), "example.test", kNow), X509_V_ERR_PERMITTED_VIOLATION);
  X509Ptr address = ForgeLeaf(**ca, "IP:192.0.2.1");
  // Verified without a host name: OpenSSL checks the name first and would stop there.
  EXPECT_EQ(VerifyLeaf(cert, address.get(), "", kNow), X509_V_ERR_EXCLUDED_VIOLATION);
}

TEST(ConstrainedInterceptCaTest, RefusesNoDomainsAndNonHosts) {
  EXPECT_EQ(InterceptCa::CreateConstrained({}, kNow).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(InterceptCa::CreateConstrained({"10.0.0.1"}, kNow).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(InterceptCa::CreateConstrained({"a.test,DNS:b.test"}, kNow).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace abox::net
