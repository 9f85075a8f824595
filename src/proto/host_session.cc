#include "src/proto/host_session.h"

#include "absl/strings/str_cat.h"
#include "src/base/status_macros.h"
#include "src/base/version.h"

namespace abox::proto {

HostSession::HostSession(Options options) : options_(options) {}

void HostSession::Queue(FrameType type, uint32_t stream, uint8_t flags, absl::string_view payload) {
  AppendFrame(type, stream, flags, payload, &output_);
}

void HostSession::Start(absl::Time now) {
  if (started_) {
    return;
  }
  started_ = true;
  last_heard_ = now;
  last_ping_sent_ = now;
  Hello ours{.version = kProtocolVersion,
             .min_version = kMinProtocolVersion,
             .agent_version = std::string("abox-host/") + kVersion,
             .capabilities = {"exec", "pty", "signal", "timeout", "tunnel"},
             .max_payload = kMaxPayload,
             .window = kDefaultWindow};
  Queue(FrameType::kHello, kControlStream, 0, EncodeHello(ours));
}

std::string HostSession::TakeOutput() { return std::exchange(output_, std::string()); }

absl::Status HostSession::OnBytes(absl::string_view data, absl::Time now) {
  if (failed_) {
    return absl::FailedPreconditionError("connection already failed");
  }
  if (!data.empty()) {
    last_heard_ = now;
  }
  while (!data.empty()) {
    size_t used = decoder_.Feed(data);
    data.remove_prefix(used);
    for (;;) {
      ABOX_ASSIGN_OR_RETURN(std::optional<Frame> frame, decoder_.Next());
      if (!frame) {
        break;
      }
      ABOX_RETURN_IF_ERROR(HandleFrame(*frame, now));
    }
  }
  if (output_.size() > kMaxPendingOutput) {
    return absl::ResourceExhaustedError(
        absl::StrCat("guest is not reading its channel (", output_.size(), " bytes unsent)"));
  }
  return absl::OkStatus();
}

absl::Status HostSession::HandleFrame(const Frame& frame, absl::Time now) {
  if (frame.header.stream == kControlStream) {
    return HandleControl(frame, now);
  }
  if (!ready()) {
    return absl::FailedPreconditionError(
        absl::StrCat("guest sent ", FrameTypeName(static_cast<uint8_t>(frame.header.type)),
                     " before the handshake"));
  }
  if (frame.header.type == FrameType::kTunnelOpen) {
    return OpenTunnel(frame);
  }
  if (frame.header.stream % 2 == 0) {
    return HandleTunnel(frame);
  }
  return HandleStream(frame);
}

absl::Status HostSession::HandleControl(const Frame& frame, absl::Time now) {
  switch (frame.header.type) {
    case FrameType::kHello: {
      if (ready()) {
        return absl::FailedPreconditionError("guest sent a second hello");
      }
      ABOX_ASSIGN_OR_RETURN(Hello theirs, DecodeHello(frame.payload));
      Hello ours{.version = kProtocolVersion, .min_version = kMinProtocolVersion};
      ABOX_ASSIGN_OR_RETURN(version_, NegotiateVersion(ours, theirs));
      if (theirs.window < kDefaultWindow || theirs.max_payload < kMaxPayload) {
        return absl::FailedPreconditionError(absl::StrCat(
            "guest offers window ", theirs.window, " and max payload ", theirs.max_payload,
            "; this host needs at least ", kDefaultWindow, " and ", kMaxPayload));
      }
      peer_ = std::move(theirs);
      return absl::OkStatus();
    }
    case FrameType::kPing:
      if (frame.payload.size() > 64) {
        return absl::InvalidArgumentError("ping payload over 64 bytes");
      }
      Queue(FrameType::kPong, kControlStream, 0, frame.payload);
      return absl::OkStatus();
    case FrameType::kPong:
      // Any pong proves liveness; its payload is only compared, never interpreted.
      if (frame.payload.size() > 64) {
        return absl::InvalidArgumentError("pong payload over 64 bytes");
      }
      ping_outstanding_since_ = absl::InfiniteFuture();
      last_pong_ = frame.payload;
      (void)now;
      return absl::OkStatus();
    case FrameType::kGoodbye: {
      auto text = DecodeError(frame.payload);
      return absl::AbortedError(
          absl::StrCat("guest closed the session: ", text.ok() ? *text : "(unreadable reason)"));
    }
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("guest sent ", FrameTypeName(static_cast<uint8_t>(frame.header.type)),
                       " on the control stream"));
  }
}

