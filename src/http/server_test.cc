// The server over real unix sockets: JSON round trips, error bodies, keep-alive, limits, load.
#include "src/http/server.h"

#include <unistd.h>

#include <future>
#include <mutex>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "src/api/errors.h"
#include "src/api/json_body.h"
#include "src/http/openapi_route.h"
#include "src/http/stream_format.h"
#include "src/http/testing/test_server.h"

namespace abox::http {
namespace {

using httptest::TempDir;
using nlohmann::json;
using testing::HasSubstr;

// GET /v1/ping, POST /v1/sandboxes (strict body), GET /v1/sandboxes/{id}, GET /v1/whoami.
Router DemoRouter() {
  Router r;
  EXPECT_TRUE(r.Add("GET", "/v1/ping", [](Request&, Responder& out) {
                 out.Json(200, {{"pong", true}});
               }).ok());
  EXPECT_TRUE(r.Add("POST", "/v1/sandboxes",
                    [](Request& request, Responder& out) {
                      absl::StatusOr<json> body = api::ParseObject(request.body);
                      if (!body.ok()) {
                        out.Error(body.status());
                        return;
                      }
                      api::Reader reader(*body);
                      std::string image;
                      int64_t cpus = 1;
                      reader.RequiredString("image", &image);
                      reader.OptionalInt("cpus", &cpus, 1, 64);
                      if (absl::Status s = reader.Finish(); !s.ok()) {
                        out.Error(s);
                        return;
                      }
                      out.Json(201, {{"image", image}, {"cpus", cpus}},
                               {{"Location", "/v1/sandboxes/sb-1"}});
                    },
                    {.blocking = true})
                  .ok());
  EXPECT_TRUE(
      r.Add("GET", "/v1/sandboxes/{id}", [](Request& request, Responder& out) {
         if (request.Param("id") != "sb-1") {
           out.Error(absl::NotFoundError("no sandbox \"" + request.Param("id") + "\""));
           return;
         }
         out.Json(200, {{"id", request.Param("id")}, {"query", request.Query("q").value_or("")}});
       }).ok());
  EXPECT_TRUE(r.Add("GET", "/v1/whoami", [](Request& request, Responder& out) {
                 out.Json(200, {{"uid", request.peer.uid.value_or(-1)},
                                {"pid", request.peer.pid.value_or(-1)},
                                {"unix", request.peer.transport == Transport::kUnix}});
               }).ok());
  return r;
}

class ServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = httptest::StartServer(httptest::TestOptions(dir_), DemoRouter());
    ASSERT_NE(server_, nullptr);
  }

  // One request on a fresh connection.
  httptest::Response Do(absl::string_view method, absl::string_view target,
                        absl::string_view body = "", const httptest::Headers& headers = {}) {
    std::unique_ptr<httptest::HttpTestClient> client = httptest::ConnectTo(*server_);
    if (client == nullptr) {
      return {};
    }
    absl::StatusOr<httptest::Response> response = client->Request(method, target, body, headers);
    EXPECT_TRUE(response.ok()) << response.status();
    return response.ok() ? *response : httptest::Response{};
  }

  // Expects the JSON error shape with `code` (and `field` when given).
  static void ExpectError(const httptest::Response& r, int status, const std::string& code,
                          std::optional<std::string> field = std::nullopt) {
    EXPECT_EQ(r.status, status) << r.body;
    EXPECT_EQ(r.Header("content-type"), "application/json");
    json body = r.Json();
    ASSERT_TRUE(body.is_object()) << r.body;
    ASSERT_TRUE(body["error"].is_object()) << r.body;
    EXPECT_EQ(body["error"]["code"], code) << r.body;
    EXPECT_TRUE(body["error"]["message"].is_string()) << r.body;
    if (field.has_value()) {
      EXPECT_EQ(body["error"]["field"], *field) << r.body;
    }
  }

  TempDir dir_;
  std::unique_ptr<Server> server_;
};

