#include "src/net/model_broker.h"

#include <sys/socket.h>

#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "src/net/chunked_body.h"
#include "src/net/testing/https_peers.h"
#include "src/net/testing/socket_tunnel.h"
#include "src/net/testing/stream_pair.h"
#include "src/net/testing/tls_peers.h"

namespace abox::net {
namespace {

using ::testing::HasSubstr;
using testing::HeaderValue;
using testing::HttpReader;
using testing::LoopbackServer;
using ::testing::Not;

constexpr char kToken[] = "sandbox-a-broker-token-0123456789abcdef";
constexpr char kOtherToken[] = "sandbox-b-broker-token-0123456789abcdef";
constexpr char kAnthropicKey[] = "sk-ant-api03-REALKEY-0123456789";
constexpr char kOpenAiKey[] = "sk-proj-REALKEY-9876543210";

std::string Request(absl::string_view method, absl::string_view target,
                    absl::string_view credential = absl::StrCat("x-api-key: ", kToken),
                    absl::string_view body = "{\"stream\":true}", absl::string_view extra = "") {
  return absl::StrCat(
      method, " ", target, " HTTP/1.1\r\nHost: 127.0.0.1:7777\r\n", credential, "\r\n", extra,
      "content-type: application/json\r\nContent-Length: ", body.size(), "\r\n\r\n", body);
}

// One request (head and Content-Length body) from a blocking socket; "" at EOF.
std::string ReadRequest(int fd) {
  std::string head = testing::ReadUntil(fd, "\r\n\r\n");
  if (!absl::EndsWith(head, "\r\n\r\n")) {
    return "";
  }
  size_t length = 0;
  if (std::optional<std::string> cl = HeaderValue(head, "Content-Length")) {
    (void)absl::SimpleAtoi(*cl, &length);
  }
  std::string body(length, '\0');
  if (length > 0 && ::recv(fd, body.data(), length, MSG_WAITALL) != static_cast<ssize_t>(length)) {
    return "";
  }
  return head + body;
}

// A provider on loopback: per connection, answers each request with the next scripted
// response (its pieces written separately), and records what it received.
class ScriptedUpstream final {
 public:
  explicit ScriptedUpstream(std::vector<std::vector<std::string>> responses)
      : responses_(std::move(responses)), server_([this](base::UniqueFd fd) { Serve(fd.get()); }) {}

  uint16_t port() const { return server_.port(); }
  int accepted() const { return server_.accepted(); }
  std::vector<std::string> requests() {
    std::lock_guard<std::mutex> lock(mu_);
    return requests_;
  }

 private:
  void Serve(int fd) {
    for (;;) {
      std::string request = ReadRequest(fd);
      if (request.empty()) {
        return;
      }
      std::vector<std::string> pieces;
      {
        std::lock_guard<std::mutex> lock(mu_);
        requests_.push_back(request);
        if (next_ < responses_.size()) {
          pieces = responses_[next_++];
        }
      }
      for (const std::string& p : pieces) {
        testing::SendAllTo(fd, p);
        std::this_thread::sleep_for(std::chrono::milliseconds(5));  // separate reads
      }
    }
  }

