#include "src/net/tls_stream.h"

#include <future>
#include <string>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "src/net/testing/stream_pair.h"

namespace abox::net {
namespace {

using ::testing::HasSubstr;
using testing::kTestHost;
using testing::MakeStreamPair;
using testing::StreamPair;
using testing::TestPki;

absl::Time Soon() { return absl::Now() + absl::Seconds(10); }

std::string ReadAll(TunnelStream& stream) {
  std::string out;
  std::string buf(size_t{64} * 1024, '\0');
  for (;;) {
    absl::StatusOr<size_t> n = stream.Read(buf.data(), buf.size(), Soon());
    if (!n.ok() || *n == 0) {
      EXPECT_TRUE(n.ok()) << n.status();
      return out;
    }
    out.append(buf.data(), *n);
  }
}

// A payload whose every position differs from its neighbours', so a reordered or dropped
// record shows.
std::string Pattern(size_t size, char seed) {
  std::string out(size, '\0');
  for (size_t i = 0; i < size; ++i) {
    out[i] = static_cast<char>(seed + static_cast<char>(i % 251));
  }
  return out;
}

struct Connected {
  StreamPair wires;  // a: the server's (guest tunnel) side, b: the client's (upstream) side
  std::unique_ptr<TlsStream> server;
  std::unique_ptr<TlsStream> client;
};

// Runs both handshakes at once (server on a second thread); fails the test when either fails.
Connected Connect(TestPki& pki, const UpstreamTrust& trust, const std::string& name = kTestHost) {
  Connected c;
  c.wires = MakeStreamPair();
  std::future<absl::StatusOr<std::unique_ptr<TlsStream>>> server =
      std::async(std::launch::async,
                 [&] { return TlsStream::Server(*c.wires.a, pki.server_ctx(), "", Soon()); });
  absl::StatusOr<std::unique_ptr<TlsStream>> client =
      TlsStream::Client(*c.wires.b, trust, name, Soon());
  absl::StatusOr<std::unique_ptr<TlsStream>> served = server.get();
  EXPECT_TRUE(client.ok()) << client.status();
  EXPECT_TRUE(served.ok()) << served.status();
  if (client.ok() && served.ok()) {
    c.client = std::move(*client);
    c.server = std::move(*served);
  }
  return c;
}

// The client's handshake error for `name` against a server presenting `pki`'s leaf; the
// server's handshake must end too (with the client's alert), not hang.
absl::Status ClientError(TestPki& pki, const UpstreamTrust& trust, const std::string& name) {
  StreamPair wires = MakeStreamPair();
  std::future<absl::StatusOr<std::unique_ptr<TlsStream>>> server =
      std::async(std::launch::async,
                 [&] { return TlsStream::Server(*wires.a, pki.server_ctx(), "", Soon()); });
  absl::StatusOr<std::unique_ptr<TlsStream>> client =
      TlsStream::Client(*wires.b, trust, name, Soon());
  EXPECT_FALSE(client.ok());
  wires.b->Reset("handshake failed");
  absl::StatusOr<std::unique_ptr<TlsStream>> served = server.get();
  EXPECT_FALSE(served.ok());
  return client.status();
}

TEST(TlsStreamTest, HandshakesAndCarriesDataBothWaysWithHalfCloses) {
  TestPki pki;
  Connected c = Connect(pki, *pki.trust());
  ASSERT_TRUE(c.client && c.server);
  EXPECT_EQ(c.client->negotiated_alpn(), "http/1.1");
  EXPECT_EQ(c.server->negotiated_alpn(), "http/1.1");
  EXPECT_TRUE(c.client->peer_verified());
  EXPECT_FALSE(c.server->peer_verified());

  ASSERT_TRUE(c.client->Write("GET / HTTP/1.1\r\n\r\n").ok());
  c.client->CloseWrite();
  EXPECT_EQ(ReadAll(*c.server), "GET / HTTP/1.1\r\n\r\n");
  EXPECT_FALSE(c.server->truncated());
  // The server answers after the client's close_notify.
  ASSERT_TRUE(c.server->Write("HTTP/1.1 200 OK\r\n\r\n").ok());
  c.server->CloseWrite();
  EXPECT_EQ(ReadAll(*c.client), "HTTP/1.1 200 OK\r\n\r\n");
  EXPECT_FALSE(c.client->truncated());
}

TEST(TlsStreamTest, HalfClosesOverTls12) {
  TestPki pki;
  ASSERT_EQ(SSL_CTX_set_max_proto_version(pki.server_ctx(), TLS1_2_VERSION), 1);
  Connected c = Connect(pki, *pki.trust());
  ASSERT_TRUE(c.client && c.server);
  ASSERT_TRUE(c.client->Write("request").ok());
  c.client->CloseWrite();
  EXPECT_EQ(ReadAll(*c.server), "request");
  ASSERT_TRUE(c.server->Write("response").ok());
  c.server->CloseWrite();
  EXPECT_EQ(ReadAll(*c.client), "response");
}

TEST(TlsStreamTest, CarriesLargePayloadsBothWaysAtOnce) {
  TestPki pki;
  Connected c = Connect(pki, *pki.trust());
  ASSERT_TRUE(c.client && c.server);
  const std::string up = Pattern(size_t{4} << 20, 'u');
  const std::string down = Pattern(size_t{4} << 20, 'd');
  // Each end reads on one thread while another writes: the SSL objects are shared between
  // them, and neither end writes everything before reading (the socket buffers would fill).
  std::thread client_writer([&] {
    EXPECT_TRUE(c.client->Write(up).ok());
    c.client->CloseWrite();
  });
  std::thread server_writer([&] {
    EXPECT_TRUE(c.server->Write(down).ok());
    c.server->CloseWrite();
  });
  std::future<std::string> server_read =
      std::async(std::launch::async, [&] { return ReadAll(*c.server); });
  std::string client_read = ReadAll(*c.client);
  client_writer.join();
  server_writer.join();
  EXPECT_TRUE(client_read == down) << client_read.size();
  std::string got_up = server_read.get();
  EXPECT_TRUE(got_up == up) << got_up.size();
}

TEST(TlsStreamTest, ServerStartsFromTheSniffedBytes) {
  TestPki pki;
  StreamPair wires = MakeStreamPair();
  std::shared_ptr<const UpstreamTrust> trust = pki.trust();
  std::future<absl::StatusOr<std::unique_ptr<TlsStream>>> client = std::async(
      std::launch::async, [&] { return TlsStream::Client(*wires.b, *trust, kTestHost, Soon()); });
  // The proxy reads the ClientHello's first bytes itself, then hands them over.
  char head[16];
  absl::StatusOr<size_t> n = wires.a->Read(head, sizeof(head), Soon());
  ASSERT_TRUE(n.ok()) << n.status();
  absl::StatusOr<std::unique_ptr<TlsStream>> server =
      TlsStream::Server(*wires.a, pki.server_ctx(), absl::string_view(head, *n), Soon());
  ASSERT_TRUE(server.ok()) << server.status();
  absl::StatusOr<std::unique_ptr<TlsStream>> connected = client.get();
  ASSERT_TRUE(connected.ok()) << connected.status();
  ASSERT_TRUE((*connected)->Write("ping").ok());
  char buf[8];
  n = (*server)->Read(buf, sizeof(buf), Soon());
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ(absl::string_view(buf, *n), "ping");
}

TEST(TlsStreamTest, ClientRefusesACertificateForAnotherName) {
  TestPki pki;
  absl::Status error = ClientError(pki, *pki.trust(), "other.example.test");
  EXPECT_TRUE(absl::IsUnavailable(error)) << error;
  EXPECT_THAT(std::string(error.message()),
              HasSubstr("upstream certificate for other.example.test did not verify: "));
  EXPECT_THAT(std::string(error.message()), HasSubstr("hostname mismatch"));
}

TEST(TlsStreamTest, ClientRefusesACaItDoesNotTrust) {
  TestPki pki;
  absl::StatusOr<std::shared_ptr<const UpstreamTrust>> system_only = UpstreamTrust::Create({});
  ASSERT_TRUE(system_only.ok()) << system_only.status();
  absl::Status error = ClientError(pki, **system_only, kTestHost);
  EXPECT_THAT(std::string(error.message()),
              HasSubstr("upstream certificate for api.example.test did not verify: "));
  EXPECT_THAT(std::string(error.message()), HasSubstr("local issuer"));
}

TEST(TlsStreamTest, ClientRefusesAnExpiredCertificate) {
  // Leaves last 7 days: one issued 30 days ago has expired.
  TestPki pki(absl::Now() - absl::Hours(24 * 30));
  absl::Status error = ClientError(pki, *pki.trust(), kTestHost);
  EXPECT_THAT(std::string(error.message()), HasSubstr("did not verify: certificate has expired"));
}

TEST(TlsStreamTest, UpstreamTrustNamesAFileItCannotLoad) {
  TestPki pki;
  absl::StatusOr<std::shared_ptr<const UpstreamTrust>> trust =
      UpstreamTrust::Create({pki.ca_file() + ".missing"});
  ASSERT_FALSE(trust.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(trust.status())) << trust.status();
  EXPECT_THAT(std::string(trust.status().message()), HasSubstr("ca.pem.missing"));
}

TEST(TlsStreamTest, ServerRefusesBytesThatAreNotAClientHello) {
  TestPki pki;
  StreamPair wires = MakeStreamPair();
  absl::StatusOr<std::unique_ptr<TlsStream>> server = TlsStream::Server(
      *wires.a, pki.server_ctx(), "GET / HTTP/1.1\r\nHost: x\r\n\r\n", absl::InfiniteFuture());
  ASSERT_FALSE(server.ok());
  EXPECT_TRUE(absl::IsUnavailable(server.status())) << server.status();
  EXPECT_THAT(std::string(server.status().message()),
              HasSubstr("TLS handshake with the guest failed: "));
}

TEST(TlsStreamTest, ServerGivesUpAtTheHandshakeDeadline) {
  TestPki pki;
  StreamPair wires = MakeStreamPair();  // the guest sends nothing
  absl::StatusOr<std::unique_ptr<TlsStream>> server =
      TlsStream::Server(*wires.a, pki.server_ctx(), "", absl::Now() + absl::Milliseconds(100));
  ASSERT_FALSE(server.ok());
  EXPECT_TRUE(absl::IsDeadlineExceeded(server.status())) << server.status();
}

TEST(TlsStreamTest, ServerFailsWhenTheGuestClosesMidHandshake) {
  TestPki pki;
  StreamPair wires = MakeStreamPair();
  wires.b->CloseWrite();
  absl::StatusOr<std::unique_ptr<TlsStream>> server =
      TlsStream::Server(*wires.a, pki.server_ctx(), "\x16\x03\x01", Soon());
  ASSERT_FALSE(server.ok());
  EXPECT_THAT(std::string(server.status().message()), HasSubstr("closed the connection"));
}

TEST(TlsStreamTest, ReadDeadlineLeavesTheStreamUsable) {
  TestPki pki;
  Connected c = Connect(pki, *pki.trust());
  ASSERT_TRUE(c.client && c.server);
  char buf[8];
  absl::StatusOr<size_t> n = c.client->Read(buf, sizeof(buf), absl::Now() + absl::Milliseconds(50));
  EXPECT_TRUE(absl::IsDeadlineExceeded(n.status())) << n.status();
  ASSERT_TRUE(c.server->Write("late").ok());
  n = c.client->Read(buf, sizeof(buf), Soon());
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ(absl::string_view(buf, *n), "late");
}

TEST(TlsStreamTest, ResetFromAnotherThreadUnblocksARead) {
  TestPki pki;
  Connected c = Connect(pki, *pki.trust());
  ASSERT_TRUE(c.client && c.server);
  std::future<absl::StatusOr<size_t>> read = std::async(std::launch::async, [&] {
    char buf[8];
    return c.client->Read(buf, sizeof(buf), absl::InfiniteFuture());
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // let the Read block (not timed)
  c.client->Reset("test");
  absl::StatusOr<size_t> n = read.get();
  EXPECT_FALSE(n.ok());
}

TEST(TlsStreamTest, EofWithoutCloseNotifyIsReportedAsTruncated) {
  TestPki pki;
  Connected c = Connect(pki, *pki.trust());
  ASSERT_TRUE(c.client && c.server);
  ASSERT_TRUE(c.server->Write("partial").ok());
  c.wires.a->CloseWrite();  // a FIN under the TLS layer, no close_notify
  EXPECT_EQ(ReadAll(*c.client), "partial");
  EXPECT_TRUE(c.client->truncated());
}

TEST(TlsStreamTest, TamperedCiphertextIsAnError) {
  TestPki pki;
  Connected c = Connect(pki, *pki.trust());
  ASSERT_TRUE(c.client && c.server);
  // A whole application-data record of garbage, as if a middlebox rewrote the bytes.
  std::string record("\x17\x03\x03\x00\x20", 5);
  record += std::string(32, '\x42');
  ASSERT_TRUE(c.wires.a->Write(record).ok());
  char buf[8];
  absl::StatusOr<size_t> n = c.client->Read(buf, sizeof(buf), Soon());
  ASSERT_FALSE(n.ok());
  EXPECT_THAT(std::string(n.status().message()), HasSubstr("TLS: "));
}

}  // namespace
}  // namespace abox::net
