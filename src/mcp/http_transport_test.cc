#include "src/mcp/http_transport.h"

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "src/http/testing/http_test_client.h"
#include "src/mcp/tool_args.h"

namespace abox::mcp {
namespace {

using ::testing::HasSubstr;
using json = nlohmann::json;
namespace httptest = http::httptest;
using httptest::HttpTestClient;
using httptest::Response;

constexpr char kToken[] = "0123456789abcdef0123456789abcdef";

// Stands for a session's ExecSessions: records that the session let it go.
struct FakeState {
  explicit FakeState(std::atomic<int>* released) : released(released) {}
  ~FakeState() { ++*released; }
  std::atomic<int>* released;
};

json Request(int id, const std::string& method, json params = json::object()) {
  return {{"jsonrpc", "2.0"}, {"id", id}, {"method", method}, {"params", std::move(params)}};
}

json InitializeRequest() {
  return Request(1, "initialize",
                 {{"protocolVersion", "2025-11-25"},
                  {"capabilities", json::object()},
                  {"clientInfo", {{"name", "test"}, {"version", "1"}}}});
}

class HttpTransportTest : public testing::Test {
 protected:
  void Start(HttpTransportOptions options = {}) {
    if (!options.no_auth) {
      options.bearer_token = kToken;
    }
    options.clock = [this] {
      std::lock_guard<std::mutex> lock(clock_mu_);
      return now_;
    };
    auto factory = [this] {
      std::vector<Tool> tools;
      tools.push_back(Tool{"progress", "Progress", "Reports progress, then answers.",
                           ObjectSchema({}), nullptr, nullptr,
                           [](const json&, CallContext& ctx) -> absl::StatusOr<json> {
                             ctx.Progress(1, "half way");
                             return json{{"done", true}};
                           }});
      return SessionTools{std::move(tools), std::make_shared<FakeState>(&released_)};
    };
    absl::StatusOr<std::unique_ptr<HttpTransport>> transport =
        HttpTransport::Create(std::move(options), ServerInfo{"abox", "test", ""}, factory);
    ASSERT_TRUE(transport.ok()) << transport.status();
    transport_ = *std::move(transport);
    ASSERT_TRUE(transport_->Start().ok());
  }

  // The headers a well-behaved client sends; `changes` replace them by name ("" removes one).
  httptest::Headers Headers(const std::map<std::string, std::string>& changes = {}) {
    std::map<std::string, std::string> all = {
        {"Host", absl::StrCat("127.0.0.1:", transport_->port())},
        {"Authorization", absl::StrCat("Bearer ", kToken)},
        {"Content-Type", "application/json"},
        {"Accept", "application/json, text/event-stream"}};
    for (const auto& [name, value] : changes) {
      all[name] = value;
    }
    httptest::Headers out;
    for (const auto& [name, value] : all) {
      if (!value.empty()) {
        out.emplace_back(name, value);
      }
    }
    return out;
  }

  Response Send(const std::string& method, const std::string& body,
                const httptest::Headers& headers) {
    absl::StatusOr<std::unique_ptr<HttpTestClient>> client =
        HttpTestClient::ConnectTcp(transport_->port());
    EXPECT_TRUE(client.ok()) << client.status();
    absl::StatusOr<Response> response = (*client)->Request(method, "/mcp", body, headers);
    EXPECT_TRUE(response.ok()) << response.status();
    return response.ok() ? *response : Response{};
  }

  Response Post(const json& message, const std::map<std::string, std::string>& changes = {}) {
    return Send("POST", message.dump(), Headers(changes));
  }

  // Opens a session; returns its id.
  std::string Initialize() {
    Response response = Post(InitializeRequest());
    EXPECT_EQ(response.status, 200) << response.body;
    return response.Header("Mcp-Session-Id").value_or("");
  }

  void Advance(absl::Duration by) {
    std::lock_guard<std::mutex> lock(clock_mu_);
    now_ += by;
  }

