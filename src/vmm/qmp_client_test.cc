#include "src/vmm/qmp_client.h"

#include <cstdlib>
#include <filesystem>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "src/vmm/testing/fake_qmp_server.h"

namespace abox::vmm {
namespace {

using nlohmann::json;
using std::chrono::milliseconds;
using testing::FakeQmpServer;
using ::testing::HasSubstr;

constexpr milliseconds kLong(5000);
constexpr milliseconds kShort(200);

absl::StatusOr<QmpClient> Connect(FakeQmpServer& server, QmpClient::Options options = {}) {
  return QmpClient::Create(server.TakeClientFd(), kLong, options);
}

// Answers qmp_capabilities, then hands other commands to `rest`.
FakeQmpServer::Handler AfterCapabilities(const FakeQmpServer::Handler& rest) {
  return [rest](const json& request) {
    if (request.value("execute", "") == "qmp_capabilities") {
      return std::vector<std::string>{FakeQmpServer::Reply(request, json::object())};
    }
    return rest(request);
  };
}

TEST(QmpClientTest, HandshakesAndRunsACommand) {
  auto server = FakeQmpServer::Start(
      {FakeQmpServer::Greeting()}, AfterCapabilities([](const json& request) {
        return std::vector<std::string>{FakeQmpServer::Reply(request, {{"status", "running"}})};
      }));
  ASSERT_TRUE(server.ok());
  absl::StatusOr<QmpClient> qmp = Connect(**server);
  ASSERT_TRUE(qmp.ok()) << qmp.status();
  EXPECT_EQ(qmp->greeting()["version"]["qemu"]["major"], 7);
  absl::StatusOr<json> status = qmp->Execute("query-status", nullptr, kLong);
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_EQ((*status)["status"], "running");
  std::vector<json> requests = (*server)->requests();
  ASSERT_EQ(requests.size(), 2u);
  EXPECT_EQ(requests[0]["execute"], "qmp_capabilities");
  EXPECT_EQ(requests[1]["execute"], "query-status");
  EXPECT_NE(requests[0]["id"], requests[1]["id"]);
}

TEST(QmpClientTest, SendsArguments) {
  auto server = FakeQmpServer::Start({FakeQmpServer::Greeting()}, FakeQmpServer::AlwaysOk());
  ASSERT_TRUE(server.ok());
  absl::StatusOr<QmpClient> qmp = Connect(**server);
  ASSERT_TRUE(qmp.ok());
  ASSERT_TRUE(qmp->Execute("migrate-set-parameters", {{"max-bandwidth", 1}}, kLong).ok());
  EXPECT_EQ((*server)->requests().back()["arguments"]["max-bandwidth"], 1);
  EXPECT_EQ(qmp->Execute("x", json::array(), kLong).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(QmpClientTest, ErrorReplyBecomesStatusAndConnectionStaysUsable) {
  auto server = FakeQmpServer::Start(
      {FakeQmpServer::Greeting()}, AfterCapabilities([](const json& request) {
        if (request["execute"] == "nope") {
          json reply = {{"error", {{"class", "CommandNotFound"}, {"desc", "no command nope"}}},
                        {"id", request["id"]}};
          return std::vector<std::string>{reply.dump()};
        }
        if (request["execute"] == "device_del") {
          json reply = {{"error", {{"class", "GenericError"}, {"desc", "busy"}}},
                        {"id", request["id"]}};
          return std::vector<std::string>{reply.dump()};
        }
        return std::vector<std::string>{FakeQmpServer::Reply(request, 42)};
      }));
  ASSERT_TRUE(server.ok());
  absl::StatusOr<QmpClient> qmp = Connect(**server);
  ASSERT_TRUE(qmp.ok());
  absl::StatusOr<json> r = qmp->Execute("nope", nullptr, kLong);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(r.status().message(), HasSubstr("no command nope"));
  r = qmp->Execute("device_del", nullptr, kLong);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(r.status().message(), HasSubstr("busy"));
  r = qmp->Execute("query-x", nullptr, kLong);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, 42);
}

TEST(QmpClientTest, CollectsEventsInterleavedWithReplies) {
  auto server = FakeQmpServer::Start(
      {FakeQmpServer::Greeting(),
       R"({"event": "RTC_CHANGE", "data": {"offset": 1}, "timestamp": {"seconds": 1}})"},
      AfterCapabilities([](const json& request) {
        return std::vector<std::string>{
            R"({"event": "SHUTDOWN", "data": {"guest": false}, "timestamp": {"seconds": 2}})",
            FakeQmpServer::Reply(request, json::object())};
      }));
  ASSERT_TRUE(server.ok());
  absl::StatusOr<QmpClient> qmp = Connect(**server);
  ASSERT_TRUE(qmp.ok()) << qmp.status();
  ASSERT_TRUE(qmp->Execute("quit", nullptr, kLong).ok());
  std::deque<json> events = qmp->TakeEvents();
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0]["event"], "RTC_CHANGE");
  EXPECT_EQ(events[1]["event"], "SHUTDOWN");
  EXPECT_TRUE(qmp->TakeEvents().empty());
}

TEST(QmpClientTest, PendingEventsAreBounded) {
  auto server =
      FakeQmpServer::Start({FakeQmpServer::Greeting()}, AfterCapabilities([](const json& request) {
                             std::vector<std::string> lines(5, R"({"event": "E", "data": {}})");
                             lines.push_back(FakeQmpServer::Reply(request, 1));
                             return lines;
                           }));
  ASSERT_TRUE(server.ok());
  absl::StatusOr<QmpClient> qmp = Connect(**server, {.max_pending_events = 2});
  ASSERT_TRUE(qmp.ok());
  ASSERT_TRUE(qmp->Execute("x", nullptr, kLong).ok());
  EXPECT_EQ(qmp->TakeEvents().size(), 2u);
  EXPECT_EQ(qmp->dropped_events(), 3u);
}

TEST(QmpClientTest, GarbageBreaksTheConnection) {
  auto server = FakeQmpServer::Start(
      {FakeQmpServer::Greeting()},
      AfterCapabilities([](const json&) { return std::vector<std::string>{"this is not json"}; }));
  ASSERT_TRUE(server.ok());
  absl::StatusOr<QmpClient> qmp = Connect(**server);
  ASSERT_TRUE(qmp.ok());
  absl::StatusOr<json> r = qmp->Execute("x", nullptr, kLong);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(r.status().message(), HasSubstr("invalid JSON"));
  EXPECT_EQ(qmp->Execute("x", nullptr, kLong).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(QmpClientTest, RejectsNonObjectsAndDeepNesting) {
  for (const std::string& bad : {std::string("[1, 2]"), std::string(R"("text")"),
                                 std::string(100, '[') + std::string(100, ']')}) {
    auto server = FakeQmpServer::Start(
        {FakeQmpServer::Greeting()},
        AfterCapabilities([bad](const json&) { return std::vector<std::string>{bad}; }));
    ASSERT_TRUE(server.ok());
    absl::StatusOr<QmpClient> qmp = Connect(**server);
    ASSERT_TRUE(qmp.ok());
    EXPECT_EQ(qmp->Execute("x", nullptr, kLong).status().code(), absl::StatusCode::kInternal)
        << bad.substr(0, 20);
  }
}

TEST(QmpClientTest, OversizedMessageIsRejected) {
  auto server = FakeQmpServer::Start(
      {FakeQmpServer::Greeting()}, AfterCapabilities([](const json&) {
        return std::vector<std::string>{R"({"return": ")" + std::string(8192, 'a') + R"("})"};
      }));
  ASSERT_TRUE(server.ok());
  absl::StatusOr<QmpClient> qmp = Connect(**server, {.max_message_bytes = 1024});
  ASSERT_TRUE(qmp.ok());
  EXPECT_EQ(qmp->Execute("x", nullptr, kLong).status().code(),
            absl::StatusCode::kResourceExhausted);
}

TEST(QmpClientTest, SilenceTimesOutAndLateRepliesAreSkipped) {
  json late;  // the request that got no answer in time
  auto server = FakeQmpServer::Start(
      {FakeQmpServer::Greeting()}, AfterCapabilities([&late](const json& request) {
        if (request["execute"] == "slow") {
          late = request;
          return std::vector<std::string>{};
        }
        return std::vector<std::string>{FakeQmpServer::Reply(late, "late"),
                                        FakeQmpServer::Reply(request, "fresh")};
      }));
  ASSERT_TRUE(server.ok());
  absl::StatusOr<QmpClient> qmp = Connect(**server);
  ASSERT_TRUE(qmp.ok());
  EXPECT_EQ(qmp->Execute("slow", nullptr, kShort).status().code(),
            absl::StatusCode::kDeadlineExceeded);
  absl::StatusOr<json> r = qmp->Execute("fast", nullptr, kLong);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(*r, "fresh");
}

TEST(QmpClientTest, RepliesMustCarryTheRightId) {
  for (const char* reply :
       {R"({"return": {}})", R"({"return": {}, "id": "x"})", R"({"return": {}, "id": 999})"}) {
    auto server = FakeQmpServer::Start(
        {FakeQmpServer::Greeting()},
        AfterCapabilities([reply](const json&) { return std::vector<std::string>{reply}; }));
    ASSERT_TRUE(server.ok());
    absl::StatusOr<QmpClient> qmp = Connect(**server);
    ASSERT_TRUE(qmp.ok());
    EXPECT_EQ(qmp->Execute("x", nullptr, kLong).status().code(), absl::StatusCode::kInternal)
        << reply;
  }
}

TEST(QmpClientTest, HandshakeFailures) {
  auto silent = FakeQmpServer::Start({}, FakeQmpServer::AlwaysOk());
  ASSERT_TRUE(silent.ok());
  EXPECT_EQ(QmpClient::Create((*silent)->TakeClientFd(), kShort, {}).status().code(),
            absl::StatusCode::kDeadlineExceeded);

  auto wrong = FakeQmpServer::Start({R"({"hello": 1})"}, FakeQmpServer::AlwaysOk());
  ASSERT_TRUE(wrong.ok());
  EXPECT_EQ(QmpClient::Create((*wrong)->TakeClientFd(), kLong, {}).status().code(),
            absl::StatusCode::kInternal);

  auto refuses = FakeQmpServer::Start({FakeQmpServer::Greeting()}, [](const json& request) {
    json reply = {{"error", {{"class", "GenericError"}, {"desc", "no"}}}, {"id", request["id"]}};
    return std::vector<std::string>{reply.dump()};
  });
  ASSERT_TRUE(refuses.ok());
  EXPECT_FALSE(QmpClient::Create((*refuses)->TakeClientFd(), kLong, {}).ok());
}

TEST(QmpClientTest, ClosedConnectionIsUnavailableButQuitSucceeds) {
  FakeQmpServer* raw = nullptr;
  auto server =
      FakeQmpServer::Start({FakeQmpServer::Greeting()}, AfterCapabilities([&raw](const json&) {
                             raw->Hangup();  // QEMU exits before answering "quit"
                             return std::vector<std::string>{};
                           }));
  ASSERT_TRUE(server.ok());
  raw = server->get();
  absl::StatusOr<QmpClient> qmp = Connect(**server);
  ASSERT_TRUE(qmp.ok());
  EXPECT_TRUE(qmp->Quit(kLong).ok());
  EXPECT_EQ(qmp->Execute("x", nullptr, kLong).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(QmpClientTest, ConnectsByPath) {
  std::string dir = ::testing::TempDir() + "/qmp_by_path_XXXXXX";
  ASSERT_NE(::mkdtemp(dir.data()), nullptr);
  std::string path = dir + "/qmp.sock";
  EXPECT_EQ(QmpClient::Connect(path, kShort).status().code(), absl::StatusCode::kNotFound);
  auto server = FakeQmpServer::Listen(path, {FakeQmpServer::Greeting()}, FakeQmpServer::AlwaysOk());
  ASSERT_TRUE(server.ok()) << server.status();
  absl::StatusOr<QmpClient> qmp = QmpClient::Connect(path, kLong);
  ASSERT_TRUE(qmp.ok()) << qmp.status();
  EXPECT_TRUE(qmp->Execute("query-status", nullptr, kLong).ok());
  server->reset();
  std::filesystem::remove_all(dir);
}

TEST(QmpClientTest, ConnectsByVeryLongPath) {
  std::string dir = ::testing::TempDir() + "/qmp_long_XXXXXX";
  ASSERT_NE(::mkdtemp(dir.data()), nullptr);
  std::string deep = dir + "/" + std::string(100, 'd');
  std::filesystem::create_directories(deep);
  std::string path = deep + "/qmp.sock";  // longer than sun_path
  auto server = FakeQmpServer::Listen(path, {FakeQmpServer::Greeting()}, FakeQmpServer::AlwaysOk());
  ASSERT_TRUE(server.ok()) << server.status();
  absl::StatusOr<QmpClient> qmp = QmpClient::Connect(path, kLong);
  ASSERT_TRUE(qmp.ok()) << qmp.status();
  server->reset();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace abox::vmm
