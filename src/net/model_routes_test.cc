#include "src/net/model_routes.h"

#include <string>

#include "absl/strings/match.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace abox::net {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kToken[] = "abox-broker-token-0123456789abcdef0123";
constexpr char kKey[] = "sk-ant-REAL-KEY-0123456789";

HttpRequestHead Head(absl::string_view text) {
  HttpSniff sniff = ParseHttpRequestHead(text);
  EXPECT_EQ(sniff.result, HttpSniffResult::kHttp) << sniff.reason;
  return sniff.head;
}

TEST(ParseModelBaseUrlTest, AcceptsHttpsAndLoopbackHttp) {
  struct Case {
    const char* url;
    bool tls;
    const char* host;
    uint16_t port;
    const char* prefix;
  };
  for (const Case& c : {
           Case{"https://api.anthropic.com", true, "api.anthropic.com", 443, ""},
           Case{"https://api.openai.com/", true, "api.openai.com", 443, ""},
           Case{"https://Gateway.Example.com:8443/compat/v2/", true, "gateway.example.com", 8443,
                "/compat/v2"},
           Case{"http://127.0.0.1:8080/compat", false, "127.0.0.1", 8080, "/compat"},
           Case{"http://127.5.6.7", false, "127.5.6.7", 80, ""},
           Case{"http://localhost:11434", false, "localhost", 11434, ""},
           Case{"http://[::1]:9000", false, "::1", 9000, ""},
           Case{"https://[2001:db8::5]", true, "2001:db8::5", 443, ""},
       }) {
    absl::StatusOr<ModelUpstream> up = ParseModelBaseUrl(ModelApi::kOpenAi, c.url);
    ASSERT_TRUE(up.ok()) << c.url << ": " << up.status();
    EXPECT_EQ(up->tls, c.tls) << c.url;
    EXPECT_EQ(up->host, c.host) << c.url;
    EXPECT_EQ(up->port, c.port) << c.url;
    EXPECT_EQ(up->path_prefix, c.prefix) << c.url;
    EXPECT_EQ(up->api, ModelApi::kOpenAi);
  }
  EXPECT_EQ(DefaultModelUpstream(ModelApi::kAnthropic).host, "api.anthropic.com");
  EXPECT_EQ(DefaultModelUpstream(ModelApi::kOpenAi).HostHeader(), "api.openai.com");
  EXPECT_EQ(ParseModelBaseUrl(ModelApi::kOpenAi, "http://[::1]:9000")->HostHeader(), "[::1]:9000");
}

TEST(ParseModelBaseUrlTest, RefusesWhatCouldLeakTheKeyOrBeMisread) {
  struct Case {
    const char* url;
    const char* why;
  };
  for (const Case& c : {
           Case{"http://api.anthropic.com", "unencrypted"},
           Case{"http://10.0.0.5:8080", "unencrypted"},
           Case{"http://[::ffff:127.0.0.1]", "unencrypted"},
           Case{"ftp://api.anthropic.com", "scheme"},
           Case{"api.anthropic.com", "scheme"},
           Case{"https://user:pw@api.anthropic.com", "userinfo"},
           Case{"https://api.anthropic.com/?x=1", "query"},
           Case{"https://api.anthropic.com/#f", "fragment"},
           Case{"https://api.anthropic.com:0", "port"},
           Case{"https://api.anthropic.com:70000", "port"},
           Case{"https://api.anthropic.com:", "port"},
           Case{"https://", "no host"},
           Case{"https://[127.0.0.1]", "IPv6"},
           Case{"https://api.anthropic.com/a/../b", "path"},
           Case{"https://api.anthropic.com/a%2fb", "path"},
           Case{"https://api.anthropic.com//a", "path"},
           Case{"https://bad_host.example", "bad_host"},
       }) {
    absl::StatusOr<ModelUpstream> up = ParseModelBaseUrl(ModelApi::kAnthropic, c.url);
    ASSERT_FALSE(up.ok()) << c.url;
    EXPECT_TRUE(absl::IsInvalidArgument(up.status())) << c.url;
    EXPECT_THAT(up.status().message(), HasSubstr(c.why)) << c.url;
    EXPECT_THAT(up.status().message(), HasSubstr("accepted: https://")) << c.url;
  }
}

