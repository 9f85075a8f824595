#include "src/proto/host_session.h"

#include <vector>

#include "gtest/gtest.h"

namespace abox::proto {
namespace {

struct RecordingSink : ExecSink {
  std::string out, err;
  std::optional<ExitInfo> exit;
  std::optional<std::string> reset;
  int eofs = 0;
  void OnStdout(absl::string_view d) override { out.append(d.data(), d.size()); }
  void OnStderr(absl::string_view d) override { err.append(d.data(), d.size()); }
  void OnOutputEof(bool) override { ++eofs; }
  void OnExit(const ExitInfo& e) override { exit = e; }
  void OnReset(absl::string_view e) override { reset = std::string(e); }
};

// Decodes everything the host queued, as the guest would see it.
std::vector<Frame> Drain(HostSession& s) {
  std::string bytes = s.TakeOutput();
  FrameDecoder d;
  std::vector<Frame> frames;
  absl::string_view rest = bytes;
  while (!rest.empty()) {
    rest.remove_prefix(d.Feed(rest));
    auto f = d.Next();
    EXPECT_TRUE(f.ok());
    if (f.ok() && *f) {
      frames.push_back(std::move(**f));
    }
  }
  return frames;
}

std::string GuestHello(uint32_t version = kProtocolVersion) {
  Hello h{.version = version,
          .min_version = version,
          .agent_version = "test",
          .capabilities = {"exec"},
          .max_payload = kMaxPayload,
          .window = kDefaultWindow};
  return EncodeFrame(FrameType::kHello, 0, 0, EncodeHello(h));
}

class HostSessionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    session_.Start(now_);
    auto frames = Drain(session_);
    ASSERT_EQ(frames.size(), 1u);
    ASSERT_EQ(frames[0].header.type, FrameType::kHello);
    ASSERT_TRUE(DecodeHello(frames[0].payload).ok());
    ASSERT_TRUE(session_.OnBytes(GuestHello(), now_).ok());
    ASSERT_TRUE(session_.ready());
  }

  uint32_t Open(RecordingSink* sink, bool stdin_open = false) {
    ExecRequest r;
    r.argv = {"cat"};
    r.stdin_open = stdin_open;
    auto id = session_.OpenExec(r, sink);
    EXPECT_TRUE(id.ok());
    auto frames = Drain(session_);
    EXPECT_EQ(frames.size(), 1u);
    EXPECT_EQ(frames[0].header.type, FrameType::kOpen);
    EXPECT_TRUE(DecodeExecRequest(frames[0].payload).ok());
    return *id;
  }

  absl::Time now_ = absl::FromUnixSeconds(1000);
  HostSession session_{HostSession::Options{}};
};

TEST_F(HostSessionTest, DeliversOutputAndExit) {
  RecordingSink sink;
  uint32_t id = Open(&sink);
  EXPECT_EQ(id % 2, 1u);
  std::string wire = EncodeFrame(FrameType::kStdout, id, 0, "out") +
                     EncodeFrame(FrameType::kStderr, id, kFlagEof, "err") +
                     EncodeFrame(FrameType::kStdout, id, kFlagEof, "") +
                     EncodeFrame(FrameType::kExit, id, 0, EncodeExitInfo({.exit_code = 3}));
  ASSERT_TRUE(session_.OnBytes(wire, now_).ok());
  EXPECT_EQ(sink.out, "out");
  EXPECT_EQ(sink.err, "err");
  EXPECT_EQ(sink.eofs, 2);
  ASSERT_TRUE(sink.exit.has_value());
  EXPECT_EQ(sink.exit->exit_code, 3);
  EXPECT_EQ(session_.open_streams(), 0u);
}

TEST_F(HostSessionTest, OutputBeyondCreditIsAViolation) {
  RecordingSink sink;
  uint32_t id = Open(&sink);
  std::string chunk(kMaxPayload, 'x');
  for (uint32_t sent = 0; sent < kDefaultWindow; sent += kMaxPayload) {
    ASSERT_TRUE(session_.OnBytes(EncodeFrame(FrameType::kStdout, id, 0, chunk), now_).ok());
  }
  auto s = session_.OnBytes(EncodeFrame(FrameType::kStdout, id, 0, "1"), now_);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
}

