// Tunnels through AgentClient against a scripted guest: delivery to on_tunnel, flow control both
// ways, EOF and reset in each direction, connection loss, and tunnels outliving the client.
#include "src/runtime/agent_tunnel.h"

#include <sys/socket.h>

#include <condition_variable>
#include <deque>
#include <future>
#include <mutex>
#include <thread>

#include "gtest/gtest.h"
#include "src/runtime/agent_client.h"
#include "src/runtime/fake_guest.h"

namespace abox::runtime {
namespace {

using proto::FrameType;
using testing::FakeGuest;

// What on_tunnel hands over, for the test thread to take.
class TunnelQueue {
 public:
  void Push(std::unique_ptr<net::TunnelStream> t) {
    std::lock_guard lock(mu_);
    tunnels_.push_back(std::move(t));
    cv_.notify_all();
  }
  std::unique_ptr<net::TunnelStream> Pop() {
    std::unique_lock lock(mu_);
    if (!cv_.wait_for(lock, std::chrono::seconds(20), [&] { return !tunnels_.empty(); })) {
      ADD_FAILURE() << "no tunnel was handed over";
      return nullptr;
    }
    auto t = std::move(tunnels_.front());
    tunnels_.pop_front();
    return t;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::unique_ptr<net::TunnelStream>> tunnels_;
};

class AgentTunnelTest : public ::testing::Test {
 protected:
  void Connect(bool egress = true) {
    int sv[2];
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    AgentClient::Options o;
    if (egress) {
      o.on_tunnel = [q = queue_](std::unique_ptr<net::TunnelStream> t) { q->Push(std::move(t)); };
    }
    auto c = AgentClient::Create(base::UniqueFd(sv[0]), o);
    ASSERT_TRUE(c.ok()) << c.status();
    client_ = std::move(*c);
    guest_ = std::make_unique<FakeGuest>(base::UniqueFd(sv[1]));
    guest_->Handshake();
    ASSERT_TRUE(client_->WaitReady(absl::Seconds(10)).ok());
  }

  // The guest opens tunnel `id` to 1.2.3.4:443 and the test takes it from on_tunnel.
  std::unique_ptr<net::TunnelStream> Open(uint32_t id, const std::string& first_bytes = "") {
    guest_->Send(FrameType::kTunnelOpen, id, 0,
                 proto::EncodeTunnelRequest(
                     {.kind = proto::TunnelKind::kTcp, .dst = "1.2.3.4", .port = 443}));
    if (!first_bytes.empty()) {
      guest_->Send(FrameType::kTunnelData, id, 0, first_bytes);
    }
    return queue_->Pop();
  }

  static std::string ReadAll(net::TunnelStream& t, size_t want) {
    std::string got;
    char buf[70000];
    while (got.size() < want) {
      auto n = t.Read(buf, sizeof(buf), absl::Now() + absl::Seconds(20));
      if (!n.ok() || *n == 0) {
        ADD_FAILURE() << "read ended early: " << (n.ok() ? "EOF" : n.status().ToString());
        break;
      }
      got.append(buf, *n);
    }
    return got;
  }

  std::shared_ptr<TunnelQueue> queue_ = std::make_shared<TunnelQueue>();
  std::unique_ptr<AgentClient> client_;
  std::unique_ptr<FakeGuest> guest_;
};

TEST_F(AgentTunnelTest, BytesFlowBothWaysAndEofClosesEachHalf) {
  Connect();
  auto t = Open(2, "hello");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->info().kind, net::TunnelInfo::Kind::kTransparent);
  ASSERT_TRUE(t->info().original_ip.has_value());
  EXPECT_EQ(t->info().original_ip->ToString(), "1.2.3.4");
  EXPECT_EQ(t->info().original_port, 443);
  EXPECT_EQ(ReadAll(*t, 5), "hello");
  guest_->Send(FrameType::kTunnelData, 2, proto::kFlagEof, "");
  char buf[16];
  auto eof = t->Read(buf, sizeof(buf), absl::Now() + absl::Seconds(20));
  ASSERT_TRUE(eof.ok()) << eof.status();
  EXPECT_EQ(*eof, 0u);