TEST_F(ServerTest, GetAndPostJsonRoundTrip) {
  httptest::Response get = Do("GET", "/v1/ping");
  EXPECT_EQ(get.status, 200);
  EXPECT_EQ(get.Header("content-type"), "application/json");
  EXPECT_EQ(get.Json(), (json{{"pong", true}}));

  httptest::Response post = Do("POST", "/v1/sandboxes", R"({"image": "debian", "cpus": 4})",
                               {{"Content-Type", "application/json"}});
  EXPECT_EQ(post.status, 201);
  EXPECT_EQ(post.Json(), (json{{"image", "debian"}, {"cpus", 4}}));
  EXPECT_EQ(post.Header("location"), "/v1/sandboxes/sb-1");

  httptest::Response got = Do("GET", "/v1/sandboxes/sb-1?q=a%20b");
  EXPECT_EQ(got.Json(), (json{{"id", "sb-1"}, {"query", "a b"}}));
}

TEST_F(ServerTest, HandlersSeeThePeerCredentials) {
  json who = Do("GET", "/v1/whoami").Json();
  EXPECT_EQ(who["uid"], ::geteuid());
  EXPECT_EQ(who["pid"], ::getpid());
  EXPECT_EQ(who["unix"], true);
}

TEST_F(ServerTest, SocketIsOwnerOnlyInAnOwnerOnlyDirectory) {
  struct stat st {};
  ASSERT_EQ(::stat(server_->socket_path().c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  ASSERT_EQ(::stat((dir_.path() + "/run").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
}

TEST_F(ServerTest, ErrorsHaveTheJsonErrorShape) {
  ExpectError(Do("GET", "/v1/nothing-here"), 404, "not_found");
  httptest::Response wrong_method = Do("DELETE", "/v1/ping");
  ExpectError(wrong_method, 405, "method_not_allowed");
  EXPECT_EQ(wrong_method.Header("allow"), "GET");
  ExpectError(Do("GET", "/v1/sandboxes/nope"), 404, "not_found");
  ExpectError(Do("GET", "/v1/sandboxes/.."), 400, "bad_request", "id");
  ExpectError(Do("POST", "/v1/sandboxes", R"({"image": "debian", "cpu": 2})"), 400, "bad_request",
              "cpu");
  ExpectError(Do("POST", "/v1/sandboxes", R"({"image": 5})"), 400, "bad_request", "image");
  ExpectError(Do("POST", "/v1/sandboxes", R"({"image": )"), 400, "bad_request");
  ExpectError(Do("GET", "/v1/ping?bad=%zz"), 400, "bad_request");
}

TEST_F(ServerTest, BodyOverTheLimitIs413) {
  // Declared too large: refused from the header, before the body is read.
  std::unique_ptr<httptest::HttpTestClient> client = httptest::ConnectTo(*server_);
  ASSERT_TRUE(client->Send("POST", "/v1/sandboxes", "", {{"Content-Length", "2000000"}}).ok());
  absl::StatusOr<httptest::Response> declared = client->ReadResponse();
  ASSERT_TRUE(declared.ok()) << declared.status();
  ExpectError(*declared, 413, "payload_too_large");
  EXPECT_FALSE(declared->keep_alive);

  // Really sent: the server drains what it will not read, so the client sees the 413.
  ExpectError(Do("POST", "/v1/sandboxes", std::string(2 << 20, 'x')), 413, "payload_too_large");

  // Chunked with no length up front: refused once the limit is crossed.
  std::string chunk(512 << 10, 'y');
  std::string chunked_body;
  for (int i = 0; i < 3; ++i) {
    chunked_body += ChunkFrame(chunk);
  }
  chunked_body += "0\r\n\r\n";
  ExpectError(Do("POST", "/v1/sandboxes", chunked_body, {{"Transfer-Encoding", "chunked"}}), 413,
              "payload_too_large");
}

TEST_F(ServerTest, MalformedHttpIs400AndCloses) {
  std::unique_ptr<httptest::HttpTestClient> client = httptest::ConnectTo(*server_);
  ASSERT_TRUE(client->WriteRaw("GET /v1/ping HTTP/1.1\r\nBad Header\r\n\r\n").ok());
  absl::StatusOr<httptest::Response> r = client->ReadResponse();
  ASSERT_TRUE(r.ok()) << r.status();
  ExpectError(*r, 400, "bad_request");
  EXPECT_TRUE(client->ServerClosed());
}

TEST_F(ServerTest, KeepAliveServesTwoRequestsOnOneConnection) {
  std::unique_ptr<httptest::HttpTestClient> client = httptest::ConnectTo(*server_);
  absl::StatusOr<httptest::Response> first = client->Request("GET", "/v1/ping");
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_TRUE(first->keep_alive);
  absl::StatusOr<httptest::Response> second =
      client->Request("POST", "/v1/sandboxes", R"({"image": "alpine"})");
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(second->status, 201);
  EXPECT_EQ(server_->connection_count(), 1u);
}

TEST_F(ServerTest, PipelinedRequestsAreAnsweredInOrder) {
  std::unique_ptr<httptest::HttpTestClient> client = httptest::ConnectTo(*server_);
  ASSERT_TRUE(client
                  ->WriteRaw("GET /v1/sandboxes/sb-1?q=1 HTTP/1.1\r\nHost: x\r\n\r\n"
                             "GET /v1/sandboxes/sb-1?q=2 HTTP/1.1\r\nHost: x\r\n\r\n")
                  .ok());
  absl::StatusOr<httptest::Response> a = client->ReadResponse();
  absl::StatusOr<httptest::Response> b = client->ReadResponse();
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->Json()["query"], "1");
  EXPECT_EQ(b->Json()["query"], "2");
}

TEST_F(ServerTest, Http10GetsAnAnswerAndAClose) {
  std::unique_ptr<httptest::HttpTestClient> client = httptest::ConnectTo(*server_);
  ASSERT_TRUE(client->WriteRaw("GET /v1/ping HTTP/1.0\r\n\r\n").ok());
  absl::StatusOr<httptest::Response> r = client->ReadResponse();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->status, 200);
  EXPECT_TRUE(client->ServerClosed());
}

TEST_F(ServerTest, HeadIsGetWithoutTheBody) {
  std::unique_ptr<httptest::HttpTestClient> client = httptest::ConnectTo(*server_);
  ASSERT_TRUE(client->WriteRaw("HEAD /v1/ping HTTP/1.1\r\nHost: x\r\n\r\n").ok());
  absl::StatusOr<httptest::Response> head = client->ReadHeader();
  ASSERT_TRUE(head.ok()) << head.status();
  EXPECT_EQ(head->status, 200);
  EXPECT_EQ(head->Header("content-length"), std::to_string(json{{"pong", true}}.dump().size()));
  // No body followed: the next response on the connection parses cleanly.
  absl::StatusOr<httptest::Response> get = client->Request("GET", "/v1/ping");
  ASSERT_TRUE(get.ok()) << get.status();
  EXPECT_EQ(get->Json(), (json{{"pong", true}}));
}

TEST_F(ServerTest, ExpectContinueGets100ThenTheResponse) {
  std::unique_ptr<httptest::HttpTestClient> client = httptest::ConnectTo(*server_);
  std::string body = R"({"image": "debian"})";
  ASSERT_TRUE(client
                  ->WriteRaw("POST /v1/sandboxes HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n"
                             "Content-Length: " +
                             std::to_string(body.size()) + "\r\n\r\n")
                  .ok());
  ASSERT_TRUE(client->ReadUntil("HTTP/1.1 100 Continue\r\n\r\n").ok());
  ASSERT_TRUE(client->ReadHeader().ok());  // the 100
  ASSERT_TRUE(client->WriteRaw(body).ok());
  absl::StatusOr<httptest::Response> r = client->ReadResponse();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->status, 201);
}

TEST_F(ServerTest, FiftySequentialAndTwentyConcurrentRequestsAreAllAnswered) {
  std::unique_ptr<httptest::HttpTestClient> client = httptest::ConnectTo(*server_);
  for (int i = 0; i < 50; ++i) {
    absl::StatusOr<httptest::Response> r = client->Request("GET", "/v1/ping");
    ASSERT_TRUE(r.ok()) << i << ": " << r.status();
    ASSERT_EQ(r->status, 200) << i;
  }
  std::vector<std::future<int>> results;
  results.reserve(20);
  for (int i = 0; i < 20; ++i) {
    results.push_back(std::async(std::launch::async, [this, i] {
      absl::StatusOr<std::unique_ptr<httptest::HttpTestClient>> c =
          httptest::HttpTestClient::ConnectUnix(server_->socket_path());
      if (!c.ok()) {
        return -1;
      }
      absl::StatusOr<httptest::Response> r =
          (*c)->Request("POST", "/v1/sandboxes", json{{"image", "img" + std::to_string(i)}}.dump());
      return r.ok() && r->Json()["image"] == "img" + std::to_string(i) ? r->status : -2;
    }));
  }
  for (auto& result : results) {
    EXPECT_EQ(result.get(), 201);
  }
}

TEST(ServerBehaviourTest, BlockingHandlerDoesNotBlockTheLoop) {
  TempDir dir;
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  Router router;
  ASSERT_TRUE(router
                  .Add("POST", "/v1/slow",
                       [released](Request&, Responder& out) {
                         released.wait();
                         out.Json(200, {{"slow", true}});
                       },
                       {.blocking = true})
                  .ok());
  ASSERT_TRUE(router
                  .Add("GET", "/v1/fast",
                       [](Request&, Responder& out) {
                         out.Json(200, {{"fast", true}});
                       })
                  .ok());
  std::unique_ptr<Server> server =
      httptest::StartServer(httptest::TestOptions(dir), std::move(router));
  ASSERT_NE(server, nullptr);
  std::unique_ptr<httptest::HttpTestClient> slow = httptest::ConnectTo(*server);
  ASSERT_TRUE(slow->Send("POST", "/v1/slow", "").ok());
  // While the slow handler waits on a worker, the loop still answers others.
  std::unique_ptr<httptest::HttpTestClient> fast = httptest::ConnectTo(*server);
  absl::StatusOr<httptest::Response> quick = fast->Request("GET", "/v1/fast");
  ASSERT_TRUE(quick.ok()) << quick.status();
  EXPECT_EQ(quick->status, 200);
  release.set_value();
  absl::StatusOr<httptest::Response> late = slow->ReadResponse();
  ASSERT_TRUE(late.ok()) << late.status();
  EXPECT_EQ(late->Json(), (json{{"slow", true}}));
}

TEST(ServerBehaviourTest, HandlerMayAnswerLaterFromAnotherThread) {
  TempDir dir;
  std::vector<std::thread> threads;
  Router router;
  ASSERT_TRUE(
      router
          .Add("GET", "/v1/later",
               [&threads](Request&, Responder& out) {
                 threads.emplace_back([out]() mutable { out.Json(200, {{"later", true}}); });
               })
          .ok());
  std::unique_ptr<Server> server =
      httptest::StartServer(httptest::TestOptions(dir), std::move(router));
  std::unique_ptr<httptest::HttpTestClient> client = httptest::ConnectTo(*server);
  absl::StatusOr<httptest::Response> r = client->Request("GET", "/v1/later");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->Json(), (json{{"later", true}}));
  for (std::thread& t : threads) {
    t.join();
  }
}

