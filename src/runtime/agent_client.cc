#include "src/runtime/agent_client.h"

#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "src/base/io.h"
#include "src/base/status_macros.h"
#include "src/runtime/agent_tunnel.h"

namespace abox::runtime {

void internal::AgentCore::Wake() const {
  uint64_t one = 1;
  (void)!::write(wake.get(), &one, sizeof(one));
}

// Collects output for one exec under the client's mutex (called by HostSession).
class Exec::Sink final : public proto::ExecSink {
 public:
  explicit Sink(Exec* exec) : exec_(exec) {}
  void OnStdout(absl::string_view d) override { Push(false, d); }
  void OnStderr(absl::string_view d) override { Push(true, d); }
  void OnExit(const proto::ExitInfo& info) override {
    exec_->exit_ = info;
    exec_->core_->timed_execs.erase(exec_->stream_);
    exec_->core_->cv.notify_all();
  }
  void OnReset(absl::string_view error) override {
    exec_->reset_ = std::string(error);
    exec_->core_->timed_execs.erase(exec_->stream_);
    exec_->core_->cv.notify_all();
  }

 private:
  void Push(bool is_stderr, absl::string_view d) {
    if (d.empty()) {
      return;
    }
    // A frame is at most proto::kMaxPayload bytes, and the queue at most a credit window.
    const uint32_t stream_bit = is_stderr ? kStderrRun : 0;
    std::deque<uint32_t>& runs = exec_->runs_;
    if (!runs.empty() && (runs.back() & kStderrRun) == stream_bit) {
      runs.back() += static_cast<uint32_t>(d.size());
    } else {
      runs.push_back(static_cast<uint32_t>(d.size()) | stream_bit);
    }
    exec_->queued_.append(d.data(), d.size());
    exec_->core_->cv.notify_all();
  }
  Exec* exec_;
};

absl::StatusOr<std::unique_ptr<AgentClient>> AgentClient::Create(base::UniqueFd channel,
                                                                 Options options) {
  ABOX_RETURN_IF_ERROR(base::SetNonBlocking(channel.get()));
  base::UniqueFd wake(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!wake) {
    return base::ErrnoError("eventfd");
  }
  auto client = std::unique_ptr<AgentClient>(
      new AgentClient(std::move(channel), std::move(wake), std::move(options)));
  client->thread_ = std::thread([c = client.get()] { c->Run(); });
  return client;
}

AgentClient::AgentClient(base::UniqueFd channel, base::UniqueFd wake, Options options)
    : channel_(std::move(channel)),
      options_(std::move(options)),
      core_(std::make_shared<internal::AgentCore>(std::move(wake), options_.session)) {
  core_->session.set_tunnel_acceptor(this);
  core_->session.Start(absl::Now());
}

AgentClient::~AgentClient() {
  {
    std::lock_guard lock(core_->mu);
    stopping_ = true;
    FailLocked(absl::CancelledError("agent client closed"));
    // Tunnels that outlive us must not reach back: the session is failed and keeps no acceptor.
    core_->session.set_tunnel_acceptor(nullptr);
  }
  core_->Wake();
  if (thread_.joinable()) {
    thread_.join();
  }
}

void AgentClient::FailLocked(const absl::Status& reason) {
  if (!core_->failure.ok()) {
    return;
  }
  core_->failure = reason;
  core_->session.Fail(reason.message());
  core_->cv.notify_all();
  if (options_.on_failure && !stopping_) {
    options_.on_failure(reason);
  }
}

void AgentClient::Fail(const absl::Status& reason) {
  std::lock_guard lock(core_->mu);
  FailLocked(reason);
  core_->Wake();
}

absl::Status AgentClient::failure() const {
  std::lock_guard lock(core_->mu);
  return core_->failure;
}

std::string AgentClient::agent_version() const {
  std::lock_guard lock(core_->mu);
  return core_->session.peer() ? core_->session.peer()->agent_version : "";
}

absl::StatusOr<proto::TunnelSink*> AgentClient::OnTunnelOpen(uint32_t stream,
                                                             const proto::TunnelRequest& request) {
  if (!options_.on_tunnel) {
    return absl::FailedPreconditionError("egress is off for this sandbox");
  }
  net::TunnelInfo info;
  switch (request.kind) {
    case proto::TunnelKind::kTcp:
      info.kind = net::TunnelInfo::Kind::kTransparent;
      info.original_ip = net::IpAddress::Parse(request.dst);
      info.original_port = request.port;
      if (!info.original_ip) {
        return absl::InvalidArgumentError("tunnel_open: dst is not an address");
      }
      break;
    case proto::TunnelKind::kProxy:
      info.kind = net::TunnelInfo::Kind::kHttpProxy;
      break;
    case proto::TunnelKind::kDns:
      info.kind = net::TunnelInfo::Kind::kDns;
      break;
    case proto::TunnelKind::kModel:
      info.kind = net::TunnelInfo::Kind::kModelBroker;
      break;
  }
  auto tunnel = std::make_unique<AgentTunnel>(core_, stream, info);
  proto::TunnelSink* sink = tunnel->sink();
  new_tunnels_.push_back(std::move(tunnel));
  return sink;
}

void AgentClient::Run() {
  std::string pending;  // bytes taken from the session and not yet written
  char buf[64 * 1024];
  for (;;) {
    int timeout_ms;
    {
      std::unique_lock lock(core_->mu);
      if (stopping_ || !core_->failure.ok()) {
        return;
      }
      absl::Time now = absl::Now();
      if (auto s = core_->session.Tick(now); !s.ok()) {
        FailLocked(s);
        return;
      }
      pending += core_->session.TakeOutput();
      if (pending.size() > proto::HostSession::kMaxPendingOutput) {
        FailLocked(absl::ResourceExhaustedError(
            absl::StrCat("guest protocol violation: guest is not reading its channel (",
                         pending.size(), " bytes unsent)")));
        return;
      }
      absl::Time next = core_->session.NextTick();
      if (!CheckExecDeadlinesLocked(now, next)) {
        return;
      }
      timeout_ms =
          static_cast<int>(std::clamp<int64_t>(absl::ToInt64Milliseconds(next - now) + 1, 1, 1000));
    }
    pollfd fds[2] = {{channel_.get(), POLLIN, 0}, {core_->wake.get(), POLLIN, 0}};
    if (!pending.empty()) {
      fds[0].events |= POLLOUT;
    }
    int r = ::poll(fds, 2, timeout_ms);
    if (r < 0) {
      if (errno == EINTR) {
        continue;
      }
      Fail(base::ErrnoError("poll(agent channel)"));
      return;
    }
    if (fds[1].revents & POLLIN) {
      uint64_t v;
      (void)!::read(core_->wake.get(), &v, sizeof(v));
    }
    if ((fds[0].revents & POLLOUT) && !pending.empty()) {
      ssize_t n = ::send(channel_.get(), pending.data(), pending.size(), MSG_NOSIGNAL);
      if (n > 0) {
        pending.erase(0, static_cast<size_t>(n));
      } else if (n < 0 && errno != EAGAIN && errno != EINTR) {
        Fail(base::ErrnoError("send(agent channel)"));
        return;
      }
    }
    if ((fds[0].revents & (POLLIN | POLLHUP | POLLERR)) && !ReadChannel(buf, sizeof(buf))) {
      return;
    }
  }
}

bool AgentClient::CheckExecDeadlinesLocked(absl::Time now, absl::Time& next) {
  std::vector<Exec*> expired;
  for (const auto& [stream, exec] : core_->timed_execs) {
    if (now < *exec->give_up_at_) {
      next = std::min(next, *exec->give_up_at_);
    } else if (exec->runs_.empty() && exec->unconsumed_ == 0) {
      expired.push_back(exec);
    }
    // Past the deadline with output our reader has not taken yet: the guest may be waiting for
    // credit, not stuck. Checked again when the reader returns credit (it wakes this thread).
  }
  if (expired.empty()) {
    return true;
  }
  std::string why = absl::StrCat("the guest agent did not end the command within ",
                                 absl::FormatDuration(options_.timeout_grace),
                                 " of its timeout: it stopped answering, so the host gave up on "
                                 "it and stops the sandbox (a sandbox whose agent stopped "
                                 "answering is not used again)");
  for (Exec* exec : expired) {
    exec->host_timeout_ = why;
  }
  FailLocked(absl::DeadlineExceededError(why));
  return false;
}

bool AgentClient::ReadChannel(char* buf, size_t len) {
  ssize_t n = ::recv(channel_.get(), buf, len, 0);
  if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
    Fail(n == 0 ? absl::UnavailableError("the agent channel closed (the VM stopped?)")
                : base::ErrnoError("recv(agent channel)"));
    return false;
  }
  if (n < 0) {
    return true;
  }
  std::vector<std::unique_ptr<AgentTunnel>> tunnels;
  {
    std::lock_guard lock(core_->mu);
    auto s = core_->session.OnBytes(absl::string_view(buf, static_cast<size_t>(n)), absl::Now());
    tunnels.swap(new_tunnels_);
    if (!s.ok()) {
      FailLocked(absl::Status(s.code(), absl::StrCat("guest protocol violation: ", s.message())));
      return false;  // `tunnels` were reset by the failure and are dropped.
    }
    core_->cv.notify_all();
  }
  // Outside the lock: the callback may use the tunnel (or drop it, which resets it).
  for (auto& tunnel : tunnels) {
    options_.on_tunnel(std::move(tunnel));
  }
  return true;
}

