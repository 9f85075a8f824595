// Test-only: a small host that drives a real Agent over a socketpair. The agent runs its loop
// on a thread; the host side is built from the proto encoders, decoder and credit windows and
// checks the order of what the guest sends (no data after EOF, kExit last).
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <deque>
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "src/base/io.h"
#include "src/base/unique_fd.h"
#include "src/guest/agent.h"
#include "src/guest/channel.h"
#include "src/proto/frame.h"
#include "src/proto/messages.h"

namespace abox::guest::testing {

using proto::FrameType;
using namespace std::chrono_literals;

inline Agent::Options DefaultAgentOptions() {
  return Agent::Options{.pid1 = false, .signal_fd = -1, .switch_user = ::geteuid() == 0};
}

inline proto::Hello HostHello() {
  return proto::Hello{.version = proto::kProtocolVersion,
                      .min_version = proto::kMinProtocolVersion,
                      .agent_version = "fake-host",
                      .capabilities = {"exec"},
                      .max_payload = proto::kMaxPayload,
                      .window = proto::kDefaultWindow};
}

inline proto::ExecRequest Shell(std::string command) {
  proto::ExecRequest r;
  r.shell = std::move(command);
  return r;
}

inline proto::ExecRequest Argv(std::vector<std::string> argv) {
  proto::ExecRequest r;
  r.argv = std::move(argv);
  return r;
}

struct ExecResult {
  std::string out;
  std::string err;
  bool out_eof = false;
  bool err_eof = false;
  std::optional<proto::ExitInfo> exit;
  std::optional<std::string> reset;   // the guest reset the stream with this error
  std::vector<std::string> problems;  // protocol problems seen on this stream
  size_t largest_frame = 0;
};

class FakeHost {
 public:
  // `kind`: kVirtioPort makes the agent treat the end of the socket as "no host connected"
  // and wait for another; end such an agent with Terminate().
  explicit FakeHost(Agent::Options options = DefaultAgentOptions(),
                    ChannelKind kind = ChannelKind::kStream) {
    int sv[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
      ADD_FAILURE() << "socketpair failed";
      return;
    }
    host_.reset(sv[0]);
    auto channel = Channel::Adopt(base::UniqueFd(sv[1]), kind);
    EXPECT_TRUE(channel.ok()) << channel.status();
    std::promise<void> started;
    std::future<void> started_future = started.get_future();
    thread_ = std::thread(
        [this, options, channel = *std::move(channel), started = std::move(started)]() mutable {
          // SIGHUP, sent to this thread only, ends the agent (see Terminate()).
          sigset_t set;
          ::sigemptyset(&set);
          ::sigaddset(&set, SIGHUP);
          ::pthread_sigmask(SIG_BLOCK, &set, nullptr);
          base::UniqueFd signals(::signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC));
          options.signal_fd = signals.get();
          agent_ = std::make_unique<Agent>(std::move(channel), options);
          started.set_value();
          result_ = agent_->Run();
        });
    started_future.wait();
  }
  // Ends the agent loop as SIGHUP would end abox-guest.
  void Terminate() { ::pthread_kill(thread_.native_handle(), SIGHUP); }
  FakeHost(const FakeHost&) = delete;
  FakeHost& operator=(const FakeHost&) = delete;
  ~FakeHost() {
    host_.reset();
    if (thread_.joinable()) {
      Terminate();  // A virtio-port agent does not end when the host leaves.
      thread_.join();
    }
  }

  // Waits for the agent loop to end (the test closed or the agent did).
  absl::StatusOr<Agent::Outcome> Join() {
    if (thread_.joinable()) {
      thread_.join();
    }
    return result_;
  }
  void CloseHostEnd() { host_.reset(); }
  [[nodiscard]] int fd() const { return host_.get(); }
  Agent& agent() { return *agent_; }