TEST(ServerBehaviourTest, HandlerThatNeverRespondsYields500) {
  TempDir dir;
  Router router;
  ASSERT_TRUE(router.Add("GET", "/v1/forgetful", [](Request&, Responder&) {}).ok());
  std::unique_ptr<Server> server =
      httptest::StartServer(httptest::TestOptions(dir), std::move(router));
  std::unique_ptr<httptest::HttpTestClient> client = httptest::ConnectTo(*server);
  absl::StatusOr<httptest::Response> r = client->Request("GET", "/v1/forgetful");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->status, 500);
  EXPECT_EQ(r->Json()["error"]["code"], "internal");
  EXPECT_THAT(r->Json()["error"]["message"].get<std::string>(), HasSubstr("GET /v1/forgetful"));
  // The connection is still usable.
  EXPECT_TRUE(client->Request("GET", "/v1/forgetful").ok());
}

TEST(ServerBehaviourTest, SecondResponseAndBadHeadersAreDropped) {
  TempDir dir;
  Router router;
  ASSERT_TRUE(
      router
          .Add("GET", "/v1/twice",
               [](Request&, Responder& out) {
                 out.Json(200, {{"first", true}}, {{"X-Bad", "a\r\nSet-Cookie: x"}, {"X-Ok", "1"}});
                 out.Json(500, {{"second", true}});
               })
          .ok());
  std::unique_ptr<Server> server =
      httptest::StartServer(httptest::TestOptions(dir), std::move(router));
  std::unique_ptr<httptest::HttpTestClient> client = httptest::ConnectTo(*server);
  absl::StatusOr<httptest::Response> r = client->Request("GET", "/v1/twice");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->Json(), (json{{"first", true}}));
  EXPECT_EQ(r->Header("x-ok"), "1");
  EXPECT_EQ(r->Header("x-bad"), std::nullopt);
  EXPECT_EQ(r->Header("set-cookie"), std::nullopt);
  // Nothing else arrives: the next request gets its own answer.
  absl::StatusOr<httptest::Response> again = client->Request("GET", "/v1/twice");
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->Json(), (json{{"first", true}}));
}

