// Test-only: a scripted guest on the other end of a socketpair, built from the proto encoders
// and decoder; the test reacts to the frames AgentClient sends.
#pragma once

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "gtest/gtest.h"
#include "src/base/io.h"
#include "src/base/unique_fd.h"
#include "src/proto/frame.h"
#include "src/proto/messages.h"
#include "src/runtime/agent_client.h"

namespace abox::runtime::testing {

using proto::EncodeFrame;
using proto::FrameType;

class FakeGuest {
 public:
  explicit FakeGuest(base::UniqueFd fd) : fd_(std::move(fd)) {}

  // The next frame from the host, or nullopt at end of stream, on a bad frame or after
  // `timeout`.
  std::optional<proto::Frame> Next(std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
    for (;;) {
      auto f = decoder_.Next();
      if (!f.ok()) {
        ADD_FAILURE() << "the host sent a bad frame: " << f.status();
        return std::nullopt;
      }
      if (*f) {
        return std::move(**f);
      }
      if (!buffered_.empty()) {
        buffered_.erase(0, decoder_.Feed(buffered_));
        continue;
      }
      pollfd p{fd_.get(), POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(timeout.count())) <= 0) {
        return std::nullopt;
      }
      char buf[65536];
      ssize_t n = ::read(fd_.get(), buf, sizeof(buf));
      if (n <= 0) {
        return std::nullopt;
      }
      buffered_.append(buf, static_cast<size_t>(n));
    }
  }
  std::optional<proto::Frame> ReadFrame() { return Next(); }

  // Reads frames until one of `type` arrives (returns it); others (pings too) are skipped.
  std::optional<proto::Frame> Expect(FrameType type) {
    for (;;) {
      auto f = Next();
      if (!f || f->header.type == type) {
        return f;
      }
    }
  }

  void Send(const std::string& bytes) { ASSERT_TRUE(base::WriteAll(fd_.get(), bytes).ok()); }
  void Send(FrameType type, uint32_t stream, uint8_t flags, absl::string_view payload) {
    Send(EncodeFrame(type, stream, flags, payload));
  }

  void Handshake() {
    auto hello = Expect(FrameType::kHello);
    ASSERT_TRUE(hello.has_value());
    proto::Hello h{.version = proto::kProtocolVersion,
                   .min_version = proto::kProtocolVersion,
                   .agent_version = "fake-guest",
                   .max_payload = proto::kMaxPayload,
                   .window = proto::kDefaultWindow};
    Send(EncodeFrame(FrameType::kHello, 0, 0, proto::EncodeHello(h)));
  }

  void Close() { fd_.reset(); }

 private:
  base::UniqueFd fd_;
  proto::FrameDecoder decoder_;
  std::string buffered_;  // read from the socket, not yet fed to the decoder
};

// An AgentClient and the FakeGuest at the other end of its socketpair. `failures` counts the
// client's on_failure calls.
struct ClientAndGuest {
  std::unique_ptr<AgentClient> client;
  std::unique_ptr<FakeGuest> guest;
  std::shared_ptr<std::atomic<int>> failures = std::make_shared<std::atomic<int>>(0);
};

// `options.on_failure` is replaced by the counter.
inline ClientAndGuest MakeClientAndGuest(AgentClient::Options options = {}) {
  int sv[2];
  EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  ClientAndGuest p;
  options.on_failure = [f = p.failures](const absl::Status&) { ++*f; };
  auto c = AgentClient::Create(base::UniqueFd(sv[0]), options);
  EXPECT_TRUE(c.ok());
  p.client = std::move(*c);
  p.guest = std::make_unique<FakeGuest>(base::UniqueFd(sv[1]));
  return p;
}

}  // namespace abox::runtime::testing
