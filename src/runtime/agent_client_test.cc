#include "src/runtime/agent_client.h"

#include <sys/socket.h>

#include <atomic>
#include <thread>

#include "gtest/gtest.h"
#include "src/base/io.h"
#include "src/proto/frame.h"
#include "src/proto/messages.h"
#include "src/runtime/fake_guest.h"

namespace abox::runtime {
namespace {

using proto::EncodeFrame;
using proto::FrameType;
using testing::FakeGuest;

using Pair = testing::ClientAndGuest;

Pair MakePair() { return testing::MakeClientAndGuest(); }

TEST(AgentClientTest, RunsACommandAndStreamsOutput) {
  Pair p = MakePair();
  std::thread guest([&] {
    p.guest->Handshake();
    auto open = p.guest->Expect(FrameType::kOpen);
    ASSERT_TRUE(open.has_value());
    auto req = proto::DecodeExecRequest(open->payload);
    ASSERT_TRUE(req.ok());
    EXPECT_EQ(req->argv, std::vector<std::string>({"echo", "hi"}));
    uint32_t id = open->header.stream;
    p.guest->Send(EncodeFrame(FrameType::kStdout, id, 0, "hi\n") +
                  EncodeFrame(FrameType::kStderr, id, proto::kFlagEof, "warn\n") +
                  EncodeFrame(FrameType::kStdout, id, proto::kFlagEof, "") +
                  EncodeFrame(FrameType::kExit, id, 0, proto::EncodeExitInfo({.exit_code = 4})));
  });
  ASSERT_TRUE(p.client->WaitReady(absl::Seconds(10)).ok());
  EXPECT_EQ(p.client->agent_version(), "fake-guest");
  auto exec = p.client->StartExec({.argv = {"echo", "hi"}});
  ASSERT_TRUE(exec.ok()) << exec.status();
  std::string out, err;
  while (auto chunk = (*exec)->ReadOutput()) {
    (chunk->is_stderr ? err : out) += chunk->data;
  }
  auto result = (*exec)->Wait();
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->exit_code, 4);
  EXPECT_EQ(out, "hi\n");
  EXPECT_EQ(err, "warn\n");
  guest.join();
}

// Issue 11 item 15: a guest filling the credit window with 1-byte frames made a string and a
// queue node per byte (megabytes for a 256 KiB window). Now frames of one stream coalesce, and
// alternating streams cost 4 bytes of bookkeeping per frame.
void FloodOneByteFrames(bool alternate) {
  Pair p = MakePair();
  constexpr size_t kFrames = proto::kDefaultWindow;  // 256 Ki frames: the whole window
  std::thread guest([&] {
    p.guest->Handshake();
    auto open = p.guest->Expect(FrameType::kOpen);
    ASSERT_TRUE(open.has_value());
    uint32_t id = open->header.stream;
    std::string flood;
    flood.reserve(kFrames * (proto::kHeaderSize + 1));
    for (size_t i = 0; i < kFrames; ++i) {
      bool err = alternate && i % 2 == 1;
      flood += EncodeFrame(err ? FrameType::kStderr : FrameType::kStdout, id, 0, err ? "e" : "o");
    }
    p.guest->Send(flood);
    p.guest->Send(EncodeFrame(FrameType::kExit, id, 0, proto::EncodeExitInfo({.exit_code = 0})));
  });
  ASSERT_TRUE(p.client->WaitReady(absl::Seconds(10)).ok());
  auto exec = p.client->StartExec({.argv = {"flood"}});
  ASSERT_TRUE(exec.ok()) << exec.status();
  guest.join();
  // The exit came after every frame: once it is in, all the output is queued, none read.
  ASSERT_TRUE((*exec)->Wait().ok());
  ASSERT_TRUE((*exec)->WaitForOutput(absl::Now()));
  const size_t memory = (*exec)->QueuedOutputMemory();
  EXPECT_GE(memory, kFrames);
  // The window's bytes in a buffer of at most twice their size, plus 4 bytes a run.
  EXPECT_LE(memory, 2 * kFrames + (alternate ? 4 * kFrames : 64)) << memory;
  std::string out;
  size_t chunks = 0;
  while (auto chunk = (*exec)->ReadOutput()) {
    EXPECT_EQ(chunk->data.find(chunk->is_stderr ? 'o' : 'e'), std::string::npos);
    out += chunk->data;
    ++chunks;
  }
  EXPECT_EQ(out.size(), kFrames);
  EXPECT_EQ(chunks, alternate ? kFrames : 1U);  // in order, one chunk per run
  EXPECT_EQ(out.substr(0, 4), alternate ? "oeoe" : "oooo");
  EXPECT_EQ(p.failures->load(), 0);
}

TEST(AgentClientTest, OneByteFramesOfOneStreamCoalesceIntoOneChunk) { FloodOneByteFrames(false); }

TEST(AgentClientTest, OneByteFramesOfAlternatingStreamsCostFourBytesEach) {
  FloodOneByteFrames(true);
}

TEST(AgentClientTest, HostileGuestIsDroppedAndExecsFail) {
  Pair p = MakePair();
  std::thread guest([&] {
    p.guest->Handshake();
    auto open = p.guest->Expect(FrameType::kOpen);
    ASSERT_TRUE(open.has_value());
    // A frame header claiming a 4 GiB payload.
    std::string evil(proto::kHeaderSize, '\xff');
    evil[8] = 6;
    evil[9] = 0;
    evil[10] = evil[11] = 0;
    p.guest->Send(evil);
  });
  ASSERT_TRUE(p.client->WaitReady(absl::Seconds(10)).ok());
  auto exec = p.client->StartExec({.argv = {"x"}});
  ASSERT_TRUE(exec.ok());
  EXPECT_FALSE((*exec)->ReadOutput().has_value());
  auto result = (*exec)->Wait();
  EXPECT_FALSE(result.ok());
  EXPECT_NE(result.status().message().find("exceeds the maximum"), absl::string_view::npos)
      << result.status();
  EXPECT_NE(p.client->failure().message().find("protocol violation"), absl::string_view::npos);
  EXPECT_EQ(*p.failures, 1);
  guest.join();
}

// Issue 19: the guest's count of OOM kills during the command reaches the exec's result.
TEST(AgentClientTest, TheExitCarriesTheGuestsOomKills) {
  Pair p = MakePair();
  std::thread guest([&] {
    p.guest->Handshake();
    auto open = p.guest->Expect(FrameType::kOpen);
    ASSERT_TRUE(open.has_value());
    uint32_t id = open->header.stream;
    p.guest->Send(
        EncodeFrame(FrameType::kStdout, id, proto::kFlagEof, "") +
        EncodeFrame(FrameType::kStderr, id, proto::kFlagEof, "") +
        EncodeFrame(FrameType::kExit, id, 0, proto::EncodeExitInfo({.signal = 9, .oom_kills = 2})));
  });
  ASSERT_TRUE(p.client->WaitReady(absl::Seconds(10)).ok());
  auto exec = p.client->StartExec({.argv = {"tail", "/dev/zero"}});
  ASSERT_TRUE(exec.ok()) << exec.status();
  while ((*exec)->ReadOutput()) {
  }
  auto result = (*exec)->Wait();
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->signal, 9);
  EXPECT_EQ(result->oom_kills, 2u);
  guest.join();
}

