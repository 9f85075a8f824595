#include "src/net/stream_splice.h"

#include <sys/socket.h>

#include <future>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "src/net/testing/socket_tunnel.h"
#include "src/net/testing/stream_pair.h"
#include "src/net/tls_stream.h"

namespace abox::net {
namespace {

using ::testing::HasSubstr;
using testing::kTestHost;
using testing::MakeSplicePeers;
using testing::MakeStreamPair;
using testing::ReadToEof;
using testing::SendAllTo;
using testing::SplicePeers;
using testing::StreamPair;
using testing::TestPki;

// Splice is SpliceStreams over an FdStream: splice_test.cc covers half-closes, resets from
// either side and the cancel fd through it; this file covers the filters and TLS streams.

absl::Time Soon() { return absl::Now() + absl::Seconds(10); }

// SplicePeers with the upstream socket as an FdStream.
struct Spliced : SplicePeers {
  std::unique_ptr<FdStream> stream;
};

Spliced Make() {
  Spliced s{MakeSplicePeers(), nullptr};
  s.stream = *FdStream::Create(std::move(s.upstream), {.write_timeout = absl::Seconds(10)});
  return s;
}

std::future<SpliceResult> Start(Spliced& s, const StreamSpliceOptions& options) {
  return std::async(std::launch::async,
                    [&s, &options] { return SpliceStreams(*s.tunnel, *s.stream, options); });
}

TEST(SpliceStreamsTest, FiltersBothWaysAndPassesHalfClosesOn) {
  Spliced s = Make();
  StreamSpliceOptions options;
  options.first_up = "head:";
  options.filter_up = [](absl::string_view in, std::string* out) {
    out->append(absl::AsciiStrToUpper(in));
    return absl::OkStatus();
  };
  // Scrubs "secret", holding back the last 5 bytes of each read (a value may span reads)
  // until the next read or the upstream's EOF.
  std::string held;
  options.filter_down = [&held](absl::string_view in, std::string* out) {
    held = absl::StrReplaceAll(absl::StrCat(held, in), {{"secret", "******"}});
    size_t release = held.size() - std::min<size_t>(held.size(), 5);
    out->append(held, 0, release);
    held.erase(0, release);
    return absl::OkStatus();
  };
  options.finish_down = [&held](std::string* out) {
    out->append(held);
    return absl::OkStatus();
  };
  std::future<SpliceResult> result = Start(s, options);
  ASSERT_TRUE(SendAllTo(s.guest.get(), "body"));
  ::shutdown(s.guest.get(), SHUT_WR);
  EXPECT_EQ(ReadToEof(s.upstream_peer.get()), "HEAD:BODY");
  ASSERT_TRUE(SendAllTo(s.upstream_peer.get(), "the secret is out: secret"));
  ::shutdown(s.upstream_peer.get(), SHUT_WR);
  EXPECT_EQ(ReadToEof(s.guest.get()), "the ****** is out: ******");
  SpliceResult r = result.get();
  EXPECT_TRUE(r.clean);
  EXPECT_EQ(r.ended, "closed");
  EXPECT_EQ(r.bytes_up, 9u);
  EXPECT_EQ(r.bytes_down, 25u);
  EXPECT_TRUE(s.tunnel->observations()->closed_write);
  EXPECT_FALSE(s.tunnel->observations()->reset);
}

TEST(SpliceStreamsTest, ARefusalLetsTheUpstreamFinishThenRepliesToTheGuest) {
  Spliced s = Make();
  StreamSpliceOptions options;
  options.filter_up = [](absl::string_view in, std::string* out) {
    size_t bad = in.find("BAD");
    absl::StrAppend(out, in.substr(0, bad));
    return bad == absl::string_view::npos ? absl::OkStatus()
                                          : absl::PermissionDeniedError("BAD is not allowed");
  };
  options.refusal_reply = [](const absl::Status& why) {
    return std::string("refused: ") + std::string(why.message());
  };
  std::future<SpliceResult> result = Start(s, options);
  ASSERT_TRUE(SendAllTo(s.guest.get(), "good BAD rest"));
  // The upstream gets what came before the refusal, then EOF, and answers it.
  EXPECT_EQ(ReadToEof(s.upstream_peer.get()), "good ");
  ASSERT_TRUE(SendAllTo(s.upstream_peer.get(), "answer;"));
  ::shutdown(s.upstream_peer.get(), SHUT_WR);
  EXPECT_EQ(ReadToEof(s.guest.get()), "answer;refused: BAD is not allowed");
  SpliceResult r = result.get();
  EXPECT_FALSE(r.clean);
  EXPECT_TRUE(absl::IsPermissionDenied(r.refused)) << r.refused;
  EXPECT_EQ(r.ended, "BAD is not allowed");
  EXPECT_EQ(r.bytes_up, 5u);
}

TEST(SpliceStreamsTest, AbortsBothSidesWhenIdle) {
  Spliced s = Make();
  StreamSpliceOptions options;
  options.idle_timeout = absl::Milliseconds(100);
  SpliceResult r = SpliceStreams(*s.tunnel, *s.stream, options);
  EXPECT_FALSE(r.clean);
  EXPECT_THAT(r.ended, HasSubstr("idle"));
  EXPECT_TRUE(s.tunnel->observations()->reset);
  EXPECT_EQ(ReadToEof(s.upstream_peer.get()), "");
}

TEST(SpliceStreamsTest, AFilterDownErrorAbortsBothSides) {
  Spliced s = Make();
  StreamSpliceOptions options;
  options.filter_down = [](absl::string_view, std::string*) {
    return absl::ResourceExhaustedError("held too much");
  };
  std::future<SpliceResult> result = Start(s, options);
  ASSERT_TRUE(SendAllTo(s.upstream_peer.get(), "response"));
  SpliceResult r = result.get();
  EXPECT_FALSE(r.clean);
  EXPECT_EQ(r.ended, "response refused: held too much");
  EXPECT_TRUE(s.tunnel->observations()->reset);
  EXPECT_EQ(ReadToEof(s.guest.get()), "");  // nothing of the response got through
  EXPECT_EQ(r.bytes_down, 0u);
}

TEST(SpliceStreamsTest, AFinishDownErrorAbortsBothSides) {
  Spliced s = Make();
  StreamSpliceOptions options;
  options.filter_down = [](absl::string_view in, std::string* out) {
    absl::StrAppend(out, in);
    return absl::OkStatus();
  };
  options.finish_down = [](std::string*) { return absl::DataLossError("cut mid-value"); };
  std::future<SpliceResult> result = Start(s, options);
  ::shutdown(s.upstream_peer.get(), SHUT_WR);
  SpliceResult r = result.get();
  EXPECT_FALSE(r.clean);
  EXPECT_EQ(r.ended, "response refused: cut mid-value");
  EXPECT_TRUE(s.tunnel->observations()->reset);
  EXPECT_FALSE(s.tunnel->observations()->closed_write);
}

// The path a secret takes: the guest's TLS ends at the proxy (TlsStream::Server on the tunnel),
// plaintext passes the filters, and a second TLS connection goes to the upstream
// (TlsStream::Client over a socket), which verifies as the real one would.
TEST(SpliceStreamsTest, SplicesTwoTerminatedTlsConnections) {
  TestPki pki;
  std::shared_ptr<const UpstreamTrust> trust = pki.trust();
  StreamPair guest_wire = MakeStreamPair();     // a: the proxy's tunnel, b: the guest
  StreamPair upstream_wire = MakeStreamPair();  // a: the proxy's socket, b: the upstream

  // The guest and the upstream, each on its own thread.
  std::future<std::string> guest = std::async(std::launch::async, [&] {
    absl::StatusOr<std::unique_ptr<TlsStream>> tls =
        TlsStream::Client(*guest_wire.b, *trust, kTestHost, Soon());
    if (!tls.ok()) {
      return std::string(tls.status().message());
    }
    if (!(*tls)->Write("Authorization: PLACEHOLDER\r\n").ok()) {
      return std::string("write failed");
    }
    (*tls)->CloseWrite();
    std::string out;
    char buf[256];
    for (;;) {
      absl::StatusOr<size_t> n = (*tls)->Read(buf, sizeof(buf), Soon());
      if (!n.ok() || *n == 0) {
        return out;
      }
      out.append(buf, *n);
    }
  });
  std::future<std::string> upstream = std::async(std::launch::async, [&] {
    absl::StatusOr<std::unique_ptr<TlsStream>> tls =
        TlsStream::Server(*upstream_wire.b, pki.server_ctx(), "", Soon());
    if (!tls.ok()) {
      return std::string(tls.status().message());
    }
    std::string got;
    char buf[256];
    for (;;) {
      absl::StatusOr<size_t> n = (*tls)->Read(buf, sizeof(buf), Soon());
      if (!n.ok() || *n == 0) {
        break;
      }
      got.append(buf, *n);
    }
    (void)(*tls)->Write("echo: real-value\r\n");
    (*tls)->CloseWrite();
    return got;
  });

  absl::StatusOr<std::unique_ptr<TlsStream>> to_guest =
      TlsStream::Server(*guest_wire.a, pki.server_ctx(), "", Soon());
  ASSERT_TRUE(to_guest.ok()) << to_guest.status();
  absl::StatusOr<std::unique_ptr<TlsStream>> to_upstream =
      TlsStream::Client(*upstream_wire.a, *trust, kTestHost, Soon());
  ASSERT_TRUE(to_upstream.ok()) << to_upstream.status();
  StreamSpliceOptions options;
  options.filter_up = [](absl::string_view in, std::string* out) {
    out->append(absl::StrReplaceAll(in, {{"PLACEHOLDER", "real-value"}}));
    return absl::OkStatus();
  };
  options.filter_down = [](absl::string_view in, std::string* out) {
    out->append(absl::StrReplaceAll(in, {{"real-value", "PLACEHOLDER"}}));
    return absl::OkStatus();
  };
  SpliceResult r = SpliceStreams(**to_guest, **to_upstream, options);
  EXPECT_TRUE(r.clean) << r.ended;
  EXPECT_EQ(upstream.get(), "Authorization: real-value\r\n");
  EXPECT_EQ(guest.get(), "echo: PLACEHOLDER\r\n");
}

}  // namespace
}  // namespace abox::net
