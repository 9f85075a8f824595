// Test doubles for the egress code (header-only, tests only): a TunnelStream over a socketpair
// whose other end plays the guest, a recording EgressSink, and loopback upstream servers.
#pragma once

#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <csignal>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "src/base/unique_fd.h"
#include "src/net/egress_log.h"
#include "src/net/egress_options.h"
#include "src/net/policy.h"
#include "src/net/tunnel.h"

namespace abox::net::testing {

// Writes to a peer that went away must fail with EPIPE, not kill the test binary.
inline const bool kSigpipeIgnored = [] {
  std::signal(SIGPIPE, SIG_IGN);
  return true;
}();

// What the test can still see after the proxy destroyed the tunnel.
struct TunnelObservations {
  std::mutex mu;
  bool reset = false;
  std::string reset_reason;
  bool closed_write = false;
};

class SocketTunnel final : public TunnelStream {
 public:
  // The tunnel (to hand to the proxy) and the guest's end of the socketpair.
  static std::pair<std::unique_ptr<SocketTunnel>, base::UniqueFd> Make(TunnelInfo info) {
    int fds[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) {
      std::abort();
    }
    base::UniqueFd guest(fds[1]);
    // A test must fail, not hang, when the proxy never answers.
    timeval tv{10, 0};
    ::setsockopt(guest.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    return {std::unique_ptr<SocketTunnel>(new SocketTunnel(info, base::UniqueFd(fds[0]))),
            std::move(guest)};
  }

  std::shared_ptr<TunnelObservations> observations() const { return seen_; }

  const TunnelInfo& info() const override { return info_; }

  absl::StatusOr<size_t> Read(char* buf, size_t len, absl::Time deadline) override {
    for (;;) {
      if (IsReset()) {
        return absl::AbortedError("tunnel reset");
      }
      absl::Duration left = deadline - absl::Now();
      if (left <= absl::ZeroDuration()) {
        return absl::DeadlineExceededError("tunnel read timed out");
      }
      pollfd p{fd_.get(), POLLIN, 0};
      int n = ::poll(
          &p, 1, static_cast<int>(absl::ToInt64Milliseconds(std::min(left, absl::Hours(1)))) + 1);
      if (n <= 0) {
        continue;
      }
      if (IsReset()) {
        return absl::AbortedError("tunnel reset");
      }
      ssize_t got = ::recv(fd_.get(), buf, len, MSG_DONTWAIT);
      if (got >= 0) {
        return static_cast<size_t>(got);
      }
      if (errno != EAGAIN && errno != EINTR) {
        return absl::AbortedError(absl::StrCat("recv: ", errno));
      }
    }
  }

  absl::Status Write(absl::string_view data) override {
    while (!data.empty()) {
      if (IsReset()) {
        return absl::AbortedError("tunnel reset");
      }
      ssize_t n = ::send(fd_.get(), data.data(), data.size(), MSG_NOSIGNAL);
      if (n < 0) {
        if (errno == EINTR) {
          continue;
        }
        return absl::AbortedError(absl::StrCat("send: ", errno));
      }
      data.remove_prefix(static_cast<size_t>(n));
    }
    return absl::OkStatus();
  }

  void CloseWrite() override {
    {
      std::lock_guard<std::mutex> lock(seen_->mu);
      seen_->closed_write = true;
    }
    ::shutdown(fd_.get(), SHUT_WR);
  }

  void Reset(absl::string_view reason) override {
    {
      std::lock_guard<std::mutex> lock(seen_->mu);
      if (!seen_->reset) {
        seen_->reset = true;
        seen_->reset_reason = std::string(reason);
      }
    }
    // Wakes a blocked poll/recv/send on our end; the guest end sees EOF.
    ::shutdown(fd_.get(), SHUT_RDWR);
  }

 private:
  SocketTunnel(TunnelInfo info, base::UniqueFd fd) : info_(info), fd_(std::move(fd)) {}
  bool IsReset() const {
    std::lock_guard<std::mutex> lock(seen_->mu);
    return seen_->reset;
  }

  TunnelInfo info_;
  base::UniqueFd fd_;
  std::shared_ptr<TunnelObservations> seen_ = std::make_shared<TunnelObservations>();
};

inline bool SendAllTo(int fd, absl::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n <= 0) {
      return false;
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

// Reads until EOF (or an error / the receive timeout); what arrived.
inline std::string ReadToEof(int fd) {
  std::string out;
  char buf[4096];
  for (;;) {
    ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) {
      return out;
    }
    out.append(buf, static_cast<size_t>(n));
  }
}

// Reads until `marker` has arrived (or EOF); everything read.
inline std::string ReadUntil(int fd, absl::string_view marker) {
  std::string out;
  char c;
  while (out.find(marker.data(), 0, marker.size()) == std::string::npos) {
    if (::recv(fd, &c, 1, 0) != 1) {
      break;
    }
    out.push_back(c);
  }
  return out;
}

// The sandbox policy a test changes while the proxy runs (as the daemon's store would).
class MutablePolicy final {
 public:
  // Rules in their text form; a rule that does not parse aborts the test binary.
  void Set(const std::vector<std::string>& rules,
           EgressPolicy::Mode mode = EgressPolicy::Mode::kAllowlist) {
    EgressPolicy policy;
    policy.mode = mode;
    for (const std::string& text : rules) {
      // Tests reach their loopback servers by address rules too.
      absl::StatusOr<Rule> rule = ParseRule(text, {.allow_loopback = true});
      if (!rule.ok()) {
        std::abort();
      }
      policy.allow.push_back(*rule);
    }
    std::lock_guard<std::mutex> lock(mu_);
    policy_ = std::move(policy);
  }
  EgressPolicy Get() {
    std::lock_guard<std::mutex> lock(mu_);
    return policy_;
  }
  // A source reading this policy at each call (the object must outlive it).
  EgressPolicySource Source() {
    EgressPolicySource source;
    source.current = [this] { return Get(); };
    return source;
  }