absl::Status AgentClient::WaitReady(absl::Duration timeout) {
  std::unique_lock lock(core_->mu);
  auto deadline = std::chrono::steady_clock::now() + absl::ToChronoMilliseconds(timeout);
  if (!core_->cv.wait_until(lock, deadline,
                            [&] { return core_->session.ready() || !core_->failure.ok(); })) {
    return absl::DeadlineExceededError(
        absl::StrCat("the guest agent did not answer within ", absl::FormatDuration(timeout)));
  }
  return core_->failure;
}

absl::StatusOr<std::unique_ptr<Exec>> AgentClient::StartExec(const proto::ExecRequest& request) {
  absl::Time start = absl::Now();
  std::unique_ptr<Exec> exec(new Exec(core_, 0));
  exec->sink_ = std::make_unique<Exec::Sink>(exec.get());
  {
    std::lock_guard lock(core_->mu);
    ABOX_RETURN_IF_ERROR(core_->failure);
    ABOX_ASSIGN_OR_RETURN(exec->stream_, core_->session.OpenExec(request, exec->sink_.get()));
    if (request.timeout_ms > 0) {
      exec->give_up_at_ = start +
                          absl::Milliseconds(static_cast<int64_t>(
                              std::min<uint64_t>(request.timeout_ms, uint64_t{1} << 40))) +
                          options_.timeout_grace;
      core_->timed_execs[exec->stream_] = exec.get();
    }
  }
  core_->Wake();
  return exec;
}