TEST_F(HostSessionTest, ConsumedOutputReturnsCreditSoOutputContinues) {
  RecordingSink sink;
  uint32_t id = Open(&sink);
  std::string chunk(kMaxPayload, 'x');
  for (uint32_t sent = 0; sent < kDefaultWindow; sent += kMaxPayload) {
    ASSERT_TRUE(session_.OnBytes(EncodeFrame(FrameType::kStdout, id, 0, chunk), now_).ok());
  }
  session_.ConsumedOutput(id, kDefaultWindow);
  auto frames = Drain(session_);
  ASSERT_EQ(frames.size(), 1u);
  EXPECT_EQ(frames[0].header.type, FrameType::kCredit);
  EXPECT_EQ(*DecodeCredit(frames[0].payload), kDefaultWindow);
  EXPECT_TRUE(session_.OnBytes(EncodeFrame(FrameType::kStdout, id, 0, chunk), now_).ok());
}

TEST_F(HostSessionTest, StdinIsLimitedByGuestCredit) {
  RecordingSink sink;
  uint32_t id = Open(&sink, /*stdin_open=*/true);
  std::string big(kDefaultWindow + 1000, 'a');
  EXPECT_EQ(session_.SendStdin(id, big), kDefaultWindow);
  EXPECT_EQ(session_.StdinCredit(id), 0u);
  EXPECT_EQ(session_.SendStdin(id, "more"), 0u);
  auto frames = Drain(session_);
  size_t total = 0;
  for (const auto& f : frames) {
    EXPECT_EQ(f.header.type, FrameType::kStdin);
    EXPECT_LE(f.payload.size(), kMaxPayload);
    total += f.payload.size();
  }
  EXPECT_EQ(total, kDefaultWindow);
  ASSERT_TRUE(
      session_.OnBytes(EncodeFrame(FrameType::kCredit, id, 0, EncodeCredit(1000)), now_).ok());
  EXPECT_EQ(session_.StdinCredit(id), 1000u);
  session_.CloseStdin(id);
  frames = Drain(session_);
  ASSERT_EQ(frames.size(), 1u);
  EXPECT_EQ(frames[0].header.flags, kFlagEof);
  EXPECT_EQ(session_.SendStdin(id, "late"), 0u);
  // An over-generous grant is a lie.
  EXPECT_FALSE(
      session_.OnBytes(EncodeFrame(FrameType::kCredit, id, 0, EncodeCredit(kDefaultWindow)), now_)
          .ok());
}

TEST_F(HostSessionTest, HostileFramesAreViolations) {
  RecordingSink sink;
  uint32_t id = Open(&sink);
  struct Case {
    const char* name;
    std::string wire;
  };
  std::vector<Case> cases = {
      {"unknown stream", EncodeFrame(FrameType::kStdout, id + 2, 0, "x")},
      {"host-only type", EncodeFrame(FrameType::kStdin, id, 0, "x")},
      {"open from guest", EncodeFrame(FrameType::kOpen, id, 0, "{}")},
      {"bad exit json", EncodeFrame(FrameType::kExit, id, 0, "{nope")},
      {"second hello", GuestHello()},
      {"bad credit", EncodeFrame(FrameType::kCredit, id, 0, "xy")},
      {"goodbye", EncodeFrame(FrameType::kGoodbye, 0, 0, EncodeError("bye"))},
  };
  for (const auto& c : cases) {
    HostSession s{HostSession::Options{}};
    s.Start(now_);
    ASSERT_TRUE(s.OnBytes(GuestHello(), now_).ok());
    ExecRequest r;
    r.argv = {"x"};
    ASSERT_TRUE(s.OpenExec(r, &sink).ok());
    EXPECT_FALSE(s.OnBytes(c.wire, now_).ok()) << c.name;
  }
}

