#include "src/net/value_scrubber.h"

#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gtest/gtest.h"

namespace abox::net {
namespace {

constexpr absl::string_view kValue = "ghp_RealValue0123456789";
constexpr absl::string_view kPlaceholder = "ABOX_SECRET_GH_1";

ValueScrubber Scrubber(std::vector<ScrubPair> pairs = {
                           {std::string(kValue), std::string(kPlaceholder)}}) {
  auto scrubber = ValueScrubber::Create(std::move(pairs));
  EXPECT_TRUE(scrubber.ok()) << scrubber.status();
  return *std::move(scrubber);
}

std::string ScrubWhole(ValueScrubber s, absl::string_view body) {
  std::string out;
  s.Feed(body, &out);
  s.Finish(&out);
  return out;
}

// Same output however the body is split in two, and byte by byte.
void ExpectSplitInvariant(const ValueScrubber& proto, absl::string_view body,
                          absl::string_view want) {
  ASSERT_EQ(ScrubWhole(proto, body), want);
  for (size_t split = 0; split <= body.size(); ++split) {
    ValueScrubber s = proto;
    std::string out;
    s.Feed(body.substr(0, split), &out);
    s.Feed(body.substr(split), &out);
    s.Finish(&out);
    EXPECT_EQ(out, want) << "split at " << split;
  }
  ValueScrubber s = proto;
  std::string out;
  for (char c : body) {
    s.Feed(absl::string_view(&c, 1), &out);
    EXPECT_LT(s.held(), std::string(kValue).size() + 16);
  }
  s.Finish(&out);
  EXPECT_EQ(out, want);
}

TEST(ValueScrubberTest, ReplacesTheValueAcrossEveryChunkBoundary) {
  std::string body = absl::StrCat("{\"echo\":\"", kValue, "\",\"again\":\"", kValue, kValue, "\"}");
  std::string want = absl::StrCat("{\"echo\":\"", kPlaceholder, "\",\"again\":\"", kPlaceholder,
                                  kPlaceholder, "\"}");
  ExpectSplitInvariant(Scrubber(), body, want);
  ValueScrubber s = Scrubber();
  std::string out;
  s.Feed(body, &out);
  s.Finish(&out);
  EXPECT_EQ(s.replacements(), 3u);
}

TEST(ValueScrubberTest, HoldsBackOnlyAPossibleStartOfTheValue) {
  ValueScrubber s = Scrubber();
  std::string out;
  s.Feed("data: {\"t\":\"hello\"}\n\n", &out);
  EXPECT_EQ(out, "data: {\"t\":\"hello\"}\n\n");  // an SSE event goes out at once
  EXPECT_EQ(s.held(), 0u);
  out.clear();
  s.Feed("data: ghp_Real", &out);
  EXPECT_EQ(out, "data: ");
  EXPECT_EQ(s.held(), 8u);
  out.clear();
  s.Feed("ly\n\n", &out);  // not the value after all
  EXPECT_EQ(out, "ghp_Really\n\n");
  EXPECT_EQ(s.held(), 0u);
  out.clear();
  s.Feed("x ghp_", &out);
  s.Finish(&out);
  EXPECT_EQ(out, "x ghp_");
}

TEST(ValueScrubberTest, PrefersTheLongerOfTwoValuesThatStartAlike) {
  ValueScrubber s = Scrubber({{"secret-abcdef", "PH_SHORT"}, {"secret-abcdef-long", "PH_LONG"}});
  ExpectSplitInvariant(s, "a secret-abcdef-long b", "a PH_LONG b");
  ExpectSplitInvariant(s, "a secret-abcdef-lon", "a PH_SHORT-lon");
  ExpectSplitInvariant(s, "secret-abcdefsecret-abcdef-long", "PH_SHORTPH_LONG");
}

TEST(ValueScrubberTest, PassesBodiesWithoutValuesUnchanged) {
  ExpectSplitInvariant(Scrubber(), "", "");
  ExpectSplitInvariant(Scrubber(), "ghp_ ghp_Real ghp_RealValue012345678",
                       "ghp_ ghp_Real ghp_RealValue012345678");
  ExpectSplitInvariant(Scrubber({}), "anything", "anything");
}

TEST(ValueScrubberTest, RefusesBadPairsWithoutQuotingTheValue) {
  auto empty = ValueScrubber::Create({{"", "PH_EMPTY"}});
  ASSERT_FALSE(empty.ok());
  EXPECT_NE(empty.status().message().find("PH_EMPTY"), absl::string_view::npos);
  auto dup = ValueScrubber::Create({{"value-1234", "PH_A"}, {"value-1234", "PH_B"}});
  ASSERT_FALSE(dup.ok());
  EXPECT_EQ(dup.status().message().find("value-1234"), absl::string_view::npos);
  EXPECT_FALSE(ValueScrubber::Create({{std::string(kMaxScrubValueSize + 1, 'v'), "PH"}}).ok());
}

std::string Chunked(const std::vector<std::string>& chunks, absl::string_view trailers = "") {
  std::string out;
  for (const std::string& c : chunks) {
    absl::StrAppend(&out, absl::StrFormat("%X", c.size()), "\r\n", c, "\r\n");
  }
  absl::StrAppend(&out, "0\r\n", trailers, "\r\n");
  return out;
}

// Decodes a chunked body strictly; fails the test on a bad frame or an empty data chunk.
std::string Dechunk(absl::string_view body, std::string* trailers) {
  std::string data;
  while (true) {
    size_t crlf = body.find("\r\n");
    EXPECT_NE(crlf, absl::string_view::npos);
    if (crlf == absl::string_view::npos) {
      return data;
    }
    uint64_t size = 0;
    EXPECT_TRUE(absl::SimpleHexAtoi(body.substr(0, crlf), &size)) << body.substr(0, crlf);
    body.remove_prefix(crlf + 2);
    if (size == 0) {
      *trailers = std::string(body);
      return data;
    }
    EXPECT_GE(body.size(), size + 2);
    data.append(std::string(body.substr(0, size)));
    EXPECT_EQ(body.substr(size, 2), "\r\n");
    body.remove_prefix(std::min<size_t>(body.size(), size + 2));
  }
}

TEST(ChunkedScrubberTest, ReframesChunksWithCorrectSizesAtEverySplit) {
  std::string value(kValue);
  // The value split across the upstream's chunks, and a chunk with an extension.
  std::string body =
      Chunked({"abc " + value.substr(0, 7), value.substr(7) + " x", "tail"}, "X-Trailer: 1\r\n");
  body.insert(body.find("\r\n"), ";ext=1");
  std::string next_response = "HTTP/1.1 200 OK\r\n";
  std::string input = body + next_response;
  std::string want_data = absl::StrCat("abc ", kPlaceholder, " xtail");
  for (size_t split = 0; split <= input.size(); ++split) {
    ChunkedScrubber s(Scrubber());
    std::string out;
    auto a = s.Feed(absl::string_view(input).substr(0, split), &out);
    ASSERT_TRUE(a.ok()) << a.status();
    size_t consumed = *a;
    if (!s.done()) {
      auto b = s.Feed(absl::string_view(input).substr(split), &out);
      ASSERT_TRUE(b.ok()) << b.status();
      consumed += *b;
    }
    ASSERT_TRUE(s.done()) << split;
    EXPECT_EQ(consumed, body.size()) << split;
    std::string trailers;
    EXPECT_EQ(Dechunk(out, &trailers), want_data) << split;
    EXPECT_EQ(trailers, "X-Trailer: 1\r\n\r\n");
    EXPECT_EQ(out.find(value), std::string::npos);
  }
}

TEST(ChunkedScrubberTest, EmitsEachSseEventAsItArrives) {
  ChunkedScrubber s(Scrubber());
  std::string out;
  std::string event = "data: {\"delta\":\"hi\"}\n\n";
  ASSERT_TRUE(s.Feed(absl::StrFormat("%x\r\n%s\r\n", event.size(), event), &out).ok());
  EXPECT_EQ(out, absl::StrFormat("%x\r\n%s\r\n", event.size(), event));
  out.clear();
  // Only a possible start of the value is held: no chunk at all rather than an empty one
  // (which would end the body).
  ASSERT_TRUE(s.Feed("4\r\nghp_\r\n", &out).ok());
  EXPECT_EQ(out, "");
  ASSERT_TRUE(s.Feed("0\r\n\r\n", &out).ok());
  EXPECT_EQ(out, "4\r\nghp_\r\n0\r\n\r\n");
  EXPECT_TRUE(s.done());
}

TEST(ChunkedScrubberTest, RefusesBadFramingAndStaysRefused) {
  for (absl::string_view bad : {"zz\r\n", "5\nhello\r\n", "5\r\nhelloXX", "5;\x01\r\n",
                                "1234567890abcdef0\r\n", "0\r\nbad\ntrailer\r\n"}) {
    ChunkedScrubber s(Scrubber());
    std::string out;
    auto r = s.Feed(bad, &out);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_TRUE(absl::IsInvalidArgument(r.status()));
    EXPECT_FALSE(s.Feed("0\r\n\r\n", &out).ok());
  }
  ChunkedScrubber s(Scrubber());
  std::string out;
  EXPECT_FALSE(s.Feed(std::string(5000, '1'), &out).ok());  // size line too long
}

}  // namespace
}  // namespace abox::net
