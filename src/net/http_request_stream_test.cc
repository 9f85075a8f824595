#include "src/net/http_request_stream.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace abox::net {
namespace {

using ::testing::HasSubstr;

// A stream that accepts heads for `host` only and records each head's target.
struct Checked {
  std::vector<std::string> targets;
  HttpRequestStream stream{
      [this](const HttpRequestHead& head, absl::string_view raw) -> absl::StatusOr<std::string> {
        if (head.destination.host != "web.test") {
          return absl::PermissionDeniedError(absl::StrCat("names ", head.destination.host));
        }
        targets.push_back(head.target);
        return std::string(raw);
      }};
  std::string up;

  absl::Status Feed(absl::string_view bytes) { return stream.Feed(bytes, &up); }
  // Feeds one byte at a time: the answer must not depend on how the bytes are split.
  absl::Status FeedBytewise(absl::string_view bytes) {
    for (char c : bytes) {
      if (absl::Status s = Feed(absl::string_view(&c, 1)); !s.ok()) {
        return s;
      }
    }
    return absl::OkStatus();
  }
};

constexpr absl::string_view kGet = "GET /a HTTP/1.1\r\nHost: web.test\r\n\r\n";
constexpr absl::string_view kEvil = "GET /b HTTP/1.1\r\nHost: evil.test\r\n\r\n";

TEST(HttpRequestStreamTest, ForwardsPipelinedRequestsForTheSameHost) {
  std::string two = absl::StrCat(kGet, "GET /c HTTP/1.1\r\nHost: WEB.test:80\r\n\r\n");
  for (bool bytewise : {false, true}) {
    Checked c;
    ASSERT_TRUE((bytewise ? c.FeedBytewise(two) : c.Feed(two)).ok());
    EXPECT_EQ(c.up, two);
    EXPECT_EQ(c.targets, (std::vector<std::string>{"/a", "/c"}));
    EXPECT_EQ(c.stream.requests(), 2u);
  }
}

TEST(HttpRequestStreamTest, StopsBeforeAPipelinedRequestForAnotherHost) {
  for (bool bytewise : {false, true}) {
    Checked c;
    std::string bytes = absl::StrCat(kGet, kEvil, kGet);
    absl::Status s = bytewise ? c.FeedBytewise(bytes) : c.Feed(bytes);
    EXPECT_TRUE(absl::IsPermissionDenied(s)) << s;
    EXPECT_EQ(c.up, kGet);
    // Final: nothing more goes through.
    EXPECT_FALSE(c.Feed(kGet).ok());
    EXPECT_EQ(c.up, kGet);
  }
}

TEST(HttpRequestStreamTest, RefusesAnAbsoluteFormTargetWhoseHostDiffers) {
  Checked c;
  absl::Status s =
      c.Feed(absl::StrCat(kGet, "GET http://evil.test/ HTTP/1.1\r\nHost: evil.test\r\n\r\n"));
  EXPECT_TRUE(absl::IsPermissionDenied(s)) << s;
  EXPECT_EQ(c.up, kGet);
  // An absolute-form target that disagrees with Host is malformed, not a way around the check.
  Checked d;
  s = d.Feed(absl::StrCat(kGet, "GET http://evil.test/ HTTP/1.1\r\nHost: web.test\r\n\r\n"));
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_EQ(d.up, kGet);
}

TEST(HttpRequestStreamTest, FollowsContentLengthSoABodyIsNotReadAsARequest) {
  std::string body(kEvil);  // request-looking bytes, but body by the framing
  std::string post = absl::StrCat(
      "POST / HTTP/1.1\r\nHost: web.test\r\nContent-Length: ", body.size(), "\r\n\r\n", body);
  for (bool bytewise : {false, true}) {
    Checked c;
    ASSERT_TRUE((bytewise ? c.FeedBytewise(post) : c.Feed(post)).ok());
    EXPECT_EQ(c.up, post);
    absl::Status s = c.Feed(kEvil);  // the next one is a request, though
    EXPECT_TRUE(absl::IsPermissionDenied(s)) << s;
    EXPECT_EQ(c.up, post);
  }
}

TEST(HttpRequestStreamTest, FollowsChunkedBodiesWithExtensionsAndTrailers) {
  std::string chunked = absl::StrCat(
      "POST / HTTP/1.1\r\nHost: web.test\r\nTransfer-Encoding: Chunked\r\n\r\n", "5;name=v\r\n",
      "GET /\r\n", "1A\r\n", "Host: evil.test\r\n\r\nxxxxxxx\r\n", "0\r\nX-Sum: 1\r\n\r\n");
  for (bool bytewise : {false, true}) {
    Checked c;
    ASSERT_TRUE((bytewise ? c.FeedBytewise(chunked) : c.Feed(chunked)).ok());
    EXPECT_EQ(c.up, chunked);
    EXPECT_TRUE(c.Feed(kGet).ok());
    EXPECT_TRUE(absl::IsPermissionDenied(c.Feed(kEvil)));
    EXPECT_EQ(c.up, absl::StrCat(chunked, kGet));
  }
}

TEST(HttpRequestStreamTest, RefusesAmbiguousFraming) {
  const std::string head = "POST / HTTP/1.1\r\nHost: web.test\r\n";
  for (const std::string& bad : {
           head + "Content-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n",
           head + "Transfer-Encoding: chunked\r\nContent-Length: 4\r\n\r\n",
           head + "Transfer-Encoding: gzip, chunked\r\n\r\n",
           head + "Transfer-Encoding: chunked\r\nTransfer-Encoding: identity\r\n\r\n",
           head + "Transfer-Encoding: xchunked\r\n\r\n",
           head + "Transfer_Encoding: chunked\r\n\r\n",
           head + "Content-Length: 4\r\nContent-Length: 4\r\n\r\n",
           head + "Content-Length: 4, 4\r\n\r\n",
           head + "Content-Length: +4\r\n\r\n",
           head + "Content-Length: 0x4\r\n\r\n",
           head + "Content-Length: 99999999999999999999\r\n\r\n",
           std::string("POST / HTTP/1.0\r\nHost: web.test\r\nTransfer-Encoding: chunked\r\n\r\n"),
       }) {
    Checked c;
    absl::Status s = c.Feed(bad);
    EXPECT_TRUE(absl::IsInvalidArgument(s)) << bad << s;
    EXPECT_EQ(c.up, "") << bad;
  }
}

TEST(HttpRequestStreamTest, RefusesBadChunkLines) {
  const std::string head =
      "POST / HTTP/1.1\r\nHost: web.test\r\nTransfer-Encoding: chunked\r\n\r\n";
  for (const std::string& bad : {
           std::string("5 \r\nhello\r\n0\r\n\r\n"),       // whitespace after the size
           std::string(" 5\r\nhello\r\n0\r\n\r\n"),       // before it
           std::string("5\nhello\r\n0\r\n\r\n"),          // bare LF
           std::string("5\r\nhelloX\r\n0\r\n\r\n"),       // data longer than the size
           std::string("0x5\r\nhello\r\n0\r\n\r\n"),      // not hex digits only
           std::string("1000000000000000\r\n"),           // 16 hex digits
           std::string("-1\r\n"),                         //
           std::string("0\r\nX: a\nb\r\n\r\n"),           // bare LF in a trailer
           std::string("0\r\n bad\r\n\r\n"),              // obs-fold in a trailer
           std::string("5;a\x01\r\nhello\r\n0\r\n\r\n"),  // control byte in an extension
       }) {
    Checked c;
    absl::Status s = c.Feed(head + bad);
    EXPECT_TRUE(absl::IsInvalidArgument(s)) << bad << s;
    EXPECT_FALSE(absl::StrContains(c.up, "hello\r\n0")) << bad;
  }
  Checked c;
  EXPECT_TRUE(absl::IsInvalidArgument(c.Feed(head + std::string(kMaxChunkLineSize + 1, '1'))));
}

TEST(HttpRequestStreamTest, RefusesUpgradeConnectAndWhatIsNotHttpAfterARequest) {
  for (const std::string& bad : {
           std::string("GET / HTTP/1.1\r\nHost: web.test\r\nConnection: Upgrade, HTTP2-Settings"
                       "\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQCAAAAAAIAAAAA\r\n\r\n"),
           std::string("GET /ws HTTP/1.1\r\nHost: web.test\r\nConnection: Upgrade\r\n"
                       "Upgrade: websocket\r\nSec-WebSocket-Version: 13\r\n\r\n"),
           std::string("CONNECT web.test:80 HTTP/1.1\r\nHost: web.test:80\r\n\r\n"),
       }) {
    Checked c;
    absl::Status s = c.Feed(absl::StrCat(kGet, bad));
    EXPECT_TRUE(absl::IsPermissionDenied(s)) << bad << s;
    EXPECT_EQ(c.up, kGet);
  }
  for (const std::string& bad : {
           std::string("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"),               // h2c prior knowledge
           std::string("\r\nGET / HTTP/1.1\r\nHost: evil.test\r\n\r\n"),  // leading CRLF
           std::string("\x81\x85\x00\x00\x00\x00hello"),                  // a WebSocket frame
       }) {
    Checked c;
    absl::Status s = c.Feed(absl::StrCat(kGet, bad));
    EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
    EXPECT_THAT(std::string(s.message()), HasSubstr("request 2"));
    EXPECT_EQ(c.up, kGet);
  }
}

TEST(HttpRequestStreamTest, CheckRequestFramingReportsTheBodyLength) {
  HttpSniff get = ParseHttpRequestHead(std::string(kGet));
  ASSERT_EQ(get.result, HttpSniffResult::kHttp);
  absl::StatusOr<RequestFraming> none = CheckRequestFraming(get.head);
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->kind, RequestFraming::Kind::kNone);
  HttpSniff post =
      ParseHttpRequestHead("PUT / HTTP/1.1\r\nHost: web.test\r\ncontent-length: 0012\r\n\r\n");
  ASSERT_EQ(post.result, HttpSniffResult::kHttp);
  absl::StatusOr<RequestFraming> length = CheckRequestFraming(post.head);
  ASSERT_TRUE(length.ok());
  EXPECT_EQ(length->kind, RequestFraming::Kind::kLength);
  EXPECT_EQ(length->length, 12u);
}

