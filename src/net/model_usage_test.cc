#include "src/net/model_usage.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace abox::net {
namespace {

using Format = ModelUsageReader::Format;

constexpr absl::string_view kAnthropicStream =
    "event: message_start\n"
    "data: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"usage\":{\"input_tokens\":25,"
    "\"cache_creation_input_tokens\":100,\"cache_read_input_tokens\":1000,\"output_tokens\":1}}}\n"
    "\n"
    "event: content_block_delta\n"
    "data: {\"type\":\"content_block_delta\",\"delta\":{\"type\":\"text_delta\",\"text\":\"hi\"}}\n"
    "\n"
    "event: message_delta\n"
    "data: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":7}}\n"
    "\n"
    "event: message_delta\n"
    "data: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":15}}\n"
    "\n"
    "event: message_stop\n"
    "data: {\"type\":\"message_stop\"}\n"
    "\n";

constexpr absl::string_view kOpenAiStream =
    "event: response.created\r\n"
    "data: {\"type\":\"response.created\",\"response\":{\"usage\":null}}\r\n"
    "\r\n"
    "event: response.output_text.delta\r\n"
    "data: {\"type\":\"response.output_text.delta\",\"delta\":\"usage\"}\r\n"
    "\r\n"
    "event: response.completed\r\n"
    "data: {\"type\":\"response.completed\",\"response\":{\"usage\":{\"input_tokens\":42,"
    "\"output_tokens\":9,\"total_tokens\":51}}}\r\n"
    "\r\n";

ModelUsage Read(ModelUsageKind kind, Format format, absl::string_view body, size_t piece) {
  ModelUsageReader reader(kind, format);
  for (size_t i = 0; i < body.size(); i += piece) {
    reader.Feed(body.substr(i, piece));
  }
  reader.Finish();
  return reader.usage();
}

TEST(ModelUsageReaderTest, ReadsAnthropicEventsHoweverTheStreamIsSplit) {
  for (size_t piece : {size_t{1}, size_t{2}, size_t{7}, size_t{64}, kAnthropicStream.size()}) {
    ModelUsage u =
        Read(ModelUsageKind::kAnthropicMessages, Format::kEventStream, kAnthropicStream, piece);
    EXPECT_TRUE(u.seen) << piece;
    EXPECT_EQ(u.input_tokens, 1125u) << piece;  // input + cache writes + cache reads
    EXPECT_EQ(u.output_tokens, 15u) << piece;   // the last message_delta
  }
}

TEST(ModelUsageReaderTest, ReadsOpenAiResponsesEventsWithCrlfLines) {
  for (size_t piece : {size_t{1}, size_t{3}, kOpenAiStream.size()}) {
    ModelUsage u =
        Read(ModelUsageKind::kOpenAiResponses, Format::kEventStream, kOpenAiStream, piece);
    EXPECT_EQ(u.input_tokens, 42u) << piece;
    EXPECT_EQ(u.output_tokens, 9u) << piece;
  }
  // CR alone ends lines too.
  ModelUsage cr = Read(ModelUsageKind::kOpenAiResponses, Format::kEventStream,
                       "data: {\"type\":\"response.incomplete\",\"response\":{\"usage\":{"
                       "\"input_tokens\":3,\"output_tokens\":4}}}\r\r",
                       5);
  EXPECT_EQ(cr.input_tokens, 3u);
  EXPECT_EQ(cr.output_tokens, 4u);
}

TEST(ModelUsageReaderTest, ReadsNonStreamingJson) {
  ModelUsage a = Read(ModelUsageKind::kAnthropicMessages, Format::kJson,
                      R"({"type":"message","usage":{"input_tokens":10,"output_tokens":20}})", 3);
  EXPECT_EQ(a.input_tokens, 10u);
  EXPECT_EQ(a.output_tokens, 20u);
  ModelUsage o = Read(ModelUsageKind::kOpenAiResponses, Format::kJson,
                      R"({"object":"response","usage":{"input_tokens":5,"output_tokens":6}})", 100);
  EXPECT_EQ(o.input_tokens, 5u);
  EXPECT_EQ(o.output_tokens, 6u);
}

TEST(ModelUsageReaderTest, BadJsonLeavesTheCountsAsTheyWere) {
  std::string body =
      absl::StrCat(kAnthropicStream.substr(0, kAnthropicStream.find("event: content_block_delta")),
                   "data: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":\n\n",
                   "data: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":-3}}\n\n",
                   "data: [\"usage\"]\n\n");
  ModelUsage u = Read(ModelUsageKind::kAnthropicMessages, Format::kEventStream, body, 4);
  EXPECT_EQ(u.input_tokens, 1125u);
  EXPECT_EQ(u.output_tokens, 1u);
  ModelUsage json = Read(ModelUsageKind::kAnthropicMessages, Format::kJson, "{\"usage\":", 1);
  EXPECT_FALSE(json.seen);
}

TEST(ModelUsageReaderTest, SkipsAnOverlongEventWithoutBufferingIt) {
  std::string huge(kMaxUsageEventSize + 10, 'x');
  std::string body =
      absl::StrCat("data: {\"usage\":\"", huge, "\"}\n\n",
                   kOpenAiStream.substr(kOpenAiStream.find("event: response.completed")));
  ModelUsage u = Read(ModelUsageKind::kOpenAiResponses, Format::kEventStream, body, 4096);
  EXPECT_EQ(u.input_tokens, 42u);
  EXPECT_EQ(u.output_tokens, 9u);
  // A JSON body over the bound is not read at all.
  std::string big = absl::StrCat(R"({"usage":{"input_tokens":1},"pad":")",
                                 std::string(kMaxUsageJsonSize, 'y'), "\"}");
  EXPECT_FALSE(Read(ModelUsageKind::kAnthropicMessages, Format::kJson, big, 1 << 16).seen);
}

TEST(ModelUsageReaderTest, PicksTheFormatFromTheResponseHead) {
  HttpResponseHead head;
  head.status = 200;
  head.headers = {{"Content-Type", "text/event-stream; charset=utf-8"}};
  EXPECT_EQ(ModelUsageReader(ModelUsageKind::kAnthropicMessages, head).format(),
            Format::kEventStream);
  head.headers = {{"content-type", "application/json"}};
  EXPECT_EQ(ModelUsageReader(ModelUsageKind::kAnthropicMessages, head).format(), Format::kJson);
  EXPECT_EQ(ModelUsageReader(ModelUsageKind::kNone, head).format(), Format::kIgnored);
  head.headers.push_back({"Content-Encoding", "gzip"});
  EXPECT_EQ(ModelUsageReader(ModelUsageKind::kAnthropicMessages, head).format(), Format::kIgnored);
  head.headers = {{"content-type", "application/json"}};
  head.status = 429;
  EXPECT_EQ(ModelUsageReader(ModelUsageKind::kAnthropicMessages, head).format(), Format::kIgnored);
}

}  // namespace
}  // namespace abox::net