TEST(ServerBehaviourTest, ServesTheOpenApiDocument) {
  TempDir dir;
  Router router;
  ASSERT_TRUE(AddOpenApiRoute(router, "openapi: 3.0.3\ninfo:\n  title: abox\n").ok());
  EXPECT_EQ(AddOpenApiRoute(router, "x").code(), absl::StatusCode::kAlreadyExists);
  std::unique_ptr<Server> server =
      httptest::StartServer(httptest::TestOptions(dir), std::move(router));
  std::unique_ptr<httptest::HttpTestClient> client = httptest::ConnectTo(*server);
  absl::StatusOr<httptest::Response> r = client->Request("GET", "/v1/openapi.yaml");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->Header("content-type"), "application/yaml");
  EXPECT_EQ(r->body, "openapi: 3.0.3\ninfo:\n  title: abox\n");
}

// DemoRouter plus GET /v1/hold, answered only when the test calls Release().
class HoldingRouter {
 public:
  Router Make() {
    Router r = DemoRouter();
    EXPECT_TRUE(r.Add("GET", "/v1/hold", [this](Request&, Responder& out) {
                   std::lock_guard lock(mu_);
                   held_.push_back(out);
                 }).ok());
    return r;
  }
  size_t held() {
    std::lock_guard lock(mu_);
    return held_.size();
  }
  void Release() {
    std::lock_guard lock(mu_);
    for (Responder& r : held_) {
      r.Json(200, {{"released", true}});
    }
    held_.clear();
  }

