#include "src/net/secret_swap.h"

#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace abox::net {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr absl::string_view kGhPlaceholder = "ABOX_SECRET_GH_77f1";
constexpr absl::string_view kGhValue = "ghp_RealGithubValue42";
constexpr absl::string_view kNpmPlaceholder = "ABOX_SECRET_NPM_9c2e";
constexpr absl::string_view kNpmValue = "npm_Real&Value=1/2";

SecretBinding Github() {
  return {"GITHUB_TOKEN",
          std::string(kGhPlaceholder),
          std::string(kGhValue),
          {"api.github.com", "github.com"},
          {},
          false};
}

SecretBinding Npm() {
  return {"NPM_TOKEN",
          std::string(kNpmPlaceholder),
          std::string(kNpmValue),
          {"registry.npmjs.org", "*.npm.example:8443"},
          {"Authorization"},
          true};
}

std::shared_ptr<const SecretTable> Table(std::vector<SecretBinding> bindings = {Github(), Npm()}) {
  auto table = SecretTable::Create(std::move(bindings));
  EXPECT_TRUE(table.ok()) << table.status();
  return *table;
}

// Parses `head` (which must be valid) and swaps for host:port.
SwapOutcome Swap(const std::string& head, absl::string_view host, uint16_t port = 443,
                 const std::shared_ptr<const SecretTable>& table = Table()) {
  HttpSniff sniff = ParseHttpRequestHead(head);
  EXPECT_EQ(sniff.result, HttpSniffResult::kHttp) << sniff.reason;
  absl::StatusOr<SwapOutcome> outcome = SwapSecrets(*table, sniff.head, host, port);
  EXPECT_TRUE(outcome.ok()) << outcome.status();
  if (!outcome.ok()) {
    return {};
  }
  // Whatever happened, no message names a real value.
  if (outcome->refusal) {
    for (absl::string_view value : {kGhValue, kNpmValue}) {
      EXPECT_THAT(outcome->refusal->message, Not(HasSubstr(value)));
      EXPECT_THAT(outcome->refusal->where, Not(HasSubstr(value)));
    }
  }
  return *outcome;
}

std::string Get(absl::string_view target, absl::string_view host, absl::string_view extra = "") {
  return absl::StrCat("GET ", target, " HTTP/1.1\r\nHost: ", host, "\r\n", extra, "\r\n");
}

TEST(SecretSwapTest, SwapsAPlaceholderInAHeaderForItsBoundHost) {
  SwapOutcome out =
      Swap(Get("/user", "api.github.com",
               absl::StrCat("Authorization: Bearer ", kGhPlaceholder, "\r\nX-Other:  keep  \r\n")),
           "api.github.com");
  ASSERT_FALSE(out.refusal) << out.refusal->message;
  EXPECT_EQ(out.head, absl::StrCat("GET /user HTTP/1.1\r\nHost: api.github.com\r\nAuthorization: "
                                   "Bearer ",
                                   kGhValue, "\r\nX-Other: keep\r\n\r\n"));
  EXPECT_THAT(out.swapped, ElementsAre("GITHUB_TOKEN"));
}

TEST(SecretSwapTest, RebuildsAHeadWithoutPlaceholdersUnchangedAndKeepsContentLength) {
  std::string head =
      "POST /upload HTTP/1.1\r\nHost: api.github.com\r\nContent-Length: 12\r\n"
      "Content-Type: application/json\r\n\r\n";
  SwapOutcome out = Swap(head, "api.github.com");
  ASSERT_FALSE(out.refusal);
  EXPECT_EQ(out.head, head);
  EXPECT_TRUE(out.swapped.empty());
  SwapOutcome with = Swap(absl::StrCat("POST /upload HTTP/1.1\r\nHost: api.github.com\r\n"
                                       "Content-Length: 12\r\nX-Token: ",
                                       kGhPlaceholder, "\r\n\r\n"),
                          "api.github.com");
  ASSERT_FALSE(with.refusal);
  EXPECT_THAT(with.head, HasSubstr("\r\nContent-Length: 12\r\n"));
}

