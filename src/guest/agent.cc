#include "src/guest/agent.h"

#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "absl/strings/str_cat.h"
#include "src/base/status_macros.h"
#include "src/guest/exec.h"
#include "src/guest/log.h"
#include "src/guest/user.h"
#include "src/proto/messages.h"

namespace abox::guest {
namespace {

using proto::FrameType;

constexpr size_t kReadChunk = size_t{64} << 10;
// Reads from the channel per loop iteration, so a flooding host cannot starve the commands.
constexpr int kReadsPerWake = 4;
constexpr std::chrono::milliseconds kRetryMin{10};
constexpr std::chrono::milliseconds kRetryMax{50};

// Non-blocking reap of the process behind `pidfd`: true once it is reaped (now or earlier).
bool ReapedOrGone(int pidfd) {
  siginfo_t info{};
  int rc;
  do {
    rc = ::waitid(P_PIDFD, static_cast<id_t>(pidfd), &info, WEXITED | WNOHANG);
  } while (rc != 0 && errno == EINTR);
  return rc != 0 || info.si_pid != 0;
}

// What a poll entry belongs to.
struct Target {
  enum Kind { kChannel, kSignals, kStream, kOrphan, kEgress } kind;
  uint32_t stream = 0;
  int slot = 0;
  pid_t pid = 0;
};

}  // namespace

Agent::Agent(Channel channel, Options options)
    : channel_(std::move(channel)),
      options_(options),
      connected_(channel_.kind() == ChannelKind::kStream),
      retry_at_(Clock::now()),
      retry_backoff_(kRetryMin),
      read_buf_(kReadChunk, '\0'),
      scratch_(proto::kMaxPayload, '\0') {}

Agent::~Agent() {
  ResetSession();
  ReapOrphansBlocking();
}

void Agent::Send(FrameType type, uint32_t stream, uint8_t flags, absl::string_view payload) {
  channel_.Send(type, stream, flags, payload);
  size_t pending = channel_.pending();
  if (pending > peak_pending_.load(std::memory_order_relaxed)) {
    peak_pending_.store(pending, std::memory_order_relaxed);
  }
}

absl::StatusOr<Agent::Outcome> Agent::Run() {
  // Writes to a closed pipe or socket must fail with EPIPE, not kill the agent.
  ::signal(SIGPIPE, SIG_IGN);
  std::vector<pollfd> fds;
  std::vector<Target> targets;
  for (;;) {
    Clock::time_point now = Clock::now();
    for (auto& [id, stream] : streams_) {
      if (auto deadline = stream->NextDeadline(); deadline && *deadline <= now) {
        stream->OnTimer(now, *this);
      }
    }
    std::erase_if(streams_, [](const auto& entry) { return entry.second->done(); });
    if (options_.egress != nullptr) {
      if (auto deadline = options_.egress->NextDeadline(); deadline && *deadline <= now) {
        options_.egress->OnTimer(now, *this);
      }
    }
    if (connected_) {
      ProcessInput();  // What an earlier read left while the queue was full.
    }
    if (connected_ && channel_.pending() > 0) {
      if (absl::Status s = channel_.Flush(); !s.ok()) {
        HostGone(s.message());
      }
    }
    if (state_ == State::kClosing && channel_.kind() == ChannelKind::kStream &&
        (channel_.pending() == 0 || now >= linger_until_)) {
      outcome_ = Outcome::kViolation;
    }
    if (outcome_) {
      if (*outcome_ != Outcome::kShutdown) {
        ResetSession();
        ReapOrphansBlocking();
      }
      channel_.Close();
      return *outcome_;
    }
    if (!connected_ && now >= retry_at_) {
      ReadChannel();  // A virtio port: is a host there now?
      continue;
    }

    fds.clear();
    targets.clear();
    if (options_.signal_fd >= 0) {
      fds.push_back({options_.signal_fd, POLLIN, 0});
      targets.push_back({Target::kSignals});
    }
    bool may_send = state_ == State::kOpen && channel_.pending() < kMaxQueuedOutput;
    for (auto& [id, stream] : streams_) {
      for (int slot = 0; slot < ExecStream::kSlots; ++slot) {
        pollfd p = stream->PollFor(slot, may_send);
        if (p.fd >= 0) {
          fds.push_back(p);
          targets.push_back({Target::kStream, id, slot});
        }
      }
    }
    for (const Orphan& orphan : orphans_) {
      fds.push_back({orphan.pidfd.get(), POLLIN, 0});
      targets.push_back({Target::kOrphan, 0, 0, orphan.pid});
    }
    size_t egress_begin = fds.size();
    if (options_.egress != nullptr) {
      options_.egress->AppendPollFds(may_send, &fds);
      targets.resize(fds.size(), Target{Target::kEgress});
    }
    size_t egress_end = fds.size();
    if (connected_) {
      short events = channel_.pending() > 0 ? POLLOUT : 0;
      if (input_off_ == input_len_ && CanTakeInput()) {
        events |= POLLIN;
      }
      fds.push_back({channel_.fd(), events, 0});
      targets.push_back({Target::kChannel});
    }

    int ready = ::poll(fds.data(), fds.size(), PollTimeoutMs(now));
    if (ready < 0) {
      if (errno == EINTR) {
        continue;
      }
      return base::ErrnoError("poll");
    }
    now = Clock::now();
    // The channel goes last: frames from the host may end streams polled above.
    for (size_t i = 0; i < fds.size(); ++i) {
      short revents = fds[i].revents;
      if (revents == 0) {
        continue;
      }
      const Target& t = targets[i];
      switch (t.kind) {
        case Target::kSignals:
          HandleSignals();
          break;
        case Target::kStream:
          if ((t.slot == ExecStream::kStdoutSlot || t.slot == ExecStream::kStderrSlot) &&
              channel_.pending() >= kMaxQueuedOutput) {
            break;  // Filled up by other streams in this round; the data waits in the pipe.
          }
          if (auto it = streams_.find(t.stream); it != streams_.end()) {
            it->second->OnPollReady(t.slot, revents, scratch_.data(), *this, now);
          }
          break;
        case Target::kOrphan:
          for (Orphan& orphan : orphans_) {
            if (orphan.pid == t.pid && orphan.pidfd && ReapedOrGone(orphan.pidfd.get())) {
              orphan.pidfd.reset();
            }
          }
          break;
        case Target::kChannel:
        case Target::kEgress:
          break;
      }
    }
    if (options_.egress != nullptr) {
      options_.egress->OnPolled(fds.data() + egress_begin, egress_end - egress_begin,
                                scratch_.data(), *this,
                                [&] { return channel_.pending() < kMaxQueuedOutput; });
    }
    std::erase_if(orphans_, [](const Orphan& o) { return !o.pidfd; });
    if (!targets.empty() && targets.back().kind == Target::kChannel) {
      short revents = fds.back().revents;
      bool hangup = (revents & (POLLHUP | POLLERR)) != 0;
      if (hangup && (channel_.kind() == ChannelKind::kVirtioPort || input_off_ != input_len_)) {
        // A virtio port reports POLLHUP exactly while no host is connected. (Reading to find
        // out is not possible while earlier input waits, and would spin.)
        HostGone("the host disconnected");
      } else if (hangup || (revents & POLLIN) != 0) {
        ReadChannel();
      }
    }
  }
}

int Agent::PollTimeoutMs(Clock::time_point now) const {
  std::optional<Clock::time_point> next;
  auto consider = [&](Clock::time_point t) { next = next ? std::min(*next, t) : t; };
  for (const auto& [id, stream] : streams_) {
    if (auto deadline = stream->NextDeadline()) {
      consider(*deadline);
    }
  }
  if (options_.egress != nullptr) {
    if (auto deadline = options_.egress->NextDeadline()) {
      consider(*deadline);
    }
  }
  if (!connected_) {
    consider(retry_at_);
  }
  if (state_ == State::kClosing && channel_.kind() == ChannelKind::kStream) {
    consider(linger_until_);
  }
  if (!next) {
    return -1;
  }
  if (*next <= now) {
    return 0;
  }
  // Round up so that we do not wake just before the deadline and spin.
  auto ms = std::chrono::ceil<std::chrono::milliseconds>(*next - now).count();
  return static_cast<int>(std::min<int64_t>(ms, 60'000));
}

bool Agent::CanTakeInput() const {
  // A host that does not read what we send gets no more of our attention either: its frames
  // would only queue more replies (pongs, credits, resets).
  return channel_.pending_control() < kMaxQueuedControl &&
         channel_.pending() < kMaxQueuedOutput + kMaxQueuedControl;
}

void Agent::ReadChannel() {
  for (int i = 0; i < kReadsPerWake && !outcome_ && input_off_ == input_len_; ++i) {
    absl::StatusOr<size_t> n = channel_.Read(read_buf_.data(), read_buf_.size());
    if (!n.ok()) {
      if (absl::IsUnavailable(n.status())) {
        if (!connected_) {
          Log("host connected");
        }
        connected_ = true;  // A virtio port with a host attached and nothing to read.
        retry_backoff_ = kRetryMin;
        return;
      }
      HostGone(n.status().message());
      return;
    }
    if (*n == 0) {
      HostGone("the host closed the channel");
      return;
    }
    if (!connected_) {
      Log("host connected");
    }
    connected_ = true;
    retry_backoff_ = kRetryMin;
    input_off_ = 0;
    input_len_ = *n;
    ProcessInput();
  }
}

void Agent::ProcessInput() {
  for (;;) {
    if (state_ == State::kClosing || outcome_) {
      input_off_ = input_len_ = 0;  // After a goodbye, everything until the disconnect is dropped.
      return;
    }
    // Frame by frame, so that the replies a read's worth of frames asks for cannot overshoot
    // the queue bound by more than one reply.
    if (!CanTakeInput()) {
      return;
    }
    absl::StatusOr<std::optional<proto::Frame>> frame = decoder_.Next();
    if (!frame.ok()) {
      Violation(frame.status().message());
      return;
    }
    if (frame->has_value()) {
      HandleFrame(**frame);
      continue;
    }
    if (input_off_ == input_len_) {
      return;
    }
    input_off_ +=
        decoder_.Feed(absl::string_view(read_buf_.data() + input_off_, input_len_ - input_off_));
  }
}

void Agent::HostGone(absl::string_view why) {
  bool was_closing = state_ == State::kClosing;
  if (state_ != State::kAwaitHello || decoder_.buffered() > 0) {
    Log(absl::StrCat("host disconnected: ", why));
  }
  ResetSession();
  channel_.DropPending();  // Nothing queued for this host may reach the next one.
  input_off_ = input_len_ = 0;
  state_ = State::kAwaitHello;
  if (channel_.kind() == ChannelKind::kStream) {
    connected_ = false;
    outcome_ = was_closing ? Outcome::kViolation : Outcome::kPeerClosed;
    return;
  }
  // A virtio port: a host may connect later. Poll would report POLLHUP without pause, so look
  // again after a short, growing delay.
  connected_ = false;
  retry_at_ = Clock::now() + retry_backoff_;
  retry_backoff_ = std::min(retry_backoff_ * 2, kRetryMax);
}

void Agent::HandleSignals() {
  signalfd_siginfo info[16];
  for (;;) {
    ssize_t n = ::read(options_.signal_fd, info, sizeof(info));
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n <= 0) {
      break;
    }
    for (size_t i = 0; i < static_cast<size_t>(n) / sizeof(info[0]); ++i) {
      int sig = static_cast<int>(info[i].ssi_signo);
      if (sig == SIGCHLD) {
        continue;
      }
      if (options_.pid1) {
        // Only the host may stop the VM (kShutdown).
        Log(absl::StrCat("ignoring signal ", sig, " from pid ", info[i].ssi_pid));
      } else if (sig == SIGTERM || sig == SIGINT || sig == SIGHUP) {
        Log(absl::StrCat("terminating on signal ", sig));
        outcome_ = Outcome::kTerminated;
      }
    }
  }
  if (options_.pid1) {
    for (;;) {
      int wait_status = 0;
      pid_t pid = ::waitpid(-1, &wait_status, WNOHANG);
      if (pid < 0 && errno == EINTR) {
        continue;
      }
      if (pid <= 0) {
        break;
      }
      ChildExited(pid, FromWaitStatus(wait_status));
    }
  }
}

void Agent::ChildExited(pid_t pid, const base::ExitStatus& status) {
  Clock::time_point now = Clock::now();
  for (auto& [id, stream] : streams_) {
    if (stream->pid() == pid) {
      stream->OnReaped(status, now, *this);
      return;
    }
  }
  for (Orphan& orphan : orphans_) {
    if (orphan.pid == pid) {
      orphan.pidfd.reset();
    }
  }
  // Anything else is an orphan re-parented to PID 1: reaped silently.
}

void Agent::ReapOrphansBlocking() {
  for (Orphan& orphan : orphans_) {
    if (!orphan.pidfd) {
      continue;
    }
    siginfo_t info{};
    while (::waitid(P_PIDFD, static_cast<id_t>(orphan.pidfd.get()), &info, WEXITED) != 0 &&
           errno == EINTR) {
    }
  }
  orphans_.clear();
}

}  // namespace abox::guest
