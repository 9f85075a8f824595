#include "src/net/fd_stream.h"

#include <sys/eventfd.h>
#include <sys/socket.h>

#include <future>
#include <string>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "src/base/io.h"
#include "src/net/splice.h"
#include "src/net/testing/socket_tunnel.h"
#include "src/net/testing/stream_pair.h"

namespace abox::net {
namespace {

using testing::LoopbackServer;
using testing::NonBlockingSocketPair;
using testing::ReadToEof;
using testing::SendAllTo;

std::unique_ptr<FdStream> Wrap(base::UniqueFd fd, FdStream::Options options = {}) {
  absl::StatusOr<std::unique_ptr<FdStream>> stream = FdStream::Create(std::move(fd), options);
  EXPECT_TRUE(stream.ok()) << stream.status();
  return std::move(*stream);
}

// The peer's end as a blocking socket with a receive timeout, so a broken test fails.
base::UniqueFd Blocking(base::UniqueFd fd) {
  EXPECT_TRUE(base::SetNonBlocking(fd.get(), false).ok());
  timeval tv{10, 0};
  ::setsockopt(fd.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  return fd;
}

std::string ReadAll(TunnelStream& stream) {
  std::string out;
  char buf[65536];
  for (;;) {
    absl::StatusOr<size_t> n = stream.Read(buf, sizeof(buf), absl::Now() + absl::Seconds(10));
    if (!n.ok() || *n == 0) {
      EXPECT_TRUE(n.ok()) << n.status();
      return out;
    }
    out.append(buf, *n);
  }
}

// A TCP connection on loopback (socketpairs know no RST): the proxy's end non-blocking, as
// ConnectToAny makes it, the peer's blocking with a receive timeout.
std::pair<base::UniqueFd, base::UniqueFd> TcpPair() {
  std::promise<base::UniqueFd> accepted;
  LoopbackServer server([&](base::UniqueFd fd) { accepted.set_value(std::move(fd)); });
  absl::StatusOr<UpstreamConnection> ours = ConnectToAny(
      {*IpAddress::Parse("127.0.0.1")}, server.port(), absl::Now() + absl::Seconds(10));
  EXPECT_TRUE(ours.ok()) << ours.status();
  base::UniqueFd theirs = accepted.get_future().get();
  return {ours.ok() ? std::move(ours->fd) : base::UniqueFd(), std::move(theirs)};
}

TEST(FdStreamTest, CarriesBytesAndHalfClosesBothWays) {
  auto [ours, theirs] = NonBlockingSocketPair();
  std::unique_ptr<FdStream> stream = Wrap(std::move(ours), {.info = {.original_port = 443}});
  base::UniqueFd peer = Blocking(std::move(theirs));
  EXPECT_EQ(stream->info().original_port, 443);
  ASSERT_TRUE(SendAllTo(peer.get(), "request"));
  ::shutdown(peer.get(), SHUT_WR);
  EXPECT_EQ(ReadAll(*stream), "request");
  // After the peer's EOF, this side can still answer.
  ASSERT_TRUE(stream->Write("answer").ok());
  stream->CloseWrite();
  EXPECT_EQ(ReadToEof(peer.get()), "answer");
}

TEST(FdStreamTest, ReadStopsAtTheDeadline) {
  auto [ours, theirs] = NonBlockingSocketPair();
  std::unique_ptr<FdStream> stream = Wrap(std::move(ours));
  char buf[16];
  absl::StatusOr<size_t> n = stream->Read(buf, sizeof(buf), absl::Now() + absl::Milliseconds(50));
  EXPECT_TRUE(absl::IsDeadlineExceeded(n.status())) << n.status();
  // Still usable afterwards.
  ASSERT_TRUE(SendAllTo(theirs.get(), "x"));
  n = stream->Read(buf, sizeof(buf), absl::Now() + absl::Seconds(10));
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ(*n, 1u);
}

TEST(FdStreamTest, ReadAndWriteStopOnTheCancelFd) {
  auto [ours, theirs] = NonBlockingSocketPair();
  base::UniqueFd cancel(::eventfd(1, EFD_CLOEXEC));  // already readable
  std::unique_ptr<FdStream> stream = Wrap(std::move(ours), {.cancel_fd = cancel.get()});
  char buf[16];
  absl::StatusOr<size_t> n = stream->Read(buf, sizeof(buf), absl::InfiniteFuture());
  EXPECT_TRUE(absl::IsCancelled(n.status())) << n.status();
  // A write that has to wait (nobody reads `theirs`) is cancelled too.
  absl::Status written = stream->Write(std::string(size_t{8} << 20, 'x'));
  EXPECT_TRUE(absl::IsCancelled(written)) << written;
}

TEST(FdStreamTest, WriteGivesUpWhenThePeerStopsReading) {
  auto [ours, theirs] = NonBlockingSocketPair();
  std::unique_ptr<FdStream> stream =
      Wrap(std::move(ours), {.write_timeout = absl::Milliseconds(100)});
  absl::Status written = stream->Write(std::string(size_t{8} << 20, 'x'));
  EXPECT_TRUE(absl::IsDeadlineExceeded(written)) << written;
  EXPECT_THAT(std::string(written.message()), ::testing::HasSubstr("peer not reading"));
}

TEST(FdStreamTest, ResetUnblocksAReadOnAnotherThreadAndSendsAnRst) {
  auto [ours, theirs] = TcpPair();
  std::unique_ptr<FdStream> stream = Wrap(std::move(ours));
  std::future<absl::StatusOr<size_t>> read = std::async(std::launch::async, [&] {
    char buf[16];
    return stream->Read(buf, sizeof(buf), absl::InfiniteFuture());
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // let the Read block (not timed)
  stream->Reset("test");
  absl::StatusOr<size_t> n = read.get();
  EXPECT_TRUE(absl::IsAborted(n.status())) << n.status();
  // The peer sees the abort at once, as an RST (while the stream is still open).
  char c;
  ssize_t got = ::recv(theirs.get(), &c, 1, 0);
  int err = errno;
  EXPECT_EQ(got, -1);
  EXPECT_EQ(err, ECONNRESET);
}

TEST(FdStreamTest, ResetUnblocksAWriteToAPeerThatDoesNotRead) {
  auto [ours, theirs] = NonBlockingSocketPair();
  std::unique_ptr<FdStream> stream = Wrap(std::move(ours));
  std::future<absl::Status> write = std::async(
      std::launch::async, [&] { return stream->Write(std::string(size_t{8} << 20, 'x')); });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  stream->Reset("test");
  absl::Status written = write.get();
  EXPECT_FALSE(written.ok());
}

TEST(FdStreamTest, ReadsOnOneThreadWhileAnotherWrites) {
  auto [ours, theirs] = NonBlockingSocketPair();
  std::unique_ptr<FdStream> stream = Wrap(std::move(ours));
  base::UniqueFd peer = Blocking(std::move(theirs));
  const std::string up(size_t{4} << 20, 'u');
  const std::string down(size_t{4} << 20, 'd');
  // Both directions at once: neither side reads only after writing everything, so a stream
  // that serialised Read and Write would deadlock on the full socket buffers.
  std::thread peer_writer([&] {
    EXPECT_TRUE(SendAllTo(peer.get(), down));
    ::shutdown(peer.get(), SHUT_WR);
  });
  std::future<std::string> peer_read =
      std::async(std::launch::async, [&] { return ReadToEof(peer.get()); });
  std::thread writer([&] {
    EXPECT_TRUE(stream->Write(up).ok());
    stream->CloseWrite();
  });
  EXPECT_EQ(ReadAll(*stream), down);
  writer.join();
  peer_writer.join();
  EXPECT_EQ(peer_read.get(), up);
}

}  // namespace
}  // namespace abox::net