TEST(ClassifyModelRouteTest, ForwardsOnlyTheAgentCalls) {
  struct Case {
    const char* method;
    const char* target;
    ModelRouteKind kind;
    const char* upstream_target;
  };
  for (const Case& c : {
           Case{"POST", "/anthropic/v1/messages", ModelRouteKind::kForward, "/v1/messages"},
           Case{"POST", "/anthropic/v1/messages?beta=true", ModelRouteKind::kForward,
                "/v1/messages?beta=true"},
           Case{"POST", "/anthropic/v1/messages/count_tokens?beta=true", ModelRouteKind::kForward,
                "/v1/messages/count_tokens?beta=true"},
           Case{"POST", "/openai/v1/responses", ModelRouteKind::kForward, "/v1/responses"},
           Case{"GET", "/openai/v1/models?client_version=0.1.0", ModelRouteKind::kForward,
                "/v1/models?client_version=0.1.0"},
           Case{"GET", "/", ModelRouteKind::kProbe, ""},
           Case{"HEAD", "/anthropic/", ModelRouteKind::kProbe, ""},
           Case{"GET", "/openai/v1", ModelRouteKind::kProbe, ""},
           Case{"POST", "/", ModelRouteKind::kMethodNotAllowed, ""},
           Case{"GET", "/anthropic/v1/messages", ModelRouteKind::kMethodNotAllowed, ""},
           Case{"POST", "/openai/v1/models", ModelRouteKind::kMethodNotAllowed, ""},
           Case{"POST", "/anthropic/v1/files", ModelRouteKind::kNotFound, ""},
           Case{"GET", "/openai/v1/chat/completions", ModelRouteKind::kNotFound, ""},
           Case{"POST", "/anthropic/../openai/v1/responses", ModelRouteKind::kNotFound, ""},
           Case{"POST", "/anthropic/v1/./messages", ModelRouteKind::kNotFound, ""},
           Case{"POST", "/anthropic/v1/%2e%2e/messages", ModelRouteKind::kNotFound, ""},
           Case{"POST", "/anthropic/v1%2fmessages", ModelRouteKind::kNotFound, ""},
           Case{"POST", "/anthropic//v1/messages", ModelRouteKind::kNotFound, ""},
           Case{"POST", "/anthropic/v1/messages/", ModelRouteKind::kNotFound, ""},
           Case{"POST", "/Anthropic/v1/messages", ModelRouteKind::kNotFound, ""},
           Case{"POST", "http://127.0.0.1/anthropic/v1/messages", ModelRouteKind::kNotFound, ""},
           Case{"POST", "/anthropicx/v1/messages", ModelRouteKind::kNotFound, ""},
           Case{"CONNECT", "/anthropic/v1/messages", ModelRouteKind::kMethodNotAllowed, ""},
       }) {
    ModelRoute route = ClassifyModelRoute(c.method, c.target);
    EXPECT_EQ(route.kind, c.kind) << c.method << " " << c.target;
    EXPECT_EQ(route.upstream_target, c.upstream_target) << c.method << " " << c.target;
  }
  EXPECT_EQ(ClassifyModelRoute("POST", "/anthropic/v1/messages").usage,
            ModelUsageKind::kAnthropicMessages);
  EXPECT_EQ(ClassifyModelRoute("POST", "/anthropic/v1/messages/count_tokens").usage,
            ModelUsageKind::kNone);
  EXPECT_EQ(ClassifyModelRoute("POST", "/openai/v1/responses").usage,
            ModelUsageKind::kOpenAiResponses);
  EXPECT_EQ(ClassifyModelRoute("POST", "/openai/v1/files").api, ModelApi::kOpenAi);
  EXPECT_EQ(ClassifyModelRoute("POST", "/v1/messages").api, std::nullopt);
}

