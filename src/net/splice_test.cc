#include "src/net/splice.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/eventfd.h>
#include <sys/socket.h>

#include <future>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "src/base/io.h"
#include "src/net/testing/socket_tunnel.h"
#include "src/net/testing/stream_pair.h"

namespace abox::net {
namespace {

using ::testing::HasSubstr;
using testing::LoopbackServer;
using testing::MakeSplicePeers;
using testing::ReadToEof;
using testing::SendAllTo;
using testing::SocketTunnel;
using testing::SplicePeers;

const IpAddress kLoopback = *IpAddress::Parse("127.0.0.1");

TEST(ConnectToAnyTest, FallsBackToTheNextAddress) {
  LoopbackServer server([](base::UniqueFd) {});
  // 127.0.0.2 routes to lo too, but nothing listens there: connection refused, then .1.
  absl::StatusOr<UpstreamConnection> up = ConnectToAny(
      {*IpAddress::Parse("127.0.0.2"), kLoopback}, server.port(), absl::Now() + absl::Seconds(5));
  ASSERT_TRUE(up.ok()) << up.status();
  EXPECT_EQ(up->address, kLoopback);
}

TEST(ConnectToAnyTest, AcceptsAnInfiniteDeadline) {
  LoopbackServer server([](base::UniqueFd) {});
  absl::StatusOr<UpstreamConnection> up =
      ConnectToAny({kLoopback}, server.port(), absl::InfiniteFuture());
  ASSERT_TRUE(up.ok()) << up.status();
}

// Regression: without TCP_NODELAY, a request the proxy wrote upstream in two writes (head, then
// body) had its body held until the upstream's delayed ACK, ~40 ms (bench/intercept_bench.cc).
TEST(ConnectToAnyTest, DisablesNagleOnTheUpstreamSocket) {
  LoopbackServer server([](base::UniqueFd) {});
  absl::StatusOr<UpstreamConnection> up =
      ConnectToAny({kLoopback}, server.port(), absl::Now() + absl::Seconds(5));
  ASSERT_TRUE(up.ok()) << up.status();
  int nodelay = 0;
  socklen_t len = sizeof(nodelay);
  ASSERT_EQ(::getsockopt(up->fd.get(), IPPROTO_TCP, TCP_NODELAY, &nodelay, &len), 0);
  EXPECT_NE(nodelay, 0);
}

TEST(ConnectToAnyTest, ListsEveryFailedAttempt) {
  uint16_t port;
  {
    LoopbackServer gone([](base::UniqueFd) {});
    port = gone.port();
  }
  absl::StatusOr<UpstreamConnection> up = ConnectToAny({*IpAddress::Parse("127.0.0.2"), kLoopback},
                                                       port, absl::Now() + absl::Seconds(5));
  ASSERT_FALSE(up.ok());
  EXPECT_THAT(std::string(up.status().message()), HasSubstr("127.0.0.2:"));
  EXPECT_THAT(std::string(up.status().message()), HasSubstr("127.0.0.1:"));
  EXPECT_FALSE(ConnectToAny({}, 80, absl::InfiniteFuture()).ok());
}

TEST(ConnectToAnyTest, StopsWhenCancelled) {
  base::UniqueFd cancel(::eventfd(1, EFD_CLOEXEC));  // already readable
  // A TEST-NET address never answers; the cancel fd ends the wait instead of the deadline.
  absl::StatusOr<UpstreamConnection> up = ConnectToAny(
      {*IpAddress::Parse("192.0.2.1")}, 9, absl::Now() + absl::Seconds(30), cancel.get());
  ASSERT_FALSE(up.ok());
  EXPECT_TRUE(absl::IsCancelled(up.status()) || absl::IsUnavailable(up.status())) << up.status();
}

TEST(SpliceTest, PassesHalfClosesOnAndCountsBytes) {
  SplicePeers s = MakeSplicePeers();
  SpliceOptions options;
  options.first_up = "head:";
  std::future<SpliceResult> result = std::async(
      std::launch::async, [&] { return Splice(*s.tunnel, std::move(s.upstream), options); });
  ASSERT_TRUE(SendAllTo(s.guest.get(), "body"));
  ::shutdown(s.guest.get(), SHUT_WR);
  // The upstream sees the guest's EOF, and can still answer afterwards.
  EXPECT_EQ(ReadToEof(s.upstream_peer.get()), "head:body");
  ASSERT_TRUE(SendAllTo(s.upstream_peer.get(), "reply"));
  ::shutdown(s.upstream_peer.get(), SHUT_WR);
  EXPECT_EQ(ReadToEof(s.guest.get()), "reply");
  SpliceResult r = result.get();
  EXPECT_TRUE(r.clean);
  EXPECT_EQ(r.ended, "closed");
  EXPECT_EQ(r.bytes_up, 9u);
  EXPECT_EQ(r.bytes_down, 5u);
  EXPECT_FALSE(s.tunnel->observations()->reset);
  EXPECT_TRUE(s.tunnel->observations()->closed_write);
}

TEST(SpliceTest, AbortsBothSidesWhenIdle) {
  SplicePeers s = MakeSplicePeers();
  SpliceOptions options;
  options.idle_timeout = absl::Milliseconds(100);
  SpliceResult r = Splice(*s.tunnel, std::move(s.upstream), options);
  EXPECT_FALSE(r.clean);
  EXPECT_THAT(r.ended, HasSubstr("idle"));
  EXPECT_TRUE(s.tunnel->observations()->reset);
  EXPECT_EQ(ReadToEof(s.upstream_peer.get()), "");
}

TEST(SpliceTest, ResetsTheGuestWhenTheUpstreamIsGone) {
  SplicePeers s = MakeSplicePeers();
  std::future<SpliceResult> result = std::async(std::launch::async, [&] {
    return Splice(*s.tunnel, std::move(s.upstream), SpliceOptions{});
  });
  ASSERT_TRUE(SendAllTo(s.upstream_peer.get(), "partial"));
  s.upstream_peer.reset();
  // The upstream's close reaches the guest as a half-close after its bytes...
  EXPECT_EQ(ReadToEof(s.guest.get()), "partial");
  // ...and the guest's next bytes cannot be delivered: both sides are aborted.
  ASSERT_TRUE(SendAllTo(s.guest.get(), "more"));
  SpliceResult r = result.get();
  EXPECT_FALSE(r.clean);
  EXPECT_TRUE(s.tunnel->observations()->reset);
  EXPECT_EQ(r.bytes_down, 7u);
}

TEST(SpliceTest, AbortsWhenTheGuestResets) {
  SplicePeers s = MakeSplicePeers();
  SocketTunnel* tunnel = s.tunnel.get();
  std::future<SpliceResult> result = std::async(
      std::launch::async, [&] { return Splice(*tunnel, std::move(s.upstream), SpliceOptions{}); });
  tunnel->Reset("guest went away");
  SpliceResult r = result.get();
  EXPECT_FALSE(r.clean);
  EXPECT_EQ(ReadToEof(s.upstream_peer.get()), "");
}

TEST(SpliceTest, AbortsOnTheCancelFd) {
  SplicePeers s = MakeSplicePeers();
  base::UniqueFd cancel(::eventfd(1, EFD_CLOEXEC));
  SpliceOptions options;
  options.cancel_fd = cancel.get();
  SpliceResult r = Splice(*s.tunnel, std::move(s.upstream), options);
  EXPECT_FALSE(r.clean);
  EXPECT_THAT(r.ended, HasSubstr("shutting down"));
  EXPECT_TRUE(s.tunnel->observations()->reset);
}

}  // namespace
}  // namespace abox::net