 private:
  std::mutex mu_;
  std::vector<Responder> held_;
};

TEST(ServerBehaviourTest, ConnectionsBeyondTheLimitGet503OnlyWhenAllAreBusy) {
  TempDir dir;
  ServerOptions options = httptest::TestOptions(dir);
  options.max_connections = 2;
  HoldingRouter holding;
  std::unique_ptr<Server> server = httptest::StartServer(options, holding.Make());
  std::unique_ptr<httptest::HttpTestClient> a = httptest::ConnectTo(*server);
  std::unique_ptr<httptest::HttpTestClient> b = httptest::ConnectTo(*server);
  ASSERT_TRUE(a->Send("GET", "/v1/hold", "").ok());
  ASSERT_TRUE(b->Send("GET", "/v1/hold", "").ok());
  for (int attempt = 0; attempt < 500 && holding.held() < 2; ++attempt) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_EQ(holding.held(), 2U);  // both connections are busy with a request
  std::unique_ptr<httptest::HttpTestClient> c = httptest::ConnectTo(*server);
  absl::StatusOr<httptest::Response> refused = c->ReadResponse();
  ASSERT_TRUE(refused.ok()) << refused.status();
  EXPECT_EQ(refused->status, 503);
  EXPECT_EQ(refused->Json()["error"]["code"], "too_many_connections");
  EXPECT_THAT(refused->Json()["error"]["message"].get<std::string>(), HasSubstr("retry"));
  holding.Release();
  ASSERT_TRUE(a->ReadResponse().ok());
  ASSERT_TRUE(b->ReadResponse().ok());
  // a and b now idle on keep-alive: a new client takes the slot of the one idle longest.
  std::unique_ptr<httptest::HttpTestClient> d = httptest::ConnectTo(*server);
  absl::StatusOr<httptest::Response> ok = d->Request("GET", "/v1/ping");
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->status, 200);
  EXPECT_TRUE(a->ServerClosed());
  EXPECT_LE(server->connection_count(), 2U);
}