// Records what it is shown; refuses a body containing "STOP"; holds until it saw "GO".
class Recorder final : public RequestBodyInspector {
 public:
  struct Log {
    std::string body;
    std::string framing;
    int ends = 0;
  };
  Recorder(Log* log, bool hold) : log_(log), holding_(hold) {}

  absl::Status OnBody(absl::string_view data) override {
    log_->body.append(data.data(), data.size());
    if (absl::StrContains(log_->body, "STOP")) {
      return absl::PermissionDeniedError("body says STOP");
    }
    if (absl::StrContains(log_->body, "GO")) {
      holding_ = false;
    }
    return absl::OkStatus();
  }
  absl::Status OnFraming(absl::string_view bytes) override {
    log_->framing.append(bytes.data(), bytes.size());
    return absl::OkStatus();
  }
  absl::Status OnEnd() override {
    ++log_->ends;
    return holding_ ? absl::PermissionDeniedError("ended undecided") : absl::OkStatus();
  }
  bool holding() const override { return holding_; }

 private:
  Log* log_;
  bool holding_;
};

struct Inspected {
  explicit Inspected(bool hold)
      : stream([this, hold](const HttpRequestHead&,
                            absl::string_view raw) -> absl::StatusOr<RequestDecision> {
          RequestDecision d;
          d.head = std::string(raw);
          d.inspector = std::make_unique<Recorder>(&log, hold);
          return d;
        }) {}
  Recorder::Log log;
  HttpRequestStream stream;
  std::string up;
};

