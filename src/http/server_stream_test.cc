// Streaming responses over real sockets: chunked NDJSON, server-sent events, and what happens
// when the client goes away.
#include <future>
#include <mutex>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "src/http/server.h"
#include "src/http/testing/test_server.h"

namespace abox::http {
namespace {

using nlohmann::json;
using testing::HasSubstr;

constexpr std::chrono::seconds kWait{20};  // generous: a failure, not a timing assertion

// A promise that can be fulfilled from any thread, once.
class Signal {
 public:
  void Notify() {
    std::call_once(once_, [this] { promise_.set_value(); });
  }
  bool WaitFor() { return future_.wait_for(kWait) == std::future_status::ready; }
  bool Done() { return future_.wait_for(std::chrono::seconds(0)) == std::future_status::ready; }

 private:
  std::once_flag once_;
  std::promise<void> promise_;
  std::shared_future<void> future_ = promise_.get_future().share();
};

TEST(ServerStreamTest, ChunkedNdjsonDeliversThreeLinesThenKeepsTheConnection) {
  httptest::TempDir dir;
  Router router;
  ASSERT_TRUE(router
                  .Add("GET", "/v1/lines",
                       [](Request&, Responder& out) {
                         Stream stream = out.StartNdjson();
                         EXPECT_TRUE(stream.WriteJson({{"n", 1}}));
                         EXPECT_TRUE(stream.WriteJson({{"n", 2}}));
                         EXPECT_TRUE(stream.WriteLine(R"({"n":3})"));
                         stream.Finish();
                         EXPECT_FALSE(stream.WriteLine("{}"));  // after Finish
                       })
                  .ok());
  ASSERT_TRUE(router
                  .Add("GET", "/v1/ping",
                       [](Request&, Responder& out) {
                         out.Json(200, {{"pong", true}});
                       })
                  .ok());
  std::unique_ptr<Server> server =
      httptest::StartServer(httptest::TestOptions(dir), std::move(router));
  std::unique_ptr<httptest::HttpTestClient> client = httptest::ConnectTo(*server);
  absl::StatusOr<httptest::Response> r = client->Request("GET", "/v1/lines");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->status, 200);
  EXPECT_TRUE(r->chunked);
  EXPECT_EQ(r->Header("content-type"), "application/x-ndjson");
  EXPECT_EQ(r->body, "{\"n\":1}\n{\"n\":2}\n{\"n\":3}\n");
  absl::StatusOr<httptest::Response> next = client->Request("GET", "/v1/ping");
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_EQ(next->status, 200);
}

TEST(ServerStreamTest, StreamIsFinishedWhenTheLastHandleIsDropped) {
  httptest::TempDir dir;
  std::vector<std::thread> producers;
  Router router;
  ASSERT_TRUE(router
                  .Add("GET", "/v1/produce",
                       [&producers](Request&, Responder& out) {
                         Stream stream = out.StartNdjson();
                         producers.emplace_back([stream]() mutable {
                           for (int i = 0; i < 3; ++i) {
                             stream.WriteJson({{"i", i}});
                           }
                         });  // no Finish(): dropping the handle ends the body
                       })
                  .ok());
  std::unique_ptr<Server> server =
      httptest::StartServer(httptest::TestOptions(dir), std::move(router));
  std::unique_ptr<httptest::HttpTestClient> client = httptest::ConnectTo(*server);
  absl::StatusOr<httptest::Response> r = client->Request("GET", "/v1/produce");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->body, "{\"i\":0}\n{\"i\":1}\n{\"i\":2}\n");
  for (std::thread& t : producers) {
    t.join();
  }
}

TEST(ServerStreamTest, SseSendsEventsAndSeesTheClientDisconnect) {
  httptest::TempDir dir;
  Signal cancelled;
  Signal sent_second;
  std::mutex mu;
  Stream kept;  // the handler's stream, kept open after the handler returns
  Router router;
  ASSERT_TRUE(router
                  .Add("GET", "/v1/events",
                       [&](Request& request, Responder& out) {
                         EXPECT_EQ(request.Header("last-event-id"), "41");
                         Stream stream = out.StartSse();
                         stream.OnCancel([&cancelled] { cancelled.Notify(); });
                         EXPECT_TRUE(stream.WriteEvent(
                             {.id = "42", .event = "sandbox.created", .data = R"({"id":"sb-1"})"}));
                         EXPECT_TRUE(stream.WriteEvent(
                             {.id = "43", .event = "sandbox.ready", .data = "line1\nline2"},
                             [&sent_second] { sent_second.Notify(); }));
                         std::lock_guard<std::mutex> lock(mu);
                         kept = stream;
                       })
                  .ok());
  std::unique_ptr<Server> server =
      httptest::StartServer(httptest::TestOptions(dir), std::move(router));
  std::unique_ptr<httptest::HttpTestClient> client = httptest::ConnectTo(*server);
  ASSERT_TRUE(client->Send("GET", "/v1/events", "", {{"Last-Event-ID", "41"}}).ok());
  absl::StatusOr<httptest::Response> header = client->ReadHeader();
  ASSERT_TRUE(header.ok()) << header.status();
  EXPECT_EQ(header->status, 200);
  EXPECT_EQ(header->Header("content-type"), "text/event-stream");
  EXPECT_EQ(header->Header("cache-control"), "no-cache");
  absl::StatusOr<std::string> seen = client->ReadUntil("data: line2\n\n");
  ASSERT_TRUE(seen.ok()) << seen.status();
  EXPECT_THAT(*seen, HasSubstr("id: 42\nevent: sandbox.created\ndata: {\"id\":\"sb-1\"}\n\n"));
  EXPECT_THAT(*seen, HasSubstr("id: 43\nevent: sandbox.ready\ndata: line1\ndata: line2\n\n"));
  ASSERT_TRUE(sent_second.WaitFor());
  EXPECT_FALSE(cancelled.Done());

  client->Close();  // mid-stream
  ASSERT_TRUE(cancelled.WaitFor()) << "the handler never learned the client left";
  std::lock_guard<std::mutex> lock(mu);
  EXPECT_TRUE(kept.cancelled());
  EXPECT_FALSE(kept.WriteEvent({.data = "nobody listens"}));
}