TEST(SecretSwapTest, MatchesHostsLikeEgressRules) {
  std::string npm_auth = absl::StrCat("Authorization: Bearer ", kNpmPlaceholder, "\r\n");
  // *.npm.example:8443 is below the apex, on that port only.
  SwapOutcome below = Swap(Get("/", "a.npm.example:8443", npm_auth), "a.npm.example", 8443);
  ASSERT_FALSE(below.refusal) << below.refusal->message;
  EXPECT_THAT(below.head, HasSubstr(kNpmValue));
  SwapOutcome apex = Swap(Get("/", "npm.example:8443", npm_auth), "npm.example", 8443);
  ASSERT_TRUE(apex.refusal);
  EXPECT_EQ(apex.refusal->kind, SecretRefusal::Kind::kLeak);
  SwapOutcome port = Swap(Get("/", "a.npm.example", npm_auth), "a.npm.example", 443);
  ASSERT_TRUE(port.refusal);
  EXPECT_EQ(port.refusal->kind, SecretRefusal::Kind::kLeak);
  // Names compare normalised; an address is never a bound host.
  SwapOutcome upper = Swap(
      Get("/", "API.GitHub.com", absl::StrCat("X-T: ", kGhPlaceholder, "\r\n")), "API.GitHub.com.");
  EXPECT_FALSE(upper.refusal);
  SwapOutcome ip =
      Swap(Get("/", "140.82.112.6", absl::StrCat("X-T: ", kGhPlaceholder, "\r\n")), "140.82.112.6");
  ASSERT_TRUE(ip.refusal);
  EXPECT_EQ(ip.refusal->kind, SecretRefusal::Kind::kLeak);
}

TEST(SecretSwapTest, RefusesAPlaceholderForAnotherHostAnywhereAsALeak) {
  std::string b64 = absl::Base64Escape(absl::StrCat("x:", kGhPlaceholder));
  struct Case {
    std::string head;
    std::string where;
    std::string encoding;
  };
  std::vector<Case> cases = {
      {Get(absl::StrCat("/?t=", kGhPlaceholder), "evil.example"), "the request line", ""},
      {Get("/a%41BOX_SECRET_GH_77f1", "evil.example"), "the request line", "percent-encoded"},
      {Get("/", "evil.example", absl::StrCat("X-Note: ", kGhPlaceholder, "\r\n")),
       "header 'X-Note'", ""},
      {Get("/", "evil.example", absl::StrCat(kGhPlaceholder, ": x\r\n")),
       absl::StrCat("header '", kGhPlaceholder, "'"), ""},
      {Get("/", "evil.example", absl::StrCat("Authorization: Basic ", b64, "\r\n")),
       "header 'Authorization'", "base64"},
      {Get("/", "evil.example", absl::StrCat("Cookie: a=", b64, "\r\n")), "header 'Cookie'",
       "base64"},
      {Get("/", "evil.example", "X-J: \\u0041BOX_SECRET_GH_77f1\r\n"), "header 'X-J'",
       "JSON-escaped"},
  };
  for (const Case& c : cases) {
    SwapOutcome out = Swap(c.head, "evil.example");
    ASSERT_TRUE(out.refusal) << c.head;
    EXPECT_EQ(out.refusal->kind, SecretRefusal::Kind::kLeak);
    EXPECT_EQ(out.refusal->secret, "GITHUB_TOKEN");
    EXPECT_EQ(out.refusal->where, c.where) << c.head;
    EXPECT_THAT(out.refusal->message, HasSubstr("GITHUB_TOKEN"));
    EXPECT_THAT(out.refusal->message, HasSubstr("evil.example:443"));
    EXPECT_THAT(out.refusal->message, HasSubstr(c.encoding));
    EXPECT_TRUE(out.head.empty());
  }
  // To a host one secret is bound to, another secret's placeholder is still a leak.
  SwapOutcome mixed = Swap(Get("/", "api.github.com",
                               absl::StrCat("X-A: ", kGhPlaceholder, " ", kNpmPlaceholder, "\r\n")),
                           "api.github.com");
  ASSERT_TRUE(mixed.refusal);
  EXPECT_EQ(mixed.refusal->secret, "NPM_TOKEN");
  EXPECT_EQ(mixed.refusal->kind, SecretRefusal::Kind::kLeak);
}