  std::vector<std::vector<std::string>> responses_;
  std::mutex mu_;
  size_t next_ = 0;
  std::vector<std::string> requests_;
  LoopbackServer server_;  // last: its thread uses the members above
};

ModelBrokerConfig LoopbackConfig(uint16_t port, absl::string_view prefix = "") {
  ModelBrokerConfig config;
  config.token = kToken;
  std::string base = absl::StrCat("http://127.0.0.1:", port, prefix);
  config.upstream = [base](ModelApi api) { return ParseModelBaseUrl(api, base); };
  config.key = [](ModelApi api) -> absl::StatusOr<std::string> {
    return api == ModelApi::kAnthropic ? kAnthropicKey : kOpenAiKey;
  };
  config.connect = [](const std::string& /*host*/, uint16_t p, absl::Time deadline, int cancel) {
    return ConnectToAny({*IpAddress::Parse("127.0.0.1")}, p, deadline, cancel);
  };
  return config;
}

// ServeModelBroker on a thread, with the guest's end of the tunnel for the test.
class BrokerRun final {
 public:
  explicit BrokerRun(ModelBrokerConfig config) : config_(std::move(config)) {
    config_.on_request = [this](const ModelRequestRecord& r) {
      std::lock_guard<std::mutex> lock(mu_);
      records_.push_back(r);
    };
    auto [tunnel, guest] = testing::SocketTunnel::Make(TunnelInfo{});
    tunnel_ = std::move(tunnel);
    guest_ = std::move(guest);
    thread_ = std::thread([this] { outcome_ = ServeModelBroker(*tunnel_, config_, -1); });
  }
  ~BrokerRun() { Join(); }

  int guest() const { return guest_.get(); }
  void Send(absl::string_view bytes) { ASSERT_TRUE(testing::SendAllTo(guest_.get(), bytes)); }
  HttpReader& reader() { return reader_; }
  // The next response (head and decoded body); "" when the connection ended first.
  std::string Response() {
    std::optional<std::string> head = reader_.ReadHead();
    if (!head) {
      return "";
    }
    std::optional<std::string> body = reader_.ReadBody(*head, /*response=*/true);
    return *head + body.value_or("<cut>");
  }
  void CloseGuest() { guest_.reset(); }
  const ModelBrokerOutcome& Join() {
    if (thread_.joinable()) {
      CloseGuest();
      thread_.join();
    }
    return outcome_;
  }
  std::vector<ModelRequestRecord> records() {
    std::lock_guard<std::mutex> lock(mu_);
    return records_;
  }

