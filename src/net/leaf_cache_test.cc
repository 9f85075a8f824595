#include "src/net/leaf_cache.h"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "src/base/clock.h"
#include "src/base/unique_fd.h"

namespace abox::net {
namespace {

using ::testing::HasSubstr;

std::unique_ptr<InterceptCa> MakeCa(const std::string& name) {
  auto dir = std::filesystem::path(::testing::TempDir()) /
             absl::StrCat("leaf_cache_test.", ::getpid()) / name;  // ctest runs tests in parallel
  std::filesystem::remove_all(dir);
  auto ca = InterceptCa::LoadOrCreate((dir / "ca").string());
  if (!ca.ok()) {
    ADD_FAILURE() << ca.status();
    return nullptr;
  }
  return *std::move(ca);
}

LeafCache::Options OptionsWith(const base::FakeClock& clock, size_t capacity = 256) {
  LeafCache::Options options;
  options.capacity = capacity;
  options.now = [&clock] { return clock.Now(); };
  return options;
}

TEST(LeafCacheTest, HitsOnTheSecondRequestForAHost) {
  auto ca = MakeCa("hit");
  ASSERT_NE(ca, nullptr);
  base::FakeClock clock;
  LeafCache cache(*ca, OptionsWith(clock));
  auto first = cache.Get("api.example.test");
  ASSERT_TRUE(first.ok()) << first.status();
  auto second = cache.Get("API.example.test.");  // one spelling per name
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(first->get(), second->get());
  EXPECT_EQ((*first)->leaf.host, "api.example.test");
  EXPECT_NE((*first)->server_ctx, nullptr);
  LeafCache::Stats stats = cache.stats();
  EXPECT_EQ(stats.hits, 1u);
  EXPECT_EQ(stats.misses, 1u);
  EXPECT_EQ(stats.size, 1u);
}

TEST(LeafCacheTest, EvictsTheLeastRecentlyUsedHostBeyondCapacity) {
  auto ca = MakeCa("lru");
  ASSERT_NE(ca, nullptr);
  base::FakeClock clock;
  LeafCache cache(*ca, OptionsWith(clock, /*capacity=*/2));
  auto a = cache.Get("a.example.test");
  ASSERT_TRUE(a.ok());
  ASSERT_TRUE(cache.Get("b.example.test").ok());
  ASSERT_TRUE(cache.Get("a.example.test").ok());  // a is now the most recent
  ASSERT_TRUE(cache.Get("c.example.test").ok());  // evicts b
  EXPECT_EQ(cache.stats().evictions, 1u);
  EXPECT_EQ(cache.stats().size, 2u);
  auto a_again = cache.Get("a.example.test");
  ASSERT_TRUE(a_again.ok());
  EXPECT_EQ(a->get(), a_again->get());
  uint64_t misses = cache.stats().misses;
  ASSERT_TRUE(cache.Get("b.example.test").ok());  // issued again
  EXPECT_EQ(cache.stats().misses, misses + 1);
  LeafCache::Stats stats = cache.stats();
  EXPECT_EQ(stats.hits, 2u);
  EXPECT_EQ(stats.misses, 4u);
  EXPECT_EQ(stats.evictions, 2u);
  // An entry handed out stays valid after its eviction.
  EXPECT_EQ((*a)->leaf.host, "a.example.test");
}

TEST(LeafCacheTest, ReissuesWithinADayOfExpiry) {
  auto ca = MakeCa("renew");
  ASSERT_NE(ca, nullptr);
  base::FakeClock clock;
  LeafCache cache(*ca, OptionsWith(clock));
  auto first = cache.Get("api.example.test");
  ASSERT_TRUE(first.ok());
  EXPECT_EQ((*first)->leaf.not_after, clock.Now() + absl::Hours(24 * 7));

  clock.Advance(absl::Hours(24 * 6) - absl::Seconds(1));  // a day and a second left
  auto still = cache.Get("api.example.test");
  ASSERT_TRUE(still.ok());
  EXPECT_EQ(first->get(), still->get());

  clock.Advance(absl::Seconds(1));  // a day left: renew
  auto renewed = cache.Get("api.example.test");
  ASSERT_TRUE(renewed.ok());
  EXPECT_NE(first->get(), renewed->get());
  EXPECT_EQ((*renewed)->leaf.not_after, clock.Now() + absl::Hours(24 * 7));
  LeafCache::Stats stats = cache.stats();
  EXPECT_EQ(stats.hits, 1u);
  EXPECT_EQ(stats.misses, 2u);
  EXPECT_EQ(stats.renewals, 1u);
  EXPECT_EQ(stats.size, 1u);
}

TEST(LeafCacheTest, RefusesANonHostWithoutCountingIt) {
  auto ca = MakeCa("bad");
  ASSERT_NE(ca, nullptr);
  base::FakeClock clock;
  LeafCache cache(*ca, OptionsWith(clock));
  auto entry = cache.Get("10.0.0.1");
  EXPECT_EQ(entry.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(entry.status().message(),
              HasSubstr("no interception certificate for 10.0.0.1: it is an IP address"));
  EXPECT_EQ(cache.stats().misses, 0u);
  EXPECT_EQ(cache.stats().size, 0u);
}

TEST(LeafCacheTest, CountsEveryRequestFromManyThreads) {
  auto ca = MakeCa("threads");
  ASSERT_NE(ca, nullptr);
  base::FakeClock clock;
  LeafCache cache(*ca, OptionsWith(clock, /*capacity=*/4));
  constexpr int kThreads = 4;
  constexpr int kRequests = 50;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&cache, t] {
      for (int i = 0; i < kRequests; ++i) {
        auto entry = cache.Get(absl::StrCat("h", (i + t) % 6, ".example.test"));
        EXPECT_TRUE(entry.ok() && (*entry)->server_ctx != nullptr);
      }
    });
  }
  for (std::thread& thread : threads) {
    thread.join();
  }
  LeafCache::Stats stats = cache.stats();
  EXPECT_EQ(stats.hits + stats.misses, uint64_t{kThreads * kRequests});
  EXPECT_LE(stats.size, 4u);
}