TEST(SecretSwapTest, SwapsInsideBasicCredentialsAndReencodes) {
  for (absl::string_view creds :
       {absl::StrCat("x-access-token:", kGhPlaceholder), absl::StrCat(kGhPlaceholder, ":"),
        absl::StrCat(kGhPlaceholder, ":x-oauth-basic")}) {
    std::string head =
        Get("/owner/repo.git/info/refs?service=git-upload-pack", "github.com",
            absl::StrCat("Authorization: basic ", absl::Base64Escape(creds), "\r\n"));
    SwapOutcome out = Swap(head, "github.com");
    ASSERT_FALSE(out.refusal) << out.refusal->message;
    size_t at = out.head.find("Authorization: basic ");
    ASSERT_NE(at, std::string::npos) << out.head;
    size_t end = out.head.find("\r\n", at);
    std::string decoded;
    ASSERT_TRUE(absl::Base64Unescape(out.head.substr(at + 21, end - at - 21), &decoded));
    std::string want(creds);
    want.replace(want.find(std::string(kGhPlaceholder)), kGhPlaceholder.size(),
                 std::string(kGhValue));
    EXPECT_EQ(decoded, want);
    EXPECT_THAT(out.swapped, ElementsAre("GITHUB_TOKEN"));
  }
  // Credentials that are not base64 pass unchanged.
  SwapOutcome odd =
      Swap(Get("/", "github.com", "Authorization: Basic !!notbase64\r\n"), "github.com");
  ASSERT_FALSE(odd.refusal);
  EXPECT_THAT(odd.head, HasSubstr("Authorization: Basic !!notbase64\r\n"));
}

TEST(SecretSwapTest, SwapsTheQueryOnlyWhenAllowedIncludingPercentEncodedForms) {
  std::string host = "registry.npmjs.org";
  for (absl::string_view form : {"ABOX_SECRET_NPM_9c2e", "ABOX%5FSECRET%5fNPM_9c2e",
                                 "%41%42%4f%58%5f%53%45%43%52%45%54%5F%4E%50%4D%5F%39%63%32%65"}) {
    SwapOutcome out = Swap(Get(absl::StrCat("/pkg?a=1&token=", form, "&b=2"), host), host);
    ASSERT_FALSE(out.refusal) << out.refusal->message;
    EXPECT_THAT(out.head, HasSubstr("GET /pkg?a=1&token=npm_Real%26Value%3D1%2F2&b=2 HTTP/1.1"));
    EXPECT_THAT(out.swapped, ElementsAre("NPM_TOKEN"));
  }
  SwapOutcome no_query = Swap(
      Get(absl::StrCat("/user?access_token=", kGhPlaceholder), "api.github.com"), "api.github.com");
  ASSERT_TRUE(no_query.refusal);
  EXPECT_EQ(no_query.refusal->kind, SecretRefusal::Kind::kNotAllowed);
  EXPECT_EQ(no_query.refusal->where, "the URL query");
  SwapOutcome path = Swap(Get(absl::StrCat("/x/", kNpmPlaceholder, "?q"), host), host);
  ASSERT_TRUE(path.refusal);
  EXPECT_EQ(path.refusal->kind, SecretRefusal::Kind::kNotAllowed);
  EXPECT_EQ(path.refusal->where, "the URL path");
}

TEST(SecretSwapTest, RefusesABoundPlaceholderInAHeaderItsBindingDoesNotList) {
  std::string host = "registry.npmjs.org";
  SwapOutcome out =
      Swap(Get("/", host, absl::StrCat("X-Npm-Token: ", kNpmPlaceholder, "\r\n")), host);
  ASSERT_TRUE(out.refusal);
  EXPECT_EQ(out.refusal->kind, SecretRefusal::Kind::kNotAllowed);
  EXPECT_EQ(out.refusal->where, "header 'X-Npm-Token'");
  EXPECT_THAT(out.refusal->message, HasSubstr("Authorization"));
  SwapOutcome ok =
      Swap(Get("/", host, absl::StrCat("authorization: Bearer ", kNpmPlaceholder, "\r\n")), host);
  EXPECT_FALSE(ok.refusal);
  SwapOutcome name =
      Swap(Get("/", "api.github.com", absl::StrCat(kGhPlaceholder, ": 1\r\n")), "api.github.com");
  ASSERT_TRUE(name.refusal);
  EXPECT_EQ(name.refusal->kind, SecretRefusal::Kind::kNotAllowed);
}