TEST(ServerStreamTest, IdleSseStreamGetsKeepaliveComments) {
  httptest::TempDir dir;
  ServerOptions options = httptest::TestOptions(dir);
  options.sse_keepalive = std::chrono::milliseconds(20);
  std::mutex mu;
  Stream kept;
  Router router;
  ASSERT_TRUE(router
                  .Add("GET", "/v1/events",
                       [&](Request&, Responder& out) {
                         std::lock_guard<std::mutex> lock(mu);
                         kept = out.StartSse();
                       })
                  .ok());
  std::unique_ptr<Server> server = httptest::StartServer(options, std::move(router));
  std::unique_ptr<httptest::HttpTestClient> client = httptest::ConnectTo(*server);
  ASSERT_TRUE(client->Send("GET", "/v1/events", "").ok());
  ASSERT_TRUE(client->ReadHeader().ok());
  absl::StatusOr<std::string> seen = client->ReadUntil(":keepalive\n\n");
  ASSERT_TRUE(seen.ok()) << seen.status();
  std::lock_guard<std::mutex> lock(mu);
  kept.Finish();
}

TEST(ServerStreamTest, PendingResponseIsCancelledWhenTheClientLeaves) {
  httptest::TempDir dir;
  Signal cancelled;
  Signal handled;
  std::mutex mu;
  std::optional<Responder> kept;  // e.g. waiting for an exec to finish
  Router router;
  ASSERT_TRUE(router
                  .Add("POST", "/v1/wait",
                       [&](Request&, Responder& out) {
                         out.OnCancel([&cancelled] { cancelled.Notify(); });
                         std::lock_guard<std::mutex> lock(mu);
                         kept = out;
                         handled.Notify();
                       })
                  .ok());
  std::unique_ptr<Server> server =
      httptest::StartServer(httptest::TestOptions(dir), std::move(router));
  std::unique_ptr<httptest::HttpTestClient> client = httptest::ConnectTo(*server);
  ASSERT_TRUE(client->Send("POST", "/v1/wait", "").ok());
  ASSERT_TRUE(handled.WaitFor());
  client->Close();
  ASSERT_TRUE(cancelled.WaitFor());
  std::lock_guard<std::mutex> lock(mu);
  EXPECT_TRUE(kept->cancelled());
  kept->Json(200, {{"too", "late"}});  // harmless
  // OnCancel after the fact runs at once.
  Signal late;
  kept->OnCancel([&late] { late.Notify(); });
  EXPECT_TRUE(late.Done());
}

TEST(ServerStreamTest, SlowClientIsCutOffInsteadOfBufferingWithoutBound) {
  httptest::TempDir dir;
  ServerOptions options = httptest::TestOptions(dir);
  options.max_stream_buffer_bytes = 256 << 10;
  Signal cancelled;
  std::vector<std::thread> producers;
  std::atomic<int> accepted_writes{0};
  Router router;
  ASSERT_TRUE(router
                  .Add("GET", "/v1/flood",
                       [&](Request&, Responder& out) {
                         Stream stream = out.StartNdjson();
                         stream.OnCancel([&cancelled] { cancelled.Notify(); });
                         producers.emplace_back([stream, &accepted_writes]() mutable {
                           std::string line(16 << 10, 'x');
                           // Far more than kernel buffers plus the limit; stops once cancelled.
                           for (int i = 0; i < 100000 && stream.WriteLine(line); ++i) {
                             accepted_writes++;
                           }
                         });
                       })
                  .ok());
  std::unique_ptr<Server> server = httptest::StartServer(options, std::move(router));
  std::unique_ptr<httptest::HttpTestClient> client = httptest::ConnectTo(*server);
  ASSERT_TRUE(client->Send("GET", "/v1/flood", "").ok());  // and never reads
  ASSERT_TRUE(cancelled.WaitFor());
  for (std::thread& t : producers) {
    t.join();
  }
  EXPECT_LT(accepted_writes.load(), 100000);
}

TEST(ServerStreamTest, StopCancelsOpenStreams) {
  httptest::TempDir dir;
  Signal cancelled;
  Signal started;
  std::mutex mu;
  Stream kept;
  Router router;
  ASSERT_TRUE(router
                  .Add("GET", "/v1/events",
                       [&](Request&, Responder& out) {
                         std::lock_guard<std::mutex> lock(mu);
                         kept = out.StartSse();
                         kept.OnCancel([&cancelled] { cancelled.Notify(); });
                         started.Notify();
                       })
                  .ok());
  std::unique_ptr<Server> server =
      httptest::StartServer(httptest::TestOptions(dir), std::move(router));
  std::unique_ptr<httptest::HttpTestClient> client = httptest::ConnectTo(*server);
  ASSERT_TRUE(client->Send("GET", "/v1/events", "").ok());
  ASSERT_TRUE(started.WaitFor());
  server->Stop();
  EXPECT_TRUE(cancelled.Done());
  std::lock_guard<std::mutex> lock(mu);
  EXPECT_FALSE(kept.WriteEvent({.data = "after stop"}));
  server.reset();
  EXPECT_FALSE(kept.WriteEvent({.data = "after destruction"}));  // still safe
}

}  // namespace
}  // namespace abox::http
