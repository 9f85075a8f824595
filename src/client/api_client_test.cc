// ApiClient against the real HTTP server (src/http) on a temporary socket, with canned
// handlers standing in for aboxd's routes.
#include "src/client/api_client.h"

#include <sys/socket.h>
#include <sys/un.h>

#include <future>
#include <mutex>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "src/api/errors.h"
#include "src/client/api_paths.h"
#include "src/http/testing/test_server.h"

namespace abox::client {
namespace {

using http::Request;
using http::Responder;
using http::Router;
using http::Server;
using http::ServerOptions;
using http::SseEvent;
using http::Stream;
using nlohmann::json;
using ::testing::HasSubstr;

constexpr std::chrono::seconds kWait{20};  // a failure bound, not a timing assertion

std::unique_ptr<ApiClient> ClientFor(const std::string& socket) {
  absl::StatusOr<std::unique_ptr<ApiClient>> client = ApiClient::Create(socket);
  EXPECT_TRUE(client.ok()) << client.status();
  return client.ok() ? *std::move(client) : nullptr;
}

// A server with the routes `add` registers, on a socket in a fresh temp dir.
class ApiClientTest : public ::testing::Test {
 protected:
  void Start(const std::function<void(Router&)>& add, ServerOptions options = {}) {
    Router router;
    add(router);
    options.unix_socket_path = socket_;
    options.stop_grace = std::chrono::milliseconds(2000);
    server_ = http::httptest::StartServer(std::move(options), std::move(router));
    ASSERT_NE(server_, nullptr);
    client_ = ClientFor(socket_);
  }

