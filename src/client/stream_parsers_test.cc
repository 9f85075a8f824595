#include "src/client/stream_parsers.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace abox::client {
namespace {

using ::testing::ElementsAre;

std::vector<std::string> FeedAll(LineSplitter& splitter, const std::vector<std::string>& pieces) {
  std::vector<std::string> lines;
  auto collect = [&](absl::string_view line) {
    lines.emplace_back(line);
    return true;
  };
  for (const std::string& piece : pieces) {
    EXPECT_TRUE(splitter.Feed(piece, collect).ok());
  }
  EXPECT_TRUE(splitter.Finish(collect));
  return lines;
}

TEST(LineSplitterTest, JoinsLinesSplitAcrossPiecesAndDropsCr) {
  LineSplitter splitter;
  EXPECT_THAT(FeedAll(splitter, {"{\"a\"", ":1}\r\n{\"b\":2}\n", "", "\n{\"c\"", ":3}"}),
              ElementsAre("{\"a\":1}", "{\"b\":2}", "", "{\"c\":3}"));
}

TEST(LineSplitterTest, StopsWhenTheCallbackSaysSo) {
  LineSplitter splitter;
  int calls = 0;
  absl::StatusOr<bool> r =
      splitter.Feed("a\nb\nc\n", [&](absl::string_view) { return ++calls < 2; });
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(*r);
  EXPECT_EQ(calls, 2);
}

TEST(LineSplitterTest, RefusesALineLongerThanTheLimit) {
  LineSplitter splitter(8);
  auto ignore = [](absl::string_view) { return true; };
  EXPECT_TRUE(splitter.Feed("12345", ignore).ok());
  absl::StatusOr<bool> r = splitter.Feed("67890", ignore);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted);
}

std::vector<SseEvent> ParseSse(const std::vector<std::string>& pieces) {
  SseParser parser;
  std::vector<SseEvent> events;
  for (const std::string& piece : pieces) {
    EXPECT_TRUE(parser
                    .Feed(piece,
                          [&](const SseEvent& e) {
                            events.push_back(e);
                            return true;
                          })
                    .ok());
  }
  return events;
}

TEST(SseParserTest, ParsesFieldsCommentsAndMultiLineData) {
  std::vector<SseEvent> events = ParseSse({
      ":keepalive\n\n",
      "id: 5\nevent: created\ndata: {\"seq\":5}\n\n",
      "event: ready\ndata:first\ndata: second\nretry: 10\n\n",
  });
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].id, "5");
  EXPECT_EQ(events[0].event, "created");
  EXPECT_EQ(events[0].data, "{\"seq\":5}");
  EXPECT_EQ(events[1].id, "5");  // the last id carries over
  EXPECT_EQ(events[1].event, "ready");
  EXPECT_EQ(events[1].data, "first\nsecond");
}

TEST(SseParserTest, SameEventsWhenFedByteByByte) {
  std::string text = "id: 1\r\nevent: stopped\r\ndata: x\r\n\r\ndata: y\n\n";
  std::vector<std::string> bytes;
  for (char c : text) {
    bytes.emplace_back(1, c);
  }
  std::vector<SseEvent> events = ParseSse(bytes);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].event, "stopped");
  EXPECT_EQ(events[0].data, "x");
  EXPECT_EQ(events[1].event, "message");  // no event field: the SSE default
  EXPECT_EQ(events[1].data, "y");
}

TEST(SseParserTest, EventWithoutDataIsNotDispatched) {
  EXPECT_TRUE(ParseSse({"event: ping\n\n"}).empty());
}

}  // namespace
}  // namespace abox::client