absl::StatusOr<absl::Duration> AgentClient::Ping(absl::Duration timeout) {
  std::unique_lock lock(core_->mu);
  ABOX_RETURN_IF_ERROR(core_->failure);
  std::string payload = absl::StrCat("rtt-", ++ping_seq_);
  absl::Time start = absl::Now();
  core_->session.Ping(payload);
  core_->Wake();
  auto deadline = std::chrono::steady_clock::now() + absl::ToChronoMilliseconds(timeout);
  if (!core_->cv.wait_until(lock, deadline, [&] {
        return core_->session.last_pong() == payload || !core_->failure.ok();
      })) {
    return absl::DeadlineExceededError("no pong from the guest agent");
  }
  ABOX_RETURN_IF_ERROR(core_->failure);
  return absl::Now() - start;
}

void AgentClient::Shutdown() {
  {
    std::lock_guard lock(core_->mu);
    core_->session.Shutdown();
  }
  core_->Wake();
}

Exec::Exec(std::shared_ptr<internal::AgentCore> core, uint32_t stream)
    : core_(std::move(core)), stream_(stream) {}

Exec::~Exec() {
  std::lock_guard lock(core_->mu);
  core_->timed_execs.erase(stream_);
  if (!exit_ && !reset_) {
    // Still running: the session kills it and stops calling our sink.
    core_->session.Detach(stream_);
    core_->Wake();
  }
}