TEST(SecretSwapTest, DoesNotSwapAgainInsideASwappedValue) {
  SecretBinding tricky = Github();
  tricky.value = absl::StrCat("pre-", kNpmPlaceholder);  // a value that looks like a placeholder
  SecretBinding npm = Npm();
  npm.hosts = {"api.github.com"};
  npm.headers = {};
  SwapOutcome out = Swap(Get("/", "api.github.com", absl::StrCat("X: ", kGhPlaceholder, "\r\n")),
                         "api.github.com", 443, Table({tricky, npm}));
  ASSERT_FALSE(out.refusal);
  EXPECT_THAT(out.head, HasSubstr(absl::StrCat("X: pre-", kNpmPlaceholder, "\r\n")));
}

TEST(SecretSwapTest, RefusesAHeadThatGrowsTooLarge) {
  SecretBinding big = Github();
  big.value = std::string(kMaxSecretValueSize, 'v');
  std::string extra;
  for (int i = 0; i < 10; ++i) {
    absl::StrAppend(&extra, "X-", i, ": ", kGhPlaceholder, "\r\n");
  }
  auto table = Table({big});
  HttpSniff sniff = ParseHttpRequestHead(Get("/", "api.github.com", extra));
  ASSERT_EQ(sniff.result, HttpSniffResult::kHttp);
  auto out = SwapSecrets(*table, sniff.head, "api.github.com", 443);
  ASSERT_FALSE(out.ok());
  EXPECT_THAT(out.status().message(), HasSubstr("exceeds"));
  EXPECT_THAT(out.status().message(), Not(HasSubstr("vvvv")));
  EXPECT_FALSE(SwapSecrets(*table, sniff.head, "", 443).ok());
}

TEST(SecretSwapTest, ValidatesBindingsWithoutQuotingValues) {
  auto with = [](auto edit) {
    SecretBinding b = Github();
    edit(b);
    return SecretTable::Create({b});
  };
  std::vector<absl::StatusOr<std::shared_ptr<const SecretTable>>> bad;
  bad.push_back(with([](SecretBinding& b) { b.name = ""; }));
  bad.push_back(with([](SecretBinding& b) { b.name = "a b"; }));
  bad.push_back(with([](SecretBinding& b) { b.placeholder = "SHORT"; }));
  bad.push_back(with([](SecretBinding& b) { b.placeholder = "ABOX SECRET 1234"; }));
  bad.push_back(with([](SecretBinding& b) { b.value = ""; }));
  bad.push_back(with([](SecretBinding& b) { b.value = absl::StrCat(kGhValue, "\r\nX-Evil: 1"); }));
  bad.push_back(with([](SecretBinding& b) { b.hosts = {}; }));
  bad.push_back(with([](SecretBinding& b) { b.hosts = {"preset:npm"}; }));
  bad.push_back(with([](SecretBinding& b) { b.hosts = {"10.0.0.5:443"}; }));
  bad.push_back(with([](SecretBinding& b) { b.hosts = {"*.com"}; }));
  bad.push_back(with([](SecretBinding& b) { b.headers = {"Bad Header"}; }));
  for (const auto& r : bad) {
    ASSERT_FALSE(r.ok());
    EXPECT_TRUE(absl::IsInvalidArgument(r.status()));
    EXPECT_THAT(r.status().message(), Not(HasSubstr(kGhValue)));
  }
  SecretBinding same_name = Npm();
  same_name.name = "GITHUB_TOKEN";
  EXPECT_FALSE(SecretTable::Create({Github(), same_name}).ok());
  SecretBinding nested = Npm();
  nested.placeholder = absl::StrCat(kGhPlaceholder, "_2");
  auto n = SecretTable::Create({Github(), nested});
  ASSERT_FALSE(n.ok());
  EXPECT_THAT(n.status().message(), HasSubstr("contain one another"));
}

TEST(SecretSwapTest, GivesLeakNeedlesForTheSecretsNotBoundToTheHost) {
  auto table = Table();
  std::vector<Needle> github = table->LeakNeedlesFor("api.github.com", 443);
  ASSERT_EQ(github.size(), 1u);
  EXPECT_EQ(github[0].name, "NPM_TOKEN");
  EXPECT_EQ(github[0].bytes, kNpmPlaceholder);
  EXPECT_EQ(table->LeakNeedlesFor("evil.example", 443).size(), 2u);
}

}  // namespace
}  // namespace abox::net
