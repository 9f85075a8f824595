#include "src/net/intercept_http.h"

#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "src/net/pkt_line.h"

namespace abox::net {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr absl::string_view kApiPlaceholder = "ABOX_SECRET_API_0123abcd";
constexpr absl::string_view kApiValue = "sk-real-api-value-0123456789";
constexpr absl::string_view kOtherPlaceholder = "ABOX_SECRET_OTHER_4567ef01";
constexpr absl::string_view kOtherValue = "other-real-value-xyz";
constexpr absl::string_view kPushPlaceholder = "ABOX_SECRET_PUSH_89abcdef";
constexpr absl::string_view kPushToken = "ghp_PushTokenValue000111222333";

const std::string kZero(40, '0');
const std::string kOld(40, '1');
const std::string kNew(40, '2');

std::shared_ptr<const InterceptRules> Rules() {
  auto table = SecretTable::Create({
      {"API", std::string(kApiPlaceholder), std::string(kApiValue), {"api.example.com"}, {}, false},
      {"OTHER",
       std::string(kOtherPlaceholder),
       std::string(kOtherValue),
       {"other.example"},
       {},
       false},
      {"PUSH", std::string(kPushPlaceholder), std::string(kPushToken), {"github.com"}, {}, false},
  });
  EXPECT_TRUE(table.ok()) << table.status();
  auto rules = std::make_shared<InterceptRules>();
  rules->secrets = *table;
  GitPushRule push;
  push.host = "github.com";
  push.repo = "owner/repo";
  push.refs.branch_patterns = {"agent/*"};
  push.token_secret = "PUSH";
  rules->git_push.push_back(push);
  return rules;
}

std::unique_ptr<InterceptedHttp> Http(absl::string_view host, uint16_t port = 443) {
  auto http = InterceptedHttp::Create(Rules(), std::string(host), port);
  EXPECT_TRUE(http.ok()) << http.status();
  return *std::move(http);
}

std::string Get(absl::string_view host, absl::string_view target, absl::string_view headers = "") {
  return absl::StrCat("GET ", target, " HTTP/1.1\r\nHost: ", host, "\r\n", headers, "\r\n");
}

TEST(InterceptedHttpTest, SwapsAPlaceholderInAHeaderHoweverTheWritesAreSplit) {
  std::string request =
      Get("api.example.com", "/v1", absl::StrCat("X-Api-Key: ", kApiPlaceholder, "\r\n"));
  std::string want = Get("api.example.com", "/v1", absl::StrCat("X-Api-Key: ", kApiValue, "\r\n"));
  for (size_t split = 0; split <= request.size(); ++split) {
    auto http = Http("api.example.com");
    std::string out;
    ASSERT_TRUE(http->FeedUp(absl::string_view(request).substr(0, split), &out).ok());
    ASSERT_TRUE(http->FeedUp(absl::string_view(request).substr(split), &out).ok());
    EXPECT_EQ(out, want) << split;
    EXPECT_THAT(http->report().swapped, ::testing::ElementsAre("API"));
  }
  auto http = Http("api.example.com");
  std::string out;
  for (char c : request) {
    ASSERT_TRUE(http->FeedUp(absl::string_view(&c, 1), &out).ok());
  }
  EXPECT_EQ(out, want);
}

TEST(InterceptedHttpTest, SwapsBasicCredentials) {
  auto http = Http("api.example.com");
  std::string out;
  ASSERT_TRUE(
      http->FeedUp(
              Get("api.example.com", "/",
                  absl::StrCat("Authorization: Basic ",
                               absl::Base64Escape(absl::StrCat("me:", kApiPlaceholder)), "\r\n")),
              &out)
          .ok());
  EXPECT_THAT(out, HasSubstr(absl::StrCat("Authorization: Basic ",
                                          absl::Base64Escape(absl::StrCat("me:", kApiValue)))));
}

TEST(InterceptedHttpTest, RefusesAnUnboundPlaceholderInTheHeadNamingTheSecretNotItsValue) {
  auto http = Http("api.example.com");
  std::string out;
  absl::Status s = http->FeedUp(
      absl::StrCat(
          Get("api.example.com", "/ok"),
          Get("api.example.com", "/x", absl::StrCat("X-Leak: ", kOtherPlaceholder, "\r\n"))),
      &out);
  EXPECT_TRUE(absl::IsPermissionDenied(s)) << s;
  EXPECT_EQ(out, Get("api.example.com", "/ok"));
  ASSERT_TRUE(http->report().leak.has_value());
  EXPECT_EQ(http->report().leak->secret, "OTHER");
  std::string reply = http->RefusalReply(s);
  EXPECT_THAT(reply, HasSubstr("HTTP/1.1 403 Forbidden"));
  EXPECT_THAT(reply, HasSubstr("'OTHER'"));
  EXPECT_THAT(reply, HasSubstr("api.example.com"));
  EXPECT_THAT(reply, Not(HasSubstr(kOtherValue)));
}

TEST(InterceptedHttpTest, BlocksALeakInAChunkedBodySplitAcrossChunks) {
  std::string placeholder(kOtherPlaceholder);
  std::string head =
      "POST /upload HTTP/1.1\r\nHost: api.example.com\r\nTransfer-Encoding: "
      "chunked\r\n\r\n";
  std::string first = absl::StrFormat("%x\r\n{\"x\":\"%s\r\n", 6 + 10, placeholder.substr(0, 10));
  std::string second = absl::StrFormat("%x\r\n%s\"}\r\n0\r\n\r\n", placeholder.size() - 10 + 2,
                                       placeholder.substr(10));
  auto http = Http("api.example.com");
  std::string out;
  ASSERT_TRUE(http->FeedUp(head + first, &out).ok());
  absl::Status s = http->FeedUp(second, &out);
  EXPECT_TRUE(absl::IsPermissionDenied(s)) << s;
  EXPECT_THAT(out, Not(HasSubstr(placeholder.substr(10))));
  EXPECT_EQ(http->report().leak->where, "the request body");
  EXPECT_THAT(std::string(s.message()), HasSubstr("other.example"));
  // Base64 in a body, and a placeholder in a chunk extension, are caught too.
  auto b64 = Http("api.example.com");
  std::string body = absl::Base64Escape(absl::StrCat("user:", kOtherPlaceholder));
  EXPECT_TRUE(absl::IsPermissionDenied(b64->FeedUp(
      absl::StrCat("POST / HTTP/1.1\r\nHost: api.example.com\r\nContent-Length: ", body.size(),
                   "\r\n\r\n", body),
      &out)));
  auto ext = Http("api.example.com");
  EXPECT_TRUE(absl::IsPermissionDenied(
      ext->FeedUp(absl::StrCat(head, "1;", kOtherPlaceholder, "\r\nx\r\n0\r\n\r\n"), &out)));
}

TEST(InterceptedHttpTest, OnPlainHttpToAnyHostRefusesPlaceholdersAndPassesTheRest) {
  auto http = Http("plain.example", 80);
  std::string out;
  std::string ok = Get("plain.example", "/", "Accept: */*\r\n");
  ASSERT_TRUE(http->FeedUp(ok, &out).ok());
  EXPECT_EQ(out, ok);
  // No secret is bound here: responses pass unchanged, even with a value in them.
  std::string response =
      absl::StrCat("HTTP/1.1 200 OK\r\nContent-Length: ", kApiValue.size(), "\r\n\r\n", kApiValue);
  std::string down;
  ASSERT_TRUE(http->FeedDown(response, &down).ok());
  EXPECT_EQ(down, response);
  EXPECT_TRUE(absl::IsPermissionDenied(
      http->FeedUp(Get("plain.example", absl::StrCat("/?k=", kApiPlaceholder)), &out)));
  EXPECT_EQ(http->report().leak->secret, "API");
}

TEST(InterceptedHttpTest, RefusesARequestForAnotherHost) {
  auto http = Http("api.example.com");
  std::string out;
  absl::Status s = http->FeedUp(Get("evil.example", "/"), &out);
  EXPECT_TRUE(absl::IsPermissionDenied(s)) << s;
  EXPECT_EQ(out, "");
  EXPECT_THAT(http->RefusalReply(s), HasSubstr("403"));
}

TEST(InterceptedHttpTest, ScrubsResponsesAndReframesThemAsChunked) {
  auto http = Http("api.example.com");
  std::string out;
  ASSERT_TRUE(http->FeedUp(Get("api.example.com", "/echo"), &out).ok());
  std::string body = absl::StrCat("you sent ", kApiValue);
  std::string down;
  ASSERT_TRUE(http->FeedDown(absl::StrCat("HTTP/1.1 200 OK\r\nContent-Length: ", body.size(),
                                          "\r\n\r\n", body),
                             &down)
                  .ok());
  EXPECT_EQ(down, absl::StrCat("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
                               absl::StrFormat("%x\r\n", 9 + kApiPlaceholder.size()), "you sent ",
                               kApiPlaceholder, "\r\n0\r\n\r\n"));
  ASSERT_TRUE(http->FinishDown(&down).ok());
  EXPECT_EQ(http->report().scrubbed, 1u);
  EXPECT_EQ(http->report().responses, 1u);
}

TEST(InterceptedHttpTest, AsksTheUpstreamToCloseForAnHttp10ClientWhenLengthsChange) {
  auto http = Http("api.example.com");
  std::string out;
  ASSERT_TRUE(
      http->FeedUp("GET / HTTP/1.0\r\nHost: api.example.com\r\nConnection: keep-alive\r\n\r\n",
                   &out)
          .ok());
  EXPECT_EQ(out, "GET / HTTP/1.0\r\nHost: api.example.com\r\nConnection: close\r\n\r\n");
}

// A push body: the commands, a flush, then (not parsed) the pack.
std::string PushBody(const std::vector<RefUpdate>& updates) {
  std::string body;
  for (size_t i = 0; i < updates.size(); ++i) {
    std::string line =
        absl::StrCat(updates[i].old_oid, " ", updates[i].new_oid, " ", updates[i].refname);
    if (i == 0) {
      absl::StrAppend(&line, std::string(1, '\0'), "report-status side-band-64k agent=git/2.43");
    }
    body += EncodePktLine(line + "\n");
  }
  return absl::StrCat(body, "0000", "PACK\x00\x00\x00\x02 binary pack bytes");
}

std::string Push(absl::string_view repo, absl::string_view body, absl::string_view extra = "") {
  return absl::StrCat("POST /", repo,
                      "/git-receive-pack HTTP/1.1\r\nHost: github.com\r\nContent-Type: "
                      "application/x-git-receive-pack-request\r\n",
                      extra, "Content-Length: ", body.size(), "\r\n\r\n", body);
}

std::string TokenHeader() {
  return absl::StrCat("Authorization: Basic ",
                      absl::Base64Escape(absl::StrCat("x-access-token:", kPushToken)), "\r\n");
}

TEST(InterceptedHttpTest, PassesAPushToAnAllowedBranchUnchangedWithTheToken) {
  std::string body = PushBody({{kZero, kNew, "refs/heads/agent/fix"}});
  std::string request = Push("owner/repo.git", body);
  std::string head = request.substr(0, request.size() - body.size());
  std::string want = absl::StrCat(head.substr(0, head.size() - 2), TokenHeader(), "\r\n", body);
  for (size_t split = 0; split <= request.size(); ++split) {
    auto http = Http("github.com");
    std::string out;
    ASSERT_TRUE(http->FeedUp(absl::string_view(request).substr(0, split), &out).ok());
    if (split < request.size() - (body.size() - body.find("0000PACK") - 4)) {
      EXPECT_EQ(out, "") << split;  // held until the command list is complete
    }
    ASSERT_TRUE(http->FeedUp(absl::string_view(request).substr(split), &out).ok());
    EXPECT_EQ(out, want) << split;
  }
}

TEST(InterceptedHttpTest, RefusesAPushToAnotherBranchADeleteOrATagBeforeAnyByteGoes) {
  for (const RefUpdate& update :
       {RefUpdate{kOld, kNew, "refs/heads/main"}, RefUpdate{kOld, kZero, "refs/heads/agent/fix"},
        RefUpdate{kZero, kNew, "refs/tags/v1"}}) {
    auto http = Http("github.com");
    std::string out;
    std::string before = Get("github.com", "/owner/repo/info/refs?service=git-receive-pack");
    ASSERT_TRUE(http->FeedUp(before, &out).ok());
    out.clear();
    absl::Status s = http->FeedUp(Push("owner/repo", PushBody({update})), &out);
    EXPECT_TRUE(absl::IsPermissionDenied(s)) << update.refname << s;
    EXPECT_EQ(out, "") << update.refname;
    ASSERT_TRUE(http->report().git_refusal.has_value());
    EXPECT_THAT(*http->report().git_refusal, HasSubstr(update.refname));
    std::string reply = http->RefusalReply(s);
    EXPECT_THAT(reply, HasSubstr("HTTP/1.1 200 OK\r\n"));
    EXPECT_THAT(reply, HasSubstr("Content-Type: application/x-git-receive-pack-result"));
    EXPECT_THAT(reply, HasSubstr(absl::StrCat("ng ", update.refname, " abox: push to ")));
    EXPECT_THAT(reply, Not(HasSubstr(kPushToken)));
  }
}

TEST(InterceptedHttpTest, RefusesPushesToAnotherRepoAndAddsTheTokenOnlyForTheAllowedOne) {
  auto http = Http("github.com");
  std::string out;
  // Fetching (no token: the repo may be public; the forge decides).
  ASSERT_TRUE(
      http->FeedUp(Get("github.com", "/other/repo.git/info/refs?service=git-upload-pack"), &out)
          .ok());
  EXPECT_THAT(out, Not(HasSubstr("Authorization")));
  out.clear();
  // The allowed repo, with or without .git, any case: the token is added.
  for (absl::string_view target : {"/owner/repo.git/info/refs?service=git-upload-pack",
                                   "/Owner/Repo/info/refs?service=git-receive-pack"}) {
    ASSERT_TRUE(http->FeedUp(Get("github.com", target), &out).ok());
    EXPECT_EQ(out, Get("github.com", target, TokenHeader()));
    out.clear();
  }
  // Not when the request brings its own (its placeholder is swapped as usual).
  std::string own = absl::StrCat("Authorization: Bearer ", kPushPlaceholder, "\r\n");
  ASSERT_TRUE(
      http->FeedUp(Get("github.com", "/owner/repo/info/refs?service=git-upload-pack", own), &out)
          .ok());
  EXPECT_EQ(out, Get("github.com", "/owner/repo/info/refs?service=git-upload-pack",
                     absl::StrCat("Authorization: Bearer ", kPushToken, "\r\n")));
  out.clear();
  // Not on other paths of the host.
  ASSERT_TRUE(http->FeedUp(Get("github.com", "/owner/repo/pulls"), &out).ok());
  EXPECT_EQ(out, Get("github.com", "/owner/repo/pulls"));
  EXPECT_EQ(http->report().tokens_added, 2u);
  // A push to another repo is refused at its first request, with a message git shows.
  for (absl::string_view target :
       {"/other/repo/info/refs?service=git-receive-pack", "/owner/repo/../x/git-receive-pack",
        "/owner/x/git%2Dreceive-pack"}) {
    auto h = Http("github.com");
    std::string o;
    absl::Status s = h->FeedUp(Get("github.com", target), &o);
    EXPECT_TRUE(absl::IsPermissionDenied(s)) << target << s;
    EXPECT_EQ(o, "");
    std::string reply = h->RefusalReply(s);
    EXPECT_THAT(reply, HasSubstr("403 Forbidden"));
    EXPECT_THAT(reply, HasSubstr("Content-Type: text/plain"));
    EXPECT_THAT(reply, HasSubstr("may push to github.com/owner/repo only"));
  }
}

TEST(InterceptedHttpTest, RefusesAPushWhoseCommandsCannotBeRead) {
  auto http = Http("github.com");
  std::string out;
  absl::Status s = http->FeedUp(Push("owner/repo", "zzzz not pkt-lines"), &out);
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_EQ(out, "");
  EXPECT_THAT(http->RefusalReply(s), HasSubstr("400 Bad Request"));
  auto gz = Http("github.com");
  s = gz->FeedUp(Push("owner/repo", "\x1f\x8b", "Content-Encoding: gzip\r\n"), &out);
  EXPECT_TRUE(absl::IsPermissionDenied(s)) << s;
  EXPECT_EQ(out, "");
}

TEST(InterceptedHttpTest, RefusesBadRules) {
  auto rules = std::make_shared<InterceptRules>(*Rules());
  rules->git_push[0].token_secret = "MISSING";
  EXPECT_TRUE(absl::IsInvalidArgument(InterceptedHttp::Create(rules, "github.com", 443).status()));
  rules->git_push[0].token_secret = "";
  rules->git_push[0].repo = "no-owner";
  EXPECT_FALSE(InterceptedHttp::Create(rules, "github.com", 443).ok());
  rules->git_push[0].repo = "owner/repo";
  rules->git_push[0].refs.branch_patterns = {"refs/heads/x"};
  EXPECT_FALSE(InterceptedHttp::Create(rules, "github.com", 443).ok());
}

}  // namespace
}  // namespace abox::net
