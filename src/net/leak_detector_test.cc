#include "src/net/leak_detector.h"

#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gtest/gtest.h"

namespace abox::net {
namespace {

constexpr absl::string_view kPlaceholder = "ABOX_SECRET_GH_3f9a1c_token";

std::shared_ptr<const LeakPatterns> Patterns(std::vector<Needle> needles) {
  auto patterns = LeakPatterns::Create(std::move(needles));
  EXPECT_TRUE(patterns.ok()) << patterns.status();
  return *patterns;
}

std::shared_ptr<const LeakPatterns> GithubOnly() {
  return Patterns({{"GITHUB_TOKEN", std::string(kPlaceholder)}});
}

std::optional<Leak> Scan(absl::string_view bytes,
                         const std::shared_ptr<const LeakPatterns>& patterns = GithubOnly()) {
  LeakDetector detector(patterns);
  return detector.Feed(bytes);
}

// The detector must find the needle in `body` at every split into two parts, and fed byte by
// byte: a needle split across writes is the easy way around a per-write check.
void ExpectFoundAtEverySplit(absl::string_view body, absl::string_view encoding) {
  auto patterns = GithubOnly();
  for (size_t split = 0; split <= body.size(); ++split) {
    LeakDetector detector(patterns);
    std::optional<Leak> first = detector.Feed(body.substr(0, split));
    std::optional<Leak> second = detector.Feed(body.substr(split));
    std::optional<Leak> leak = first ? first : second;
    ASSERT_TRUE(leak.has_value()) << encoding << " split at " << split << " of " << body;
    EXPECT_EQ(leak->name, "GITHUB_TOKEN");
    EXPECT_EQ(leak->encoding, encoding) << "split at " << split;
  }
  LeakDetector bytewise(patterns);
  std::optional<Leak> leak;
  for (char c : body) {
    leak = bytewise.Feed(absl::string_view(&c, 1));
  }
  ASSERT_TRUE(leak.has_value()) << encoding << " fed byte by byte: " << body;
}

std::string PercentEncodeAll(absl::string_view s, bool upper) {
  std::string out;
  for (char c : s) {
    const auto byte = static_cast<uint8_t>(c);
    absl::StrAppend(&out,
                    upper ? absl::StrFormat("%%%02X", byte) : absl::StrFormat("%%%02x", byte));
  }
  return out;
}

std::string JsonEscapeAll(absl::string_view s, bool upper) {
  std::string out;
  for (char c : s) {
    const auto byte = static_cast<uint8_t>(c);
    absl::StrAppend(&out,
                    upper ? absl::StrFormat("\\u%04X", byte) : absl::StrFormat("\\u%04x", byte));
  }
  return out;
}

TEST(LeakDetectorTest, FindsTheRawPlaceholderAcrossEveryChunkBoundary) {
  ExpectFoundAtEverySplit(absl::StrCat("curl -d 'x=", kPlaceholder, "&y=1'"), "raw");
}

TEST(LeakDetectorTest, FindsPercentEncodedFormsInBothHexCasesAndPartlyEncoded) {
  ExpectFoundAtEverySplit(absl::StrCat("q=", PercentEncodeAll(kPlaceholder, true), "&"),
                          "percent-encoded");
  ExpectFoundAtEverySplit(absl::StrCat("q=", PercentEncodeAll(kPlaceholder, false)),
                          "percent-encoded");
  // Only the underscores encoded (what many URL encoders do for no reason), mixed hex case.
  ExpectFoundAtEverySplit("q=ABOX%5fSECRET%5FGH%5F3f9a1c%5ftoken", "percent-encoded");
  // Only one letter encoded.
  ExpectFoundAtEverySplit("ABOX_SECRET_GH_3f9a1c_t%6Fken", "percent-encoded");
}

TEST(LeakDetectorTest, FindsJsonEscapedFormsOfAnyCharacter) {
  ExpectFoundAtEverySplit(absl::StrCat("{\"k\":\"", JsonEscapeAll(kPlaceholder, false), "\"}"),
                          "JSON-escaped");
  ExpectFoundAtEverySplit(absl::StrCat("{\"k\":\"", JsonEscapeAll(kPlaceholder, true), "\"}"),
                          "JSON-escaped");
  ExpectFoundAtEverySplit("{\"k\":\"\\u0041BOX\\u005fSECRET_GH_3f9a1c_toke\\u006E\"}",
                          "JSON-escaped");
  // A JSON string holding a percent-encoded URL with the '%' itself escaped.
  ExpectFoundAtEverySplit("{\"u\":\"ABOX\\u00255FSECRET_GH_3f9a1c_token\"}",
                          "JSON-escaped and percent-encoded");
}

TEST(LeakDetectorTest, FindsBase64AndBase64UrlAtEveryAlignment) {
  for (absl::string_view prefix : {"", "a", "ab", "abc", "abcd", "user:", "x-access-token:"}) {
    std::string plain = absl::StrCat(prefix, kPlaceholder, "!tail");
    ExpectFoundAtEverySplit(absl::StrCat("data=", absl::Base64Escape(plain), ";"), "base64");
  }
  // Bytes whose base64 has '+' and '/': the URL-safe alphabet must be found too.
  std::string needle = "k\xfb\xff\xbf\xfe\xfb\xef\xff\xbe\xfa";
  auto patterns = Patterns({{"BINARY", needle}});
  for (absl::string_view prefix : {"", "a", "ab"}) {
    std::string standard = absl::Base64Escape(absl::StrCat(prefix, needle));
    std::string url_safe = absl::WebSafeBase64Escape(absl::StrCat(prefix, needle));
    ASSERT_NE(standard, url_safe);
    std::optional<Leak> s = Scan(standard, patterns);
    ASSERT_TRUE(s.has_value()) << prefix;
    EXPECT_EQ(s->encoding, "base64");
    std::optional<Leak> u = Scan(url_safe, patterns);
    ASSERT_TRUE(u.has_value()) << prefix;
    EXPECT_EQ(u->encoding, "base64url");
    // '/' written "\/" in a JSON string.
    std::string json;
    for (char c : standard) {
      json += c == '/' ? std::string("\\/") : std::string(1, c);
    }
    EXPECT_TRUE(Scan(json, patterns).has_value()) << prefix;
  }
}

TEST(LeakDetectorTest, FindsThePlaceholderInsideHttpBasicCredentials) {
  std::string basic = absl::Base64Escape(absl::StrCat("x-access-token:", kPlaceholder));
  ExpectFoundAtEverySplit(absl::StrCat("Authorization: Basic ", basic, "\r\n"), "base64");
  std::string as_user = absl::Base64Escape(absl::StrCat(kPlaceholder, ":x-oauth-basic"));
  ExpectFoundAtEverySplit(absl::StrCat("Authorization: Basic ", as_user, "\r\n"), "base64");
}

TEST(LeakDetectorTest, IgnoresOrdinaryTrafficAndNearMisses) {
  EXPECT_FALSE(Scan("GET / HTTP/1.1\r\nHost: example.com\r\n\r\n").has_value());
  EXPECT_FALSE(Scan("ABOX_SECRET_GH_3f9a1c_toke").has_value());        // one byte short
  EXPECT_FALSE(Scan("ABOX_SECRET_GH_3f9a1c_toke%6").has_value());      // unfinished escape
  EXPECT_FALSE(Scan("ABOX_SECRET_GH_3f9a1c_toke\\u006").has_value());  // unfinished escape
  EXPECT_FALSE(Scan(absl::Base64Escape("ABOX_SECRET_GH_3f9a1c_tokeX")).has_value());
  EXPECT_FALSE(Scan(std::string(100000, 'A')).has_value());
}

TEST(LeakDetectorTest, NamesTheNeedleNotItsBytesAndStaysTripped) {
  auto patterns = Patterns(
      {{"NPM_TOKEN", "npm_0123456789abcdef"}, {"GITHUB_TOKEN", std::string(kPlaceholder)}});
  LeakDetector detector(patterns);
  EXPECT_FALSE(detector.Feed("hello ").has_value());
  std::optional<Leak> leak = detector.Feed("npm_0123456789abcdef");
  ASSERT_TRUE(leak.has_value());
  EXPECT_EQ(leak->name, "NPM_TOKEN");
  EXPECT_EQ(leak->encoding.find("npm_"), std::string::npos);
  std::optional<Leak> again = detector.Feed("nothing here");
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(again->name, "NPM_TOKEN");
  EXPECT_TRUE(detector.leak().has_value());
}

TEST(LeakDetectorTest, KeepsOnlyASmallTail) {
  auto patterns = GithubOnly();
  // The tail is shorter than the longest pattern (the raw placeholder or its base64).
  EXPECT_LT(patterns->max_pattern_size(), kPlaceholder.size() * 2);
  LeakDetector detector(patterns);
  for (int i = 0; i < 1000; ++i) {
    ASSERT_FALSE(detector.Feed(std::string(4096, 'x')).has_value());
  }
  std::string split(kPlaceholder);
  EXPECT_FALSE(detector.Feed(split.substr(0, 5)).has_value());
  EXPECT_TRUE(detector.Feed(split.substr(5)).has_value());
}

TEST(LeakDetectorTest, RefusesNeedlesTooShortOrLongOrUnnamedWithoutQuotingThem) {
  auto short_one = LeakPatterns::Create({{"PIN", "1234567"}});
  ASSERT_FALSE(short_one.ok());
  EXPECT_NE(short_one.status().message().find("PIN"), absl::string_view::npos);
  EXPECT_EQ(short_one.status().message().find("1234567"), absl::string_view::npos);
  EXPECT_FALSE(LeakPatterns::Create({{"BIG", std::string(kMaxNeedleSize + 1, 'a')}}).ok());
  auto unnamed = LeakPatterns::Create({{"", "secretvalue123"}});
  ASSERT_FALSE(unnamed.ok());
  EXPECT_EQ(unnamed.status().message().find("secretvalue123"), absl::string_view::npos);
  std::vector<Needle> many(kMaxNeedles + 1, Needle{"N", "0123456789"});
  EXPECT_FALSE(LeakPatterns::Create(many).ok());
  auto none = LeakPatterns::Create({});
  ASSERT_TRUE(none.ok());
  LeakDetector empty(*none);
  EXPECT_FALSE(empty.Feed("anything").has_value());
}

}  // namespace
}  // namespace abox::net