constexpr absl::string_view kChunkedHead =
    "POST / HTTP/1.1\r\nHost: web.test\r\nTransfer-Encoding: chunked\r\n\r\n";

TEST(HttpRequestStreamTest, ShowsAnInspectorTheDeframedBodyAndTheFramingApart) {
  std::string req =
      absl::StrCat(kChunkedHead, "3;x=y\r\nabc\r\n2\r\nde\r\n0\r\nX-T: 1\r\n\r\n", kGet);
  for (size_t split = 0; split <= req.size(); ++split) {
    Inspected i(/*hold=*/false);
    ASSERT_TRUE(i.stream.Feed(absl::string_view(req).substr(0, split), &i.up).ok());
    ASSERT_TRUE(i.stream.Feed(absl::string_view(req).substr(split), &i.up).ok());
    EXPECT_EQ(i.up, req);
    EXPECT_EQ(i.log.body, "abcde");
    EXPECT_EQ(i.log.framing, "3;x=y\r\n2\r\n0\r\nX-T: 1\r\n\r\n");
    EXPECT_EQ(i.log.ends, 2);  // the POST and the GET
  }
}

TEST(HttpRequestStreamTest, AnInspectorRefusalStopsBeforeTheRefusedBytes) {
  std::string post = absl::StrCat(kChunkedHead, "4\r\nab");
  Inspected i(/*hold=*/false);
  ASSERT_TRUE(i.stream.Feed(post, &i.up).ok());
  EXPECT_EQ(i.up, post);
  absl::Status s = i.stream.Feed("ST\r\n2\r\nOP\r\n0\r\n\r\n", &i.up);
  EXPECT_TRUE(absl::IsPermissionDenied(s)) << s;
  EXPECT_EQ(i.up, absl::StrCat(post, "ST\r\n2\r\n"));  // "OP" never went
  EXPECT_FALSE(i.stream.Feed(kGet, &i.up).ok());
}

