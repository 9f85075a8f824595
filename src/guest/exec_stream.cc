#include "src/guest/exec_stream.h"

#include <signal.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "src/base/status_macros.h"
#include "src/guest/log.h"
#include "src/guest/oom_kills.h"

namespace abox::guest {

ExecStream::ExecStream(uint32_t id, SpawnedProcess process, const proto::ExecRequest& request,
                       uint32_t send_window, uint32_t max_payload,
                       std::unique_ptr<ExecCgroup> cgroup)
    : id_(id),
      pid_(process.pid),
      max_payload_(std::min(max_payload, proto::kMaxPayload)),
      stdin_open_(request.stdin_open),
      pty_(request.pty.has_value()),
      kill_leftovers_(request.kill_leftovers),
      cgroup_(std::move(cgroup)),
      pidfd_(std::move(process.pidfd)),
      outputs_{{std::move(process.stdout_fd), proto::FrameType::kStdout},
               {std::move(process.stderr_fd), proto::FrameType::kStderr}},
      stdin_fd_(std::move(process.stdin_fd)),
      pty_master_(std::move(process.pty_master)),
      send_(send_window),
      recv_(proto::kDefaultWindow),
      started_(process.started),
      error_(std::move(process.error)),
      oom_counter_path_(std::move(process.oom_counter_path)),
      oom_kill_counter_(process.oom_kill_counter) {
  if (request.timeout_ms > 0) {
    timeout_at_ = started_ + std::chrono::milliseconds(request.timeout_ms);
  }
}

ExecStream::~ExecStream() {
  if (pidfd_) {
    // Not reaped and not aborted (a bug elsewhere): never leave the process behind.
    ::kill(-pid_, SIGKILL);
    siginfo_t info{};
    while (::waitid(P_PIDFD, static_cast<id_t>(pidfd_.get()), &info, WEXITED) != 0 &&
           errno == EINTR) {
    }
  }
}

pollfd ExecStream::PollFor(int slot, bool may_send) const {
  pollfd p{-1, 0, 0};
  if (exit_sent_) {
    return p;
  }
  switch (slot) {
    case kStdoutSlot:
    case kStderrSlot: {
      const Output& out = outputs_[slot];
      if (out.fd && may_send && send_.Available() > 0) {
        p = {out.fd.get(), POLLIN, 0};
      }
      break;
    }
    case kStdinSlot:
      if (stdin_fd_ && stdin_off_ < stdin_buf_.size()) {
        p = {stdin_fd_.get(), POLLOUT, 0};
      }
      break;
    case kProcessSlot:
      if (pidfd_ && !status_) {
        p = {pidfd_.get(), POLLIN, 0};
      }
      break;
    default:
      break;
  }
  return p;
}

void ExecStream::OnPollReady(int slot, short revents, char* scratch, FrameSink& sink,
                             Clock::time_point now) {
  if (exit_sent_ || revents == 0) {
    return;
  }
  switch (slot) {
    case kStdoutSlot:
    case kStderrSlot:
      ReadOutput(outputs_[slot], scratch, sink);
      break;
    case kStdinSlot:
      WriteStdin(sink);
      break;
    case kProcessSlot:
      if (pidfd_ && !status_) {
        if (std::optional<base::ExitStatus> status = TryReapPidfd(pidfd_.get())) {
          Reaped(*status, now);
        }
      }
      break;
    default:
      break;
  }
  MaybeFinish(now, sink);
}

void ExecStream::ReadOutput(Output& out, char* scratch, FrameSink& sink) {
  uint32_t want = std::min(send_.Available(), max_payload_);
  if (!out.fd || want == 0) {
    return;
  }
  ssize_t n;
  do {
    n = ::read(out.fd.get(), scratch, want);
  } while (n < 0 && errno == EINTR);
  if (n > 0) {
    send_.Consume(static_cast<uint32_t>(n));
    sink.Send(out.type, id_, 0, absl::string_view(scratch, static_cast<size_t>(n)));
    out.must_drain -= std::min(out.must_drain, static_cast<size_t>(n));
    return;
  }
  if (n < 0 && errno == EAGAIN) {
    return;
  }
  if (n < 0 && errno != EIO) {  // EIO: a PTY whose slave side is closed everywhere.
    Log(absl::StrCat("stream ", id_, ": read(",
                     proto::FrameTypeName(static_cast<uint8_t>(out.type)),
                     "): ", ErrnoText(errno)));
  }
  CloseOutput(out, sink);
}

void ExecStream::CloseOutput(Output& out, FrameSink& sink) {
  if (out.eof_sent) {
    return;
  }
  out.fd.reset();
  out.eof_sent = true;
  sink.Send(out.type, id_, proto::kFlagEof, "");
}

void ExecStream::WriteStdin(FrameSink& sink) {
  auto grant = [&](size_t n) {
    if (uint32_t credit = recv_.Release(static_cast<uint32_t>(n)); credit > 0) {
      sink.Send(proto::FrameType::kCredit, id_, 0, proto::EncodeCredit(credit));
    }
  };
  while (stdin_fd_ && stdin_off_ < stdin_buf_.size()) {
    ssize_t n =
        ::write(stdin_fd_.get(), stdin_buf_.data() + stdin_off_, stdin_buf_.size() - stdin_off_);
    if (n > 0) {
      stdin_off_ += static_cast<size_t>(n);
      grant(static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n < 0 && errno == EAGAIN) {
      break;
    }
    // EPIPE: the command closed its stdin. What is left (and what still comes) is dropped and
    // its credit returned so the host is never stuck.
    grant(stdin_buf_.size() - stdin_off_);
    stdin_off_ = stdin_buf_.size();
    CloseStdin();
  }
  if (stdin_off_ == stdin_buf_.size()) {
    stdin_buf_.clear();
    stdin_off_ = 0;
  } else if (stdin_off_ > stdin_buf_.size() / 2) {
    stdin_buf_.erase(0, stdin_off_);
    stdin_off_ = 0;
  }
  if (stdin_eof_ && stdin_buf_.empty() && !pty_) {
    CloseStdin();  // The command sees EOF. (A PTY stays open: closing it would hang up.)
  }
}

void ExecStream::CloseStdin() {
  stdin_fd_.reset();
  stdin_buf_.clear();
  stdin_off_ = 0;
}

absl::Status ExecStream::OnStdin(absl::string_view data, bool eof, FrameSink& sink) {
  if (!stdin_open_) {
    return absl::InvalidArgumentError(
        absl::StrCat("stdin on stream ", id_, ", which was opened without stdin"));
  }
  if (stdin_eof_) {
    return absl::InvalidArgumentError(absl::StrCat("stdin on stream ", id_, " after its EOF"));
  }
  ABOX_RETURN_IF_ERROR(base::Annotate(recv_.OnReceived(static_cast<uint32_t>(data.size())),
                                      absl::StrCat("stdin on stream ", id_)));
  stdin_eof_ = eof;
  if (exit_sent_) {
    return absl::OkStatus();
  }
  if (!stdin_fd_) {
    // The command closed its stdin (or has finished): drop the bytes, return the credit.
    if (uint32_t credit = recv_.Release(static_cast<uint32_t>(data.size())); credit > 0) {
      sink.Send(proto::FrameType::kCredit, id_, 0, proto::EncodeCredit(credit));
    }
    return absl::OkStatus();
  }
  stdin_buf_.append(data.data(), data.size());
  WriteStdin(sink);
  return absl::OkStatus();
}

absl::Status ExecStream::OnCredit(uint32_t bytes) {
  return base::Annotate(send_.Grant(bytes), absl::StrCat("credit on stream ", id_));
}

void ExecStream::OnSignal(int signal) {
  if (!exit_sent_) {
    ::kill(-pid_, signal);  // The whole process group; ESRCH when it is gone already.
  }
}

void ExecStream::OnResize(const proto::PtySize& size) {
  if (pty_master_) {
    struct winsize ws {};
    ws.ws_row = size.rows;
    ws.ws_col = size.cols;
    ::ioctl(pty_master_.get(), TIOCSWINSZ, &ws);  // The kernel sends SIGWINCH.
  }
}

void ExecStream::KillAll() {
  ::kill(-pid_, SIGKILL);
  if (cgroup_) {
    cgroup_->Kill();
  }
}

void ExecStream::Reaped(const base::ExitStatus& status, Clock::time_point now) {
  status_ = status;
  ended_ = now;
  pidfd_.reset();
  if (kill_leftovers_) {
    // Background jobs and daemons the command left (setsid ones too, with a cgroup) end with it;
    // their output is not waited for.
    KillAll();
  }
  grace_end_ = now + kDrainGrace;
  for (Output& out : outputs_) {
    int queued = 0;
    if (out.fd && ::ioctl(out.fd.get(), FIONREAD, &queued) == 0 && queued > 0) {
      out.must_drain = static_cast<size_t>(queued);
    }
  }
}

void ExecStream::OnReaped(const base::ExitStatus& status, Clock::time_point now, FrameSink& sink) {
  if (!status_ && !exit_sent_) {
    Reaped(status, now);
    MaybeFinish(now, sink);
  }
}

std::optional<Clock::time_point> ExecStream::NextDeadline() const {
  if (exit_sent_) {
    return std::nullopt;
  }
  if (!status_) {
    return timed_out_ ? std::nullopt : timeout_at_;
  }
  return grace_expired_ ? std::nullopt : std::optional<Clock::time_point>(grace_end_);
}

void ExecStream::OnTimer(Clock::time_point now, FrameSink& sink) {
  if (exit_sent_) {
    return;
  }
  if (!status_ && timeout_at_ && now >= *timeout_at_ && !timed_out_) {
    timed_out_ = true;
    KillAll();
  }
  MaybeFinish(now, sink);
}

void ExecStream::MaybeFinish(Clock::time_point now, FrameSink& sink) {
  if (!status_ || exit_sent_) {
    return;
  }
  if (now >= grace_end_) {
    grace_expired_ = true;
  }
  for (Output& out : outputs_) {
    if (out.fd && grace_expired_ && out.must_drain == 0) {
      CloseOutput(out, sink);  // Background processes still hold it: stop waiting.
    }
  }
  if (outputs_[0].fd || outputs_[1].fd) {
    return;
  }
  CloseOutput(outputs_[0], sink);
  CloseOutput(outputs_[1], sink);
  CloseStdin();
  pty_master_.reset();
  proto::ExitInfo info;
  info.exit_code = status_->exit_code;
  info.signal = status_->signal;
  info.timed_out = timed_out_;
  info.error = error_;
  info.duration_us = static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::microseconds>(ended_ - started_).count());
  // Read as the stream ends, after the main process was reaped: a kill of it is counted by then
  // (the kernel counts before it delivers the SIGKILL), and so are kills of what it left.
  info.oom_kills = OomKillsBetween(oom_kill_counter_, ReadOomKillCounter(oom_counter_path_));
  sink.Send(proto::FrameType::kExit, id_, 0, proto::EncodeExitInfo(info));
  exit_sent_ = true;
}

base::UniqueFd ExecStream::Abort() {
  if (!exit_sent_) {
    KillAll();
  }
  outputs_[0].fd.reset();
  outputs_[1].fd.reset();
  CloseStdin();
  pty_master_.reset();
  exit_sent_ = true;
  return std::move(pidfd_);
}

}  // namespace abox::guest
