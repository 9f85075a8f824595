#include "src/proto/frame.h"

#include "gtest/gtest.h"

namespace abox::proto {
namespace {

std::string RawHeader(uint32_t length, uint32_t stream, uint8_t type, uint8_t flags,
                      uint16_t reserved = 0) {
  std::string h(kHeaderSize, '\0');
  for (int i = 0; i < 4; ++i) {
    h[i] = static_cast<char>(length >> (8 * i));
    h[4 + i] = static_cast<char>(stream >> (8 * i));
  }
  h[8] = static_cast<char>(type);
  h[9] = static_cast<char>(flags);
  h[10] = static_cast<char>(reserved & 0xff);
  h[11] = static_cast<char>(reserved >> 8);
  return h;
}

absl::StatusOr<std::optional<Frame>> DecodeOne(const std::string& bytes) {
  FrameDecoder d;
  size_t used = d.Feed(bytes);
  EXPECT_LE(used, bytes.size());
  return d.Next();
}

TEST(FrameTest, RoundTripsAcrossArbitrarySplits) {
  std::string wire = EncodeFrame(FrameType::kStdout, 7, kFlagEof, "hello") +
                     EncodeFrame(FrameType::kPing, 0, 0, "") +
                     EncodeFrame(FrameType::kStderr, 9, 0, std::string(70000 - 5536, 'x'));
  for (size_t chunk : {size_t{1}, size_t{5}, size_t{13}, size_t{4096}, wire.size()}) {
    FrameDecoder d;
    std::vector<Frame> frames;
    absl::string_view rest = wire;
    while (!rest.empty()) {
      absl::string_view piece = rest.substr(0, chunk);
      while (!piece.empty()) {
        size_t used = d.Feed(piece);
        piece.remove_prefix(used);
        rest.remove_prefix(used);
        auto f = d.Next();
        ASSERT_TRUE(f.ok()) << f.status();
        if (*f) {
          frames.push_back(std::move(**f));
        }
      }
    }
    ASSERT_EQ(frames.size(), 3u) << "chunk " << chunk;
    EXPECT_EQ(frames[0].header.type, FrameType::kStdout);
    EXPECT_EQ(frames[0].header.stream, 7u);
    EXPECT_EQ(frames[0].header.flags, kFlagEof);
    EXPECT_EQ(frames[0].payload, "hello");
    EXPECT_EQ(frames[1].header.type, FrameType::kPing);
    EXPECT_EQ(frames[2].payload.size(), 70000u - 5536u);
    EXPECT_EQ(d.buffered(), 0u);
  }
}

TEST(FrameTest, RejectsOversizedLengthWithoutBuffering) {
  FrameDecoder d;
  d.Feed(RawHeader(kMaxPayload + 1, 1, 6, 0));
  auto f = d.Next();
  EXPECT_EQ(f.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(f.status().message().find("exceeds the maximum"), absl::string_view::npos);
  // A decoder in error stays in error and consumes nothing more.
  EXPECT_EQ(d.Feed("more"), 0u);
  EXPECT_FALSE(d.Next().ok());
}

TEST(FrameTest, RejectsUnknownTypeReservedBitsBadFlagsAndWrongStreams) {
  EXPECT_FALSE(DecodeOne(RawHeader(0, 1, 0, 0)).ok());
  EXPECT_FALSE(DecodeOne(RawHeader(0, 1, kMaxFrameType + 1, 0)).ok());
  EXPECT_FALSE(DecodeOne(RawHeader(0, 1, 6, 0, 1)).ok());       // reserved bits
  EXPECT_FALSE(DecodeOne(RawHeader(0, 1, 6, 0x2)).ok());        // undefined flag
  EXPECT_FALSE(DecodeOne(RawHeader(0, 1, 11, kFlagEof)).ok());  // EOF on a non-data frame
  EXPECT_FALSE(DecodeOne(RawHeader(0, 0, 6, 0)).ok());          // data on the control stream
  EXPECT_FALSE(DecodeOne(RawHeader(0, 3, 2, 0)).ok());          // ping off the control stream
  EXPECT_TRUE(DecodeOne(RawHeader(0, 0, 2, 0)).ok());
}

TEST(FrameTest, TunnelFramesCarryEofOnDataOnlyAndNeverOnTheControlStream) {
  auto data = DecodeOne(RawHeader(0, 2, 16, kFlagEof));
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_EQ(FrameTypeName(15), "tunnel_open");
  EXPECT_EQ(FrameTypeName(16), "tunnel_data");
  EXPECT_TRUE(DecodeOne(RawHeader(0, 2, 15, 0)).ok());
  EXPECT_FALSE(DecodeOne(RawHeader(0, 2, 15, kFlagEof)).ok());  // EOF on tunnel_open
  EXPECT_FALSE(DecodeOne(RawHeader(0, 0, 15, 0)).ok());         // tunnel_open on stream 0
  EXPECT_FALSE(DecodeOne(RawHeader(0, 0, 16, 0)).ok());         // tunnel_data on stream 0
}

TEST(FrameTest, PartialFrameIsNotReturned) {
  std::string wire = EncodeFrame(FrameType::kStdin, 1, 0, "abcdef");
  FrameDecoder d;
  d.Feed(absl::string_view(wire).substr(0, wire.size() - 1));
  auto f = d.Next();
  ASSERT_TRUE(f.ok());
  EXPECT_FALSE(f->has_value());
  EXPECT_EQ(d.buffered(), wire.size() - 1);
}

TEST(FrameTest, CreditPayloadRoundTripAndValidation) {
  auto c = DecodeCredit(EncodeCredit(123456));
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(*c, 123456u);
  EXPECT_FALSE(DecodeCredit("abc").ok());
  EXPECT_FALSE(DecodeCredit("abcde").ok());
}

TEST(CreditWindowTest, SenderCannotExceedGrantedCredit) {
  CreditWindow w(100);
  EXPECT_EQ(w.Available(), 100u);
  w.Consume(60);
  EXPECT_EQ(w.Available(), 40u);
  ASSERT_TRUE(w.Grant(60).ok());
  EXPECT_EQ(w.Available(), 100u);
  // A peer granting more than the window is lying.
  EXPECT_FALSE(w.Grant(1).ok());
}

TEST(CreditWindowTest, ReceiverDetectsOverrunAndBatchesGrants) {
  CreditWindow w(100);
  ASSERT_TRUE(w.OnReceived(60).ok());
  ASSERT_TRUE(w.OnReceived(40).ok());
  EXPECT_FALSE(w.OnReceived(1).ok());  // beyond the window
  EXPECT_EQ(w.Release(10), 0u);        // batched: below half a window
  EXPECT_EQ(w.Release(45), 55u);       // half a window reached
  EXPECT_EQ(w.Release(45), 45u);       // everything released
  EXPECT_EQ(w.Outstanding(), 0u);
  ASSERT_TRUE(w.OnReceived(100).ok());
}

}  // namespace
}  // namespace abox::proto