  void SendRaw(absl::string_view bytes) {
    while (!bytes.empty()) {
      pollfd p{host_.get(), POLLOUT | POLLIN, 0};
      if (::poll(&p, 1, 20'000) <= 0) {
        ADD_FAILURE() << "host: cannot write to the agent";
        return;
      }
      if (p.revents & POLLIN) {
        Pump();  // Keep reading so the agent is never stuck writing to us.
      }
      if (p.revents & POLLOUT) {
        ssize_t n = ::send(host_.get(), bytes.data(), bytes.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
        if (n > 0) {
          bytes.remove_prefix(static_cast<size_t>(n));
        } else if (n < 0 && errno != EAGAIN && errno != EINTR) {
          return;  // The agent closed the channel; the test will notice.
        }
      }
    }
  }
  void Send(FrameType type, uint32_t stream, uint8_t flags, absl::string_view payload) {
    SendRaw(proto::EncodeFrame(type, stream, flags, payload));
  }

  // The next frame from the guest, or nullopt on timeout / end of stream.
  std::optional<proto::Frame> Next(std::chrono::milliseconds timeout = 20s) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (inbox_.empty() && !eof_) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) {
        return std::nullopt;
      }
      pollfd p{host_.get(), POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left.count())) > 0) {
        Pump();
      }
    }
    if (inbox_.empty()) {
      return std::nullopt;
    }
    proto::Frame f = std::move(inbox_.front());
    inbox_.pop_front();
    return f;
  }
  // True once the agent closed its end (after all frames were taken).
  bool AtEof(std::chrono::milliseconds timeout = 20s) {
    auto f = Next(timeout);
    if (f) {
      ADD_FAILURE() << "unexpected " << proto::FrameTypeName(static_cast<uint8_t>(f->header.type))
                    << " frame on stream " << f->header.stream;
      return false;
    }
    return eof_;
  }

  proto::Hello Handshake() {
    Send(FrameType::kHello, 0, 0, proto::EncodeHello(HostHello()));
    auto f = Next();
    if (!f || f->header.type != FrameType::kHello) {
      ADD_FAILURE() << "no hello from the agent";
      return {};
    }
    auto hello = proto::DecodeHello(f->payload);
    EXPECT_TRUE(hello.ok()) << hello.status();
    return hello.ok() ? *hello : proto::Hello{};
  }
  // Expects a kGoodbye whose reason contains `text`; returns the reason.
  std::string ExpectGoodbye(absl::string_view text = "") {
    for (;;) {
      auto f = Next();
      if (!f) {
        ADD_FAILURE() << "no goodbye";
        return "";
      }
      if (f->header.type != FrameType::kGoodbye) {
        continue;  // Output of streams that were running.
      }
      auto why = proto::DecodeError(f->payload);
      EXPECT_TRUE(why.ok());
      EXPECT_NE(why->find(std::string(text)), std::string::npos) << *why;
      return *why;
    }
  }

  uint32_t Open(const proto::ExecRequest& request) {
    uint32_t id = next_stream_;
    next_stream_ += 2;
    Send(FrameType::kOpen, id, 0, proto::EncodeExecRequest(request));
    return id;
  }

  struct Job {
    proto::ExecRequest request;
    std::string stdin_data;
    bool close_stdin = true;
  };
  // Runs the jobs concurrently to completion: streams stdin within the credit window and
  // grants output credit back as it arrives (like a host that consumes output immediately).
  std::vector<ExecResult> RunAll(const std::vector<Job>& jobs,
                                 std::chrono::milliseconds timeout = 60s) {
    struct Live {
      const Job* job;
      ExecResult result;
      proto::CreditWindow stdin_window;
      proto::CreditWindow output_window;
      size_t stdin_sent = 0;
      bool stdin_closed;
      bool finished = false;
    };
    std::map<uint32_t, Live> live;
    std::vector<uint32_t> order;
    for (const Job& job : jobs) {
      uint32_t id = Open(job.request);
      order.push_back(id);
      live.emplace(id, Live{&job, ExecResult{}, proto::CreditWindow(), proto::CreditWindow(), 0,
                            !job.request.stdin_open});
    }
    size_t finished = 0;
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (finished < live.size()) {
      for (auto& [id, s] : live) {
        while (!s.stdin_closed && s.stdin_sent < s.job->stdin_data.size() &&
               s.stdin_window.Available() > 0) {
          uint32_t n = static_cast<uint32_t>(
              std::min<size_t>({s.job->stdin_data.size() - s.stdin_sent, s.stdin_window.Available(),
                                proto::kMaxPayload}));
          s.stdin_window.Consume(n);
          Send(FrameType::kStdin, id, 0,
               absl::string_view(s.job->stdin_data).substr(s.stdin_sent, n));
          s.stdin_sent += n;
        }
        if (!s.stdin_closed && s.stdin_sent == s.job->stdin_data.size() && s.job->close_stdin) {
          Send(FrameType::kStdin, id, proto::kFlagEof, "");
          s.stdin_closed = true;
        }
      }
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      auto f = Next(std::max(left, 0ms));
      if (!f) {
        ADD_FAILURE() << "timed out waiting for " << (live.size() - finished) << " command(s)";
        break;
      }
      auto it = live.find(f->header.stream);
      if (it == live.end() || it->second.finished) {
        ADD_FAILURE() << proto::FrameTypeName(static_cast<uint8_t>(f->header.type)) << " on stream "
                      << f->header.stream << ", which is not open";
        continue;
      }
      Live& s = it->second;
      ExecResult& r = s.result;
      switch (f->header.type) {
        case FrameType::kStdout:
        case FrameType::kStderr: {
          bool is_err = f->header.type == FrameType::kStderr;
          bool& eof = is_err ? r.err_eof : r.out_eof;
          if (eof) {
            r.problems.push_back("data after EOF");
          }
          if (!s.output_window.OnReceived(static_cast<uint32_t>(f->payload.size())).ok()) {
            r.problems.push_back("output beyond the window");
          }
          r.largest_frame = std::max(r.largest_frame, f->payload.size());
          (is_err ? r.err : r.out) += f->payload;
          if (f->header.flags & proto::kFlagEof) {
            eof = true;
          }
          if (uint32_t credit = s.output_window.Release(static_cast<uint32_t>(f->payload.size()));
              credit > 0) {
            Send(FrameType::kCredit, f->header.stream, 0, proto::EncodeCredit(credit));
          }
          break;
        }
        case FrameType::kCredit: {
          auto n = proto::DecodeCredit(f->payload);
          if (!n.ok() || !s.stdin_window.Grant(*n).ok()) {
            r.problems.push_back("bad credit");
          }
          break;
        }
        case FrameType::kExit: {
          auto info = proto::DecodeExitInfo(f->payload);
          if (!info.ok()) {
            r.problems.push_back(std::string(info.status().message()));
          } else {
            r.exit = *info;
          }
          if (!r.out_eof || !r.err_eof) {
            r.problems.push_back("exit before EOF on stdout and stderr");
          }
          s.finished = true;
          ++finished;
          break;
        }
        case FrameType::kReset: {
          auto why = proto::DecodeError(f->payload);
          r.reset = why.ok() ? *why : "(unreadable)";
          s.finished = true;
          ++finished;
          break;
        }
        default:
          r.problems.push_back(absl::StrCat(
              "unexpected ", proto::FrameTypeName(static_cast<uint8_t>(f->header.type))));
      }
    }
    std::vector<ExecResult> out;
    for (uint32_t id : order) {
      out.push_back(std::move(live.at(id).result));
    }
    return out;
  }
  ExecResult Run(const proto::ExecRequest& request, std::string stdin_data = "") {
    return RunAll({Job{request, std::move(stdin_data)}})[0];
  }

 private:
  void Pump() {
    char buf[64 * 1024];
    ssize_t n = ::recv(host_.get(), buf, sizeof(buf), MSG_DONTWAIT);
    if (n == 0) {
      eof_ = true;
      return;
    }
    if (n < 0) {
      if (errno != EAGAIN && errno != EINTR) {
        eof_ = true;
      }
      return;
    }
    absl::string_view data(buf, static_cast<size_t>(n));
    while (!data.empty()) {
      data.remove_prefix(decoder_.Feed(data));
      for (;;) {
        auto f = decoder_.Next();
        if (!f.ok()) {
          ADD_FAILURE() << "the agent sent a bad frame: " << f.status();
          eof_ = true;
          return;
        }
        if (!*f) {
          break;
        }
        inbox_.push_back(**f);
      }
    }
  }

  base::UniqueFd host_;
  std::unique_ptr<Agent> agent_;
  std::thread thread_;
  absl::StatusOr<Agent::Outcome> result_ = absl::UnknownError("still running");
  proto::FrameDecoder decoder_;
  std::deque<proto::Frame> inbox_;
  bool eof_ = false;
  uint32_t next_stream_ = 1;
};

// True once `pid` no longer runs (gone, or a zombie waiting for whoever reaps it).
inline bool ProcessGone(pid_t pid, std::chrono::milliseconds timeout = 10s) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    auto stat = base::ReadFile(absl::StrCat("/proc/", pid, "/stat"), 4096);
    if (!stat.ok()) {
      return true;
    }
    size_t paren = stat->rfind(')');
    if (paren != std::string::npos && paren + 2 < stat->size() && (*stat)[paren + 2] == 'Z') {
      return true;
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      return false;
    }
    std::this_thread::sleep_for(10ms);
  }
}

}  // namespace abox::guest::testing