  http::httptest::TempDir dir_;
  std::string socket_ = dir_.path() + "/run/aboxd.sock";
  std::unique_ptr<Server> server_;
  std::unique_ptr<ApiClient> client_;
};

void Add(Router& router, const std::string& method, const std::string& pattern,
         http::Handler handler) {
  absl::Status added = router.Add(method, pattern, std::move(handler));
  ASSERT_TRUE(added.ok()) << added;
}

TEST_F(ApiClientTest, GetParsesTheJsonBody) {
  Start([](Router& r) {
    Add(r, "GET", "/v1/health", [](Request&, Responder& out) {
      out.Json(200, {{"status", "ok"}, {"pid", 42}});
    });
  });
  absl::StatusOr<ApiResponse> r = client_->Get("/v1/health");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->json["status"], "ok");
  EXPECT_EQ(r->json["pid"], 42);
}

TEST_F(ApiClientTest, KeepsOneConnectionForManyRequests) {
  ServerOptions options;
  options.max_connections = 1;  // a second connection would get 503 too_many_connections
  Start(
      [](Router& r) {
        Add(r, "GET", "/v1/ping", [](Request&, Responder& out) { out.Json(200, {{"pong", 1}}); });
        Add(r, "DELETE", "/v1/thing", [](Request&, Responder& out) { out.Send(204, "", ""); });
      },
      options);
  for (int i = 0; i < 20; ++i) {
    absl::StatusOr<ApiResponse> r = i % 2 ? client_->Get("/v1/ping") : client_->Delete("/v1/thing");
    ASSERT_TRUE(r.ok()) << "request " << i << ": " << r.status();
  }
}

TEST_F(ApiClientTest, ReconnectsWhenTheDaemonRestartedBetweenRequests) {
  auto routes = [](Router& r) {
    Add(r, "GET", "/v1/ping", [](Request&, Responder& out) { out.Json(200, {{"pong", 1}}); });
    Add(r, "POST", "/v1/poke", [](Request&, Responder& out) { out.Json(201, {{"poked", 1}}); });
  };
  Start(routes);
  ASSERT_TRUE(client_->Get("/v1/ping").ok());
  server_->Stop();  // closes the client's kept connection
  server_.reset();
  Router router;
  routes(router);
  ServerOptions options;
  options.unix_socket_path = socket_;
  server_ = http::httptest::StartServer(options, std::move(router));
  absl::StatusOr<ApiResponse> get = client_->Get("/v1/ping");
  EXPECT_TRUE(get.ok()) << get.status();
  server_->Stop();
  server_.reset();
  Router again;
  routes(again);
  server_ = http::httptest::StartServer(options, std::move(again));
  absl::StatusOr<ApiResponse> post = client_->Post("/v1/poke", json::object());
  ASSERT_TRUE(post.ok()) << post.status();
  EXPECT_EQ(post->status, 201);
}

struct ErrorCase {
  absl::Status sent;
  absl::StatusCode expected;
  absl::string_view code;
};

TEST_F(ApiClientTest, ErrorAnswersBecomeStatusesWithTheMessageVerbatim) {
  std::vector<ErrorCase> cases = {
      {api::WithField(absl::NotFoundError("no sandbox \"x\"; list them with `abox ls`"), "id"),
       absl::StatusCode::kNotFound, "not_found"},
      {absl::InvalidArgumentError("cpus: must be 1..64"), absl::StatusCode::kInvalidArgument,
       "bad_request"},
      {absl::FailedPreconditionError("sandbox web is stopped; start a new one"),
       absl::StatusCode::kFailedPrecondition, "conflict"},
      {absl::ResourceExhaustedError("no capacity: 4 of 4 vCPUs used; remove a sandbox"),
       absl::StatusCode::kResourceExhausted, "no_capacity"},
      {absl::UnavailableError("shutting down"), absl::StatusCode::kUnavailable, "unavailable"},
      {absl::DeadlineExceededError("exec still running after 100 ms"),
       absl::StatusCode::kDeadlineExceeded, "timeout"},
  };
  Start([&cases](Router& r) {
    Add(r, "GET", "/v1/fail/{n}", [&cases](Request& req, Responder& out) {
      out.Error(cases[std::stoul(req.Param("n"))].sent);
    });
  });
  for (size_t i = 0; i < cases.size(); ++i) {
    absl::StatusOr<ApiResponse> r = client_->Get(absl::StrCat("/v1/fail/", i));
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), cases[i].expected) << r.status();
    EXPECT_EQ(r.status().message(), cases[i].sent.message());
    EXPECT_EQ(api::ErrorKindOf(r.status()).code, cases[i].code);
  }
  absl::StatusOr<ApiResponse> with_field = client_->Get("/v1/fail/0");
  EXPECT_EQ(api::FieldOf(with_field.status()), "id");
  // The connection survives error answers.
  EXPECT_EQ(client_->Get("/v1/fail/1").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(ApiClientTest, ErrorWithoutTheApiBodyQuotesWhatCame) {
  Start([](Router& r) {
    Add(r, "GET", "/v1/odd",
        [](Request&, Responder& out) { out.Send(502, "text/plain", "upstream went away\n"); });
  });
  absl::StatusOr<ApiResponse> r = client_->Get("/v1/odd");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(r.status().message(), HasSubstr("HTTP 502"));
  EXPECT_THAT(r.status().message(), HasSubstr("upstream went away"));
}

TEST_F(ApiClientTest, PostSendsJsonAndPostBytesSendsRawBytes) {
  std::string binary("a\0b\xff\n", 5);
  Start([&binary](Router& r) {
    Add(r, "POST", "/v1/json", [](Request& req, Responder& out) {
      out.Json(201, {{"content_type", req.Header("content-type").value_or("")},
                     {"body", json::parse(req.body, nullptr, false)}});
    });
    Add(r, "POST", "/v1/bytes", [&binary](Request& req, Responder& out) {
      bool same = req.body == binary && req.Header("content-type") ==
                                            std::optional<std::string>("application/octet-stream");
      out.Send(same ? 204 : 400, "", "");
    });
  });
  absl::StatusOr<ApiResponse> posted = client_->Post("/v1/json", {{"argv", {"echo", "hi"}}});
  ASSERT_TRUE(posted.ok()) << posted.status();
  EXPECT_EQ(posted->json["content_type"], "application/json");
  EXPECT_EQ(posted->json["body"], json({{"argv", {"echo", "hi"}}}));
  absl::StatusOr<ApiResponse> bytes = client_->PostBytes("/v1/bytes", binary);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  EXPECT_EQ(bytes->status, 204);
  EXPECT_TRUE(bytes->json.is_null());
}

TEST_F(ApiClientTest, QueryValuesArriveDecoded) {
  Start([](Router& r) {
    Add(r, "GET", "/v1/sandboxes/{id}", [](Request& req, Responder& out) {
      out.Json(200, {{"id", req.Param("id")}, {"label", req.QueryAll("label")}});
    });
  });
  absl::StatusOr<ApiResponse> r =
      client_->Get(WithQuery(SandboxPath("we b+1"), {{"label", "app=web & co"}, {"label", "x=é"}}));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->json["id"], "we b+1");
  EXPECT_EQ(r->json["label"], json({"app=web & co", "x=é"}));
}