  ASSERT_TRUE(t->Write("world").ok());
  t->CloseWrite();
  auto data = guest_->Expect(FrameType::kTunnelData);
  ASSERT_TRUE(data.has_value());
  EXPECT_EQ(data->header.stream, 2u);
  EXPECT_EQ(data->payload, "world");
  auto fin = guest_->Expect(FrameType::kTunnelData);
  ASSERT_TRUE(fin.has_value());
  EXPECT_EQ(fin->header.flags, proto::kFlagEof);
  EXPECT_FALSE(t->Write("late").ok());
  // Both halves are closed: dropping the tunnel sends nothing more (the next frame is a pong).
  t.reset();
  guest_->Send(FrameType::kPing, 0, 0, "after");
  auto next = guest_->Next();
  ASSERT_TRUE(next.has_value());
  EXPECT_EQ(next->header.type, FrameType::kPong);
}

TEST_F(AgentTunnelTest, KindsMapToTunnelInfo) {
  Connect();
  guest_->Send(FrameType::kTunnelOpen, 2, 0,
               proto::EncodeTunnelRequest({.kind = proto::TunnelKind::kDns}));
  guest_->Send(FrameType::kTunnelOpen, 4, 0,
               proto::EncodeTunnelRequest({.kind = proto::TunnelKind::kProxy}));
  auto dns = queue_->Pop();
  auto proxy = queue_->Pop();
  ASSERT_NE(dns, nullptr);
  ASSERT_NE(proxy, nullptr);
  EXPECT_EQ(dns->info().kind, net::TunnelInfo::Kind::kDns);
  EXPECT_FALSE(dns->info().original_ip.has_value());
  EXPECT_EQ(proxy->info().kind, net::TunnelInfo::Kind::kHttpProxy);
}

TEST_F(AgentTunnelTest, GuestGetsCreditOnlyAsTheHostReads) {
  Connect();
  auto t = Open(2);
  ASSERT_NE(t, nullptr);
  std::string chunk(proto::kMaxPayload, 'x');
  for (uint32_t sent = 0; sent < proto::kDefaultWindow; sent += proto::kMaxPayload) {
    guest_->Send(FrameType::kTunnelData, 2, 0, chunk);
  }
  // Nothing read yet: the pong comes back with no credit before it.
  guest_->Send(FrameType::kPing, 0, 0, "barrier");
  auto pong = guest_->Next();
  ASSERT_TRUE(pong.has_value());
  EXPECT_EQ(pong->header.type, FrameType::kPong);
  EXPECT_EQ(ReadAll(*t, proto::kDefaultWindow).size(), proto::kDefaultWindow);
  uint32_t credit = 0;
  while (credit < proto::kDefaultWindow) {
    auto f = guest_->Expect(FrameType::kCredit);
    ASSERT_TRUE(f.has_value());
    EXPECT_EQ(f->header.stream, 2u);
    credit += *proto::DecodeCredit(f->payload);
  }
  EXPECT_EQ(credit, proto::kDefaultWindow);
}

TEST_F(AgentTunnelTest, WriteBlocksUntilTheGuestGrantsCredit) {
  Connect();
  auto t = Open(2);
  ASSERT_NE(t, nullptr);
  const size_t kTotal = proto::kDefaultWindow + 1000;
  auto writer = std::async(std::launch::async, [&] { return t->Write(std::string(kTotal, 'w')); });
  size_t got = 0;
  while (got < proto::kDefaultWindow) {
    auto f = guest_->Expect(FrameType::kTunnelData);
    ASSERT_TRUE(f.has_value());
    got += f->payload.size();
  }
  EXPECT_EQ(got, proto::kDefaultWindow);
  EXPECT_EQ(writer.wait_for(std::chrono::milliseconds(100)), std::future_status::timeout);
  guest_->Send(FrameType::kCredit, 2, 0, proto::EncodeCredit(1000));
  auto rest = guest_->Expect(FrameType::kTunnelData);
  ASSERT_TRUE(rest.has_value());
  EXPECT_EQ(rest->payload.size(), 1000u);
  EXPECT_TRUE(writer.get().ok());
}

TEST_F(AgentTunnelTest, WithoutOnTunnelEveryTunnelIsResetAsEgressOff) {
  Connect(/*egress=*/false);
  guest_->Send(FrameType::kTunnelOpen, 2, 0,
               proto::EncodeTunnelRequest({.kind = proto::TunnelKind::kDns}));
  auto reset = guest_->Expect(FrameType::kReset);
  ASSERT_TRUE(reset.has_value());
  EXPECT_EQ(reset->header.stream, 2u);
  EXPECT_EQ(*proto::DecodeError(reset->payload), "egress is off for this sandbox");
  EXPECT_TRUE(client_->failure().ok());  // not a violation
}

TEST_F(AgentTunnelTest, GuestResetFailsReadAndWrite) {
  Connect();
  auto t = Open(2, "partial");
  ASSERT_NE(t, nullptr);
  guest_->Send(FrameType::kReset, 2, 0, proto::EncodeError("connection refused"));
  char buf[16];
  auto n = t->Read(buf, sizeof(buf), absl::Now() + absl::Seconds(20));
  // Like a TCP reset, buffered bytes are dropped once the reset is in.
  for (int i = 0; i < 2 && n.ok(); ++i) {
    n = t->Read(buf, sizeof(buf), absl::Now() + absl::Seconds(20));
  }
  ASSERT_FALSE(n.ok());
  EXPECT_EQ(n.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(n.status().message().find("connection refused"), absl::string_view::npos);
  EXPECT_FALSE(t->Write("x").ok());
}

TEST_F(AgentTunnelTest, HostResetUnblocksReadAndResetsTheGuest) {
  Connect();
  auto t = Open(2);
  ASSERT_NE(t, nullptr);
  auto reader = std::async(std::launch::async, [&] {
    char buf[16];
    return t->Read(buf, sizeof(buf), absl::InfiniteFuture());
  });
  EXPECT_EQ(reader.wait_for(std::chrono::milliseconds(50)), std::future_status::timeout);
  t->Reset("denied by policy");
  auto n = reader.get();
  EXPECT_EQ(n.status().code(), absl::StatusCode::kCancelled);
  auto reset = guest_->Expect(FrameType::kReset);
  ASSERT_TRUE(reset.has_value());
  EXPECT_EQ(*proto::DecodeError(reset->payload), "denied by policy");
  // The guest's data that crossed the reset is ignored, not a violation.
  guest_->Send(FrameType::kTunnelData, 2, 0, "late");
  guest_->Send(FrameType::kPing, 0, 0, "barrier");
  auto pong = guest_->Next();
  ASSERT_TRUE(pong.has_value());
  EXPECT_EQ(pong->header.type, FrameType::kPong);
  EXPECT_TRUE(client_->failure().ok());
}

TEST_F(AgentTunnelTest, DestroyingAnOpenTunnelResetsIt) {
  Connect();
  auto t = Open(2);
  ASSERT_NE(t, nullptr);
  t.reset();
  auto reset = guest_->Expect(FrameType::kReset);
  ASSERT_TRUE(reset.has_value());
  EXPECT_EQ(reset->header.stream, 2u);
  EXPECT_EQ(*proto::DecodeError(reset->payload), "the host closed the tunnel");
}

TEST_F(AgentTunnelTest, ReadHonoursItsDeadline) {
  Connect();
  auto t = Open(2);
  ASSERT_NE(t, nullptr);
  char buf[16];
  auto n = t->Read(buf, sizeof(buf), absl::Now() + absl::Milliseconds(20));
  EXPECT_EQ(n.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(t->Read(buf, 0, absl::Now()).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(AgentTunnelTest, ConnectionLossFailsEveryTunnel) {
  Connect();
  auto a = Open(2);
  auto b = Open(4);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  guest_->Close();
  char buf[16];
  auto n = a->Read(buf, sizeof(buf), absl::Now() + absl::Seconds(20));
  EXPECT_EQ(n.status().code(), absl::StatusCode::kUnavailable) << n.status();
  EXPECT_FALSE(b->Write("x").ok());
}

TEST_F(AgentTunnelTest, TunnelOutlivesTheClientAndFailsCleanly) {
  Connect();
  auto t = Open(2, "abc");
  ASSERT_NE(t, nullptr);
  client_.reset();
  char buf[16];
  EXPECT_FALSE(t->Read(buf, sizeof(buf), absl::Now() + absl::Seconds(20)).ok());
  EXPECT_FALSE(t->Write("x").ok());
  t->CloseWrite();
  t->Reset("late");
  t.reset();  // must not touch the destroyed client
}

}  // namespace
}  // namespace abox::runtime
