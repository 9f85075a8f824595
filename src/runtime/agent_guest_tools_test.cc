// A hostile guest agent that takes a workspace tool's exec and then never answers, reads or
// ends it: the tool's deadline (GuestToolDeadline) kills it and, since the agent ignores the
// kill too, fails the agent connection, so the caller is never stuck.
#include "src/runtime/agent_guest_tools.h"

#include <sys/socket.h>

#include <atomic>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "src/base/status_macros.h"
#include "src/runtime/fake_guest.h"

namespace abox::runtime {
namespace {

using proto::FrameType;
using testing::FakeGuest;
using ::testing::HasSubstr;

constexpr GuestToolDeadline kShort = {.floor = absl::Milliseconds(300),
                                      .bytes_per_second = 1 << 20,
                                      .kill_grace = absl::Milliseconds(300)};

struct Pair {
  std::unique_ptr<AgentClient> client;
  std::unique_ptr<FakeGuest> guest;
};

Pair MakePair() {
  int sv[2];
  EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  Pair p;
  auto c = AgentClient::Create(base::UniqueFd(sv[0]), {});
  EXPECT_TRUE(c.ok());
  p.client = std::move(*c);
  p.guest = std::make_unique<FakeGuest>(base::UniqueFd(sv[1]));
  return p;
}

// Takes the exec, then reads (and ignores: no credit, no exit, no output) everything the host
// sends, the kill included, until the host closes the channel.
void WedgedGuest(FakeGuest& guest, std::atomic<int>* signals) {
  guest.Handshake();
  ASSERT_TRUE(guest.Expect(FrameType::kOpen).has_value());
  while (auto frame = guest.Next(std::chrono::seconds(60))) {
    if (frame->header.type == FrameType::kSignal) {
      ++*signals;
    }
  }
}

TEST(AgentGuestToolsTest, AManifestThatNeverComesFailsAfterTheDeadlineAndTheAgentWithIt) {
  Pair p = MakePair();
  std::atomic<int> signals{0};
  std::thread guest([&] { WedgedGuest(*p.guest, &signals); });
  ASSERT_TRUE(p.client->WaitReady(absl::Seconds(10)).ok());
  AgentGuestTools tools(*p.client, kGuestAgentPath, kShort, "sb-hostile");
  absl::Status s = tools.Run({"manifest", "/workspace"}, nullptr,
                             [](absl::string_view) { return absl::OkStatus(); });
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
  EXPECT_THAT(s.message(), HasSubstr("abox-guest ws manifest in sandbox sb-hostile"));
  EXPECT_THAT(s.message(), HasSubstr("did not finish within"));
  EXPECT_THAT(s.message(), HasSubstr("so the sandbox failed"));
  EXPECT_FALSE(p.client->failure().ok()) << "an agent that ignores the kill is not used again";
  p.client.reset();
  guest.join();
  EXPECT_GE(signals.load(), 1) << "the tool was not sent a kill";
}

TEST(AgentGuestToolsTest, AnUnpackThatIsNeverReadFailsAfterTheDeadline) {
  Pair p = MakePair();
  std::atomic<int> signals{0};
  std::thread guest([&] { WedgedGuest(*p.guest, &signals); });
  ASSERT_TRUE(p.client->WaitReady(absl::Seconds(10)).ok());
  AgentGuestTools tools(*p.client, kGuestAgentPath, kShort, "sb-hostile");
  std::string chunk(1 << 20, 'x');
  absl::Status s = tools.Run(
      {"unpack", "/workspace"},
      [&](const workspace::GuestTools::WriteFn& write) {
        for (int i = 0; i < 64; ++i) {  // far beyond any credit the guest granted
          ABOX_RETURN_IF_ERROR(write(chunk));
        }
        return absl::OkStatus();
      },
      nullptr);
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
  EXPECT_THAT(s.message(), HasSubstr("abox-guest ws unpack in sandbox sb-hostile"));
  p.client.reset();
  guest.join();
}

}  // namespace
}  // namespace abox::runtime
