#include "src/mcp/http_guard.h"

#include <set>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace abox::mcp {
namespace {

using ::testing::HasSubstr;

TEST(HttpGuardTest, ListensOnlyOnLoopback) {
  absl::StatusOr<ListenAddress> any_port = ParseListenAddress("127.0.0.1:0");
  ASSERT_TRUE(any_port.ok()) << any_port.status();
  EXPECT_EQ(any_port->port, 0);
  absl::StatusOr<ListenAddress> localhost = ParseListenAddress("localhost:8931");
  ASSERT_TRUE(localhost.ok()) << localhost.status();
  EXPECT_EQ(localhost->port, 8931);
  for (const char* refused :
       {"0.0.0.0:8931", "192.168.1.20:8931", "example.com:8931", "[::]:8931"}) {
    absl::StatusOr<ListenAddress> address = ParseListenAddress(refused);
    ASSERT_FALSE(address.ok()) << refused;
    EXPECT_THAT(address.status().message(), HasSubstr("only on the loopback address 127.0.0.1"));
  }
  for (const char* malformed :
       {"8931", "127.0.0.1", "127.0.0.1:", "127.0.0.1:65536", "127.0.0.1:-1", "127.0.0.1:80x"}) {
    EXPECT_FALSE(ParseListenAddress(malformed).ok()) << malformed;
  }
}

TEST(HttpGuardTest, HostMustNameThisServer) {
  EXPECT_TRUE(CheckHost("127.0.0.1:8931", 8931).ok());
  EXPECT_TRUE(CheckHost("LocalHost:8931", 8931).ok());
  EXPECT_FALSE(CheckHost(std::nullopt, 8931).ok());
  EXPECT_FALSE(CheckHost("127.0.0.1:8932", 8931).ok());
  EXPECT_FALSE(CheckHost("127.0.0.1", 8931).ok());
  absl::Status rebound = CheckHost("evil.example.com:8931", 8931);
  EXPECT_EQ(rebound.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(rebound.message(), HasSubstr("DNS rebinding"));
}

TEST(HttpGuardTest, OriginMustBeLoopbackWhenPresent) {
  EXPECT_TRUE(CheckOrigin(std::nullopt).ok());
  for (const char* ok : {"http://127.0.0.1:6274", "http://localhost", "https://localhost:3000",
                         "http://[::1]:8931"}) {
    EXPECT_TRUE(CheckOrigin(ok).ok()) << ok;
  }
  for (const char* refused : {"http://evil.example.com", "null", "http://127.0.0.1.evil.com",
                              "file://", "http://localhost:80/x", "ftp://localhost"}) {
    absl::Status status = CheckOrigin(refused);
    EXPECT_EQ(status.code(), absl::StatusCode::kPermissionDenied) << refused;
  }
}

TEST(HttpGuardTest, ProtocolVersionHeader) {
  EXPECT_TRUE(CheckProtocolVersion(std::nullopt).ok());
  EXPECT_TRUE(CheckProtocolVersion("2025-11-25").ok());
  EXPECT_TRUE(CheckProtocolVersion("2025-06-18").ok());
  absl::Status old = CheckProtocolVersion("2024-11-05");
  EXPECT_EQ(old.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(old.message(), HasSubstr("2025-11-25, 2025-06-18"));
}

TEST(HttpGuardTest, AcceptsEventStream) {
  EXPECT_TRUE(AcceptsEventStream(std::nullopt));
  EXPECT_TRUE(AcceptsEventStream("application/json, text/event-stream"));
  EXPECT_TRUE(AcceptsEventStream("*/*"));
  EXPECT_FALSE(AcceptsEventStream("application/json"));
}

TEST(HttpGuardTest, SessionIdsAreLongRandomAndVisibleAscii) {
  std::set<std::string> seen;
  for (int i = 0; i < 100; ++i) {
    absl::StatusOr<std::string> id = NewSessionId();
    ASSERT_TRUE(id.ok()) << id.status();
    ASSERT_EQ(id->size(), 64u);
    EXPECT_EQ(id->find_first_not_of("0123456789abcdef"), std::string::npos);
    seen.insert(*id);
  }
  EXPECT_EQ(seen.size(), 100u);
}

}  // namespace
}  // namespace abox::mcp
