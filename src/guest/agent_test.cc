// Session-level behaviour of the agent: handshake, ping, protocol violations, stream ids,
// resets, disconnects and shutdown. Exec behaviour is in exec_stream_test.cc, flow control in
// flow_control_test.cc.
#include "src/guest/agent.h"

#include <signal.h>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "src/base/version.h"
#include "src/guest/fake_host.h"

namespace abox::guest {
namespace {

using testing::Argv;
using testing::FakeHost;
using ::testing::HasSubstr;
using testing::Shell;

TEST(AgentTest, AnswersHelloWithVersionsCapabilitiesAndLimits) {
  FakeHost host;
  proto::Hello hello = host.Handshake();
  EXPECT_EQ(hello.version, proto::kProtocolVersion);
  EXPECT_EQ(hello.min_version, proto::kMinProtocolVersion);
  EXPECT_EQ(hello.agent_version, kVersion);
  EXPECT_THAT(hello.capabilities,
              ::testing::ElementsAre("exec", "pty", "signal", "timeout", "tunnel"));
  EXPECT_EQ(hello.max_payload, proto::kMaxPayload);
  EXPECT_EQ(hello.window, proto::kDefaultWindow);
}

TEST(AgentTest, SendsNothingBeforeTheHostsHello) {
  FakeHost host;
  EXPECT_FALSE(host.Next(std::chrono::milliseconds(300)).has_value());
}

TEST(AgentTest, VersionMismatchGetsGoodbyeAndClose) {
  FakeHost host;
  proto::Hello hello = testing::HostHello();
  hello.version = 7;
  hello.min_version = 5;
  host.Send(proto::FrameType::kHello, 0, 0, proto::EncodeHello(hello));
  EXPECT_THAT(host.ExpectGoodbye("protocol mismatch"), HasSubstr("5-7"));
  EXPECT_TRUE(host.AtEof());
  EXPECT_EQ(*host.Join(), Agent::Outcome::kViolation);
}

TEST(AgentTest, FramesLeftFromAPreviousHostAreDroppedBeforeHello) {
  // What a killed host wrote last can reach the guest after the next host connected.
  FakeHost host;
  host.Send(proto::FrameType::kCredit, 1, 0, std::string(4, '\0'));
  host.Send(proto::FrameType::kPing, 0, 0, "x");
  proto::Hello hello = host.Handshake();
  EXPECT_EQ(hello.version, proto::kProtocolVersion);
  host.Send(proto::FrameType::kPing, 0, 0, "after");
  auto pong = host.Next();
  ASSERT_TRUE(pong.has_value());
  EXPECT_EQ(pong->header.type, proto::FrameType::kPong);
  EXPECT_EQ(pong->payload, "after");
}

TEST(AgentTest, AHostThatNeverSaysHelloIsAViolation) {
  FakeHost host;
  for (int i = 0; i < 65; ++i) {
    host.Send(proto::FrameType::kPing, 0, 0, "x");
  }
  host.ExpectGoodbye("expected hello, got ping (after 64 frames without hello)");
  EXPECT_TRUE(host.AtEof());
}

TEST(AgentTest, GarbageHelloIsAViolation) {
  FakeHost host;
  host.Send(proto::FrameType::kHello, 0, 0, "{not json");
  host.ExpectGoodbye("not valid JSON");
}

TEST(AgentTest, HelloWithZeroWindowIsAViolation) {
  FakeHost host;
  proto::Hello hello = testing::HostHello();
  hello.window = 0;
  host.Send(proto::FrameType::kHello, 0, 0, proto::EncodeHello(hello));
  host.ExpectGoodbye("window");
}

TEST(AgentTest, EchoesPings) {
  FakeHost host;
  host.Handshake();
  for (const std::string& payload : std::vector<std::string>{"", "1", std::string(64, 'p')}) {
    host.Send(proto::FrameType::kPing, 0, 0, payload);
    auto f = host.Next();
    ASSERT_TRUE(f);
    EXPECT_EQ(f->header.type, proto::FrameType::kPong);
    EXPECT_EQ(f->header.stream, 0u);
    EXPECT_EQ(f->payload, payload);
  }
}

TEST(AgentTest, OversizedPingIsAViolation) {
  FakeHost host;
  host.Handshake();
  host.Send(proto::FrameType::kPing, 0, 0, std::string(65, 'p'));
  host.ExpectGoodbye("ping payload of 65 bytes");
}

TEST(AgentTest, PongsGetThroughWhileOutputFlows) {
  FakeHost host;
  host.Handshake();
  uint32_t id = host.Open(Shell("head -c 100000000 /dev/zero"));
  host.Send(proto::FrameType::kPing, 0, 0, "during");
  bool got_pong = false;
  size_t output = 0;
  while (!got_pong) {
    auto f = host.Next();
    ASSERT_TRUE(f);
    if (f->header.type == proto::FrameType::kPong) {
      EXPECT_EQ(f->payload, "during");
      got_pong = true;
    } else {
      ASSERT_EQ(f->header.stream, id);
      output += f->payload.size();
    }
  }
  // The window is never re-granted here, so the pong cannot be behind more than one window.
  EXPECT_LE(output, proto::kDefaultWindow);
}

TEST(AgentTest, OversizedFrameHeaderIsAViolation) {
  FakeHost host;
  host.Handshake();
  std::string frame = proto::EncodeFrame(proto::FrameType::kPing, 0, 0, "");
  frame[0] = static_cast<char>(0x01);  // length = kMaxPayload + 1 (0x10001)
  frame[1] = 0;
  frame[2] = static_cast<char>(0x01);
  host.SendRaw(frame);
  host.ExpectGoodbye("exceeds the maximum");
  EXPECT_TRUE(host.AtEof());
}

TEST(AgentTest, UnknownFrameTypeIsAViolation) {
  FakeHost host;
  host.Handshake();
  std::string frame = proto::EncodeFrame(proto::FrameType::kPing, 0, 0, "");
  frame[8] = 99;
  host.SendRaw(frame);
  host.ExpectGoodbye("unknown type 99");
}

TEST(AgentTest, GuestOnlyFramesFromTheHostAreViolations) {
  for (auto type : {proto::FrameType::kStdout, proto::FrameType::kExit}) {
    FakeHost host;
    host.Handshake();
    uint32_t id = host.Open(Argv({"sleep", "100"}));
    host.Send(type, id, 0, "x");
    host.ExpectGoodbye("which only the guest sends");
  }
}

TEST(AgentTest, FramesOnNeverOpenedStreamsAreViolations) {
  struct Case {
    proto::FrameType type;
    std::string payload;
  };
  for (const Case& c : {Case{proto::FrameType::kStdin, "data"},
                        Case{proto::FrameType::kCredit, proto::EncodeCredit(1)},
                        Case{proto::FrameType::kSignal, proto::EncodeSignal(15)},
                        Case{proto::FrameType::kResize, proto::EncodeResize({10, 10})}}) {
    FakeHost host;
    host.Handshake();
    host.Send(c.type, 99, 0, c.payload);
    host.ExpectGoodbye("on stream 99, which was never opened");
  }
}

TEST(AgentTest, ReusedStreamIdIsAViolationAndKillsRunningCommands) {
  FakeHost host;
  host.Handshake();
  uint32_t id = host.Open(Shell("echo $$; exec sleep 100"));
  auto f = host.Next();
  ASSERT_TRUE(f);
  ASSERT_EQ(f->header.type, proto::FrameType::kStdout);
  int pid = 0;
  ASSERT_TRUE(absl::SimpleAtoi(absl::StripAsciiWhitespace(f->payload), &pid));
  host.Send(proto::FrameType::kOpen, id, 0, proto::EncodeExecRequest(Argv({"true"})));
  host.ExpectGoodbye("already used");
  EXPECT_TRUE(testing::ProcessGone(pid));
}

TEST(AgentTest, EvenStreamIdIsAViolation) {
  FakeHost host;
  host.Handshake();
  host.Send(proto::FrameType::kOpen, 2, 0, proto::EncodeExecRequest(Argv({"true"})));
  host.ExpectGoodbye("even stream 2");
}

TEST(AgentTest, InvalidExecRequestResetsOnlyThatStream) {
  FakeHost host;
  host.Handshake();
  host.Send(proto::FrameType::kOpen, 1, 0, "{garbage");
  auto f = host.Next();
  ASSERT_TRUE(f);
  EXPECT_EQ(f->header.type, proto::FrameType::kReset);
  EXPECT_EQ(f->header.stream, 1u);
  EXPECT_THAT(*proto::DecodeError(f->payload), HasSubstr("not valid JSON"));
  host.Send(proto::FrameType::kOpen, 3, 0, R"({"argv":["true"],"user":"mallory"})");
  f = host.Next();
  ASSERT_TRUE(f);
  EXPECT_EQ(f->header.type, proto::FrameType::kReset);
  EXPECT_THAT(*proto::DecodeError(f->payload), HasSubstr("user"));
  // The session goes on.
  host.Send(proto::FrameType::kPing, 0, 0, "still here");
  f = host.Next();
  ASSERT_TRUE(f);
  EXPECT_EQ(f->header.type, proto::FrameType::kPong);
}

TEST(AgentTest, GarbageSignalPayloadIsAViolation) {
  FakeHost host;
  host.Handshake();
  uint32_t id = host.Open(Argv({"sleep", "100"}));
  host.Send(proto::FrameType::kSignal, id, 0, "nine");
  host.ExpectGoodbye("not valid JSON");
}

TEST(AgentTest, FramesCrossingTheExitAreIgnored) {
  FakeHost host;
  host.Handshake();
  auto r = host.Run(Argv({"true"}));
  ASSERT_TRUE(r.exit);
  // The host may still send these for a stream whose kExit is in flight.
  host.Send(proto::FrameType::kCredit, 1, 0, proto::EncodeCredit(100));
  host.Send(proto::FrameType::kSignal, 1, 0, proto::EncodeSignal(9));
  host.Send(proto::FrameType::kStdin, 1, 0, "late");
  host.Send(proto::FrameType::kReset, 1, 0, proto::EncodeError("late"));
  host.Send(proto::FrameType::kPing, 0, 0, "ok");
  auto f = host.Next();
  ASSERT_TRUE(f);
  EXPECT_EQ(f->header.type, proto::FrameType::kPong);
}

TEST(AgentTest, TooManyStreamsAreReset) {
  FakeHost host;
  host.Handshake();
  proto::ExecRequest cat = Argv({"cat"});
  cat.stdin_open = true;  // Blocks until stdin closes.
  for (uint32_t i = 0; i < proto::kMaxStreams; ++i) {
    host.Open(cat);
  }
  uint32_t extra = host.Open(cat);
  auto f = host.Next(std::chrono::seconds(60));
  ASSERT_TRUE(f);
  EXPECT_EQ(f->header.type, proto::FrameType::kReset);
  EXPECT_EQ(f->header.stream, extra);
  EXPECT_THAT(*proto::DecodeError(f->payload), HasSubstr("too many open streams"));
}

TEST(AgentTest, HostResetKillsTheCommandAndEndsTheStreamSilently) {
  FakeHost host;
  host.Handshake();
  uint32_t id = host.Open(Shell("echo $$; exec sleep 100"));
  auto f = host.Next();
  ASSERT_TRUE(f);
  int pid = 0;
  ASSERT_TRUE(absl::SimpleAtoi(absl::StripAsciiWhitespace(f->payload), &pid));
  host.Send(proto::FrameType::kReset, id, 0, proto::EncodeError("cancelled"));
  EXPECT_TRUE(testing::ProcessGone(pid));
  host.Send(proto::FrameType::kPing, 0, 0, "after");
  f = host.Next();
  ASSERT_TRUE(f);
  EXPECT_EQ(f->header.type, proto::FrameType::kPong);  // Nothing more on the reset stream.
}

TEST(AgentTest, HostDisconnectKillsRunningCommands) {
  FakeHost host;
  host.Handshake();
  host.Open(Shell("sleep 100 & echo $!; sleep 100"));
  auto f = host.Next();
  ASSERT_TRUE(f);
  int background = 0;
  ASSERT_TRUE(absl::SimpleAtoi(absl::StripAsciiWhitespace(f->payload), &background));
  host.CloseHostEnd();
  EXPECT_EQ(*host.Join(), Agent::Outcome::kPeerClosed);
  EXPECT_TRUE(testing::ProcessGone(background));
}

TEST(AgentTest, SecondHelloStartsANewSession) {
  FakeHost host;
  host.Handshake();
  host.Open(Shell("echo $$; exec sleep 100"));
  auto f = host.Next();
  ASSERT_TRUE(f);
  int pid = 0;
  ASSERT_TRUE(absl::SimpleAtoi(absl::StripAsciiWhitespace(f->payload), &pid));
  host.Handshake();  // A reconnected host whose disconnect we never saw.
  EXPECT_TRUE(testing::ProcessGone(pid));
  // Stream ids start over in the new session.
  host.Send(proto::FrameType::kOpen, 1, 0, proto::EncodeExecRequest(Argv({"true"})));
  bool exited = false;
  while (!exited) {
    f = host.Next();
    ASSERT_TRUE(f);
    exited = f->header.type == proto::FrameType::kExit;
  }
}

TEST(AgentTest, HostGoodbyeEndsTheSession) {
  FakeHost host;
  host.Handshake();
  host.Send(proto::FrameType::kGoodbye, 0, 0, proto::EncodeError("bye"));
  EXPECT_TRUE(host.AtEof());
  EXPECT_EQ(*host.Join(), Agent::Outcome::kPeerClosed);
}

TEST(AgentTest, VirtioPortOutlivesTheHost) {
  FakeHost host(testing::DefaultAgentOptions(), ChannelKind::kVirtioPort);
  host.Handshake();
  host.Open(Shell("echo $$; exec sleep 100"));
  auto f = host.Next();
  ASSERT_TRUE(f);
  int pid = 0;
  ASSERT_TRUE(absl::SimpleAtoi(absl::StripAsciiWhitespace(f->payload), &pid));
  host.CloseHostEnd();
  // The commands of the lost host are killed; the agent waits for the next host.
  EXPECT_TRUE(testing::ProcessGone(pid));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  host.Terminate();
  EXPECT_EQ(*host.Join(), Agent::Outcome::kTerminated);
}

TEST(AgentTest, TerminationSignalKillsCommandsAndEndsTheLoop) {
  FakeHost host;
  host.Handshake();
  host.Open(Shell("echo $$; exec sleep 100"));
  auto f = host.Next();
  ASSERT_TRUE(f);
  int pid = 0;
  ASSERT_TRUE(absl::SimpleAtoi(absl::StripAsciiWhitespace(f->payload), &pid));
  host.Terminate();
  EXPECT_EQ(*host.Join(), Agent::Outcome::kTerminated);
  EXPECT_TRUE(testing::ProcessGone(pid));
  EXPECT_TRUE(host.AtEof());
}

TEST(AgentTest, ShutdownEndsTheLoop) {
  FakeHost host;
  host.Handshake();
  host.Send(proto::FrameType::kShutdown, 0, 0, "");
  EXPECT_EQ(*host.Join(), Agent::Outcome::kShutdown);
}

}  // namespace
}  // namespace abox::guest