struct SslFree {
  void operator()(SSL* ssl) const { SSL_free(ssl); }
};
using SslPtr = std::unique_ptr<SSL, SslFree>;

struct ClientResult {
  bool handshake = false;
  long verify_result = -1;  // NOLINT(google-runtime-int): OpenSSL's type
  std::string alpn;
  std::string reply;
};

// A client that trusts only `ca`, checks the name `verify_host`, sends SNI `sni` and offers h2
// and http/1.1, against a server on the other end of a socketpair using `server_ctx`.
ClientResult HandshakeOverSocketpair(const InterceptCa& ca, SSL_CTX* server_ctx,
                                     const std::string& sni, const std::string& verify_host) {
  int fds[2];
  EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
  base::UniqueFd server_fd(fds[0]);
  base::UniqueFd client_fd(fds[1]);
  timeval tv{10, 0};  // fail, not hang
  ::setsockopt(server_fd.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  ::setsockopt(client_fd.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));

  std::thread server([&] {
    SslPtr ssl(SSL_new(server_ctx));
    SSL_set_fd(ssl.get(), server_fd.get());
    if (SSL_accept(ssl.get()) == 1) {
      char buf[4];
      if (SSL_read(ssl.get(), buf, 4) == 4 && std::string(buf, 4) == "ping") {
        SSL_write(ssl.get(), "pong", 4);
      }
      SSL_shutdown(ssl.get());
    }
    ::shutdown(server_fd.get(), SHUT_RDWR);
    ERR_clear_error();
  });

  ClientResult out;
  SslCtxPtr ctx(SSL_CTX_new(TLS_client_method()));
  X509_STORE_add_cert(SSL_CTX_get_cert_store(ctx.get()), ca.certificate());  // only the CA
  SSL_CTX_set_verify(ctx.get(), SSL_VERIFY_PEER, nullptr);
  static const unsigned char kAlpn[] = {2, 'h', '2', 8, 'h', 't', 't', 'p', '/', '1', '.', '1'};
  SSL_CTX_set_alpn_protos(ctx.get(), kAlpn, sizeof(kAlpn));
  SslPtr ssl(SSL_new(ctx.get()));
  SSL_set_fd(ssl.get(), client_fd.get());
  SSL_set_tlsext_host_name(ssl.get(), sni.c_str());
  SSL_set1_host(ssl.get(), verify_host.c_str());
  if (SSL_connect(ssl.get()) == 1) {
    out.handshake = true;
    const unsigned char* alpn = nullptr;
    unsigned int alpn_len = 0;
    SSL_get0_alpn_selected(ssl.get(), &alpn, &alpn_len);
    out.alpn.assign(reinterpret_cast<const char*>(alpn), alpn_len);
    if (SSL_write(ssl.get(), "ping", 4) == 4) {
      char buf[16];
      int n = SSL_read(ssl.get(), buf, sizeof(buf));
      if (n > 0) {
        out.reply.assign(buf, static_cast<size_t>(n));
      }
    }
  }
  out.verify_result = SSL_get_verify_result(ssl.get());
  ssl.reset();
  ::shutdown(client_fd.get(), SHUT_RDWR);
  server.join();
  ERR_clear_error();
  return out;
}