TEST_F(ApiClientTest, OversizedBodyIs413ResourceExhausted) {
  Start([](Router& r) {
    Add(r, "POST", "/v1/stdin", [](Request&, Responder& out) { out.Send(204, "", ""); });
  });
  absl::StatusOr<ApiResponse> r = client_->PostBytes("/v1/stdin", std::string(2 << 20, 'x'));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted) << r.status();
  EXPECT_EQ(api::ErrorKindOf(r.status()).code, "payload_too_large");
}

TEST_F(ApiClientTest, NdjsonStreamDeliversEveryLineThenTheConnectionIsReused) {
  ServerOptions options;
  options.max_connections = 1;
  Start(
      [](Router& r) {
        Add(r, "GET", "/v1/lines", [](Request&, Responder& out) {
          Stream s = out.StartNdjson();
          for (int i = 0; i < 3; ++i) {
            s.WriteJson({{"type", "output"}, {"seq", i}});
          }
          s.WriteJson({{"type", "exit"}});
          s.Finish();
        });
        Add(r, "GET", "/v1/ping", [](Request&, Responder& out) { out.Json(200, {{"pong", 1}}); });
      },
      options);
  std::vector<json> lines;
  absl::Status s = client_->StreamNdjson("/v1/lines", [&](const json& line) {
    lines.push_back(line);
    return true;
  });
  ASSERT_TRUE(s.ok()) << s;
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_EQ(lines[2]["seq"], 2);
  EXPECT_EQ(lines[3]["type"], "exit");
  EXPECT_TRUE(client_->Get("/v1/ping").ok());
}

TEST_F(ApiClientTest, LeavingAStreamEarlyTellsTheDaemonTheReaderWentAway) {
  std::promise<void> cancelled;
  std::mutex mu;
  std::vector<Stream> kept;
  Start([&](Router& r) {
    Add(r, "GET", "/v1/follow", [&](Request&, Responder& out) {
      Stream s = out.StartNdjson();
      s.OnCancel([&cancelled] { cancelled.set_value(); });
      s.WriteJson({{"n", 1}});
      std::lock_guard<std::mutex> lock(mu);
      kept.push_back(s);  // stays open: only the client can end it
    });
  });
  int seen = 0;
  absl::Status s = client_->StreamNdjson("/v1/follow", [&](const json&) {
    ++seen;
    return false;
  });
  EXPECT_TRUE(s.ok()) << s;
  EXPECT_EQ(seen, 1);
  EXPECT_EQ(cancelled.get_future().wait_for(kWait), std::future_status::ready);
  server_->Stop();
}

TEST_F(ApiClientTest, StreamThatBreaksBeforeItsEndIsUnavailable) {
  std::mutex mu;
  std::vector<Stream> kept;
  Start([&](Router& r) {
    Add(r, "GET", "/v1/follow", [&](Request&, Responder& out) {
      Stream s = out.StartNdjson();
      s.WriteJson({{"n", 1}});
      std::lock_guard<std::mutex> lock(mu);
      kept.push_back(s);
    });
  });
  absl::Status s = client_->StreamNdjson("/v1/follow", [&](const json&) {
    server_->Stop();  // the daemon goes away mid-stream
    return true;
  });
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_THAT(s.message(), HasSubstr(socket_));
}

TEST_F(ApiClientTest, StreamErrorAnswerAndMalformedLines) {
  Start([](Router& r) {
    Add(r, "GET", "/v1/missing", [](Request&, Responder& out) {
      out.Error(absl::NotFoundError("no exec \"e1\" in sandbox web"));
    });
    Add(r, "GET", "/v1/garbage", [](Request&, Responder& out) {
      Stream s = out.StartNdjson();
      s.WriteLine("{\"ok\":1}");
      s.WriteLine("not json");
      s.Finish();
    });
  });
  absl::Status missing = client_->StreamNdjson("/v1/missing", [](const json&) { return true; });
  EXPECT_EQ(missing.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(missing.message(), "no exec \"e1\" in sandbox web");
  int good = 0;
  absl::Status garbage = client_->StreamNdjson("/v1/garbage", [&](const json&) {
    ++good;
    return true;
  });
  EXPECT_EQ(garbage.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(garbage.message(), HasSubstr("not json"));
  EXPECT_EQ(good, 1);
}

TEST_F(ApiClientTest, SseStreamParsesEventsAndSendsLastEventId) {
  Start([](Router& r) {
    Add(r, "GET", "/v1/events", [](Request& req, Responder& out) {
      Stream s = out.StartSse();
      s.WriteEvent(SseEvent{"7", "created", req.Header("last-event-id").value_or("none")});
      s.WriteEvent(SseEvent{"8", "ready", "line one\nline two"});
      s.Finish();
    });
  });
  std::vector<client::SseEvent> events;
  absl::Status s = client_->StreamSse(
      "/v1/events",
      [&](const client::SseEvent& e) {
        events.push_back(e);
        return true;
      },
      "6");
  ASSERT_TRUE(s.ok()) << s;
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].id, "7");
  EXPECT_EQ(events[0].event, "created");
  EXPECT_EQ(events[0].data, "6");
  EXPECT_EQ(events[1].event, "ready");
  EXPECT_EQ(events[1].data, "line one\nline two");
}

