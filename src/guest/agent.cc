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
#include "src/base/version.h"
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
constexpr size_t kMaxPing = 64;
// Frames dropped before hello before that is a violation (see Agent::stale_frames_).
constexpr uint32_t kMaxStaleFrames = 64;
constexpr std::chrono::milliseconds kRetryMin{10};
constexpr std::chrono::milliseconds kRetryMax{50};

std::string TypeName(FrameType type) { return proto::FrameTypeName(static_cast<uint8_t>(type)); }

proto::Hello OurHello() {
  return proto::Hello{.version = proto::kProtocolVersion,
                      .min_version = proto::kMinProtocolVersion,
                      .agent_version = kVersion,
                      .capabilities = {"exec", "pty", "signal", "timeout", "tunnel"},
                      .max_payload = proto::kMaxPayload,
                      .window = proto::kDefaultWindow};
}

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

void Agent::HandleFrame(const proto::Frame& frame) {
  FrameType type = frame.header.type;
  if (state_ == State::kAwaitHello && type != FrameType::kHello) {
    // A frame of the previous host's session (see stale_frames_), or a host that never says
    // hello: the first few are dropped, then it is a violation.
    if (++stale_frames_ > kMaxStaleFrames) {
      Violation(absl::StrCat("expected hello, got ", TypeName(type), " (after ", kMaxStaleFrames,
                             " frames without hello)"));
    } else if (stale_frames_ == 1) {
      Log(absl::StrCat("dropping frames before hello (left from a previous host session?): ",
                       TypeName(type)));
    }
    return;
  }
  switch (type) {
    case FrameType::kHello:
      HandleHello(frame);
      return;
    case FrameType::kPing:
      if (frame.payload.size() > kMaxPing) {
        Violation(absl::StrCat("ping payload of ", frame.payload.size(), " bytes (max 64)"));
        return;
      }
      Send(FrameType::kPong, proto::kControlStream, 0, frame.payload);
      return;
    case FrameType::kPong:
      return;  // We send no pings; a stray pong is harmless.
    case FrameType::kShutdown:
      Log("shutdown requested by the host");
      outcome_ = Outcome::kShutdown;
      return;
    case FrameType::kGoodbye: {
      absl::StatusOr<std::string> why = proto::DecodeError(frame.payload);
      Log(absl::StrCat("host said goodbye: ", why.ok() ? *why : "(unreadable reason)"));
      ResetSession();
      if (channel_.kind() == ChannelKind::kStream) {
        outcome_ = Outcome::kPeerClosed;
      } else {
        state_ = State::kClosing;  // The host disconnects next; discard until then.
      }
      return;
    }
    case FrameType::kOpen:
      HandleOpen(frame);
      return;
    case FrameType::kTunnelData:
    case FrameType::kCredit:
    case FrameType::kReset:
      if (frame.header.stream % 2 == 0) {
        if (absl::Status s = HandleTunnelFrame(frame); !s.ok()) {
          Violation(s.message());
        }
        return;
      }
      if (type == FrameType::kTunnelData) {
        Violation(absl::StrCat("tunnel_data on exec stream ", frame.header.stream));
        return;
      }
      [[fallthrough]];
    case FrameType::kStdin:
    case FrameType::kSignal:
    case FrameType::kResize:
      if (absl::Status s = HandleStreamFrame(frame); !s.ok()) {
        Violation(s.message());
      }
      return;
    case FrameType::kStdout:
    case FrameType::kStderr:
    case FrameType::kExit:
    case FrameType::kTunnelOpen:
      Violation(absl::StrCat("the host sent ", TypeName(type), ", which only the guest sends"));
      return;
  }
  Violation(absl::StrCat("unexpected frame type ", TypeName(type)));
}

void Agent::HandleHello(const proto::Frame& frame) {
  if (state_ == State::kOpen) {
    // A host that lost its connection and reconnected before we saw the disconnect.
    Log("hello in an established session: the host restarted it");
    ResetSession();
    state_ = State::kAwaitHello;
  }
  absl::StatusOr<proto::Hello> theirs = proto::DecodeHello(frame.payload);
  if (!theirs.ok()) {
    Violation(theirs.status().message());
    return;
  }
  proto::Hello ours = OurHello();
  absl::StatusOr<uint32_t> version = proto::NegotiateVersion(ours, *theirs);
  if (!version.ok()) {
    Violation(version.status().message());
    return;
  }
  if (theirs->window == 0 || theirs->max_payload == 0) {
    Violation("hello: window and max_payload must be positive");
    return;
  }
  send_window_ = theirs->window;
  max_payload_ = std::min(theirs->max_payload, proto::kMaxPayload);
  Send(FrameType::kHello, proto::kControlStream, 0, proto::EncodeHello(ours));
  state_ = State::kOpen;
  if (options_.egress != nullptr) {
    options_.egress->Start(send_window_, max_payload_);
  }
  Log(absl::StrCat("session started (protocol ", *version, ", host ", theirs->agent_version, ")"));
}