 private:
  ModelBrokerConfig config_;
  std::unique_ptr<testing::SocketTunnel> tunnel_;
  base::UniqueFd guest_;
  HttpReader reader_{
      [this](char* buf, size_t len) -> long { return ::recv(guest_.get(), buf, len, 0); }};
  std::mutex mu_;
  std::vector<ModelRequestRecord> records_;
  ModelBrokerOutcome outcome_;
  std::thread thread_;
};

std::string Sse(absl::string_view data) { return absl::StrCat("data: ", data, "\n\n"); }

std::string Chunk(absl::string_view data) {
  std::string out;
  AppendChunk(data, &out);
  return out;
}

constexpr absl::string_view kSseHead =
    "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n";

TEST(ModelBrokerTest, StreamsTheFirstEventBeforeTheProviderSendsTheRest) {
  std::mutex mu;
  std::condition_variable cv;
  bool guest_got_first = false;
  bool released_by_guest = false;
  LoopbackServer upstream([&](base::UniqueFd fd) {
    if (ReadRequest(fd.get()).empty()) {
      return;
    }
    testing::SendAllTo(fd.get(), absl::StrCat(kSseHead, Chunk(Sse("{\"n\":1}"))));
    {
      std::unique_lock<std::mutex> lock(mu);
      released_by_guest =
          cv.wait_for(lock, std::chrono::seconds(5), [&] { return guest_got_first; });
    }
    testing::SendAllTo(fd.get(), absl::StrCat(Chunk(Sse("{\"n\":2}")), "0\r\n\r\n"));
  });
  BrokerRun run(LoopbackConfig(upstream.port()));
  run.Send(Request("POST", "/anthropic/v1/messages?beta=true"));
  std::string first = testing::ReadUntil(run.guest(), "{\"n\":1}\n\n");
  EXPECT_THAT(first, HasSubstr("HTTP/1.1 200 OK"));
  ASSERT_THAT(first, HasSubstr("data: {\"n\":1}\n\n"));
  {
    std::lock_guard<std::mutex> lock(mu);
    guest_got_first = true;
  }
  cv.notify_all();
  std::string rest = testing::ReadUntil(run.guest(), "0\r\n\r\n");
  EXPECT_THAT(rest, HasSubstr("data: {\"n\":2}"));
  run.Join();
  std::lock_guard<std::mutex> lock(mu);
  EXPECT_TRUE(released_by_guest) << "the guest saw the first event only after the provider went on";
}

TEST(ModelBrokerTest, ForwardsWithTheRealKeyAndNeverTheToken) {
  ScriptedUpstream upstream({{"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}"}});
  BrokerRun run(LoopbackConfig(upstream.port(), "/compat"));
  run.Send(Request("POST", "/anthropic/v1/messages?beta=true",
                   absl::StrCat("Authorization: Bearer ", kToken), "{}",
                   "anthropic-version: 2023-06-01\r\nanthropic-beta: tools-2024,x\r\n"
                   "Connection: keep-alive\r\nKeep-Alive: timeout=5\r\nTE: trailers\r\n"
                   "Cookie: c=1\r\nProxy-Authorization: Basic eA==\r\nUser-Agent: claude-cli\r\n"));
  EXPECT_THAT(run.Response(), HasSubstr("HTTP/1.1 200 OK"));
  run.Join();
  std::vector<std::string> got = upstream.requests();
  ASSERT_EQ(got.size(), 1u);
  const std::string& r = got[0];
  EXPECT_TRUE(absl::StartsWith(r, "POST /compat/v1/messages?beta=true HTTP/1.1\r\n")) << r;
  EXPECT_EQ(HeaderValue(r, "x-api-key"), kAnthropicKey);
  EXPECT_EQ(HeaderValue(r, "Authorization"), std::nullopt);
  EXPECT_THAT(r, Not(HasSubstr(kToken)));
  EXPECT_EQ(HeaderValue(r, "Host"), absl::StrCat("127.0.0.1:", upstream.port()));
  EXPECT_EQ(HeaderValue(r, "anthropic-version"), "2023-06-01");
  EXPECT_EQ(HeaderValue(r, "anthropic-beta"), "tools-2024,x");
  EXPECT_EQ(HeaderValue(r, "User-Agent"), "claude-cli");
  for (const char* gone : {"Connection", "Keep-Alive", "TE", "Cookie", "Proxy-Authorization"}) {
    EXPECT_EQ(HeaderValue(r, gone), std::nullopt) << gone;
  }
  EXPECT_TRUE(absl::EndsWith(r, "\r\n\r\n{}"));
}

TEST(ModelBrokerTest, OpenAiGetsABearerKey) {
  ScriptedUpstream upstream({{"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}"}});
  BrokerRun run(LoopbackConfig(upstream.port()));
  run.Send(
      absl::StrCat("GET /openai/v1/models?client_version=0.9 HTTP/1.1\r\nHost: x\r\n"
                   "Authorization: Bearer ",
                   kToken, "\r\n\r\n"));
  EXPECT_THAT(run.Response(), HasSubstr("200 OK"));
  run.Join();
  ASSERT_EQ(upstream.requests().size(), 1u);
  const std::string r = upstream.requests()[0];
  EXPECT_TRUE(absl::StartsWith(r, "GET /v1/models?client_version=0.9 HTTP/1.1\r\n")) << r;
  EXPECT_EQ(HeaderValue(r, "Authorization"), absl::StrCat("Bearer ", kOpenAiKey));
}

TEST(ModelBrokerTest, RefusesBadTokensAndRoutesWithoutReachingTheProvider) {
  ScriptedUpstream upstream({});
  struct Case {
    std::string request;
    const char* status;
    const char* says;
  };
  for (const Case& c : {
           Case{Request("POST", "/anthropic/v1/messages", "x-api-key: wrong"), "401",
                "authentication_error"},
           Case{Request("POST", "/anthropic/v1/messages", absl::StrCat("x-api-key: ", kOtherToken)),
                "401", "not this sandbox's broker token"},
           Case{Request("POST", "/openai/v1/responses", ""), "401", "invalid_api_key"},
           Case{Request("POST", "/anthropic/v1/files"), "404", "not_found_error"},
           Case{Request("GET", "/openai/v1/chat/completions"), "404", "unknown_url"},
           Case{Request("POST", "/anthropic/../openai/v1/responses"), "404", "no route"},
           Case{Request("POST", "/anthropic/v1/%6dessages"), "404", "no route"},
           Case{Request("GET", "/anthropic/v1/messages"), "405", "allow: POST"},
           Case{Request("POST", "http://127.0.0.1:7777/anthropic/v1/messages"), "404", "no route"},
           Case{Request("POST", "/anthropic/v1/messages", absl::StrCat("x-api-key: ", kToken), "{}",
                        "Upgrade: websocket\r\n"),
                "400", "Upgrade"},
       }) {
    BrokerRun run(LoopbackConfig(upstream.port()));
    run.Send(c.request);
    std::string response = run.Response();
    EXPECT_TRUE(absl::StartsWith(response, absl::StrCat("HTTP/1.1 ", c.status))) << response;
    EXPECT_THAT(response, HasSubstr(c.says));
    EXPECT_THAT(response, HasSubstr("abox model broker: "));
    EXPECT_THAT(run.reader().ReadToEof(), "") << "the connection is closed after a refusal";
    EXPECT_EQ(run.Join().requests, 0u);
    std::vector<ModelRequestRecord> records = run.records();
    ASSERT_EQ(records.size(), 1u) << c.request;
    EXPECT_TRUE(records[0].refused);
    EXPECT_EQ(absl::StrCat(records[0].status), c.status);
  }
  EXPECT_EQ(upstream.accepted(), 0) << "nothing refused may reach the provider";
}

TEST(ModelBrokerTest, AnswersProbesItself) {
  ScriptedUpstream upstream({});
  for (const char* request : {"GET /anthropic HTTP/1.1\r\nHost: x\r\n\r\n",
                              "HEAD /openai/v1/ HTTP/1.1\r\nHost: x\r\n\r\n"}) {
    BrokerRun run(LoopbackConfig(upstream.port()));
    run.Send(request);
    std::string all = run.reader().ReadToEof();
    EXPECT_TRUE(absl::StartsWith(all, "HTTP/1.1 200 OK\r\n")) << all;
    EXPECT_EQ(absl::EndsWith(all, "{\"ok\":true}"), absl::StartsWith(request, "GET")) << all;
  }
  EXPECT_EQ(upstream.accepted(), 0);
}

TEST(ModelBrokerTest, ChecksEveryRequestOnAKeptAliveConnection) {
  for (const std::string& second :
       {Request("POST", "/anthropic/v1/messages", "x-api-key: nope"),
        Request("POST", "/openai/v1/responses", absl::StrCat("Authorization: Bearer ", kToken))}) {
    ScriptedUpstream upstream({{"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nfirst"},
                               {"HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nsecond"}});
    BrokerRun run(LoopbackConfig(upstream.port()));
    run.Send(Request("POST", "/anthropic/v1/messages/count_tokens"));
    EXPECT_THAT(run.Response(), HasSubstr("first"));
    run.Send(second);
    std::string refusal = run.Response();
    EXPECT_THAT(refusal, ::testing::AnyOf(HasSubstr("HTTP/1.1 401"), HasSubstr("HTTP/1.1 400")));
    // Shaped for the API the refused request's path names (its client reads that shape).
    EXPECT_THAT(refusal, HasSubstr("abox model broker: "));
    run.Join();
    EXPECT_EQ(upstream.requests().size(), 1u) << second;
    std::vector<ModelRequestRecord> records = run.records();
    ASSERT_EQ(records.size(), 2u);
    EXPECT_FALSE(records[0].refused);
    EXPECT_EQ(records[0].status, 200);
    EXPECT_EQ(records[0].route, "/anthropic/v1/messages/count_tokens");
    EXPECT_TRUE(records[1].refused);
  }
}

TEST(ModelBrokerTest, KeepAliveServesSeveralRequests) {
  ScriptedUpstream upstream({{"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\na"},
                             {"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nb"},
                             {"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nc"}});
  BrokerRun run(LoopbackConfig(upstream.port()));
  for (const char* expected : {"a", "b", "c"}) {
    run.Send(Request("POST", "/anthropic/v1/messages"));
    EXPECT_TRUE(absl::EndsWith(run.Response(), expected));
  }
  EXPECT_EQ(run.Join().requests, 3u);
  EXPECT_EQ(upstream.accepted(), 1);
  EXPECT_EQ(upstream.requests().size(), 3u);
}

TEST(ModelBrokerTest, TheGuestGoingAwayClosesTheProviderConnection) {
  std::mutex mu;
  std::condition_variable cv;
  bool saw_end = false;
  LoopbackServer upstream([&](base::UniqueFd fd) {
    if (ReadRequest(fd.get()).empty()) {
      return;
    }
    testing::SendAllTo(fd.get(), absl::StrCat(kSseHead, Chunk(Sse("{\"n\":1}"))));
    char c;
    ssize_t n = ::recv(fd.get(), &c, 1, 0);  // 10 s receive timeout: -1/EAGAIN if never closed
    std::lock_guard<std::mutex> lock(mu);
    saw_end = n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
    cv.notify_all();
  });
  BrokerRun run(LoopbackConfig(upstream.port()));
  run.Send(Request("POST", "/anthropic/v1/messages"));
  ASSERT_THAT(testing::ReadUntil(run.guest(), "{\"n\":1}\n\n"), HasSubstr("{\"n\":1}"));
  run.CloseGuest();
  const ModelBrokerOutcome& outcome = run.Join();
  EXPECT_FALSE(outcome.splice.clean);
  EXPECT_THAT(outcome.splice.ended, HasSubstr("guest"));
  {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait_for(lock, std::chrono::seconds(20), [&] { return saw_end; });
    EXPECT_TRUE(saw_end) << "the provider saw neither EOF nor a reset";
  }
  std::vector<ModelRequestRecord> records = run.records();
  ASSERT_EQ(records.size(), 1u);
  EXPECT_THAT(records[0].error, HasSubstr("before the response was complete"));
}

TEST(ModelBrokerTest, RecordsUsageOfEachKindOfResponse) {
  std::string anthropic_sse = absl::StrCat(
      "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":"
      "{\"input_tokens\":11,\"cache_read_input_tokens\":100,\"output_tokens\":1}}}\n\n",
      "event: message_delta\ndata: "
      "{\"type\":\"message_delta\",\"usage\":{\"output_tokens\":33}}\n\n");
  std::string openai_sse =
      "data: {\"type\":\"response.completed\",\"response\":{\"usage\":{\"input_tokens\":7,"
      "\"output_tokens\":8}}}\n\n";
  std::string json = R"({"type":"message","usage":{"input_tokens":3,"output_tokens":4}})";
  std::string error = R"({"type":"error","error":{"type":"rate_limit_error"}})";
  size_t split = anthropic_sse.find("cache_read");  // one event across two reads
  ScriptedUpstream upstream({
      {kSseHead.data(), Chunk(anthropic_sse.substr(0, split)),
       absl::StrCat(Chunk(anthropic_sse.substr(split)), "0\r\n\r\n")},
      {absl::StrCat("HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nContent-Length: ",
                    json.size(), "\r\n\r\n", json.substr(0, 10)),
       json.substr(10)},
      {absl::StrCat("HTTP/1.1 429 Too Many Requests\r\ncontent-type: application/json\r\n"
                    "Content-Length: ",
                    error.size(), "\r\n\r\n", error)},
  });
  BrokerRun run(LoopbackConfig(upstream.port()));
  run.Send(Request("POST", "/anthropic/v1/messages"));
  EXPECT_THAT(run.Response(), HasSubstr("message_delta"));
  run.Send(Request("POST", "/anthropic/v1/messages"));
  EXPECT_THAT(run.Response(), HasSubstr(json));
  run.Send(Request("POST", "/anthropic/v1/messages"));
  EXPECT_THAT(run.Response(), HasSubstr("429"));
  run.Join();
  std::vector<ModelRequestRecord> r = run.records();
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r[0].input_tokens, 111u);
  EXPECT_EQ(r[0].output_tokens, 33u);
  EXPECT_EQ(r[0].error, "");
  EXPECT_EQ(r[1].input_tokens, 3u);
  EXPECT_EQ(r[1].output_tokens, 4u);
  EXPECT_EQ(r[2].status, 429);
  EXPECT_FALSE(r[2].refused);
  EXPECT_THAT(r[2].error, HasSubstr("429"));

