// Egress through a real Agent and TunnelHub: programs connect to the egress sockets (loopback,
// ephemeral ports) and the fake host sees tunnel streams. Covers each listener, both directions
// with EOF and reset, flow control, the DNS stub, the limits and protocol violations.
#include "src/guest/tunnel_hub.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "src/guest/dns_stub.h"
#include "src/guest/fake_host.h"
#include "src/guest/log.h"

namespace abox::guest {
namespace {

using proto::FrameType;
using testing::FakeHost;
using namespace std::chrono_literals;

base::UniqueFd Connect(uint16_t port, int type = SOCK_STREAM) {
  base::UniqueFd fd(::socket(AF_INET, type | SOCK_CLOEXEC, 0));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::connect(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)), 0)
      << ErrnoText(errno);
  return fd;
}

// One recv with a timeout: the bytes, "" at EOF, or an error text ("ECONNRESET", "timeout").
std::string Recv(int fd, std::chrono::milliseconds timeout = 20s) {
  pollfd p{fd, POLLIN, 0};
  if (::poll(&p, 1, static_cast<int>(timeout.count())) <= 0) {
    return "timeout";
  }
  char buf[65536];
  ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
  if (n < 0) {
    return errno == ECONNRESET ? "ECONNRESET" : ErrnoText(errno);
  }
  return std::string(buf, static_cast<size_t>(n));
}

// A DNS query for example.com/A with id 0x1234 and RD set.
std::string Query() {
  std::string q("\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00", 12);
  q += std::string(
      "\x07"
      "example\x03"
      "com\x00",
      13);
  q += std::string("\x00\x01\x00\x01", 4);
  return q;
}

std::string Framed(absl::string_view message) {
  std::string out;
  out.push_back(static_cast<char>(message.size() >> 8));
  out.push_back(static_cast<char>(message.size() & 0xff));
  out.append(message.data(), message.size());
  return out;
}

class TunnelHubTest : public ::testing::Test {
 protected:
  explicit TunnelHubTest(size_t max_tunnels = proto::kMaxTunnels, size_t max_dns = 64,
                         std::chrono::milliseconds dns_timeout = 10s) {
    auto sockets =
        OpenEgressSockets({.transparent = 0, .http_proxy = 0, .dns = 0, .model_broker = 0});
    EXPECT_TRUE(sockets.ok()) << sockets.status();
    TunnelHub::Options o{.sockets = *std::move(sockets)};
    o.original_destination = [](int) -> absl::StatusOr<proto::TunnelRequest> {
      return proto::TunnelRequest{
          .kind = proto::TunnelKind::kTcp, .dst = "93.184.215.14", .port = 443};
    };
    o.max_tunnels = max_tunnels;
    o.max_dns_in_flight = max_dns;
    o.dns_timeout = dns_timeout;
    hub_ = std::make_unique<TunnelHub>(std::move(o));
    Agent::Options agent = testing::DefaultAgentOptions();
    agent.egress = hub_.get();
    host_ = std::make_unique<FakeHost>(agent);
  }
  ~TunnelHubTest() override { host_.reset(); }  // the agent thread uses the hub

  uint16_t Port(const base::UniqueFd& fd) { return BoundPort(fd.get()); }
  const EgressSockets& sockets() { return hub_->sockets(); }

  // The next frame, skipping credits unless asked for.
  std::optional<proto::Frame> NextFrame(bool skip_credit = true) {
    for (;;) {
      auto f = host_->Next();
      if (!f || !skip_credit || f->header.type != FrameType::kCredit) {
        return f;
      }
    }
  }
  proto::TunnelRequest ExpectOpen(uint32_t id) {
    auto f = NextFrame();
    EXPECT_TRUE(f && f->header.type == FrameType::kTunnelOpen && f->header.stream == id);
    auto r = proto::DecodeTunnelRequest(f ? f->payload : "");
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : proto::TunnelRequest{};
  }
  // Nothing else was sent before the agent answered a ping.
  void ExpectQuiet() {
    host_->Send(FrameType::kPing, 0, 0, "quiet");
    auto f = NextFrame();
    ASSERT_TRUE(f);
    EXPECT_EQ(f->header.type, FrameType::kPong)
        << proto::FrameTypeName(static_cast<uint8_t>(f->header.type));
  }

  std::unique_ptr<TunnelHub> hub_;
  std::unique_ptr<FakeHost> host_;
};