absl::Status HostSession::HandleStream(const Frame& frame) {
  uint32_t id = frame.header.stream;
  auto it = streams_.find(id);
  if (it == streams_.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat("guest sent ", FrameTypeName(static_cast<uint8_t>(frame.header.type)),
                     " on unknown stream ", id));
  }
  Stream& s = it->second;
  switch (frame.header.type) {
    case FrameType::kStdout:
    case FrameType::kStderr: {
      bool is_err = frame.header.type == FrameType::kStderr;
      bool& eof = is_err ? s.stderr_eof : s.stdout_eof;
      if (eof) {
        return absl::InvalidArgumentError(
            absl::StrCat("guest sent ", is_err ? "stderr" : "stdout", " after EOF on stream ", id));
      }
      ABOX_RETURN_IF_ERROR(
          base::Annotate(s.recv.OnReceived(static_cast<uint32_t>(frame.payload.size())),
                         absl::StrCat("stream ", id)));
      if (!frame.payload.empty()) {
        if (is_err) {
          s.sink->OnStderr(frame.payload);
        } else {
          s.sink->OnStdout(frame.payload);
        }
      }
      if (frame.header.flags & kFlagEof) {
        eof = true;
        s.sink->OnOutputEof(is_err);
      }
      if (s.detached) {
        ConsumedOutput(id, frame.payload.size());
      }
      return absl::OkStatus();
    }
    case FrameType::kCredit: {
      ABOX_ASSIGN_OR_RETURN(uint32_t n, DecodeCredit(frame.payload));
      return base::Annotate(s.send.Grant(n), absl::StrCat("stream ", id));
    }
    case FrameType::kExit: {
      ABOX_ASSIGN_OR_RETURN(ExitInfo info, DecodeExitInfo(frame.payload));
      ExecSink* sink = s.sink;
      streams_.erase(it);
      sink->OnExit(info);
      return absl::OkStatus();
    }
    case FrameType::kReset: {
      auto text = DecodeError(frame.payload);
      ExecSink* sink = s.sink;
      streams_.erase(it);
      sink->OnReset(text.ok() ? *text : "guest reset the stream (unreadable reason)");
      return absl::OkStatus();
    }
    case FrameType::kTunnelData:
      return absl::InvalidArgumentError(absl::StrCat("guest sent tunnel_data on exec stream ", id));
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("guest sent ", FrameTypeName(static_cast<uint8_t>(frame.header.type)),
                       ", which only the host may send, on stream ", id));
  }
}

absl::Status HostSession::OpenTunnel(const Frame& frame) {
  uint32_t id = frame.header.stream;
  if (id % 2 != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("guest opened a tunnel on odd stream ", id, " (odd ids are the host's)"));
  }
  if (id <= last_tunnel_) {
    return absl::InvalidArgumentError(absl::StrCat("guest opened a tunnel on stream ", id,
                                                   ", which was already used (the last was ",
                                                   last_tunnel_, "; tunnel ids must increase)"));
  }
  ABOX_ASSIGN_OR_RETURN(TunnelRequest request, DecodeTunnelRequest(frame.payload));
  last_tunnel_ = id;
  // Refusals below are answers, not violations: the guest lives on, its tunnel does not.
  if (tunnels_.size() >= kMaxTunnels) {
    Queue(FrameType::kReset, id, 0, EncodeError("too many tunnels"));
    return absl::OkStatus();
  }
  absl::StatusOr<TunnelSink*> sink =
      acceptor_ != nullptr ? acceptor_->OnTunnelOpen(id, request)
                           : absl::StatusOr<TunnelSink*>(
                                 absl::FailedPreconditionError("egress is off for this sandbox"));
  if (!sink.ok() || *sink == nullptr) {
    Queue(FrameType::kReset, id, 0,
          EncodeError(sink.ok() ? "tunnel refused" : sink.status().message()));
    return absl::OkStatus();
  }
  tunnels_[id].sink = *sink;
  return absl::OkStatus();
}

