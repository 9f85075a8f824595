// The host holds an exec's timeout itself (AgentClient::Options::timeout_grace): a guest that
// stops answering cannot keep a command with --timeout running past timeout + grace.
#include <signal.h>
#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "src/proto/frame.h"
#include "src/proto/messages.h"
#include "src/runtime/agent_client.h"
#include "src/runtime/fake_guest.h"

namespace abox::runtime {
namespace {

using proto::EncodeFrame;
using proto::FrameType;
using std::chrono::milliseconds;
using testing::FakeGuest;
using ::testing::HasSubstr;
using Clock = std::chrono::steady_clock;

constexpr int64_t kTimeoutMs = 300;
constexpr auto kGrace = absl::Milliseconds(500);
// Generous: the host may be slow (two cores, sanitizers); what matters is that the end comes
// from the host's deadline, not from the 30 s heartbeat.
constexpr milliseconds kMargin(8000);

using Pair = testing::ClientAndGuest;

Pair MakePair() {
  AgentClient::Options o;
  o.timeout_grace = kGrace;
  return testing::MakeClientAndGuest(o);
}

// A wedged guest: it takes the command and then never answers anything again (no output, no
// exit, no pong), until the host closes the channel.
void WedgedGuest(FakeGuest& guest, std::atomic<uint32_t>* stream) {
  guest.Handshake();
  auto open = guest.Expect(FrameType::kOpen);
  ASSERT_TRUE(open.has_value());
  *stream = open->header.stream;
  while (guest.Next(std::chrono::seconds(60))) {
  }
}

TEST(ExecTimeoutTest, HostEndsTheCommandWhenTheGuestNeverReportsItsTimeout) {
  Pair p = MakePair();
  std::atomic<uint32_t> stream{0};
  std::thread guest([&] { WedgedGuest(*p.guest, &stream); });
  ASSERT_TRUE(p.client->WaitReady(absl::Seconds(10)).ok());
  Clock::time_point start = Clock::now();
  proto::ExecRequest request{.argv = {"sh", "-c", ":(){ :|:& };:"}};
  request.timeout_ms = kTimeoutMs;
  auto exec = p.client->StartExec(request);
  ASSERT_TRUE(exec.ok()) << exec.status();
  EXPECT_FALSE((*exec)->ReadOutput().has_value());
  absl::StatusOr<proto::ExitInfo> result = (*exec)->Wait();
  auto elapsed = std::chrono::duration_cast<milliseconds>(Clock::now() - start);

  // Timed out and killed (the CLI and aboxd turn timed_out into exit code 124), with the reason.
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_TRUE(result->timed_out);
  EXPECT_EQ(result->signal, SIGKILL);
  EXPECT_THAT(result->error, HasSubstr("did not end the command"));
  // Not before the timeout plus the grace, and well before the heartbeat's 30 s.
  EXPECT_GE(elapsed, milliseconds(kTimeoutMs) + absl::ToChronoMilliseconds(kGrace));
  EXPECT_LT(elapsed, milliseconds(kTimeoutMs) + absl::ToChronoMilliseconds(kGrace) + kMargin);
  // The connection is failed, so the owner stops the VM (abox run) or fails the sandbox (aboxd).
  EXPECT_EQ(p.client->failure().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(p.client->failure().message(), HasSubstr("stopped answering"));
  EXPECT_EQ(*p.failures, 1);
  EXPECT_FALSE(p.client->StartExec({.argv = {"true"}}).ok());
  EXPECT_NE(stream.load(), 0u);
  exec->reset();
  p.client.reset();  // closes the channel: the guest thread ends
  guest.join();
}

TEST(ExecTimeoutTest, AGuestThatReportsItsTimeoutInTimeKeepsTheConnection) {
  Pair p = MakePair();
  std::thread guest([&] {
    p.guest->Handshake();
    auto open = p.guest->Expect(FrameType::kOpen);
    ASSERT_TRUE(open.has_value());
    uint32_t id = open->header.stream;
    // The guest's own kill at the timeout, reported within the grace.
    std::this_thread::sleep_for(milliseconds(kTimeoutMs));
    p.guest->Send(EncodeFrame(FrameType::kStdout, id, proto::kFlagEof, "") +
                  EncodeFrame(FrameType::kStderr, id, proto::kFlagEof, "") +
                  EncodeFrame(FrameType::kExit, id, 0,
                              proto::EncodeExitInfo({.signal = SIGKILL, .timed_out = true})));
    // A second command without a timeout that stays silent for longer than any grace.
    auto second = p.guest->Expect(FrameType::kOpen);
    ASSERT_TRUE(second.has_value());
    while (p.guest->Next(std::chrono::seconds(60))) {
    }
  });
  ASSERT_TRUE(p.client->WaitReady(absl::Seconds(10)).ok());
  proto::ExecRequest request{.argv = {"sleep", "100"}};
  request.timeout_ms = kTimeoutMs;
  auto exec = p.client->StartExec(request);
  ASSERT_TRUE(exec.ok());
  while ((*exec)->ReadOutput()) {
  }
  auto result = (*exec)->Wait();
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_TRUE(result->timed_out);
  EXPECT_TRUE(result->error.empty()) << result->error;

  auto untimed = p.client->StartExec({.argv = {"sleep", "100"}});
  ASSERT_TRUE(untimed.ok());
  std::this_thread::sleep_for(milliseconds(kTimeoutMs) + 3 * absl::ToChronoMilliseconds(kGrace));
  // Neither the ended exec nor the one without a timeout gets a host deadline.
  EXPECT_TRUE(p.client->failure().ok()) << p.client->failure();
  EXPECT_EQ(*p.failures, 0);
  untimed->reset();
  p.client.reset();
  guest.join();
}

TEST(ExecTimeoutTest, OutputOurReaderHasNotTakenDefersTheDeadline) {
  Pair p = MakePair();
  std::thread guest([&] {
    p.guest->Handshake();
    auto open = p.guest->Expect(FrameType::kOpen);
    ASSERT_TRUE(open.has_value());
    // Output the host does not read yet; then silence.
    p.guest->Send(EncodeFrame(FrameType::kStdout, open->header.stream, 0, "queued\n"));
    while (p.guest->Next(std::chrono::seconds(60))) {
    }
  });
  ASSERT_TRUE(p.client->WaitReady(absl::Seconds(10)).ok());
  proto::ExecRequest request{.argv = {"yes"}};
  request.timeout_ms = kTimeoutMs;
  auto exec = p.client->StartExec(request);
  ASSERT_TRUE(exec.ok());
  // Our reader is slow: the guest may be waiting for credit, so the host does not give up.
  std::this_thread::sleep_for(milliseconds(kTimeoutMs) + 3 * absl::ToChronoMilliseconds(kGrace));
  EXPECT_TRUE(p.client->failure().ok()) << p.client->failure();
  // Once the reader has taken everything, the deadline (long past) holds at once.
  Clock::time_point start = Clock::now();
  auto chunk = (*exec)->ReadOutput();
  ASSERT_TRUE(chunk.has_value());
  EXPECT_EQ(chunk->data, "queued\n");
  EXPECT_FALSE((*exec)->ReadOutput().has_value());
  auto result = (*exec)->Wait();
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_TRUE(result->timed_out);
  EXPECT_LT(Clock::now() - start, kMargin);
  EXPECT_EQ(p.client->failure().code(), absl::StatusCode::kDeadlineExceeded);
  exec->reset();
  p.client.reset();
  guest.join();
}

}  // namespace
}  // namespace abox::runtime