// A count no kernel could have reached is a guest lying: a violation like any malformed field.
TEST(AgentClientTest, AHostileOomCountIsAViolation) {
  Pair p = MakePair();
  std::thread guest([&] {
    p.guest->Handshake();
    auto open = p.guest->Expect(FrameType::kOpen);
    ASSERT_TRUE(open.has_value());
    uint32_t id = open->header.stream;
    p.guest->Send(
        EncodeFrame(FrameType::kExit, id, 0, R"({"signal":9,"oom_kills":18446744073709551615})"));
  });
  ASSERT_TRUE(p.client->WaitReady(absl::Seconds(10)).ok());
  auto exec = p.client->StartExec({.argv = {"x"}});
  ASSERT_TRUE(exec.ok());
  auto result = (*exec)->Wait();
  EXPECT_FALSE(result.ok());
  EXPECT_NE(p.client->failure().message().find("oom_kills"), absl::string_view::npos)
      << p.client->failure();
  guest.join();
}

TEST(AgentClientTest, ConnectionLossFailsRunningExecs) {
  Pair p = MakePair();
  std::thread guest([&] {
    p.guest->Handshake();
    p.guest->Expect(FrameType::kOpen);
    p.guest->Close();
  });
  ASSERT_TRUE(p.client->WaitReady(absl::Seconds(10)).ok());
  auto exec = p.client->StartExec({.argv = {"x"}});
  ASSERT_TRUE(exec.ok());
  auto result = (*exec)->Wait();
  EXPECT_EQ(result.status().code(), absl::StatusCode::kUnavailable);
  guest.join();
  EXPECT_FALSE(p.client->StartExec({.argv = {"y"}}).ok());
}

TEST(AgentClientTest, StdinWaitsForCreditAndFlows) {
  Pair p = MakePair();
  const size_t kTotal = 3 * proto::kDefaultWindow;
  std::thread guest([&] {
    p.guest->Handshake();
    auto open = p.guest->Expect(FrameType::kOpen);
    ASSERT_TRUE(open.has_value());
    uint32_t id = open->header.stream;
    size_t got = 0;
    bool eof = false;
    while (!eof) {
      auto f = p.guest->Expect(FrameType::kStdin);
      ASSERT_TRUE(f.has_value());
      got += f->payload.size();
      eof = f->header.flags & proto::kFlagEof;
      // Grant credit back as a real guest would once bytes reach the command.
      if (!f->payload.empty()) {
        p.guest->Send(EncodeFrame(FrameType::kCredit, id, 0,
                                  proto::EncodeCredit(static_cast<uint32_t>(f->payload.size()))));
      }
    }
    EXPECT_EQ(got, kTotal);
    p.guest->Send(EncodeFrame(FrameType::kExit, id, 0, proto::EncodeExitInfo({.exit_code = 0})));
  });
  ASSERT_TRUE(p.client->WaitReady(absl::Seconds(10)).ok());
  proto::ExecRequest req{.argv = {"cat"}};
  req.stdin_open = true;
  auto exec = p.client->StartExec(req);
  ASSERT_TRUE(exec.ok());
  ASSERT_TRUE((*exec)->WriteStdin(std::string(kTotal, 'z')).ok());
  (*exec)->CloseStdin();
  auto result = (*exec)->Wait();
  ASSERT_TRUE(result.ok()) << result.status();
  guest.join();
}

}  // namespace
}  // namespace abox::runtime