absl::Status HostSession::HandleTunnel(const Frame& frame) {
  uint32_t id = frame.header.stream;
  FrameType type = frame.header.type;
  // Validate the payload even when the tunnel has ended.
  std::optional<uint32_t> credit;
  std::optional<std::string> error;
  switch (type) {
    case FrameType::kTunnelData:
      break;
    case FrameType::kCredit: {
      ABOX_ASSIGN_OR_RETURN(credit, DecodeCredit(frame.payload));
      break;
    }
    case FrameType::kReset: {
      auto text = DecodeError(frame.payload);
      error = text.ok() ? *text : "guest reset the tunnel (unreadable reason)";
      break;
    }
    default:
      return absl::InvalidArgumentError(absl::StrCat(
          "guest sent ", FrameTypeName(static_cast<uint8_t>(type)), " on tunnel stream ", id));
  }
  auto it = tunnels_.find(id);
  if (it == tunnels_.end()) {
    if (id <= last_tunnel_) {
      return absl::OkStatus();  // The tunnel has ended; the frame crossed our reset or EOF.
    }
    return absl::InvalidArgumentError(
        absl::StrCat("guest sent ", FrameTypeName(static_cast<uint8_t>(type)), " on tunnel stream ",
                     id, ", which was never opened"));
  }
  Tunnel& t = it->second;
  switch (type) {
    case FrameType::kTunnelData: {
      if (t.guest_eof) {
        return absl::InvalidArgumentError(
            absl::StrCat("guest sent tunnel_data after EOF on stream ", id));
      }
      ABOX_RETURN_IF_ERROR(
          base::Annotate(t.recv.OnReceived(static_cast<uint32_t>(frame.payload.size())),
                         absl::StrCat("tunnel ", id)));
      if (!frame.payload.empty()) {
        t.sink->OnData(frame.payload);
      }
      if (frame.header.flags & kFlagEof) {
        t.guest_eof = true;
        TunnelSink* sink = t.sink;
        if (t.host_eof) {
          tunnels_.erase(it);  // Both halves closed: the tunnel is over.
        }
        sink->OnEof();
      }
      return absl::OkStatus();
    }
    case FrameType::kCredit:
      return base::Annotate(t.send.Grant(*credit), absl::StrCat("tunnel ", id));
    case FrameType::kReset: {
      TunnelSink* sink = t.sink;
      tunnels_.erase(it);
      sink->OnReset(*error);
      return absl::OkStatus();
    }
    default:
      return absl::InternalError("not a tunnel frame");
  }
}

size_t HostSession::TunnelCredit(uint32_t stream) const {
  auto it = tunnels_.find(stream);
  if (it == tunnels_.end() || it->second.host_eof || failed_) {
    return 0;
  }
  return it->second.send.Available();
}

size_t HostSession::SendTunnel(uint32_t stream, absl::string_view data) {
  auto it = tunnels_.find(stream);
  if (it == tunnels_.end() || it->second.host_eof || failed_) {
    return 0;
  }
  return QueueData(FrameType::kTunnelData, stream, it->second.send, data);
}

void HostSession::CloseTunnel(uint32_t stream) {
  auto it = tunnels_.find(stream);
  if (it == tunnels_.end() || it->second.host_eof || failed_) {
    return;
  }
  it->second.host_eof = true;
  Queue(FrameType::kTunnelData, stream, kFlagEof, "");
  if (it->second.guest_eof) {
    tunnels_.erase(it);
  }
}

void HostSession::ResetTunnel(uint32_t stream, absl::string_view reason) {
  auto it = tunnels_.find(stream);
  if (it == tunnels_.end()) {
    return;
  }
  tunnels_.erase(it);
  if (!failed_) {
    Queue(FrameType::kReset, stream, 0, EncodeError(reason));
  }
}

void HostSession::ConsumedTunnel(uint32_t stream, size_t n) {
  auto it = tunnels_.find(stream);
  if (it == tunnels_.end() || failed_) {
    return;
  }
  uint32_t grant = it->second.recv.Release(static_cast<uint32_t>(n));
  if (grant > 0) {
    Queue(FrameType::kCredit, stream, 0, EncodeCredit(grant));
  }
}

absl::Status HostSession::Tick(absl::Time now) {
  if (failed_) {
    return absl::FailedPreconditionError("connection already failed");
  }
  if (ping_outstanding_since_ != absl::InfiniteFuture() &&
      now - std::max(ping_outstanding_since_, last_heard_) > options_.ping_timeout) {
    return absl::DeadlineExceededError(absl::StrCat("guest did not answer heartbeats for ",
                                                    absl::FormatDuration(now - last_heard_)));
  }
  if (!ready() && started_ && now - last_heard_ > options_.ping_timeout &&
      ping_outstanding_since_ == absl::InfiniteFuture()) {
    // The handshake itself is subject to the same deadline.
    ping_outstanding_since_ = last_heard_;
  }
  if (ready() && now - last_ping_sent_ >= options_.ping_interval) {
    last_ping_sent_ = now;
    if (ping_outstanding_since_ == absl::InfiniteFuture()) {
      ping_outstanding_since_ = now;
    }
    std::string payload = absl::StrCat(++ping_seq_);
    Queue(FrameType::kPing, kControlStream, 0, payload);
  }
  return absl::OkStatus();
}

