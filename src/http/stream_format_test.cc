#include "src/http/stream_format.h"

#include "gtest/gtest.h"

namespace abox::http {
namespace {

TEST(StreamFormatTest, ChunkFrameUsesHexLength) {
  EXPECT_EQ(ChunkFrame("hello\n"), "6\r\nhello\n\r\n");
  EXPECT_EQ(ChunkFrame(std::string(26, 'x')), "1a\r\n" + std::string(26, 'x') + "\r\n");
  EXPECT_EQ(ChunkFrame(""), "");  // an empty chunk would end the body
}

TEST(StreamFormatTest, SseEventHasIdEventAndDataLines) {
  EXPECT_EQ(FormatSseEvent({.id = "7", .event = "exec.finished", .data = R"({"exit":0})"}),
            "id: 7\nevent: exec.finished\ndata: {\"exit\":0}\n\n");
  EXPECT_EQ(FormatSseEvent({.data = "x"}), "data: x\n\n");
  EXPECT_EQ(FormatSseEvent({}), "data: \n\n");
}

TEST(StreamFormatTest, MultiLineDataBecomesSeveralDataLines) {
  EXPECT_EQ(FormatSseEvent({.data = "a\nb\r\nc\rd"}), "data: a\ndata: b\ndata: c\ndata: d\n\n");
}

TEST(StreamFormatTest, NewlinesCannotInjectFields) {
  EXPECT_EQ(FormatSseEvent({.id = "1\ndata: evil", .event = "x\r\nid: 9", .data = "ok"}),
            "id: 1data: evil\nevent: xid: 9\ndata: ok\n\n");
}

}  // namespace
}  // namespace abox::http