TEST(LeafCacheTest, ClientTrustingOnlyTheCaCompletesAHandshakeForTheHost) {
  auto ca = MakeCa("handshake");
  ASSERT_NE(ca, nullptr);
  LeafCache cache(*ca, LeafCache::Options{});  // real clock: the client checks validity
  auto entry = cache.Get("api.example.test");
  ASSERT_TRUE(entry.ok()) << entry.status();
  ClientResult result = HandshakeOverSocketpair(*ca, (*entry)->server_ctx.get(), "api.example.test",
                                                "api.example.test");
  EXPECT_TRUE(result.handshake);
  EXPECT_EQ(result.verify_result, X509_V_OK);
  EXPECT_EQ(result.alpn, "http/1.1");
  EXPECT_EQ(result.reply, "pong");
}

TEST(LeafCacheTest, ClientExpectingAnotherHostRefusesTheLeaf) {
  auto ca = MakeCa("handshake-other");
  ASSERT_NE(ca, nullptr);
  LeafCache cache(*ca, LeafCache::Options{});
  auto entry = cache.Get("api.example.test");
  ASSERT_TRUE(entry.ok()) << entry.status();
  ClientResult result = HandshakeOverSocketpair(*ca, (*entry)->server_ctx.get(), "api.example.test",
                                                "evil.example.test");
  EXPECT_FALSE(result.handshake);
  EXPECT_EQ(result.verify_result, X509_V_ERR_HOSTNAME_MISMATCH);
}

TEST(LeafCacheTest, ClientOfAnotherInstallRefusesTheLeaf) {
  auto ca = MakeCa("handshake-ca");
  auto other = MakeCa("handshake-ca-other");
  ASSERT_NE(ca, nullptr);
  ASSERT_NE(other, nullptr);
  LeafCache cache(*ca, LeafCache::Options{});
  auto entry = cache.Get("api.example.test");
  ASSERT_TRUE(entry.ok()) << entry.status();
  ClientResult result = HandshakeOverSocketpair(*other, (*entry)->server_ctx.get(),
                                                "api.example.test", "api.example.test");
  EXPECT_FALSE(result.handshake);
  EXPECT_NE(result.verify_result, X509_V_OK);
}

TEST(LeafCacheTest, ServerContextIsTls12OrLater) {
  auto ca = MakeCa("tls12");
  ASSERT_NE(ca, nullptr);
  auto leaf = ca->IssueLeaf("api.example.test", absl::Now());
  ASSERT_TRUE(leaf.ok());
  auto ctx = MakeInterceptServerContext(*leaf);
  ASSERT_TRUE(ctx.ok()) << ctx.status();
  EXPECT_EQ(SSL_CTX_get_min_proto_version(ctx->get()), TLS1_2_VERSION);
  EXPECT_EQ(X509_cmp(SSL_CTX_get0_certificate(ctx->get()), leaf->cert.get()), 0);
}

}  // namespace
}  // namespace abox::net
