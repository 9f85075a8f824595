#include "src/base/byte_channel.h"

#include <string>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace abox::base {
namespace {

std::string ReadToEnd(ByteChannel& channel, size_t chunk, size_t* max_seen = nullptr) {
  std::string out;
  std::string buf(chunk, '\0');
  for (;;) {
    absl::StatusOr<size_t> n = channel.Read(buf.data(), buf.size());
    EXPECT_TRUE(n.ok()) << n.status();
    if (!n.ok() || *n == 0) {
      return out;
    }
    if (max_seen != nullptr) {
      *max_seen = std::max(*max_seen, *n);
    }
    out.append(buf.data(), *n);
  }
}

TEST(ByteChannelTest, PassesAStreamLargerThanItsCapacityInOrder) {
  ByteChannel channel(/*capacity=*/64);
  std::string sent;
  for (int i = 0; i < 5000; ++i) {
    sent += std::to_string(i) + ",";
  }
  std::thread writer([&] {
    for (size_t at = 0; at < sent.size(); at += 1000) {
      ASSERT_TRUE(channel.Write(absl::string_view(sent).substr(at, 1000)).ok());
    }
    channel.CloseWrite();
  });
  size_t max_seen = 0;
  std::string got = ReadToEnd(channel, 4096, &max_seen);
  writer.join();
  EXPECT_EQ(got, sent);
  // Never more than the capacity at once: the writer waited for the reader.
  EXPECT_LE(max_seen, 64u);
}

TEST(ByteChannelTest, AWriterFailsOnceTheReaderClosedAndDoesNotBlock) {
  ByteChannel channel(/*capacity=*/16);
  ASSERT_TRUE(channel.Write("0123456789abcdef").ok());  // full
  std::thread reader([&] { channel.CloseRead(); });
  // Blocked for room until the reader closes, then told so.
  absl::Status s = channel.Write("more");
  reader.join();
  EXPECT_TRUE(absl::IsAborted(s)) << s;
  EXPECT_TRUE(absl::IsAborted(channel.Write("x")));
}

TEST(ByteChannelTest, TheReaderSeesWhatWasBufferedThenTheEnd) {
  ByteChannel channel;
  ASSERT_TRUE(channel.Write("abc").ok());
  channel.CloseWrite();
  EXPECT_EQ(ReadToEnd(channel, 2), "abc");
  char c;
  absl::StatusOr<size_t> n = channel.Read(&c, 1);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 0u);
}

}  // namespace
}  // namespace abox::base