  ScriptedUpstream openai({{absl::StrCat(
      "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nContent-Length: ", openai_sse.size(),
      "\r\n\r\n", openai_sse)}});
  BrokerRun run2(LoopbackConfig(openai.port()));
  run2.Send(
      Request("POST", "/openai/v1/responses", absl::StrCat("Authorization: Bearer ", kToken)));
  EXPECT_THAT(run2.Response(), HasSubstr("response.completed"));
  run2.Join();
  ASSERT_EQ(run2.records().size(), 1u);
  EXPECT_EQ(run2.records()[0].api, ModelApi::kOpenAi);
  EXPECT_EQ(run2.records()[0].input_tokens, 7u);
  EXPECT_EQ(run2.records()[0].output_tokens, 8u);
}

TEST(ModelBrokerTest, CapsRequestsInFlightAndPerMinute) {
  ScriptedUpstream upstream({{"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\na"}});
  absl::Time now = absl::FromUnixSeconds(1000);
  auto limiter = ModelBrokerLimiter::Create(
      {.max_in_flight = 1, .per_minute = 60, .burst = 1, .now = [&now] { return now; }});
  ModelBrokerConfig config = LoopbackConfig(upstream.port());
  config.limiter = limiter;
  {
    ModelBrokerLimiter::Admission held = limiter->Admit();  // another connection's request
    ASSERT_TRUE(held.admitted);
    BrokerRun run(config);
    run.Send(Request("POST", "/anthropic/v1/messages"));
    std::string response = run.Response();
    EXPECT_TRUE(absl::StartsWith(response, "HTTP/1.1 429")) << response;
    EXPECT_THAT(response, HasSubstr("in flight"));
    EXPECT_THAT(response, HasSubstr("retry-after: 1\r\n"));
    run.Join();
    ASSERT_EQ(run.records().size(), 1u);
    EXPECT_TRUE(run.records()[0].refused);
    EXPECT_EQ(run.records()[0].status, 429);
  }
  now += absl::Seconds(1);  // one token back
  {
    BrokerRun run(config);
    run.Send(Request("POST", "/anthropic/v1/messages"));
    EXPECT_TRUE(absl::EndsWith(run.Response(), "a"));
    run.Send(Request("POST", "/anthropic/v1/messages"));
    std::string response = run.Response();
    EXPECT_TRUE(absl::StartsWith(response, "HTTP/1.1 429")) << response;
    EXPECT_THAT(response, HasSubstr("per minute"));
    run.Join();
    ASSERT_EQ(run.records().size(), 2u);
    EXPECT_TRUE(run.records()[1].refused);
  }
  EXPECT_EQ(limiter->in_flight(), 0);
  EXPECT_EQ(upstream.requests().size(), 1u);
}

TEST(ModelBrokerTest, MissingKeyAndUnreachableProviderAnswerWhatToDo) {
  ScriptedUpstream upstream({});
  ModelBrokerConfig no_key = LoopbackConfig(upstream.port());
  no_key.key = [](ModelApi) -> absl::StatusOr<std::string> { return absl::NotFoundError("none"); };
  BrokerRun run(no_key);
  run.Send(Request("POST", "/anthropic/v1/messages"));
  std::string response = run.Response();
  EXPECT_TRUE(absl::StartsWith(response, "HTTP/1.1 503")) << response;
  EXPECT_THAT(response, HasSubstr("run `abox agent login anthropic`"));
  run.Join();
  EXPECT_EQ(upstream.accepted(), 0);

  ModelBrokerConfig unreachable = LoopbackConfig(upstream.port());
  unreachable.connect = [](const std::string&, uint16_t, absl::Time,
                           int) -> absl::StatusOr<UpstreamConnection> {
    return absl::UnavailableError("connection refused");
  };
  BrokerRun run2(unreachable);
  run2.Send(Request("POST", "/anthropic/v1/messages"));
  response = run2.Response();
  EXPECT_TRUE(absl::StartsWith(response, "HTTP/1.1 502")) << response;
  EXPECT_THAT(response, HasSubstr("cannot reach 127.0.0.1:"));
  EXPECT_THAT(response, HasSubstr("api_error"));
  run2.Join();
  ASSERT_EQ(run2.records().size(), 1u);
  EXPECT_EQ(run2.records()[0].status, 502);
  EXPECT_THAT(run2.records()[0].error, Not(HasSubstr(kAnthropicKey)));
}

TEST(ModelBrokerTest, MasksTheKeyIfTheProviderEchoesIt) {
  std::string body = absl::StrCat("{\"echo\":\"", kAnthropicKey, "\"}");
  ScriptedUpstream upstream({{absl::StrCat(
      "HTTP/1.1 400 Bad Request\r\nContent-Length: ", body.size(), "\r\n\r\n", body)}});
  BrokerRun run(LoopbackConfig(upstream.port()));
  run.Send(Request("POST", "/anthropic/v1/messages"));
  std::string response = run.Response();
  EXPECT_THAT(response, Not(HasSubstr(kAnthropicKey)));
  EXPECT_THAT(response, HasSubstr(std::string(sizeof(kAnthropicKey) - 1, '*')));
}

ModelBrokerConfig HttpsConfig(uint16_t port, std::shared_ptr<const UpstreamTrust> trust) {
  ModelBrokerConfig config = LoopbackConfig(port);
  std::string base = absl::StrCat("https://", testing::kTestHost, ":", port);
  config.upstream = [base](ModelApi api) { return ParseModelBaseUrl(api, base); };
  config.trust = std::move(trust);
  return config;
}

TEST(ModelBrokerTest, HttpsUpstreamIsVerified) {
  testing::TestPki pki;
  testing::HttpsUpstream good(pki.server_ctx());
  BrokerRun run(HttpsConfig(good.port(), pki.trust()));
  run.Send(Request("POST", "/anthropic/v1/messages"));
  EXPECT_TRUE(absl::EndsWith(run.Response(), "ok"));
  run.Join();
  EXPECT_EQ(HeaderValue(good.all_received(), "x-api-key"), kAnthropicKey);
  EXPECT_EQ(HeaderValue(good.all_received(), "Host"),
            absl::StrCat(testing::kTestHost, ":", good.port()));

  testing::SslCtxPtr self_signed = testing::MakeServerContext(testing::kTestHost);
  testing::HttpsUpstream bad(self_signed.get());
  BrokerRun run2(HttpsConfig(bad.port(), pki.trust()));
  run2.Send(Request("POST", "/anthropic/v1/messages"));
  std::string response = run2.Response();
  EXPECT_TRUE(absl::StartsWith(response, "HTTP/1.1 502")) << response;
  EXPECT_THAT(response, HasSubstr("did not verify"));
  run2.Join();
  EXPECT_EQ(bad.handshakes(), 0);
  EXPECT_EQ(bad.all_received(), "") << "no request may reach an unverified upstream";
}

}  // namespace
}  // namespace abox::net