std::optional<Exec::Chunk> Exec::ReadOutput() {
  std::unique_lock lock(core_->mu);
  if (unconsumed_ > 0) {
    core_->session.ConsumedOutput(stream_, unconsumed_);
    unconsumed_ = 0;
    core_->Wake();
  }
  core_->cv.wait(lock, [&] { return !runs_.empty() || exit_ || reset_; });
  if (runs_.empty()) {
    return std::nullopt;
  }
  const uint32_t run = runs_.front();
  runs_.pop_front();
  const size_t size = run & ~kStderrRun;
  Chunk c{(run & kStderrRun) != 0, queued_.substr(queued_head_, size)};
  queued_head_ += size;
  if (runs_.empty()) {
    queued_.clear();
    queued_head_ = 0;
  } else if (queued_head_ * 2 >= queued_.size()) {
    queued_.erase(0, queued_head_);  // keep the buffer within about twice what is unread
    queued_head_ = 0;
  }
  unconsumed_ = c.data.size();
  return c;
}

bool Exec::WaitForOutput(absl::Time deadline) {
  std::unique_lock lock(core_->mu);
  if (unconsumed_ > 0) {
    core_->session.ConsumedOutput(stream_, unconsumed_);
    unconsumed_ = 0;
    core_->Wake();
  }
  auto ready = [&] { return !runs_.empty() || exit_ || reset_; };
  while (!ready()) {
    absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) {
      return false;
    }
    core_->cv.wait_for(lock, absl::ToChronoMilliseconds(left) + std::chrono::milliseconds(1));
  }
  return true;
}

size_t Exec::QueuedOutputMemory() const {
  std::lock_guard lock(core_->mu);
  return queued_.capacity() + runs_.size() * sizeof(uint32_t);
}

absl::StatusOr<proto::ExitInfo> Exec::Wait() {
  std::unique_lock lock(core_->mu);
  core_->cv.wait(lock, [&] { return exit_ || reset_; });
  if (exit_) {
    return *exit_;
  }
  if (!host_timeout_.empty()) {
    // The host held the timeout: the command counts as timed out and killed (the VM it ran in
    // is stopped by the owner of the failed connection).
    proto::ExitInfo info;
    info.signal = SIGKILL;
    info.timed_out = true;
    info.error = host_timeout_;
    return info;
  }
  return absl::UnavailableError(*reset_);
}

absl::Status Exec::WriteStdin(absl::string_view data) {
  while (!data.empty()) {
    std::unique_lock lock(core_->mu);
    core_->cv.wait(lock, [&] {
      return core_->session.StdinCredit(stream_) > 0 || exit_ || reset_ || !core_->failure.ok();
    });
    if (exit_ || reset_ || !core_->failure.ok()) {
      return absl::FailedPreconditionError("the command is no longer reading stdin");
    }
    size_t n = core_->session.SendStdin(stream_, data);
    data.remove_prefix(n);
    core_->Wake();
  }
  return absl::OkStatus();
}

void Exec::CloseStdin() {
  std::lock_guard lock(core_->mu);
  core_->session.CloseStdin(stream_);
  core_->Wake();
}

void Exec::Signal(int signal) {
  std::lock_guard lock(core_->mu);
  core_->session.Signal(stream_, signal);
  core_->Wake();
}

void Exec::Resize(proto::PtySize size) {
  std::lock_guard lock(core_->mu);
  core_->session.Resize(stream_, size);
  core_->Wake();
}

}  // namespace abox::runtime