 private:
  std::mutex mu_;
  EgressPolicy policy_;
};

class RecordingSink final : public EgressSink {
 public:
  struct Denial {
    std::string sandbox;
    std::string name;
    uint16_t port;
    std::string reason;
  };

  void OnConnection(const ConnectionRecord& record) override {
    std::lock_guard<std::mutex> lock(mu_);
    connections_.push_back(record);
    cv_.notify_all();
  }
  void OnDns(const DnsRecord& record) override {
    std::lock_guard<std::mutex> lock(mu_);
    dns_.push_back(record);
    cv_.notify_all();
  }
  void OnDenied(absl::string_view sandbox, absl::string_view name, uint16_t port,
                absl::string_view reason) override {
    std::lock_guard<std::mutex> lock(mu_);
    denials_.push_back({std::string(sandbox), std::string(name), port, std::string(reason)});
    cv_.notify_all();
  }

  // Waits (bounded) until `n` connection records arrived; all of them.
  std::vector<ConnectionRecord> WaitForConnections(size_t n) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, std::chrono::seconds(20), [&] { return connections_.size() >= n; });
    return connections_;
  }
  std::vector<DnsRecord> dns() {
    std::lock_guard<std::mutex> lock(mu_);
    return dns_;
  }
  std::vector<Denial> denials() {
    std::lock_guard<std::mutex> lock(mu_);
    return denials_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<ConnectionRecord> connections_;
  std::vector<DnsRecord> dns_;
  std::vector<Denial> denials_;
};

// A TCP server on 127.0.0.1:0 that runs `handler` on each accepted connection (one at a time,
// on its own thread) until destroyed.
class LoopbackServer final {
 public:
  using Handler = std::function<void(base::UniqueFd)>;