TEST_F(TunnelHubTest, RedirectedConnectionBecomesATcpTunnelBothWays) {
  host_->Handshake();
  base::UniqueFd conn = Connect(Port(sockets().transparent));
  proto::TunnelRequest r = ExpectOpen(2);
  EXPECT_EQ(r.kind, proto::TunnelKind::kTcp);
  EXPECT_EQ(r.dst, "93.184.215.14");
  EXPECT_EQ(r.port, 443);

  ASSERT_EQ(::send(conn.get(), "hello", 5, MSG_NOSIGNAL), 5);
  auto data = NextFrame();
  ASSERT_TRUE(data);
  EXPECT_EQ(data->header.type, FrameType::kTunnelData);
  EXPECT_EQ(data->payload, "hello");

  host_->Send(FrameType::kTunnelData, 2, 0, "world");
  EXPECT_EQ(Recv(conn.get()), "world");
  host_->Send(FrameType::kTunnelData, 2, proto::kFlagEof, "");
  EXPECT_EQ(Recv(conn.get()), "");  // the program reads EOF
  ::shutdown(conn.get(), SHUT_WR);
  auto eof = NextFrame();
  ASSERT_TRUE(eof);
  EXPECT_EQ(eof->header.type, FrameType::kTunnelData);
  EXPECT_EQ(eof->header.flags, proto::kFlagEof);
  ExpectQuiet();
}

TEST_F(TunnelHubTest, ProxyAndDnsTcpPortsOpenTheirKinds) {
  host_->Handshake();
  base::UniqueFd proxy = Connect(Port(sockets().http_proxy));
  EXPECT_EQ(ExpectOpen(2).kind, proto::TunnelKind::kProxy);
  base::UniqueFd dns = Connect(Port(sockets().dns_tcp));
  proto::TunnelRequest r = ExpectOpen(4);
  EXPECT_EQ(r.kind, proto::TunnelKind::kDns);
  EXPECT_TRUE(r.dst.empty());
}

TEST_F(TunnelHubTest, HostResetResetsTheProgramsConnection) {
  host_->Handshake();
  base::UniqueFd conn = Connect(Port(sockets().transparent));
  ExpectOpen(2);
  host_->Send(FrameType::kReset, 2, 0, proto::EncodeError("egress is off for this sandbox"));
  EXPECT_EQ(Recv(conn.get()), "ECONNRESET");
  // Frames that crossed the reset are ignored, not violations.
  host_->Send(FrameType::kTunnelData, 2, 0, "late");
  host_->Send(FrameType::kCredit, 2, 0, proto::EncodeCredit(10));
  ExpectQuiet();
}

TEST_F(TunnelHubTest, ProgramResetResetsTheTunnel) {
  host_->Handshake();
  base::UniqueFd conn = Connect(Port(sockets().transparent));
  ExpectOpen(2);
  CloseWithReset(conn);
  auto f = NextFrame();
  ASSERT_TRUE(f);
  EXPECT_EQ(f->header.type, FrameType::kReset);
  EXPECT_EQ(f->header.stream, 2u);
}

TEST_F(TunnelHubTest, GuestSendsAtMostAWindowUntilTheHostGrantsCredit) {
  host_->Handshake();
  base::UniqueFd conn = Connect(Port(sockets().transparent));
  ExpectOpen(2);
  const size_t kTotal = 3 * proto::kDefaultWindow + 123;
  std::string payload(kTotal, '\0');
  for (size_t i = 0; i < kTotal; ++i) {
    payload[i] = static_cast<char>('a' + i % 26);
  }
  std::thread writer([&] { EXPECT_TRUE(base::WriteAll(conn.get(), payload).ok()); });
  std::string got;
  while (got.size() < proto::kDefaultWindow) {
    auto f = NextFrame();
    ASSERT_TRUE(f && f->header.type == FrameType::kTunnelData);
    got += f->payload;
  }
  EXPECT_EQ(got.size(), proto::kDefaultWindow);
  ExpectQuiet();  // the window is used up: nothing more arrives
  while (got.size() < kTotal) {
    host_->Send(FrameType::kCredit, 2, 0,
                proto::EncodeCredit(static_cast<uint32_t>(
                    std::min<size_t>(proto::kDefaultWindow, kTotal - got.size()))));
    size_t target = std::min(kTotal, got.size() + proto::kDefaultWindow);
    while (got.size() < target) {
      auto f = NextFrame();
      ASSERT_TRUE(f && f->header.type == FrameType::kTunnelData);
      got += f->payload;
    }
  }
  writer.join();
  EXPECT_TRUE(got == payload);
}

