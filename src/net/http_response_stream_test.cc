#include "src/net/http_response_stream.h"

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace abox::net {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr absl::string_view kValue = "ghp_RealValue0123456789";  // 23 bytes
constexpr absl::string_view kPlaceholder = "ABOX_SECRET_GH_1";   // 16: lengths differ

ValueScrubber Scrubber(absl::string_view value = kValue,
                       absl::string_view placeholder = kPlaceholder) {
  auto s = ValueScrubber::Create({{std::string(value), std::string(placeholder)}});
  EXPECT_TRUE(s.ok()) << s.status();
  return *std::move(s);
}

// A stream that scrubs every response, with `requests` pending.
struct Follower {
  explicit Follower(std::vector<PendingRequest> requests,
                    std::optional<ValueScrubber> scrubber = Scrubber())
      : stream([scrubber](const HttpResponseHead&, const PendingRequest&) { return scrubber; }) {
    for (const PendingRequest& r : requests) {
      EXPECT_TRUE(stream.ExpectResponse(r));
    }
  }
  HttpResponseStream stream;
  std::string down;

  absl::Status Feed(absl::string_view bytes) { return stream.Feed(bytes, &down); }
};

const PendingRequest kGet11{};
const PendingRequest kGet10{.is_head = false, .minor_version = 0};
const PendingRequest kHead11{.is_head = true};

// Splits a head from a body; decodes a chunked body strictly (fails the test on bad frames).
std::string Dechunk(absl::string_view body, std::string* rest = nullptr) {
  std::string data;
  while (true) {
    size_t crlf = body.find("\r\n");
    if (crlf == absl::string_view::npos) {
      ADD_FAILURE() << "unterminated chunked body";
      return data;
    }
    uint64_t size = 0;
    EXPECT_TRUE(absl::SimpleHexAtoi(body.substr(0, crlf), &size)) << body.substr(0, crlf);
    body.remove_prefix(crlf + 2);
    if (size == 0) {
      EXPECT_TRUE(absl::StartsWith(body, "\r\n"));
      if (rest != nullptr) {
        *rest = std::string(body.substr(2));
      }
      return data;
    }
    data.append(std::string(body.substr(0, size)));
    EXPECT_EQ(body.substr(size, 2), "\r\n");
    body.remove_prefix(std::min<size_t>(body.size(), size + 2));
  }
}

std::string Head(absl::string_view response) {
  return std::string(response.substr(0, response.find("\r\n\r\n") + 4));
}
std::string Body(absl::string_view response) {
  return std::string(response.substr(response.find("\r\n\r\n") + 4));
}

TEST(HttpResponseStreamTest, ReframesAContentLengthBodyAsChunkedWhenTheLengthChanges) {
  std::string body = absl::StrCat("{\"token\":\"", kValue, "\"}");
  std::string response = absl::StrCat(
      "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: ", body.size(),
      "\r\n\r\n", body);
  std::string want = absl::StrCat("{\"token\":\"", kPlaceholder, "\"}");
  for (size_t split = 0; split <= response.size(); ++split) {
    Follower f({kGet11});
    ASSERT_TRUE(f.Feed(absl::string_view(response).substr(0, split)).ok());
    ASSERT_TRUE(f.Feed(absl::string_view(response).substr(split)).ok());
    EXPECT_EQ(Head(f.down),
              "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: "
              "chunked\r\n\r\n")
        << split;
    std::string rest;
    EXPECT_EQ(Dechunk(Body(f.down), &rest), want) << split;
    EXPECT_EQ(rest, "");
    EXPECT_EQ(f.stream.replacements(), 1u);
    EXPECT_EQ(f.stream.responses(), 1u);
  }
}

TEST(HttpResponseStreamTest, KeepsContentLengthWhenValueAndPlaceholderAreTheSameLength) {
  std::string same(kValue.size(), 'P');
  std::string body = absl::StrCat("a", kValue, "b");
  Follower f({kGet11}, Scrubber(kValue, same));
  std::string head = absl::StrCat("HTTP/1.1 200 OK\r\nContent-Length: ", body.size(), "\r\n\r\n");
  ASSERT_TRUE(f.Feed(head + body).ok());
  EXPECT_EQ(f.down, absl::StrCat(head, "a", same, "b"));
}

TEST(HttpResponseStreamTest, EndsAnHttp10ClientsReframedBodyAtClose) {
  std::string body = absl::StrCat("x", kValue);
  Follower f({kGet10});
  ASSERT_TRUE(f.Feed(absl::StrCat("HTTP/1.1 200 OK\r\nConnection: keep-alive\r\nContent-Length: ",
                                  body.size(), "\r\n\r\n", body))
                  .ok());
  EXPECT_EQ(f.down, absl::StrCat("HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nx", kPlaceholder));
  EXPECT_TRUE(f.stream.Finish(&f.down).ok());
  // Another response could not be told apart from this body: refused.
  Follower g({kGet10, kGet10});
  EXPECT_TRUE(absl::IsInvalidArgument(g.Feed(absl::StrCat(
      "HTTP/1.0 200 OK\r\nContent-Length: ", body.size(), "\r\n\r\n", body, "HTTP/1.0 200 OK"))));
}

TEST(HttpResponseStreamTest, ScrubsChunkedBodiesAndHeaders) {
  std::string value(kValue);
  std::string response = absl::StrCat(
      "HTTP/1.1 500 Oops\r\nX-Echo: Bearer ", kValue, "\r\nTransfer-Encoding: chunked\r\n\r\n",
      absl::StrFormat("%x\r\n", 6 + 5), "echo: ", value.substr(0, 5), "\r\n",
      absl::StrFormat("%x;ext\r\n", value.size() - 5), value.substr(5), "\r\n", "0\r\n\r\n");
  for (size_t split = 0; split <= response.size(); ++split) {
    Follower f({kGet11});
    ASSERT_TRUE(f.Feed(absl::string_view(response).substr(0, split)).ok());
    ASSERT_TRUE(f.Feed(absl::string_view(response).substr(split)).ok());
    EXPECT_EQ(Head(f.down), absl::StrCat("HTTP/1.1 500 Oops\r\nX-Echo: Bearer ", kPlaceholder,
                                         "\r\nTransfer-Encoding: chunked\r\n\r\n"));
    EXPECT_EQ(Dechunk(Body(f.down)), absl::StrCat("echo: ", kPlaceholder));
    EXPECT_THAT(f.down, Not(HasSubstr(value)));
    EXPECT_EQ(f.stream.replacements(), 2u);
  }
}

TEST(HttpResponseStreamTest, HeadAnd204And304AndInterimResponsesHaveNoBody) {
  // The HEAD response's Content-Length describes a body that is not sent; 100 and 103 come
  // before the final response to the same request.
  std::string responses = absl::StrCat(
      "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n", "HTTP/1.1 204 No Content\r\n\r\n",
      "HTTP/1.1 304 Not Modified\r\nContent-Length: 50\r\n\r\n", "HTTP/1.1 100 Continue\r\n\r\n",
      "HTTP/1.1 103 Early Hints\r\nLink: </a.css>\r\n\r\n",
      "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
      "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
  for (size_t split = 0; split <= responses.size(); ++split) {
    Follower f({kHead11, kGet11, kGet11, kGet11, kGet11});
    ASSERT_TRUE(f.Feed(absl::string_view(responses).substr(0, split)).ok());
    ASSERT_TRUE(f.Feed(absl::string_view(responses).substr(split)).ok()) << split;
    // "ok" is 2 bytes either way: the length-changing scrubber re-frames it anyway.
    EXPECT_EQ(f.stream.responses(), 5u);
    EXPECT_EQ(f.stream.pending(), 0u);
    EXPECT_TRUE(f.stream.Finish(&f.down).ok());
  }
}

TEST(HttpResponseStreamTest, FollowsPipelinedResponsesOfEveryFraming) {
  std::string value(kValue);
  std::string responses =
      absl::StrCat("HTTP/1.1 200 OK\r\nContent-Length: ", value.size(), "\r\n\r\n", value,
                   "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
                   "HTTP/1.1 404 Not Found\r\nContent-Length: 3\r\n\r\nnop");
  Follower f({kGet11, kGet11, kGet11});
  ASSERT_TRUE(f.Feed(responses).ok());
  std::string rest;
  std::string first = Body(f.down);
  EXPECT_EQ(Dechunk(first, &rest), kPlaceholder);
  std::string second = Body(rest);
  EXPECT_EQ(Dechunk(second, &rest), "abc");
  EXPECT_EQ(Dechunk(Body(rest)), "nop");
  EXPECT_EQ(f.stream.responses(), 3u);
}

TEST(HttpResponseStreamTest, PassesResponsesUnchangedWithoutAScrubber) {
  std::string value(kValue);
  std::string responses = absl::StrCat("HTTP/1.1 200 OK\r\nContent-Length: ", value.size(),
                                       "\r\n\r\n", value, "HTTP/1.1 204 No Content\r\n\r\n");
  Follower f({kGet11, kGet11}, std::nullopt);
  ASSERT_TRUE(f.Feed(responses).ok());
  EXPECT_EQ(f.down, responses);
}

TEST(HttpResponseStreamTest, LetsServerSentEventsFlowBeforeTheBodyEnds) {
  std::string event = "data: {\"delta\":\"hi\"}\n\n";
  Follower chunked({kGet11});
  ASSERT_TRUE(chunked
                  .Feed(absl::StrCat("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                                     "Transfer-Encoding: chunked\r\n\r\n",
                                     absl::StrFormat("%x\r\n%s\r\n", event.size(), event)))
                  .ok());
  EXPECT_EQ(Body(chunked.down), absl::StrFormat("%x\r\n%s\r\n", event.size(), event));
  // Close-delimited: each event as it comes; the end at close.
  Follower close({kGet11});
  ASSERT_TRUE(
      close.Feed(absl::StrCat("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n", event))
          .ok());
  EXPECT_EQ(Body(close.down), event);
  ASSERT_TRUE(close.Feed(absl::StrCat("data: ", kValue.substr(0, 4))).ok());
  EXPECT_EQ(Body(close.down), absl::StrCat(event, "data: "));  // "ghp_" could start the value
  ASSERT_TRUE(close.Feed(absl::StrCat(kValue.substr(4), "\n\n")).ok());
  EXPECT_EQ(Body(close.down), absl::StrCat(event, "data: ", kPlaceholder, "\n\n"));
  ASSERT_TRUE(close.Feed("data: ghp_").ok());
  ASSERT_TRUE(close.stream.Finish(&close.down).ok());
  EXPECT_EQ(Body(close.down), absl::StrCat(event, "data: ", kPlaceholder, "\n\ndata: ghp_"));
}

TEST(HttpResponseStreamTest, ScrubsAfterSwitchingProtocolsUntilClose) {
  Follower f({kGet11});
  ASSERT_TRUE(f.Feed(absl::StrCat("HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\n\r\n", "raw ",
                                  kValue, " HTTP/1.1 200 OK\r\n\r\n"))
                  .ok());
  ASSERT_TRUE(f.stream.Finish(&f.down).ok());
  EXPECT_EQ(Body(f.down), absl::StrCat("raw ", kPlaceholder, " HTTP/1.1 200 OK\r\n\r\n"));
}

TEST(HttpResponseStreamTest, RefusesWhatItCannotFollow) {
  for (absl::string_view bad : {
           "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n",
           "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\n",
           "HTTP/1.1 200 OK\r\nContent-Length: 3, 3\r\n\r\n",
           "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
           "HTTP/2 200 OK\r\n\r\n",
           "HTTP/1.1 20 OK\r\n\r\n",
           "HTTP/1.1 200 OK\nX: y\r\n\r\n",
           "HTTP/1.1 200 OK\r\nX : y\r\n\r\n",
           "HTTP/1.1 200 OK\r\n folded\r\n\r\n",
           "HTTP/1.1 200 OK\r\nX: a\rb\r\n\r\n",
           "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
       }) {
    Follower f({kGet11, kGet11});
    absl::Status s = f.Feed(bad);
    EXPECT_TRUE(absl::IsInvalidArgument(s)) << bad << s;
    EXPECT_FALSE(f.Feed("HTTP/1.1 204 No Content\r\n\r\n").ok()) << bad;
  }
  Follower big({kGet11});
  EXPECT_TRUE(absl::IsInvalidArgument(big.Feed(
      absl::StrCat("HTTP/1.1 200 OK\r\nX: ", std::string(kMaxResponseHeadSize, 'a'), "\r\n\r\n"))));
  EXPECT_LT(big.down.size(), 1u);
  // Closed in the middle of a framed body, or of a head.
  Follower cut({kGet11});
  ASSERT_TRUE(cut.Feed(absl::StrCat("HTTP/1.1 200 OK\r\nContent-Length: 99\r\n\r\nab")).ok());
  EXPECT_TRUE(absl::IsInvalidArgument(cut.stream.Finish(&cut.down)));
  Follower half({kGet11});
  ASSERT_TRUE(half.Feed("HTTP/1.1 200 O").ok());
  EXPECT_TRUE(absl::IsInvalidArgument(half.stream.Finish(&half.down)));
  EXPECT_EQ(half.down, "");
}

TEST(HttpResponseStreamTest, BoundsTheRequestsAwaitingResponses) {
  HttpResponseStream stream(nullptr);
  for (size_t i = 0; i < kMaxPendingResponses; ++i) {
    ASSERT_TRUE(stream.ExpectResponse({}));
  }
  EXPECT_FALSE(stream.ExpectResponse({}));
}

// What the model broker reads usage from: each final response's head, its body de-framed (chunk
// data only, whatever the reads), and its end; interim 1xx are not shown.
class RecordingObserver final : public ResponseObserver {
 public:
  void OnResponseHead(const HttpResponseHead& head, const PendingRequest&) override {
    events.push_back(absl::StrCat("head ", head.status));
  }
  void OnResponseBody(absl::string_view data) override { body.append(data.data(), data.size()); }
  void OnResponseEnd() override { events.push_back(absl::StrCat("end ", body)); }

  std::vector<std::string> events;
  std::string body;
};

TEST(HttpResponseStreamTest, ObserverSeesDeframedBodiesAndEnds) {
  RecordingObserver observer;
  HttpResponseStream stream(nullptr);
  stream.set_observer(&observer);
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(stream.ExpectResponse({}));
  }
  std::string wire = absl::StrCat("HTTP/1.1 100 Continue\r\n\r\n",
                                  "HTTP/1.1 200 OK\r\nTransfer-Encoding: "
                                  "chunked\r\n\r\n5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\n\r\n",
                                  "HTTP/1.1 204 No Content\r\n\r\n",
                                  "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabc");
  std::string down;
  for (char c : wire) {  // one byte per Feed: splits everything
    ASSERT_TRUE(stream.Feed(absl::string_view(&c, 1), &down).ok());
  }
  EXPECT_TRUE(absl::EndsWith(down, "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabc"));
  EXPECT_THAT(observer.events,
              ::testing::ElementsAre("head 200", "end hello world", "head 204", "end hello world",
                                     "head 200", "end hello worldabc"));
}

TEST(HttpResponseStreamTest, ObserverSeesABodyEndingAtCloseEndAtFinish) {
  RecordingObserver observer;
  HttpResponseStream stream(nullptr);
  stream.set_observer(&observer);
  std::string down;
  ASSERT_TRUE(stream.Feed("HTTP/1.1 200 OK\r\n\r\ndata: 1\n\n", &down).ok());
  EXPECT_EQ(observer.body, "data: 1\n\n");
  EXPECT_EQ(observer.events.size(), 1u);
  ASSERT_TRUE(stream.Finish(&down).ok());
  EXPECT_THAT(observer.events, ::testing::ElementsAre("head 200", "end data: 1\n\n"));
}

}  // namespace
}  // namespace abox::net