absl::Time HostSession::NextTick() const {
  absl::Time next = last_ping_sent_ + options_.ping_interval;
  if (ping_outstanding_since_ != absl::InfiniteFuture()) {
    next = std::min(next, std::max(ping_outstanding_since_, last_heard_) + options_.ping_timeout +
                              absl::Milliseconds(1));
  }
  return next;
}

absl::StatusOr<uint32_t> HostSession::OpenExec(const ExecRequest& request, ExecSink* sink) {
  if (failed_) {
    return absl::UnavailableError("the guest connection has failed");
  }
  if (!ready()) {
    return absl::FailedPreconditionError("the guest agent has not completed the handshake");
  }
  if (streams_.size() >= kMaxStreams) {
    return absl::ResourceExhaustedError(
        absl::StrCat("too many commands running at once (", kMaxStreams, ")"));
  }
  std::string payload = EncodeExecRequest(request);
  if (payload.size() > kMaxPayload) {
    return absl::InvalidArgumentError(absl::StrCat("command line and environment take ",
                                                   payload.size(), " bytes; the limit is ",
                                                   kMaxPayload));
  }
  uint32_t id = next_stream_;
  next_stream_ += 2;
  Stream& s = streams_[id];
  s.sink = sink;
  s.stdin_closed = !request.stdin_open;
  Queue(FrameType::kOpen, id, 0, payload);
  return id;
}

size_t HostSession::StdinCredit(uint32_t stream) const {
  auto it = streams_.find(stream);
  if (it == streams_.end() || it->second.stdin_closed || failed_) {
    return 0;
  }
  return it->second.send.Available();
}

size_t HostSession::SendStdin(uint32_t stream, absl::string_view data) {
  auto it = streams_.find(stream);
  if (it == streams_.end() || it->second.stdin_closed || failed_) {
    return 0;
  }
  return QueueData(FrameType::kStdin, stream, it->second.send, data);
}

size_t HostSession::QueueData(FrameType type, uint32_t stream, CreditWindow& window,
                              absl::string_view data) {
  size_t sent = 0;
  while (sent < data.size() && window.Available() > 0) {
    uint32_t n = static_cast<uint32_t>(
        std::min<size_t>({data.size() - sent, window.Available(), kMaxPayload}));
    window.Consume(n);
    Queue(type, stream, 0, data.substr(sent, n));
    sent += n;
  }
  return sent;
}

void HostSession::CloseStdin(uint32_t stream) {
  auto it = streams_.find(stream);
  if (it == streams_.end() || it->second.stdin_closed || failed_) {
    return;
  }
  it->second.stdin_closed = true;
  Queue(FrameType::kStdin, stream, kFlagEof, "");
}

void HostSession::Signal(uint32_t stream, int signal) {
  if (streams_.count(stream) != 0 && !failed_) {
    Queue(FrameType::kSignal, stream, 0, EncodeSignal(signal));
  }
}

void HostSession::Resize(uint32_t stream, PtySize size) {
  if (streams_.count(stream) != 0 && !failed_) {
    Queue(FrameType::kResize, stream, 0, EncodeResize(size));
  }
}

void HostSession::ConsumedOutput(uint32_t stream, size_t n) {
  auto it = streams_.find(stream);
  if (it == streams_.end() || failed_) {
    return;
  }
  uint32_t grant = it->second.recv.Release(static_cast<uint32_t>(n));
  if (grant > 0) {
    Queue(FrameType::kCredit, stream, 0, EncodeCredit(grant));
  }
}

void HostSession::Detach(uint32_t stream) {
  auto it = streams_.find(stream);
  if (it == streams_.end()) {
    return;
  }
  Stream& s = it->second;
  s.sink = &discard_sink_;
  s.detached = true;
  if (!failed_) {
    Queue(FrameType::kSignal, stream, 0, EncodeSignal(9));
    uint32_t grant = s.recv.Release(s.recv.Outstanding());
    if (grant > 0) {
      Queue(FrameType::kCredit, stream, 0, EncodeCredit(grant));
    }
  }
}

void HostSession::Ping(absl::string_view payload) {
  if (!failed_ && payload.size() <= 64) {
    Queue(FrameType::kPing, kControlStream, 0, payload);
  }
}

void HostSession::Shutdown() {
  if (!failed_) {
    Queue(FrameType::kShutdown, kControlStream, 0, "");
  }
}

void HostSession::Fail(absl::string_view reason) {
  if (failed_) {
    return;
  }
  failed_ = true;
  auto streams = std::move(streams_);
  streams_.clear();
  auto tunnels = std::move(tunnels_);
  tunnels_.clear();
  for (auto& [id, s] : streams) {
    s.sink->OnReset(reason);
  }
  for (auto& [id, t] : tunnels) {
    t.sink->OnReset(reason);
  }
}

}  // namespace abox::proto