TEST_F(TunnelHubTest, HostDataIsCreditedBackAsItReachesTheProgram) {
  host_->Handshake();
  base::UniqueFd conn = Connect(Port(sockets().transparent));
  ExpectOpen(2);
  std::string chunk(proto::kMaxPayload, 'z');
  for (uint32_t sent = 0; sent < proto::kDefaultWindow; sent += proto::kMaxPayload) {
    host_->Send(FrameType::kTunnelData, 2, 0, chunk);
  }
  size_t read = 0;
  while (read < proto::kDefaultWindow) {
    std::string s = Recv(conn.get());
    ASSERT_NE(s, "timeout");
    read += s.size();
  }
  uint32_t credit = 0;
  while (credit < proto::kDefaultWindow) {
    auto f = NextFrame(/*skip_credit=*/false);
    ASSERT_TRUE(f && f->header.type == FrameType::kCredit);
    credit += *proto::DecodeCredit(f->payload);
  }
  EXPECT_EQ(credit, proto::kDefaultWindow);
}

TEST_F(TunnelHubTest, HostDataBeyondTheWindowIsAViolation) {
  host_->Handshake();
  base::UniqueFd conn = Connect(Port(sockets().transparent));
  // The program does not read, so the guest cannot pass much on; the host sends too much.
  ExpectOpen(2);
  std::string chunk(proto::kMaxPayload, 'z');
  for (uint32_t sent = 0; sent <= proto::kDefaultWindow; sent += proto::kMaxPayload) {
    host_->Send(FrameType::kTunnelData, 2, 0, chunk);
  }
  // Loopback buffers may take some of it; credit returned for that keeps it legal. Keep
  // sending until the guest objects.
  for (int i = 0; i < 400; ++i) {
    host_->Send(FrameType::kTunnelData, 2, 0, chunk);
  }
  host_->ExpectGoodbye("tunnel_data on stream 2");
  // The session is reset with it: after the bytes that made it, the program sees a reset.
  std::string last;
  for (int i = 0; i < 10000; ++i) {
    last = Recv(conn.get());
    if (last == "ECONNRESET" || last == "timeout" || last.empty()) {
      break;
    }
  }
  EXPECT_EQ(last, "ECONNRESET");
}

TEST_F(TunnelHubTest, TunnelFramesTheHostMayNotSendAreViolations) {
  host_->Handshake();
  host_->Send(FrameType::kTunnelOpen, 2, 0,
              proto::EncodeTunnelRequest({.kind = proto::TunnelKind::kDns}));
  host_->ExpectGoodbye("which only the guest sends");
}

TEST_F(TunnelHubTest, DataOnANeverOpenedTunnelIsAViolation) {
  host_->Handshake();
  host_->Send(FrameType::kTunnelData, 2, 0, "x");
  host_->ExpectGoodbye("never opened");
}

TEST_F(TunnelHubTest, UdpQueryIsFramedAndTheAnswerSentBack) {
  host_->Handshake();
  base::UniqueFd client = Connect(Port(sockets().dns_udp), SOCK_DGRAM);
  std::string query = Query();
  ASSERT_EQ(::send(client.get(), query.data(), query.size(), 0),
            static_cast<ssize_t>(query.size()));
  EXPECT_EQ(ExpectOpen(2).kind, proto::TunnelKind::kDns);
  auto data = NextFrame();
  ASSERT_TRUE(data);
  EXPECT_EQ(data->header.type, FrameType::kTunnelData);
  EXPECT_EQ(data->header.flags, proto::kFlagEof);  // one query per tunnel
  EXPECT_EQ(data->payload, Framed(query));
  std::string answer = *DnsErrorReply(query, 3);  // any message will do: NXDOMAIN
  std::string framed = Framed(answer);
  // Split across frames: the stub reassembles.
  host_->Send(FrameType::kTunnelData, 2, 0, framed.substr(0, 1));
  host_->Send(FrameType::kTunnelData, 2, proto::kFlagEof, framed.substr(1));
  EXPECT_EQ(Recv(client.get()), answer);
  ExpectQuiet();
}

TEST_F(TunnelHubTest, UdpQueryRefusedByTheHostGetsRefusedAtOnce) {
  host_->Handshake();
  base::UniqueFd client = Connect(Port(sockets().dns_udp), SOCK_DGRAM);
  std::string query = Query();
  ASSERT_GT(::send(client.get(), query.data(), query.size(), 0), 0);
  ExpectOpen(2);
  host_->Send(FrameType::kReset, 2, 0, proto::EncodeError("egress is off for this sandbox"));
  std::string reply = Recv(client.get());
  ASSERT_GE(reply.size(), 12u);
  EXPECT_EQ(reply.substr(0, 2), "\x12\x34");
  EXPECT_EQ(reply[3] & 0x0f, kDnsRefused);
  EXPECT_EQ(reply.substr(12), query.substr(12));
}

TEST_F(TunnelHubTest, WithoutASessionConnectionsAreResetAndQueriesRefused) {
  base::UniqueFd conn = Connect(Port(sockets().transparent));
  EXPECT_EQ(Recv(conn.get()), "ECONNRESET");
  base::UniqueFd client = Connect(Port(sockets().dns_udp), SOCK_DGRAM);
  std::string query = Query();
  ASSERT_GT(::send(client.get(), query.data(), query.size(), 0), 0);
  std::string reply = Recv(client.get());
  ASSERT_GE(reply.size(), 4u);
  EXPECT_EQ(reply[3] & 0x0f, kDnsRefused);
}