  std::mutex clock_mu_;
  absl::Time now_ = absl::FromUnixSeconds(1'000'000);
  std::atomic<int> released_{0};
  std::unique_ptr<HttpTransport> transport_;
};

TEST_F(HttpTransportTest, InitializeOpensASessionAnsweredAsJson) {
  Start();
  Response response = Post(InitializeRequest());
  ASSERT_EQ(response.status, 200) << response.body;
  EXPECT_THAT(response.Header("Content-Type").value_or(""), HasSubstr("application/json"));
  std::string id = response.Header("Mcp-Session-Id").value_or("");
  EXPECT_EQ(id.size(), 64u);
  EXPECT_EQ(response.Json()["result"]["protocolVersion"], "2025-11-25");
  EXPECT_EQ(transport_->session_count(), 1u);

  Response ping = Post(Request(2, "ping"), {{"Mcp-Session-Id", id}});
  ASSERT_EQ(ping.status, 200) << ping.body;
  EXPECT_EQ(ping.Json()["id"], 2);
  EXPECT_EQ(ping.Json()["result"], json::object());
  EXPECT_NE(Initialize(), id) << "each initialize opens its own session";
}

TEST_F(HttpTransportTest, RequestsNeedAKnownSession) {
  Start();
  Response missing = Post(Request(2, "tools/list"));
  EXPECT_EQ(missing.status, 400);
  EXPECT_THAT(missing.Json()["error"]["message"].get<std::string>(),
              HasSubstr("no Mcp-Session-Id header"));
  Response unknown = Post(Request(2, "tools/list"), {{"Mcp-Session-Id", std::string(64, 'a')}});
  EXPECT_EQ(unknown.status, 404);
  EXPECT_THAT(unknown.Json()["error"]["message"].get<std::string>(),
              HasSubstr("start a new one with initialize"));
  std::string id = Initialize();
  Response again = Post(InitializeRequest(), {{"Mcp-Session-Id", id}});
  EXPECT_EQ(again.status, 400);
  Response version =
      Post(Request(2, "ping"), {{"Mcp-Session-Id", id}, {"MCP-Protocol-Version", "2024-11-05"}});
  EXPECT_EQ(version.status, 400);
  EXPECT_THAT(version.body, HasSubstr("unsupported MCP-Protocol-Version"));
}

TEST_F(HttpTransportTest, BearerTokenIsRequired) {
  Start();
  Response missing = Post(InitializeRequest(), {{"Authorization", ""}});
  EXPECT_EQ(missing.status, 401);
  EXPECT_THAT(missing.Header("WWW-Authenticate").value_or(""), HasSubstr("Bearer"));
  EXPECT_THAT(missing.body, HasSubstr("the token abox-mcp was started with"));
  Response wrong =
      Post(InitializeRequest(), {{"Authorization", "Bearer fedcba9876543210fedcba9876543210"}});
  EXPECT_EQ(wrong.status, 401);
  EXPECT_EQ(transport_->session_count(), 0u);
}

TEST_F(HttpTransportTest, NoAuthServesWithoutToken) {
  HttpTransportOptions options;
  options.no_auth = true;
  Start(std::move(options));
  EXPECT_EQ(Post(InitializeRequest(), {{"Authorization", ""}}).status, 200);
}

TEST_F(HttpTransportTest, ForeignOriginIsForbidden) {
  Start();
  Response evil = Post(InitializeRequest(), {{"Origin", "http://evil.example.com"}});
  EXPECT_EQ(evil.status, 403);
  EXPECT_THAT(evil.body, HasSubstr("not a loopback origin"));
  EXPECT_EQ(Post(InitializeRequest(), {{"Origin", "http://localhost:6274"}}).status, 200);
}

TEST_F(HttpTransportTest, ForeignHostIsForbidden) {
  Start();
  std::string port = absl::StrCat(transport_->port());
  Response rebound = Post(InitializeRequest(), {{"Host", "evil.example.com:" + port}});
  EXPECT_EQ(rebound.status, 403);
  EXPECT_THAT(rebound.body, HasSubstr("DNS rebinding"));
  EXPECT_EQ(Post(InitializeRequest(), {{"Host", "127.0.0.1:1"}}).status, 403);
  EXPECT_EQ(Post(InitializeRequest(), {{"Host", "localhost:" + port}}).status, 200);
}

TEST_F(HttpTransportTest, BodyOverFourMiBIs413) {
  Start();
  absl::StatusOr<std::unique_ptr<HttpTestClient>> client =
      HttpTestClient::ConnectTcp(transport_->port());
  ASSERT_TRUE(client.ok());
  httptest::Headers headers = Headers();
  headers.emplace_back("Content-Length", absl::StrCat(kMaxLineBytes + 1));
  ASSERT_TRUE((*client)->Send("POST", "/mcp", "", headers).ok());
  absl::StatusOr<Response> response = (*client)->ReadResponse();
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->status, 413);
}

TEST_F(HttpTransportTest, BadMessagesAreClearErrors) {
  Start();
  Response not_json = Send("POST", "{", Headers());
  EXPECT_EQ(not_json.status, 400);
  EXPECT_EQ(not_json.Json()["error"]["code"], kParseError);
  Response text =
      Send("POST", InitializeRequest().dump(), Headers({{"Content-Type", "text/plain"}}));
  EXPECT_EQ(text.status, 415);
  Response get = Send("GET", "", Headers());
  EXPECT_EQ(get.status, 405);
  EXPECT_EQ(get.Header("Allow").value_or(""), "DELETE, POST");
}

TEST_F(HttpTransportTest, NotificationsGet202) {
  Start();
  std::string id = Initialize();
  Response response =
      Post({{"jsonrpc", "2.0"}, {"method", "notifications/initialized"}}, {{"Mcp-Session-Id", id}});
  EXPECT_EQ(response.status, 202);
  EXPECT_TRUE(response.body.empty());
}

TEST_F(HttpTransportTest, DeleteEndsTheSessionAndReleasesItsState) {
  Start();
  std::string id = Initialize();
  EXPECT_EQ(released_.load(), 0);
  Response deleted = Send("DELETE", "", Headers({{"Mcp-Session-Id", id}}));
  EXPECT_EQ(deleted.status, 204);
  EXPECT_EQ(released_.load(), 1) << "the commands the session started die with it";
  EXPECT_EQ(Post(Request(2, "ping"), {{"Mcp-Session-Id", id}}).status, 404);
  EXPECT_EQ(Send("DELETE", "", Headers({{"Mcp-Session-Id", id}})).status, 404);
}

TEST_F(HttpTransportTest, ToolCallStreamsProgressThenTheAnswer) {
  Start();
  std::string id = Initialize();
  Response response =
      Post(Request(7, "tools/call", {{"name", "progress"}, {"_meta", {{"progressToken", "tok"}}}}),
           {{"Mcp-Session-Id", id}});
  ASSERT_EQ(response.status, 200) << response.body;
  EXPECT_THAT(response.Header("Content-Type").value_or(""), HasSubstr("text/event-stream"));
  // Two events, each "event: message" + one data line, in order: the progress, then the answer.
  std::vector<json> events;
  size_t at = 0;
  while (at < response.body.size()) {
    size_t end = response.body.find("\n\n", at);
    ASSERT_NE(end, std::string::npos) << response.body;
    std::string event = response.body.substr(at, end - at);
    at = end + 2;
    if (event.rfind(':', 0) == 0) {
      continue;  // a keepalive comment
    }
    ASSERT_EQ(event.rfind("event: message\ndata: ", 0), 0u) << event;
    std::string data = event.substr(std::string("event: message\ndata: ").size());
    ASSERT_EQ(data.find('\n'), std::string::npos);
    events.push_back(json::parse(data));
  }
  ASSERT_EQ(events.size(), 2u) << response.body;
  EXPECT_EQ(events[0]["method"], "notifications/progress");
  EXPECT_EQ(events[0]["params"]["progressToken"], "tok");
  EXPECT_EQ(events[1]["id"], 7);
  EXPECT_EQ(events[1]["result"]["structuredContent"]["done"], true);
}

TEST_F(HttpTransportTest, ToolCallIsPlainJsonForClientsThatTakeOnlyJson) {
  Start();
  std::string id = Initialize();
  Response response = Post(Request(7, "tools/call", {{"name", "progress"}}),
                           {{"Mcp-Session-Id", id}, {"Accept", "application/json"}});
  ASSERT_EQ(response.status, 200) << response.body;
  EXPECT_EQ(response.Json()["result"]["structuredContent"]["done"], true);
}

TEST_F(HttpTransportTest, IdleSessionsExpire) {
  HttpTransportOptions options;
  options.idle_timeout = absl::Minutes(30);
  Start(std::move(options));
  std::string id = Initialize();
  Advance(absl::Minutes(29));
  transport_->ExpireIdle();
  EXPECT_EQ(Post(Request(2, "ping"), {{"Mcp-Session-Id", id}}).status, 200);
  Advance(absl::Minutes(31));
  transport_->ExpireIdle();
  EXPECT_EQ(transport_->session_count(), 0u);
  EXPECT_EQ(released_.load(), 1);
  EXPECT_EQ(Post(Request(3, "ping"), {{"Mcp-Session-Id", id}}).status, 404);
}

TEST_F(HttpTransportTest, SessionsAreBounded) {
  HttpTransportOptions options;
  options.max_sessions = 2;
  Start(std::move(options));
  Initialize();
  Initialize();
  Response full = Post(InitializeRequest());
  EXPECT_EQ(full.status, 503);
  EXPECT_THAT(full.body, HasSubstr("2 sessions are open"));
}

}  // namespace
}  // namespace abox::mcp
