// Agent: the frames the host sends (hello, open, per-stream input, signals, resize, credit,
// tunnels), protocol violations and session resets. The loop that reads them: agent.cc.
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "src/base/status_macros.h"
#include "src/base/version.h"
#include "src/guest/agent.h"
#include "src/guest/exec.h"
#include "src/guest/log.h"
#include "src/guest/user.h"
#include "src/proto/messages.h"

namespace abox::guest {
namespace {

using proto::FrameType;

constexpr size_t kMaxPing = 64;
// Frames dropped before hello before that is a violation (see Agent::stale_frames_).
constexpr uint32_t kMaxStaleFrames = 64;

std::string TypeName(FrameType type) { return proto::FrameTypeName(static_cast<uint8_t>(type)); }

proto::Hello OurHello() {
  return proto::Hello{.version = proto::kProtocolVersion,
                      .min_version = proto::kMinProtocolVersion,
                      .agent_version = kVersion,
                      .capabilities = {"exec", "pty", "signal", "timeout", "tunnel"},
                      .max_payload = proto::kMaxPayload,
                      .window = proto::kDefaultWindow};
}

}  // namespace

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
    channel_.DropPending();  // The previous session's output is not for this host.
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
  spec.oom_counter_path = options_.oom_counter_path;
  std::unique_ptr<ExecCgroup> cgroup;
  if (request->kill_leftovers && options_.pid1) {
    // Only as PID 1 in the VM: elsewhere (the tests' fake VM) this would be the host's cgroups.
    absl::StatusOr<std::unique_ptr<ExecCgroup>> made = ExecCgroup::Create();
    if (made.ok()) {
      cgroup = *std::move(made);
      spec.cgroup_procs_fd = cgroup->procs_fd();
    } else {
      Log(absl::StrCat("stream ", id, ": no cgroup (", made.status().message(),
                       "); its leftovers are killed by process group only"));
    }
  }
  absl::StatusOr<SpawnedProcess> process = Spawn(spec);
  if (!process.ok()) {
    Log(absl::StrCat("stream ", id, ": ", process.status().message()));
    reset(absl::StrCat("could not start the command: ", process.status().message()));
    return;
  }
  streams_.emplace(id, std::make_unique<ExecStream>(id, *std::move(process), *request, send_window_,
                                                    max_payload_, std::move(cgroup)));
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

}  // namespace abox::guest