TEST_F(TunnelHubTest, EndOfTheSessionResetsEveryConnection) {
  host_->Handshake();
  base::UniqueFd conn = Connect(Port(sockets().transparent));
  ExpectOpen(2);
  host_->CloseHostEnd();
  EXPECT_EQ(Recv(conn.get()), "ECONNRESET");
}

class SmallTunnelHubTest : public TunnelHubTest {
 protected:
  SmallTunnelHubTest() : TunnelHubTest(/*max_tunnels=*/2, /*max_dns=*/1, /*dns_timeout=*/200ms) {}
};

TEST_F(SmallTunnelHubTest, ConnectionsBeyondTheLimitWaitForATunnelToEnd) {
  host_->Handshake();
  base::UniqueFd a = Connect(Port(sockets().transparent));
  ExpectOpen(2);
  base::UniqueFd b = Connect(Port(sockets().transparent));
  ExpectOpen(4);
  base::UniqueFd c = Connect(Port(sockets().transparent));  // waits in the backlog
  ExpectQuiet();
  host_->Send(FrameType::kReset, 2, 0, proto::EncodeError("done"));
  ExpectOpen(6);
}

TEST_F(SmallTunnelHubTest, QueriesBeyondTheLimitAreDroppedAndSlowAnswersTimeOut) {
  host_->Handshake();
  base::UniqueFd client = Connect(Port(sockets().dns_udp), SOCK_DGRAM);
  std::string query = Query();
  ASSERT_GT(::send(client.get(), query.data(), query.size(), 0), 0);
  ASSERT_GT(::send(client.get(), query.data(), query.size(), 0), 0);
  ExpectOpen(2);
  auto data = NextFrame();
  ASSERT_TRUE(data && data->header.type == FrameType::kTunnelData);
  // No answer: after the timeout the tunnel is reset and the client gets SERVFAIL.
  auto reset = NextFrame();
  ASSERT_TRUE(reset);
  EXPECT_EQ(reset->header.type, FrameType::kReset);
  EXPECT_EQ(reset->header.stream, 2u);
  std::string reply = Recv(client.get());
  ASSERT_GE(reply.size(), 4u);
  EXPECT_EQ(reply[3] & 0x0f, kDnsServFail);
  ExpectQuiet();  // the second query was dropped, not queued
}

TEST(DnsErrorReplyTest, EchoesIdOpcodeRdAndTheQuestion) {
  std::string query = Query();
  auto reply = DnsErrorReply(query, kDnsRefused);
  ASSERT_TRUE(reply.has_value());
  ASSERT_EQ(reply->size(), query.size());
  EXPECT_EQ(reply->substr(0, 2), "\x12\x34");
  EXPECT_EQ(static_cast<uint8_t>((*reply)[2]), 0x81);  // QR, RD
  EXPECT_EQ(static_cast<uint8_t>((*reply)[3]), 0x85);  // RA, REFUSED
  EXPECT_EQ(reply->substr(4, 8), std::string("\x00\x01\x00\x00\x00\x00\x00\x00", 8));
  EXPECT_EQ(reply->substr(12), query.substr(12));
  // An EDNS OPT record after the question is not echoed.
  std::string with_opt = query;
  with_opt[11] = 1;
  with_opt += std::string("\x00\x00\x29\x04\xd0\x00\x00\x00\x00\x00\x00", 11);
  EXPECT_EQ(DnsErrorReply(with_opt, kDnsRefused)->size(), query.size());
}

TEST(DnsErrorReplyTest, MalformedQueriesGetNoReply) {
  std::string query = Query();
  EXPECT_FALSE(DnsErrorReply("", kDnsRefused).has_value());
  EXPECT_FALSE(DnsErrorReply(query.substr(0, 11), kDnsRefused).has_value());
  EXPECT_FALSE(DnsErrorReply(query.substr(0, query.size() - 1), kDnsRefused).has_value());
  std::string response = query;
  response[2] = static_cast<char>(0x81);
  EXPECT_FALSE(DnsErrorReply(response, kDnsRefused).has_value());
  std::string two = query;
  two[5] = 2;
  EXPECT_FALSE(DnsErrorReply(two, kDnsRefused).has_value());
  std::string pointer = query;
  pointer[12] = static_cast<char>(0xc0);
  EXPECT_FALSE(DnsErrorReply(pointer, kDnsRefused).has_value());
}

}  // namespace
}  // namespace abox::guest
