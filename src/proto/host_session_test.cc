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
  ASSERT_TRUE(session_.OnBytes(EncodeFrame(FrameType::kCredit, id, 0, EncodeCredit(1000)), now_)
                  .ok());
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