TEST_F(HostSessionTest, DataAfterEofAndAfterExitAreViolations) {
  RecordingSink sink;
  uint32_t id = Open(&sink);
  ASSERT_TRUE(session_.OnBytes(EncodeFrame(FrameType::kStdout, id, kFlagEof, ""), now_).ok());
  EXPECT_FALSE(session_.OnBytes(EncodeFrame(FrameType::kStdout, id, 0, "x"), now_).ok());

  HostSession s{HostSession::Options{}};
  s.Start(now_);
  ASSERT_TRUE(s.OnBytes(GuestHello(), now_).ok());
  RecordingSink sink2;
  ExecRequest r;
  r.argv = {"x"};
  uint32_t id2 = *s.OpenExec(r, &sink2);
  ASSERT_TRUE(
      s.OnBytes(EncodeFrame(FrameType::kExit, id2, 0, EncodeExitInfo({.exit_code = 0})), now_)
          .ok());
  EXPECT_FALSE(s.OnBytes(EncodeFrame(FrameType::kStdout, id2, 0, "x"), now_).ok());
}

TEST(HostSessionHandshakeTest, RefusesIncompatibleVersionAndEarlyStreamFrames) {
  absl::Time now = absl::FromUnixSeconds(1);
  HostSession s{HostSession::Options{}};
  s.Start(now);
  EXPECT_FALSE(s.OnBytes(EncodeFrame(FrameType::kStdout, 1, 0, "x"), now).ok());
  HostSession s2{HostSession::Options{}};
  s2.Start(now);
  auto st = s2.OnBytes(GuestHello(kProtocolVersion + 1), now);
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_FALSE(s2.ready());
  RecordingSink sink;
  EXPECT_EQ(s2.OpenExec(ExecRequest{.argv = {"x"}}, &sink).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(HostSessionHeartbeatTest, SilentGuestIsDeclaredDead) {
  absl::Time t = absl::FromUnixSeconds(1);
  HostSession::Options o;
  o.ping_interval = absl::Seconds(1);
  o.ping_timeout = absl::Seconds(3);
  HostSession s{o};
  s.Start(t);
  ASSERT_TRUE(s.OnBytes(GuestHello(), t).ok());
  (void)s.TakeOutput();
  t += absl::Seconds(1);
  ASSERT_TRUE(s.Tick(t).ok());
  auto frames = Drain(s);
  ASSERT_EQ(frames.size(), 1u);
  EXPECT_EQ(frames[0].header.type, FrameType::kPing);
  // A pong keeps it alive.
  ASSERT_TRUE(s.OnBytes(EncodeFrame(FrameType::kPong, 0, 0, frames[0].payload), t).ok());
  t += absl::Seconds(2);
  ASSERT_TRUE(s.Tick(t).ok());
  // Then silence past the timeout.
  for (int i = 0; i < 3; ++i) {
    t += absl::Seconds(1);
    ASSERT_TRUE(s.Tick(t).ok());
  }
  t += absl::Seconds(1);
  EXPECT_EQ(s.Tick(t).code(), absl::StatusCode::kDeadlineExceeded);
}

TEST(HostSessionHeartbeatTest, GuestThatNeverAnswersTheHandshakeTimesOut) {
  absl::Time t = absl::FromUnixSeconds(1);
  HostSession::Options o;
  o.ping_timeout = absl::Seconds(3);
  HostSession s{o};
  s.Start(t);
  absl::Status st;
  for (int i = 0; i < 10 && st.ok(); ++i) {
    t += absl::Seconds(1);
    st = s.Tick(t);
  }
  EXPECT_EQ(st.code(), absl::StatusCode::kDeadlineExceeded);
}

TEST(HostSessionTest2, GuestThatStopsReadingIsAViolation) {
  absl::Time t = absl::FromUnixSeconds(1);
  HostSession s{HostSession::Options{}};
  s.Start(t);
  // The guest pings a lot but never reads our pongs.
  std::string pings;
  for (int i = 0; i < 400000; ++i) {
    pings += EncodeFrame(FrameType::kPing, 0, 0, "0123456789");
  }
  EXPECT_EQ(s.OnBytes(pings, t).code(), absl::StatusCode::kResourceExhausted);
}

TEST_F(HostSessionTest, FailResetsEveryOpenStream) {
  RecordingSink a, b;
  Open(&a);
  Open(&b);
  session_.Fail("qemu exited");
  EXPECT_EQ(a.reset, "qemu exited");
  EXPECT_EQ(b.reset, "qemu exited");
  EXPECT_TRUE(session_.failed());
  EXPECT_EQ(session_.OpenExec(ExecRequest{.argv = {"x"}}, &a).status().code(),
            absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace abox::proto

namespace abox::proto {
namespace {

TEST_F(HostSessionTest, DetachKillsTheCommandAndDiscardsItsOutput) {
  auto sink = std::make_unique<RecordingSink>();
  uint32_t id = Open(sink.get());
  ASSERT_TRUE(session_.OnBytes(EncodeFrame(FrameType::kStdout, id, 0, "abc"), now_).ok());
  session_.Detach(id);
  sink.reset();  // the owner is gone; the session must not touch it again
  auto frames = Drain(session_);
  ASSERT_EQ(frames.size(), 2u);
  EXPECT_EQ(frames[0].header.type, FrameType::kSignal);
  EXPECT_EQ(*DecodeSignal(frames[0].payload), 9);
  EXPECT_EQ(frames[1].header.type, FrameType::kCredit);
  // Output keeps flowing until the exit, far beyond one window, without a violation.
  std::string chunk(kMaxPayload, 'x');
  for (int i = 0; i < 20; ++i) {
    ASSERT_TRUE(session_.OnBytes(EncodeFrame(FrameType::kStdout, id, 0, chunk), now_).ok());
  }
  ASSERT_TRUE(
      session_.OnBytes(EncodeFrame(FrameType::kExit, id, 0, EncodeExitInfo({.signal = 9})), now_)
          .ok());
  EXPECT_EQ(session_.open_streams(), 0u);
}

}  // namespace
}  // namespace abox::proto

namespace abox::proto {
namespace {

struct RecordingTunnel : TunnelSink {
  std::string data;
  bool eof = false;
  std::optional<std::string> reset;
  void OnData(absl::string_view d) override { data.append(d.data(), d.size()); }
  void OnEof() override { eof = true; }
  void OnReset(absl::string_view e) override { reset = std::string(e); }
};

// Accepts every tunnel into a RecordingTunnel, or refuses with `refusal` when it is set.
struct RecordingAcceptor : TunnelAcceptor {
  std::map<uint32_t, std::unique_ptr<RecordingTunnel>> tunnels;
  std::vector<TunnelRequest> requests;
  std::optional<absl::Status> refusal;
  absl::StatusOr<TunnelSink*> OnTunnelOpen(uint32_t stream, const TunnelRequest& r) override {
    requests.push_back(r);
    if (refusal) {
      return *refusal;
    }
    auto& t = tunnels[stream];
    t = std::make_unique<RecordingTunnel>();
    return t.get();
  }
};

std::string TunnelOpen(uint32_t id, TunnelRequest r = {
                                        .kind = TunnelKind::kTcp, .dst = "1.2.3.4", .port = 443}) {
  return EncodeFrame(FrameType::kTunnelOpen, id, 0, EncodeTunnelRequest(r));
}

class HostSessionTunnelTest : public HostSessionTest {
 protected:
  void SetUp() override {
    HostSessionTest::SetUp();
    (void)session_.TakeOutput();
    session_.set_tunnel_acceptor(&acceptor_);
  }
  absl::Status Guest(const std::string& wire) { return session_.OnBytes(wire, now_); }

  RecordingAcceptor acceptor_;
};

TEST_F(HostSessionTunnelTest, GuestOpensATunnelAndBytesFlowBothWaysUntilBothEofs) {
  ASSERT_TRUE(Guest(TunnelOpen(2) + EncodeFrame(FrameType::kTunnelData, 2, 0, "GET /")).ok());
  ASSERT_EQ(acceptor_.requests.size(), 1u);
  EXPECT_EQ(acceptor_.requests[0].dst, "1.2.3.4");
  EXPECT_EQ(acceptor_.requests[0].port, 443);
  RecordingTunnel& t = *acceptor_.tunnels.at(2);
  EXPECT_EQ(t.data, "GET /");
  EXPECT_EQ(session_.open_tunnels(), 1u);

  EXPECT_EQ(session_.TunnelCredit(2), kDefaultWindow);
  EXPECT_EQ(session_.SendTunnel(2, "HTTP/1.1 200"), 12u);
  session_.CloseTunnel(2);
  EXPECT_EQ(session_.SendTunnel(2, "late"), 0u);  // our write half is closed
  auto frames = Drain(session_);
  ASSERT_EQ(frames.size(), 2u);
  EXPECT_EQ(frames[0].header.type, FrameType::kTunnelData);
  EXPECT_EQ(frames[0].header.stream, 2u);
  EXPECT_EQ(frames[0].payload, "HTTP/1.1 200");
  EXPECT_EQ(frames[1].header.type, FrameType::kTunnelData);
  EXPECT_EQ(frames[1].header.flags, kFlagEof);

  ASSERT_TRUE(Guest(EncodeFrame(FrameType::kTunnelData, 2, kFlagEof, "")).ok());
  EXPECT_TRUE(t.eof);
  EXPECT_FALSE(t.reset.has_value());
  EXPECT_EQ(session_.open_tunnels(), 0u);  // both halves closed
  // A late credit from the guest crossed the end: ignored.
  EXPECT_TRUE(Guest(EncodeFrame(FrameType::kCredit, 2, 0, EncodeCredit(12))).ok());
}

TEST_F(HostSessionTunnelTest, KindsOtherThanTcpCarryNoAddress) {
  ASSERT_TRUE(
      Guest(TunnelOpen(2, {.kind = TunnelKind::kDns}) + TunnelOpen(4, {.kind = TunnelKind::kProxy}))
          .ok());
  ASSERT_EQ(acceptor_.requests.size(), 2u);
  EXPECT_EQ(acceptor_.requests[0].kind, TunnelKind::kDns);
  EXPECT_EQ(acceptor_.requests[1].kind, TunnelKind::kProxy);
  EXPECT_TRUE(acceptor_.requests[1].dst.empty());
}

TEST_F(HostSessionTunnelTest, WithoutAnAcceptorEveryTunnelIsResetAsEgressOff) {
  session_.set_tunnel_acceptor(nullptr);
  ASSERT_TRUE(Guest(TunnelOpen(2) + EncodeFrame(FrameType::kTunnelData, 2, 0, "x")).ok());
  auto frames = Drain(session_);
  ASSERT_EQ(frames.size(), 1u);
  EXPECT_EQ(frames[0].header.type, FrameType::kReset);
  EXPECT_EQ(frames[0].header.stream, 2u);
  EXPECT_EQ(*DecodeError(frames[0].payload), "egress is off for this sandbox");
  EXPECT_EQ(session_.open_tunnels(), 0u);
}

TEST_F(HostSessionTunnelTest, AcceptorRefusalBecomesTheResetReason) {
  acceptor_.refusal = absl::PermissionDeniedError("policy says no");
  ASSERT_TRUE(Guest(TunnelOpen(2)).ok());
  auto frames = Drain(session_);
  ASSERT_EQ(frames.size(), 1u);
  EXPECT_EQ(frames[0].header.type, FrameType::kReset);
  EXPECT_EQ(*DecodeError(frames[0].payload), "policy says no");
}

TEST_F(HostSessionTunnelTest, TooManyTunnelsAreResetButTheSessionLives) {
  std::string wire;
  for (uint32_t i = 1; i <= kMaxTunnels + 3; ++i) {
    wire += TunnelOpen(2 * i) + EncodeFrame(FrameType::kTunnelData, 2 * i, 0, "x");
  }
  ASSERT_TRUE(Guest(wire).ok());
  EXPECT_EQ(session_.open_tunnels(), kMaxTunnels);
  EXPECT_EQ(acceptor_.tunnels.size(), kMaxTunnels);
  auto frames = Drain(session_);
  ASSERT_EQ(frames.size(), 3u);
  for (const Frame& f : frames) {
    EXPECT_EQ(f.header.type, FrameType::kReset);
    EXPECT_GT(f.header.stream, 2 * kMaxTunnels);
    EXPECT_EQ(*DecodeError(f.payload), "too many tunnels");
  }
  // Once one ends, the next is accepted.
  ASSERT_TRUE(Guest(EncodeFrame(FrameType::kReset, 2, 0, EncodeError("closed"))).ok());
  EXPECT_EQ(acceptor_.tunnels.at(2)->reset, "closed");
  uint32_t next = 2 * (kMaxTunnels + 4);
  ASSERT_TRUE(Guest(TunnelOpen(next)).ok());
  EXPECT_EQ(session_.open_tunnels(), kMaxTunnels);
  EXPECT_EQ(acceptor_.tunnels.count(next), 1u);
  EXPECT_TRUE(Drain(session_).empty());
}

TEST_F(HostSessionTunnelTest, TunnelDataBeyondCreditIsAViolationAndConsumedDataIsRecredited) {
  ASSERT_TRUE(Guest(TunnelOpen(2)).ok());
  std::string chunk(kMaxPayload, 'x');
  for (uint32_t sent = 0; sent < kDefaultWindow; sent += kMaxPayload) {
    ASSERT_TRUE(Guest(EncodeFrame(FrameType::kTunnelData, 2, 0, chunk)).ok());
  }
  session_.ConsumedTunnel(2, kDefaultWindow);
  auto frames = Drain(session_);
  ASSERT_EQ(frames.size(), 1u);
  EXPECT_EQ(frames[0].header.type, FrameType::kCredit);
  EXPECT_EQ(*DecodeCredit(frames[0].payload), kDefaultWindow);
  for (uint32_t sent = 0; sent < kDefaultWindow; sent += kMaxPayload) {
    ASSERT_TRUE(Guest(EncodeFrame(FrameType::kTunnelData, 2, 0, chunk)).ok());
  }
  EXPECT_EQ(Guest(EncodeFrame(FrameType::kTunnelData, 2, 0, "1")).code(),
            absl::StatusCode::kResourceExhausted);
}

TEST_F(HostSessionTunnelTest, HostSendsOnlyWithinTheGuestsCredit) {
  ASSERT_TRUE(Guest(TunnelOpen(2)).ok());
  std::string big(kDefaultWindow + 1000, 'a');
  EXPECT_EQ(session_.SendTunnel(2, big), kDefaultWindow);
  EXPECT_EQ(session_.TunnelCredit(2), 0u);
  for (const Frame& f : Drain(session_)) {
    EXPECT_EQ(f.header.type, FrameType::kTunnelData);
    EXPECT_LE(f.payload.size(), kMaxPayload);
  }
  ASSERT_TRUE(Guest(EncodeFrame(FrameType::kCredit, 2, 0, EncodeCredit(1000))).ok());
  EXPECT_EQ(session_.TunnelCredit(2), 1000u);
  // Granting beyond the window is a lie.
  EXPECT_FALSE(Guest(EncodeFrame(FrameType::kCredit, 2, 0, EncodeCredit(kDefaultWindow))).ok());
}

TEST_F(HostSessionTunnelTest, FramesCrossingOurResetAreIgnored) {
  ASSERT_TRUE(Guest(TunnelOpen(2)).ok());
  RecordingTunnel* t = acceptor_.tunnels.at(2).get();
  session_.ResetTunnel(2, "denied by policy");
  auto frames = Drain(session_);
  ASSERT_EQ(frames.size(), 1u);
  EXPECT_EQ(frames[0].header.type, FrameType::kReset);
  EXPECT_EQ(*DecodeError(frames[0].payload), "denied by policy");
  EXPECT_TRUE(Guest(EncodeFrame(FrameType::kTunnelData, 2, 0, "more") +
                    EncodeFrame(FrameType::kTunnelData, 2, kFlagEof, "") +
                    EncodeFrame(FrameType::kCredit, 2, 0, EncodeCredit(5)) +
                    EncodeFrame(FrameType::kReset, 2, 0, EncodeError("bye")))
                  .ok());
  EXPECT_TRUE(t->data.empty());
  EXPECT_FALSE(t->reset.has_value());  // not called after ResetTunnel
  session_.ResetTunnel(2, "again");    // no-op for an ended tunnel
  EXPECT_TRUE(Drain(session_).empty());
  // Still validated: a malformed credit on an ended tunnel is a violation.
  EXPECT_FALSE(Guest(EncodeFrame(FrameType::kCredit, 2, 0, "xy")).ok());
}

TEST_F(HostSessionTunnelTest, HostileTunnelFramesAreViolations) {
  struct Case {
    const char* name;
    std::string wire;
  };
  std::vector<Case> cases = {
      {"open on an odd id", TunnelOpen(3)},
      {"open on an id in use", TunnelOpen(2) + TunnelOpen(2)},
      {"open on a lower id", TunnelOpen(4) + TunnelOpen(2)},
      {"open with bad json", EncodeFrame(FrameType::kTunnelOpen, 2, 0, "{nope")},
      {"open with a host name",
       EncodeFrame(FrameType::kTunnelOpen, 2, 0, R"({"kind":"tcp","dst":"example.com","port":1})")},
      {"data on a never-opened tunnel", EncodeFrame(FrameType::kTunnelData, 2, 0, "x")},
      {"credit on a never-opened tunnel", EncodeFrame(FrameType::kCredit, 4, 0, EncodeCredit(1))},
      {"data after eof", TunnelOpen(2) + EncodeFrame(FrameType::kTunnelData, 2, kFlagEof, "") +
                             EncodeFrame(FrameType::kTunnelData, 2, 0, "x")},
      {"stdout on a tunnel", TunnelOpen(2) + EncodeFrame(FrameType::kStdout, 2, 0, "x")},
      {"exit on a tunnel",
       TunnelOpen(2) + EncodeFrame(FrameType::kExit, 2, 0, EncodeExitInfo({.exit_code = 0}))},
      {"tunnel data on an exec stream", EncodeFrame(FrameType::kTunnelData, 1, 0, "x")},
      {"open before the handshake", ""},
  };
  for (const auto& c : cases) {
    HostSession s{HostSession::Options{}};
    s.Start(now_);
    if (c.wire.empty()) {
      EXPECT_FALSE(s.OnBytes(TunnelOpen(2), now_).ok()) << c.name;
      continue;
    }
    ASSERT_TRUE(s.OnBytes(GuestHello(), now_).ok());
    RecordingAcceptor acceptor;
    s.set_tunnel_acceptor(&acceptor);
    RecordingSink sink;
    ASSERT_TRUE(s.OpenExec(ExecRequest{.argv = {"x"}}, &sink).ok());  // stream 1
    EXPECT_FALSE(s.OnBytes(c.wire, now_).ok()) << c.name;
  }
}

TEST_F(HostSessionTunnelTest, FailResetsEveryTunnel) {
  ASSERT_TRUE(Guest(TunnelOpen(2) + TunnelOpen(4)).ok());
  session_.Fail("qemu exited");
  EXPECT_EQ(acceptor_.tunnels.at(2)->reset, "qemu exited");
  EXPECT_EQ(acceptor_.tunnels.at(4)->reset, "qemu exited");
  EXPECT_EQ(session_.open_tunnels(), 0u);
  EXPECT_EQ(session_.SendTunnel(2, "x"), 0u);
}

TEST_F(HostSessionTunnelTest, HostHelloOffersTheTunnelCapability) {
  HostSession s{HostSession::Options{}};
  s.Start(now_);
  auto frames = Drain(s);
  ASSERT_EQ(frames.size(), 1u);
  auto hello = DecodeHello(frames[0].payload);
  ASSERT_TRUE(hello.ok());
  EXPECT_EQ(hello->version, 2u);
  EXPECT_NE(std::find(hello->capabilities.begin(), hello->capabilities.end(), "tunnel"),
            hello->capabilities.end());
}

}  // namespace
}  // namespace abox::proto