TEST_F(ApiClientTest, CancelEndsABlockedStreamFromAnotherThread) {
  std::promise<void> streaming;
  std::mutex mu;
  std::vector<Stream> kept;
  Start([&](Router& r) {
    Add(r, "GET", "/v1/quiet", [&](Request&, Responder& out) {
      Stream s = out.StartNdjson();
      s.WriteJson({{"hello", 1}});
      std::lock_guard<std::mutex> lock(mu);
      kept.push_back(s);
    });
  });
  auto result = std::async(std::launch::async, [&] {
    return client_->StreamNdjson("/v1/quiet", [&](const json&) {
      streaming.set_value();
      return true;
    });
  });
  ASSERT_EQ(streaming.get_future().wait_for(kWait), std::future_status::ready);
  client_->Cancel();
  ASSERT_EQ(result.wait_for(kWait), std::future_status::ready);
  EXPECT_EQ(result.get().code(), absl::StatusCode::kCancelled);
  server_->Stop();
}

TEST_F(ApiClientTest, TimeoutBoundsAnUnansweredRequest) {
  std::mutex mu;
  std::vector<Responder> unanswered;
  Start([&](Router& r) {
    Add(r, "GET", "/v1/slow", [&](Request&, Responder& out) {
      std::lock_guard<std::mutex> lock(mu);
      unanswered.push_back(out);
    });
  });
  client_->set_timeout(absl::Milliseconds(100));
  absl::StatusOr<ApiResponse> r = client_->Get("/v1/slow");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDeadlineExceeded) << r.status();
  EXPECT_THAT(r.status().message(), HasSubstr("GET /v1/slow"));
  server_->Stop();
}

TEST(ApiClientConnectTest, NothingListeningIsMarkedAndNamesTheSocket) {
  http::httptest::TempDir dir;
  std::unique_ptr<ApiClient> missing = ClientFor(dir.path() + "/none.sock");
  absl::StatusOr<ApiResponse> r = missing->Get("/v1/health");
  EXPECT_TRUE(IsNothingListening(r.status())) << r.status();
  EXPECT_THAT(r.status().message(), HasSubstr(dir.path() + "/none.sock"));

  // A socket file whose daemon died: bound, never listening.
  std::string stale = dir.path() + "/stale.sock";
  base::UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, stale.c_str(), stale.size() + 1);
  ASSERT_EQ(::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  absl::StatusOr<ApiResponse> s = ClientFor(stale)->Get("/v1/health");
  EXPECT_TRUE(IsNothingListening(s.status())) << s.status();
}

TEST(ApiClientConnectTest, ReachesASocketPathLongerThanSunPath) {
  http::httptest::TempDir dir;
  std::string deep = dir.path() + "/" + std::string(60, 'd') + "/" + std::string(60, 'e');
  Router router;
  Add(router, "GET", "/v1/health", [](Request&, Responder& out) {
    out.Json(200, {{"status", "ok"}});
  });
  ServerOptions options;
  options.unix_socket_path = deep + "/aboxd.sock";
  ASSERT_GT(options.unix_socket_path.size(), sizeof(sockaddr_un::sun_path));
  std::unique_ptr<Server> server = http::httptest::StartServer(options, std::move(router));
  ASSERT_NE(server, nullptr);
  absl::StatusOr<ApiResponse> r = ClientFor(options.unix_socket_path)->Get("/v1/health");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->json["status"], "ok");
}

}  // namespace
}  // namespace abox::client