  explicit LoopbackServer(Handler handler) : handler_(std::move(handler)) {
    listen_.reset(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_in sin{};
    sin.sin_family = AF_INET;
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(sin);
    if (!listen_ || ::bind(listen_.get(), reinterpret_cast<sockaddr*>(&sin), len) != 0 ||
        ::listen(listen_.get(), 64) != 0 ||
        ::getsockname(listen_.get(), reinterpret_cast<sockaddr*>(&sin), &len) != 0 ||
        ::pipe2(stop_, O_CLOEXEC) != 0) {
      std::abort();
    }
    port_ = ntohs(sin.sin_port);
    thread_ = std::thread([this] { Loop(); });
  }
  ~LoopbackServer() {
    char c = 'x';
    (void)!::write(stop_[1], &c, 1);
    thread_.join();
    ::close(stop_[0]);
    ::close(stop_[1]);
  }

  uint16_t port() const { return port_; }
  int accepted() const { return accepted_.load(); }

 private:
  void Loop() {
    for (;;) {
      pollfd fds[2] = {{listen_.get(), POLLIN, 0}, {stop_[0], POLLIN, 0}};
      if (::poll(fds, 2, -1) < 0 || fds[1].revents != 0) {
        return;
      }
      base::UniqueFd conn(::accept4(listen_.get(), nullptr, nullptr, SOCK_CLOEXEC));
      if (conn) {
        timeval tv{10, 0};
        ::setsockopt(conn.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
        ++accepted_;
        handler_(std::move(conn));
      }
    }
  }

  Handler handler_;
  base::UniqueFd listen_;
  int stop_[2] = {-1, -1};
  uint16_t port_ = 0;
  std::atomic<int> accepted_{0};
  std::thread thread_;
};

inline constexpr absl::string_view kUpstreamResponse =
    "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello";

// An HTTP server: reads one request head, records it, answers kUpstreamResponse, closes.
class FakeHttpUpstream final {
 public:
  FakeHttpUpstream()
      : server_([this](base::UniqueFd fd) {
          std::string head = ReadUntil(fd.get(), "\r\n\r\n");
          if (head.empty()) {
            return;  // connected and dropped by the proxy
          }
          {
            std::lock_guard<std::mutex> lock(mu_);
            requests_.push_back(head);
          }
          SendAllTo(fd.get(), kUpstreamResponse);
        }) {}

  uint16_t port() const { return server_.port(); }
  int accepted() const { return server_.accepted(); }
  std::vector<std::string> requests() {
    std::lock_guard<std::mutex> lock(mu_);
    return requests_;
  }

 private:
  std::mutex mu_;
  std::vector<std::string> requests_;
  LoopbackServer server_;  // last: its thread uses the members above
};

// An HTTP server that records every byte each connection sent it, to prove what did NOT reach
// the upstream. kAnswerEachHead: answers each request head (no bodies expected) with a
// kept-alive "200 ok" until EOF. kAnswerAtEof: reads until EOF, then answers kUpstreamResponse
// once and closes. A connection's bytes are recorded before its last answer is sent.
class RecordingHttpUpstream final {
 public:
  enum class Mode : uint8_t { kAnswerEachHead, kAnswerAtEof };
  static constexpr absl::string_view kKeptAliveResponse =
      "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";

  explicit RecordingHttpUpstream(Mode mode)
      : mode_(mode), server_([this](base::UniqueFd fd) { Serve(fd.get()); }) {}

  uint16_t port() const { return server_.port(); }
  int accepted() const { return server_.accepted(); }
  // What each connection sent, in order.
  std::vector<std::string> received() {
    std::lock_guard<std::mutex> lock(mu_);
    return received_;
  }

 private:
  void Serve(int fd) {
    size_t index;
    {
      std::lock_guard<std::mutex> lock(mu_);
      index = received_.size();
      received_.emplace_back();
    }
    auto record = [&](const std::string& bytes) {
      std::lock_guard<std::mutex> lock(mu_);
      received_[index] += bytes;
    };
    if (mode_ == Mode::kAnswerAtEof) {
      record(ReadToEof(fd));
      SendAllTo(fd, kUpstreamResponse);
      return;
    }
    for (;;) {
      std::string head = ReadUntil(fd, "\r\n\r\n");
      record(head);
      if (head.size() < 4 || head.substr(head.size() - 4) != "\r\n\r\n" ||
          !SendAllTo(fd, kKeptAliveResponse)) {
        return;
      }
    }
  }

  const Mode mode_;
  std::mutex mu_;
  std::vector<std::string> received_;
  LoopbackServer server_;  // last: its thread uses the members above
};

}  // namespace abox::net::testing