// Issue 11 item 17: a few hundred idle or half-open connections made aboxd answer 503 to the
// user's CLI. Now they give way to a new client, and each is closed by the head deadline.
TEST(ServerBehaviourTest, HundredsOfSilentAndDribblingConnectionsCannotStarveANewClient) {
  TempDir dir;
  ServerOptions options = httptest::TestOptions(dir);
  options.request_head_timeout = std::chrono::milliseconds(1500);
  ASSERT_EQ(options.max_connections, 256U);  // the daemon's default
  std::unique_ptr<Server> server = httptest::StartServer(options, DemoRouter());
  std::vector<std::unique_ptr<httptest::HttpTestClient>> silent;
  for (int i = 0; i < 300; ++i) {
    silent.push_back(httptest::ConnectTo(*server));
    ASSERT_NE(silent.back(), nullptr);
  }
  std::vector<std::unique_ptr<httptest::HttpTestClient>> dribblers;
  for (int i = 0; i < 20; ++i) {
    dribblers.push_back(httptest::ConnectTo(*server));
    ASSERT_NE(dribblers.back(), nullptr);
  }
  // Slowloris: one byte of a never-ending header every 250 ms, on every dribbler, for longer
  // than the deadline. A write that fails means the server closed that connection.
  const std::string head = "GET /v1/ping HTTP/1.1\r\n";
  auto started = std::chrono::steady_clock::now();
  std::vector<bool> cut(dribblers.size(), false);
  for (size_t byte = 0; byte < head.size(); ++byte) {
    for (size_t i = 0; i < dribblers.size(); ++i) {
      if (!cut[i] && !dribblers[i]->WriteRaw(head.substr(byte, 1)).ok()) {
        cut[i] = true;
      }
    }
    if (byte == 2) {
      // Every slot is taken by a silent or dribbling connection: the user's request still
      // gets its answer, at once (not after the head deadline).
      std::unique_ptr<httptest::HttpTestClient> cli = httptest::ConnectTo(*server);
      absl::StatusOr<httptest::Response> health = cli->Request("GET", "/v1/ping");
      ASSERT_TRUE(health.ok()) << health.status();
      EXPECT_EQ(health->status, 200) << health->body;
      EXPECT_LT(std::chrono::steady_clock::now() - started, options.request_head_timeout);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  // 250 ms x 23 bytes is far past the deadline: every connection was closed by the server.
  for (size_t i = 0; i < dribblers.size(); ++i) {
    EXPECT_TRUE(cut[i] || dribblers[i]->ServerClosed()) << "dribbler " << i << " still open";
  }
  for (size_t i = 0; i < silent.size(); ++i) {
    EXPECT_TRUE(silent[i]->ServerClosed()) << "silent connection " << i << " still open";
  }
  for (int attempt = 0; attempt < 200 && server->connection_count() > 0; ++attempt) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(server->connection_count(), 0U);
}

TEST(ServerBehaviourTest, IdleKeepAliveConnectionIsClosedAfterTheHeadTimeout) {
  TempDir dir;
  ServerOptions options = httptest::TestOptions(dir);
  options.request_head_timeout = std::chrono::milliseconds(200);
  std::unique_ptr<Server> server = httptest::StartServer(options, DemoRouter());
  std::unique_ptr<httptest::HttpTestClient> client = httptest::ConnectTo(*server);
  absl::StatusOr<httptest::Response> first = client->Request("GET", "/v1/ping");
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_TRUE(first->keep_alive);
  EXPECT_TRUE(client->ServerClosed());  // nothing more sent: closed after the idle deadline
}

TEST(ServerBehaviourTest, IdleConnectionIsClosedAfterTheHeadTimeout) {
  TempDir dir;
  ServerOptions options = httptest::TestOptions(dir);
  options.request_head_timeout = std::chrono::milliseconds(100);
  std::unique_ptr<Server> server = httptest::StartServer(options, DemoRouter());
  std::unique_ptr<httptest::HttpTestClient> idle = httptest::ConnectTo(*server);
  ASSERT_TRUE(idle->WriteRaw("GET /v1/ping HTTP/1.1\r\n").ok());  // and never finishes
  EXPECT_TRUE(idle->ServerClosed());
}

TEST(ServerBehaviourTest, ABodyGetsTheReadTimeoutNotTheHeadTimeout) {
  TempDir dir;
  ServerOptions options = httptest::TestOptions(dir);
  options.request_head_timeout = std::chrono::milliseconds(200);
  std::unique_ptr<Server> server = httptest::StartServer(options, DemoRouter());
  std::unique_ptr<httptest::HttpTestClient> client = httptest::ConnectTo(*server);
  ASSERT_TRUE(client
                  ->WriteRaw("POST /v1/sandboxes HTTP/1.1\r\nContent-Type: application/json\r\n"
                             "Content-Length: 18\r\n\r\n{\"image\":")
                  .ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(600));  // past the head deadline
  ASSERT_TRUE(client->WriteRaw("\"debian\"}").ok());
  absl::StatusOr<httptest::Response> r = client->ReadResponse();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->status, 201) << r->body;
}

TEST(ServerBehaviourTest, StopClosesIdleConnectionsAndRemovesTheSocket) {
  TempDir dir;
  std::unique_ptr<Server> server = httptest::StartServer(httptest::TestOptions(dir), DemoRouter());
  std::unique_ptr<httptest::HttpTestClient> client = httptest::ConnectTo(*server);
  ASSERT_TRUE(client->Request("GET", "/v1/ping").ok());
  std::string path = server->socket_path();
  server->Stop();
  EXPECT_TRUE(client->ServerClosed());
  EXPECT_NE(::access(path.c_str(), F_OK), 0);
  server->Stop();  // idempotent
  // The path is free for the next daemon.
  std::unique_ptr<Server> next = httptest::StartServer(httptest::TestOptions(dir), DemoRouter());
  ASSERT_NE(next, nullptr);
  std::unique_ptr<httptest::HttpTestClient> again = httptest::ConnectTo(*next);
  EXPECT_TRUE(again->Request("GET", "/v1/ping").ok());
}

TEST(ServerBehaviourTest, CreateRejectsBadOptions) {
  TempDir dir;
  ServerOptions no_path;
  EXPECT_EQ(Server::Create(no_path, Router()).status().code(), absl::StatusCode::kInvalidArgument);
  ServerOptions short_token = httptest::TestOptions(dir);
  short_token.tcp_port = 0;
  short_token.tcp_bearer_token = "short";
  absl::StatusOr<std::unique_ptr<Server>> r = Server::Create(short_token, Router());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("bearer token"));
}

}  // namespace
}  // namespace abox::http