TEST(HttpRequestStreamTest, HoldsTheWholeRequestUntilTheInspectorDecides) {
  std::string post =
      absl::StrCat("POST / HTTP/1.1\r\nHost: web.test\r\nContent-Length: 8\r\n\r\n", "xxGOyyzz");
  for (size_t split = 0; split <= post.size(); ++split) {
    Inspected i(/*hold=*/true);
    ASSERT_TRUE(i.stream.Feed(absl::string_view(post).substr(0, split), &i.up).ok());
    if (split < post.size() - 4) {
      EXPECT_EQ(i.up, "") << split;  // not even the head before "GO"
    }
    ASSERT_TRUE(i.stream.Feed(absl::string_view(post).substr(split), &i.up).ok());
    EXPECT_EQ(i.up, post);
    EXPECT_EQ(i.stream.held(), 0u);
  }
  // Refused while holding: nothing of the request went.
  Inspected r(/*hold=*/true);
  absl::Status s =
      r.stream.Feed("POST / HTTP/1.1\r\nHost: web.test\r\nContent-Length: 6\r\n\r\nSTOPGO", &r.up);
  EXPECT_TRUE(absl::IsPermissionDenied(s));
  EXPECT_EQ(r.up, "");
  // Ended undecided: OnEnd refuses.
  Inspected e(/*hold=*/true);
  EXPECT_TRUE(absl::IsPermissionDenied(
      e.stream.Feed("POST / HTTP/1.1\r\nHost: web.test\r\nContent-Length: 2\r\n\r\nno", &e.up)));
  EXPECT_EQ(e.up, "");
}

TEST(HttpRequestStreamTest, RefusesToHoldMoreThanTheLimit) {
  Inspected i(/*hold=*/true);
  ASSERT_TRUE(i.stream.Feed(kChunkedHead, &i.up).ok());
  std::string chunk(64 * 1024, 'x');
  std::string framed = absl::StrCat("10000\r\n", chunk, "\r\n");
  absl::Status s;
  for (size_t sent = 0; s.ok() && sent <= kMaxHeldRequestSize + framed.size();
       sent += framed.size()) {
    s = i.stream.Feed(framed, &i.up);
  }
  EXPECT_TRUE(absl::IsPermissionDenied(s)) << s;
  EXPECT_EQ(i.up, "");
  EXPECT_EQ(i.stream.held(), 0u);
}

}  // namespace
}  // namespace abox::net
