#include "src/guest/channel.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "src/base/io.h"

namespace abox::guest {
namespace {

using proto::FrameType;

struct Pair {
  Channel channel;
  base::UniqueFd peer;
};

Pair MakePair() {
  int sv[2];
  EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  auto channel = Channel::Adopt(base::UniqueFd(sv[0]), ChannelKind::kStream);
  EXPECT_TRUE(channel.ok());
  return Pair{*std::move(channel), base::UniqueFd(sv[1])};
}

std::vector<proto::Frame> ReadFrames(int fd, size_t count) {
  proto::FrameDecoder decoder;
  std::vector<proto::Frame> frames;
  char buf[65536];
  while (frames.size() < count) {
    auto n = base::ReadSome(fd, buf, sizeof(buf));
    EXPECT_TRUE(n.ok());
    if (!n.ok() || *n == 0) {
      break;
    }
    absl::string_view data(buf, *n);
    while (!data.empty()) {
      data.remove_prefix(decoder.Feed(data));
      for (;;) {
        auto f = decoder.Next();
        EXPECT_TRUE(f.ok());
        if (!f.ok() || !f->has_value()) {
          break;
        }
        frames.push_back(**f);
      }
    }
  }
  return frames;
}

TEST(ChannelTest, ControlFramesAndCreditsJumpAheadOfQueuedStreamFrames) {
  Pair p = MakePair();
  p.channel.Send(FrameType::kStdout, 1, 0, "a");
  p.channel.Send(FrameType::kExit, 1, 0, "{}");
  p.channel.Send(FrameType::kPong, 0, 0, "p");
  p.channel.Send(FrameType::kCredit, 3, 0, proto::EncodeCredit(5));
  EXPECT_EQ(p.channel.pending_control(), 2 * proto::kHeaderSize + 1 + 4);
  ASSERT_TRUE(p.channel.Flush().ok());
  EXPECT_EQ(p.channel.pending(), 0u);
  auto frames = ReadFrames(p.peer.get(), 4);
  ASSERT_EQ(frames.size(), 4u);
  EXPECT_EQ(frames[0].header.type, FrameType::kPong);
  EXPECT_EQ(frames[1].header.type, FrameType::kCredit);
  // Stream frames keep their order: data before exit.
  EXPECT_EQ(frames[2].header.type, FrameType::kStdout);
  EXPECT_EQ(frames[3].header.type, FrameType::kExit);
}

TEST(ChannelTest, KeepsUnsentBytesWhenThePeerIsNotReadingAndDropsThemOnRequest) {
  Pair p = MakePair();
  std::string chunk(proto::kMaxPayload, 'x');
  for (int i = 0; i < 64; ++i) {  // 4 MiB: more than a socket buffer.
    p.channel.Send(FrameType::kStdout, 1, 0, chunk);
  }
  ASSERT_TRUE(p.channel.Flush().ok());
  EXPECT_GT(p.channel.pending(), 0u);
  p.channel.Send(FrameType::kPong, 0, 0, "p");
  EXPECT_EQ(p.channel.pending_control(), proto::kHeaderSize + 1);
  p.channel.DropPending();
  EXPECT_EQ(p.channel.pending(), 0u);
}

TEST(ChannelTest, FlushFailsWhenThePeerIsGone) {
  Pair p = MakePair();
  p.peer.reset();
  ::signal(SIGPIPE, SIG_IGN);
  p.channel.Send(FrameType::kPong, 0, 0, "p");
  EXPECT_FALSE(p.channel.Flush().ok());
}

TEST(ChannelTest, ReadReportsEndOfStreamAndNothingYet) {
  Pair p = MakePair();
  char buf[16];
  auto n = p.channel.Read(buf, sizeof(buf));
  EXPECT_TRUE(absl::IsUnavailable(n.status()));
  p.peer.reset();
  n = p.channel.Read(buf, sizeof(buf));
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 0u);
}

TEST(FindAgentPortTest, FindsThePortByName) {
  char tmpl[] = "/tmp/abox-ports-XXXXXX";
  std::string root = ::mkdtemp(tmpl);
  for (auto [entry, name] :
       {std::pair{"vport0p0", "org.qemu.console"}, std::pair{"vport0p1", "org.abox.agent.0"},
        std::pair{"vport1p1", "other"}}) {
    std::string dir = absl::StrCat(root, "/", entry);
    ::mkdir(dir.c_str(), 0755);
    std::ofstream(dir + "/name") << name << "\n";
  }
  EXPECT_EQ(FindAgentPort(root), "/dev/vport0p1");
  EXPECT_EQ(FindAgentPort(root, "other", "/devices"), "/devices/vport1p1");
  EXPECT_EQ(FindAgentPort(root, "missing"), std::nullopt);
  EXPECT_EQ(FindAgentPort(root + "/nonexistent"), std::nullopt);
  std::filesystem::remove_all(root);
}

}  // namespace
}  // namespace abox::guest