TEST(HasModelTokenTest, AcceptsEitherHeaderOnlyWithTheToken) {
  std::string t = kToken;
  EXPECT_TRUE(HasModelToken(Head("POST / HTTP/1.1\r\nHost: x\r\nx-api-key: " + t + "\r\n\r\n"), t));
  EXPECT_TRUE(HasModelToken(
      Head("POST / HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + t + "\r\n\r\n"), t));
  EXPECT_TRUE(HasModelToken(
      Head("POST / HTTP/1.1\r\nHost: x\r\nauthorization: bearer " + t + "\r\n\r\n"), t));
  EXPECT_FALSE(HasModelToken(Head("POST / HTTP/1.1\r\nHost: x\r\n\r\n"), t));
  EXPECT_FALSE(HasModelToken(
      Head("POST / HTTP/1.1\r\nHost: x\r\nx-api-key: " + t.substr(1) + "\r\n\r\n"), t));
  EXPECT_FALSE(HasModelToken(
      Head("POST / HTTP/1.1\r\nHost: x\r\nAuthorization: Basic " + t + "\r\n\r\n"), t));
  // Two credentials that disagree: refused, whichever is right.
  EXPECT_FALSE(HasModelToken(Head("POST / HTTP/1.1\r\nHost: x\r\nx-api-key: " + t +
                                  "\r\nAuthorization: Bearer other\r\n\r\n"),
                             t));
  EXPECT_FALSE(HasModelToken(Head("POST / HTTP/1.1\r\nHost: x\r\nx-api-key: \r\n\r\n"), ""));
}

TEST(RewriteModelHeadTest, SwapsCredentialsAndDropsHopByHop) {
  HttpRequestHead head = Head(
      "POST /anthropic/v1/messages?beta=true HTTP/1.1\r\nHost: 127.0.0.1:4000\r\n"
      "Connection: keep-alive, X-Drop-Me\r\nX-Drop-Me: 1\r\nKeep-Alive: timeout=5\r\n"
      "TE: trailers\r\nx-api-key: guest\r\nCookie: a=b\r\nProxy-Authorization: Basic x\r\n"
      "anthropic-version: 2023-06-01\r\nanthropic-beta: a,b\r\nContent-Length: 2\r\n\r\n");
  ModelRoute route = ClassifyModelRoute(head.method, head.target);
  ModelUpstream up = *ParseModelBaseUrl(ModelApi::kAnthropic, "https://gw.example.com:8443/p");
  EXPECT_EQ(RewriteModelHead(head, route, up, kKey),
            "POST /p/v1/messages?beta=true HTTP/1.1\r\nHost: gw.example.com:8443\r\n"
            "anthropic-version: 2023-06-01\r\nanthropic-beta: a,b\r\nContent-Length: 2\r\n"
            "x-api-key: sk-ant-REAL-KEY-0123456789\r\n\r\n");
  ModelUpstream openai = DefaultModelUpstream(ModelApi::kOpenAi);
  HttpRequestHead get = Head(
      "GET /openai/v1/models HTTP/1.1\r\nAuthorization: Bearer guest\r\nHost: 127.0.0.1\r\n"
      "Accept-Encoding: zstd,gzip\r\n\r\n");  // dropped: usage is read from plain bodies
  EXPECT_EQ(
      RewriteModelHead(get, ClassifyModelRoute("GET", "/openai/v1/models"), openai, "sk-o1"),
      "GET /v1/models HTTP/1.1\r\nHost: api.openai.com\r\nAuthorization: Bearer sk-o1\r\n\r\n");
}

TEST(CheckModelKeyTest, RefusesKeysThatWouldBreakTheHeadWithoutQuotingThem) {
  EXPECT_TRUE(CheckModelKey(ModelApi::kAnthropic, kKey).ok());
  for (std::string key : {std::string("short"), std::string("sk-ant-abc\r\nX-Evil: 1"),
                          std::string("sk-ant-with space")}) {
    absl::Status s = CheckModelKey(ModelApi::kAnthropic, key);
    EXPECT_TRUE(absl::IsFailedPrecondition(s)) << key;
    EXPECT_THAT(s.message(), HasSubstr("abox agent login anthropic"));
    EXPECT_THAT(s.message(), Not(HasSubstr(key)));
  }
}

TEST(BuildModelErrorReplyTest, ShapesBodiesLikeEachProvider) {
  ModelReply reply;
  reply.status = 401;
  reply.message = "bad \"token\"";
  std::string a = BuildModelErrorReply(ModelApi::kAnthropic, reply, false);
  ASSERT_TRUE(absl::StartsWith(a, "HTTP/1.1 401 Unauthorized\r\n")) << a;
  nlohmann::json ja = nlohmann::json::parse(a.substr(a.find("\r\n\r\n") + 4));
  EXPECT_EQ(ja["type"], "error");
  EXPECT_EQ(ja["error"]["type"], "authentication_error");
  EXPECT_EQ(ja["error"]["message"], "abox model broker: bad \"token\"");
  // Claude Code gives up at once instead of retrying a refusal for minutes.
  EXPECT_THAT(a, HasSubstr("\r\nx-should-retry: false\r\n"));

  reply.status = 429;
  reply.headers.push_back({"retry-after", "3"});
  std::string o = BuildModelErrorReply(ModelApi::kOpenAi, reply, false);
  EXPECT_THAT(o, HasSubstr("\r\nretry-after: 3\r\n"));
  EXPECT_THAT(o, Not(HasSubstr("x-should-retry")));  // a rate limit is worth waiting out
  nlohmann::json jo = nlohmann::json::parse(o.substr(o.find("\r\n\r\n") + 4));
  EXPECT_EQ(jo["error"]["code"], "rate_limit_exceeded");
  EXPECT_EQ(jo["error"]["message"], "abox model broker: bad \"token\"");

  EXPECT_TRUE(absl::EndsWith(BuildModelProbeReply(false), "\r\n\r\n{\"ok\":true}"));
  EXPECT_TRUE(
      absl::EndsWith(BuildModelProbeReply(true), "content-length: 0\r\nconnection: close\r\n\r\n"));
}

}  // namespace
}  // namespace abox::net