void Agent::HandleOpen(const proto::Frame& frame) {
  uint32_t id = frame.header.stream;
  if (id % 2 == 0) {
    Violation(absl::StrCat("open on even stream ", id, " (the host opens odd streams)"));
    return;
  }
  if (id <= last_opened_) {
    Violation(absl::StrCat("open on stream ", id, ", which was already used (the last was ",
                           last_opened_, "; stream ids must increase)"));
    return;
  }
  last_opened_ = id;
  auto reset = [&](absl::string_view why) {
    Send(FrameType::kReset, id, 0, proto::EncodeError(why));
  };
  if (streams_.size() >= proto::kMaxStreams) {
    reset(absl::StrCat("too many open streams (", proto::kMaxStreams, ")"));
    return;
  }
  absl::StatusOr<proto::ExecRequest> request = proto::DecodeExecRequest(frame.payload);
  if (!request.ok()) {
    reset(request.status().message());
    return;
  }
  Identity identity = options_.switch_user ? LookUpIdentity(request->user) : CurrentIdentity();
  SpawnSpec spec = BuildSpawnSpec(*request, identity, options_.switch_user);
  absl::StatusOr<SpawnedProcess> process = Spawn(spec);
  if (!process.ok()) {
    Log(absl::StrCat("stream ", id, ": ", process.status().message()));
    reset(absl::StrCat("could not start the command: ", process.status().message()));
    return;
  }
  streams_.emplace(id, std::make_unique<ExecStream>(id, *std::move(process), *request, send_window_,
                                                    max_payload_));
}

absl::Status Agent::HandleTunnelFrame(const proto::Frame& frame) {
  if (options_.egress == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(TypeName(frame.header.type),
                                                   " on tunnel stream ", frame.header.stream,
                                                   ", but this agent opens no tunnels"));
  }
  return options_.egress->HandleFrame(frame, *this);
}

absl::Status Agent::HandleStreamFrame(const proto::Frame& frame) {
  uint32_t id = frame.header.stream;
  FrameType type = frame.header.type;
  // Validate the payload even when the stream has finished.
  std::optional<uint32_t> credit;
  std::optional<int> signal;
  std::optional<proto::PtySize> size;
  switch (type) {
    case FrameType::kCredit: {
      ABOX_ASSIGN_OR_RETURN(credit, proto::DecodeCredit(frame.payload));
      break;
    }
    case FrameType::kSignal: {
      ABOX_ASSIGN_OR_RETURN(signal, proto::DecodeSignal(frame.payload));
      break;
    }
    case FrameType::kResize: {
      ABOX_ASSIGN_OR_RETURN(size, proto::DecodeResize(frame.payload));
      break;
    }
    case FrameType::kReset: {
      ABOX_RETURN_IF_ERROR(proto::DecodeError(frame.payload).status());
      break;
    }
    default:
      break;
  }
  auto it = streams_.find(id);
  if (it == streams_.end()) {
    if (id % 2 == 1 && id <= last_opened_) {
      return absl::OkStatus();  // The stream has ended; the frame crossed our kExit.
    }
    return absl::InvalidArgumentError(
        absl::StrCat(TypeName(type), " on stream ", id, ", which was never opened"));
  }
  ExecStream& stream = *it->second;
  switch (type) {
    case FrameType::kStdin:
      return stream.OnStdin(frame.payload, (frame.header.flags & proto::kFlagEof) != 0, *this);
    case FrameType::kCredit:
      return stream.OnCredit(*credit);
    case FrameType::kSignal:
      stream.OnSignal(*signal);
      return absl::OkStatus();
    case FrameType::kResize:
      stream.OnResize(*size);
      return absl::OkStatus();
    case FrameType::kReset:
      AbortStream(stream);
      streams_.erase(it);
      return absl::OkStatus();
    default:
      return absl::InternalError("not a stream frame");
  }
}

void Agent::Violation(absl::string_view why) {
  Log(absl::StrCat("protocol violation: ", why));
  Send(FrameType::kGoodbye, proto::kControlStream, 0, proto::EncodeError(why));
  ResetSession();
  state_ = State::kClosing;
  linger_until_ = Clock::now() + kGoodbyeLinger;
}

void Agent::AbortStream(ExecStream& stream) {
  base::UniqueFd pidfd = stream.Abort();
  if (pidfd) {
    orphans_.push_back({stream.pid(), std::move(pidfd)});
  }
}

void Agent::ResetSession() {
  for (auto& [id, stream] : streams_) {
    AbortStream(*stream);
  }
  streams_.clear();
  if (options_.egress != nullptr) {
    options_.egress->Stop();  // Programs see their connections reset.
  }
  decoder_ = proto::FrameDecoder();
  last_opened_ = 0;
  stale_frames_ = 0;
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
