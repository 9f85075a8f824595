// Credit-based flow control between the agent and the host, in both directions, and the bound
// on the agent's channel queue.
#include <chrono>
#include <thread>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "src/guest/agent.h"
#include "src/guest/fake_host.h"

namespace abox::guest {
namespace {

using testing::Argv;
using testing::FakeHost;
using ::testing::HasSubstr;
using testing::Shell;
using namespace std::chrono_literals;

constexpr size_t kTwentyMiB = 20 << 20;

TEST(FlowControlTest, StopsAtTheWindowWithoutCreditAndResumesWithIt) {
  FakeHost host;
  host.Handshake();
  uint32_t id = host.Open(Shell(absl::StrCat("head -c ", kTwentyMiB, " /dev/zero")));
  size_t received = 0;
  // No credit: exactly one window arrives, then nothing.
  while (received < proto::kDefaultWindow) {
    auto f = host.Next();
    ASSERT_TRUE(f);
    ASSERT_EQ(f->header.stream, id);
    ASSERT_EQ(f->header.type, proto::FrameType::kStdout);
    ASSERT_EQ(f->header.flags, 0);
    ASSERT_LE(f->payload.size(), proto::kMaxPayload);
    received += f->payload.size();
  }
  EXPECT_EQ(received, proto::kDefaultWindow);
  EXPECT_FALSE(host.Next(500ms).has_value()) << "output beyond the window";

  // Credit, granted as a host does (half a window at a time), lets it finish.
  proto::CreditWindow window;
  ASSERT_TRUE(window.OnReceived(static_cast<uint32_t>(received)).ok());
  auto consume = [&](size_t n) {
    if (uint32_t credit = window.Release(static_cast<uint32_t>(n)); credit > 0) {
      host.Send(proto::FrameType::kCredit, id, 0, proto::EncodeCredit(credit));
    }
  };
  consume(received);
  std::optional<proto::ExitInfo> exit;
  bool eof = false;
  while (!exit) {
    auto f = host.Next();
    ASSERT_TRUE(f);
    if (f->header.type == proto::FrameType::kStdout) {
      ASSERT_FALSE(eof);
      ASSERT_TRUE(window.OnReceived(static_cast<uint32_t>(f->payload.size())).ok())
          << "the agent overran its window";
      received += f->payload.size();
      eof = (f->header.flags & proto::kFlagEof) != 0;
      consume(f->payload.size());
    } else if (f->header.type == proto::FrameType::kExit) {
      exit = *proto::DecodeExitInfo(f->payload);
    }
  }
  EXPECT_TRUE(eof);
  EXPECT_EQ(received, kTwentyMiB);
  EXPECT_EQ(exit->exit_code, 0);
}

TEST(FlowControlTest, StdoutAndStderrShareTheWindow) {
  FakeHost host;
  host.Handshake();
  host.Open(Shell("head -c 1000000 /dev/zero & head -c 1000000 /dev/zero >&2; wait"));
  size_t received = 0;
  while (received < proto::kDefaultWindow) {
    auto f = host.Next();
    ASSERT_TRUE(f);
    ASSERT_TRUE(f->header.type == proto::FrameType::kStdout ||
                f->header.type == proto::FrameType::kStderr);
    received += f->payload.size();
  }
  EXPECT_EQ(received, proto::kDefaultWindow);
  EXPECT_FALSE(host.Next(500ms).has_value());
}

TEST(FlowControlTest, StdinCreditComesBackAsTheCommandReads) {
  FakeHost host;
  host.Handshake();
  proto::ExecRequest req = Argv({"wc", "-c"});
  req.stdin_open = true;
  // 8 windows of stdin only get through if the agent returns credit.
  testing::ExecResult r = host.Run(req, std::string(8 * proto::kDefaultWindow, 'z'));
  EXPECT_THAT(r.problems, ::testing::IsEmpty());
  ASSERT_TRUE(r.exit);
  EXPECT_EQ(r.out, absl::StrCat(8 * proto::kDefaultWindow, "\n"));
}

TEST(FlowControlTest, StdinBeyondTheWindowIsAViolation) {
  FakeHost host;
  host.Handshake();
  proto::ExecRequest req = Argv({"sleep", "100"});  // Never reads its stdin.
  req.stdin_open = true;
  uint32_t id = host.Open(req);
  // Send every byte of credit we have (the agent returns some as the pipe buffer fills), until
  // no more credit comes back.
  uint64_t allowed = proto::kDefaultWindow;
  uint64_t sent = 0;
  for (;;) {
    while (sent < allowed) {
      size_t n = std::min<uint64_t>(allowed - sent, proto::kMaxPayload);
      host.Send(proto::FrameType::kStdin, id, 0, std::string(n, 's'));
      sent += n;
    }
    uint64_t before = allowed;
    while (auto f = host.Next(300ms)) {
      ASSERT_EQ(f->header.type, proto::FrameType::kCredit);
      allowed += *proto::DecodeCredit(f->payload);
    }
    if (allowed == before) {
      break;
    }
  }
  host.Send(proto::FrameType::kStdin, id, 0, "!");
  host.ExpectGoodbye("credit");
}

TEST(FlowControlTest, StdinAfterEofIsAViolation) {
  FakeHost host;
  host.Handshake();
  proto::ExecRequest req = Argv({"sleep", "100"});
  req.stdin_open = true;
  uint32_t id = host.Open(req);
  host.Send(proto::FrameType::kStdin, id, proto::kFlagEof, "");
  host.Send(proto::FrameType::kStdin, id, 0, "more");
  host.ExpectGoodbye("after its EOF");
}

TEST(FlowControlTest, StdinToACommandWithoutStdinIsAViolation) {
  FakeHost host;
  host.Handshake();
  uint32_t id = host.Open(Argv({"sleep", "100"}));
  host.Send(proto::FrameType::kStdin, id, 0, "data");
  host.ExpectGoodbye("opened without stdin");
}

TEST(FlowControlTest, GrantBeyondTheWindowIsAViolation) {
  FakeHost host;
  host.Handshake();
  uint32_t id = host.Open(Argv({"sleep", "100"}));
  host.Send(proto::FrameType::kCredit, id, 0, proto::EncodeCredit(1));  // Window is full.
  host.ExpectGoodbye("overflows");
}

TEST(FlowControlTest, MalformedCreditIsAViolation) {
  FakeHost host;
  host.Handshake();
  uint32_t id = host.Open(Argv({"sleep", "100"}));
  host.Send(proto::FrameType::kCredit, id, 0, "abc");
  host.ExpectGoodbye("want 4");
}

TEST(FlowControlTest, SmallerHostWindowAndPayloadAreHonoured) {
  FakeHost host;
  proto::Hello hello = testing::HostHello();
  hello.window = 10000;
  hello.max_payload = 4096;
  host.Send(proto::FrameType::kHello, 0, 0, proto::EncodeHello(hello));
  ASSERT_TRUE(host.Next());
  host.Open(Shell("head -c 100000 /dev/zero"));
  size_t received = 0;
  while (auto f = host.Next(500ms)) {
    EXPECT_LE(f->payload.size(), 4096u);
    received += f->payload.size();
  }
  EXPECT_EQ(received, 10000u);
}

TEST(FlowControlTest, QueueStaysBoundedWhenTheHostStopsReading) {
  FakeHost host;
  host.Handshake();
  // 16 streams x a full window = 4 MiB of output the agent may send without more credit;
  // the host reads none of it for a while.
  std::vector<uint32_t> ids;
  for (int i = 0; i < 16; ++i) {
    ids.push_back(host.Open(Shell("head -c 10000000 /dev/zero")));
  }
  std::this_thread::sleep_for(1500ms);
  size_t peak = host.agent().peak_pending();
  EXPECT_GT(peak, 0u);
  // The limit, plus at most one frame read while under it and a few small frames.
  EXPECT_LE(peak, Agent::kMaxQueuedOutput + proto::kHeaderSize + proto::kMaxPayload + 4096);
  size_t received = 0;
  while (auto f = host.Next(1s)) {
    received += f->payload.size();
  }
  EXPECT_EQ(received, 16 * proto::kDefaultWindow);
}

TEST(FlowControlTest, ChannelIsNotReadWhileRepliesPileUp) {
  FakeHost host;
  host.Handshake();
  // Invalid opens each cost the agent a kReset reply; the host never reads them.
  std::string opens;
  for (uint32_t id = 1; id < 2 * 100'000; id += 2) {
    proto::AppendFrame(proto::FrameType::kOpen, id, 0, "x", &opens);
  }
  absl::string_view left = opens;
  auto stalled_since = std::chrono::steady_clock::now();
  while (!left.empty() && std::chrono::steady_clock::now() - stalled_since < 1s) {
    ssize_t n = ::send(host.fd(), left.data(), left.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n > 0) {
      left.remove_prefix(static_cast<size_t>(n));
      stalled_since = std::chrono::steady_clock::now();
    } else {
      std::this_thread::sleep_for(10ms);
    }
  }
  EXPECT_FALSE(left.empty()) << "the agent read everything although nobody read its replies";
  EXPECT_LE(host.agent().peak_pending(), Agent::kMaxQueuedOutput + Agent::kMaxQueuedControl + 8192);
}

}  // namespace
}  // namespace abox::guest
