#include "src/runtime/agent_client.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

#include "absl/strings/str_cat.h"
#include "src/base/io.h"
#include "src/base/status_macros.h"

namespace abox::runtime {

// Collects output for one exec under the client's mutex (called by HostSession).
class Exec::Sink final : public proto::ExecSink {
 public:
  explicit Sink(Exec* exec) : exec_(exec) {}
  void OnStdout(absl::string_view d) override { Push(false, d); }
  void OnStderr(absl::string_view d) override { Push(true, d); }
  void OnExit(const proto::ExitInfo& info) override {
    exec_->exit_ = info;
    exec_->client_->cv_.notify_all();
  }
  void OnReset(absl::string_view error) override {
    exec_->reset_ = std::string(error);
    exec_->client_->cv_.notify_all();
  }

 private:
  void Push(bool is_stderr, absl::string_view d) {
    exec_->chunks_.push_back({is_stderr, std::string(d)});
    exec_->client_->cv_.notify_all();
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
      wake_(std::move(wake)),
      options_(std::move(options)),
      session_(options_.session) {
  session_.Start(absl::Now());
}

AgentClient::~AgentClient() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    FailLocked(absl::CancelledError("agent client closed"));
  }
  Wake();
  if (thread_.joinable()) {
    thread_.join();
  }
}

void AgentClient::Wake() {
  uint64_t one = 1;
  (void)!::write(wake_.get(), &one, sizeof(one));
}

void AgentClient::FailLocked(const absl::Status& reason) {
  if (!failure_.ok()) {
    return;
  }
  failure_ = reason;
  session_.Fail(reason.message());
  cv_.notify_all();
  if (options_.on_failure && !stopping_) {
    options_.on_failure(reason);
  }
}

void AgentClient::Fail(const absl::Status& reason) {
  std::lock_guard lock(mu_);
  FailLocked(reason);
  Wake();
}

absl::Status AgentClient::failure() const {
  std::lock_guard lock(mu_);
  return failure_;
}

std::string AgentClient::agent_version() const {
  std::lock_guard lock(mu_);
  return session_.peer() ? session_.peer()->agent_version : "";
}

void AgentClient::Run() {
  std::string pending;  // bytes taken from the session and not yet written
  char buf[64 * 1024];
  for (;;) {
    int timeout_ms;
    {
      std::unique_lock lock(mu_);
      if (stopping_ || !failure_.ok()) {
        return;
      }
      absl::Time now = absl::Now();
      if (auto s = session_.Tick(now); !s.ok()) {
        FailLocked(s);
        return;
      }
      pending += session_.TakeOutput();
      if (pending.size() > proto::HostSession::kMaxPendingOutput) {
        FailLocked(absl::ResourceExhaustedError(absl::StrCat(
            "guest protocol violation: guest is not reading its channel (", pending.size(),
            " bytes unsent)")));
        return;
      }
      timeout_ms = static_cast<int>(std::clamp<int64_t>(
          absl::ToInt64Milliseconds(session_.NextTick() - now) + 1, 1, 1000));
    }
    pollfd fds[2] = {{channel_.get(), POLLIN, 0}, {wake_.get(), POLLIN, 0}};
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
      (void)!::read(wake_.get(), &v, sizeof(v));
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
    if (fds[0].revents & (POLLIN | POLLHUP | POLLERR)) {
      ssize_t n = ::recv(channel_.get(), buf, sizeof(buf), 0);
      if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
        Fail(n == 0 ? absl::UnavailableError("the agent channel closed (the VM stopped?)")
                    : base::ErrnoError("recv(agent channel)"));
        return;
      }
      if (n > 0) {
        std::lock_guard lock(mu_);
        auto s = session_.OnBytes(absl::string_view(buf, static_cast<size_t>(n)), absl::Now());
        if (!s.ok()) {
          FailLocked(absl::Status(s.code(),
                                  absl::StrCat("guest protocol violation: ", s.message())));
          return;
        }
        cv_.notify_all();
      }
    }
  }
}

absl::Status AgentClient::WaitReady(absl::Duration timeout) {
  std::unique_lock lock(mu_);
  auto deadline = std::chrono::steady_clock::now() + absl::ToChronoMilliseconds(timeout);
  if (!cv_.wait_until(lock, deadline, [&] { return session_.ready() || !failure_.ok(); })) {
    return absl::DeadlineExceededError(absl::StrCat(
        "the guest agent did not answer within ", absl::FormatDuration(timeout)));
  }
  return failure_;
}

absl::StatusOr<std::unique_ptr<Exec>> AgentClient::StartExec(const proto::ExecRequest& request) {
  std::unique_ptr<Exec> exec(new Exec(this, 0));
  exec->sink_ = std::make_unique<Exec::Sink>(exec.get());
  {
    std::lock_guard lock(mu_);
    ABOX_RETURN_IF_ERROR(failure_);
    ABOX_ASSIGN_OR_RETURN(exec->stream_, session_.OpenExec(request, exec->sink_.get()));
  }
  Wake();
  return exec;
}

absl::StatusOr<absl::Duration> AgentClient::Ping(absl::Duration timeout) {
  std::unique_lock lock(mu_);
  ABOX_RETURN_IF_ERROR(failure_);
  std::string payload = absl::StrCat("rtt-", ++ping_seq_);
  absl::Time start = absl::Now();
  session_.Ping(payload);
  Wake();
  auto deadline = std::chrono::steady_clock::now() + absl::ToChronoMilliseconds(timeout);
  if (!cv_.wait_until(lock, deadline,
                      [&] { return session_.last_pong() == payload || !failure_.ok(); })) {
    return absl::DeadlineExceededError("no pong from the guest agent");
  }
  ABOX_RETURN_IF_ERROR(failure_);
  return absl::Now() - start;
}

void AgentClient::Shutdown() {
  {
    std::lock_guard lock(mu_);
    session_.Shutdown();
  }
  Wake();
}

Exec::Exec(AgentClient* client, uint32_t stream) : client_(client), stream_(stream) {}

Exec::~Exec() {
  std::lock_guard lock(client_->mu_);
  if (!exit_ && !reset_) {
    // Still running: the session kills it and stops calling our sink.
    client_->session_.Detach(stream_);
    client_->Wake();
  }
}

std::optional<Exec::Chunk> Exec::ReadOutput() {
  std::unique_lock lock(client_->mu_);
  if (unconsumed_ > 0) {
    client_->session_.ConsumedOutput(stream_, unconsumed_);
    unconsumed_ = 0;
    client_->Wake();
  }
  client_->cv_.wait(lock, [&] { return !chunks_.empty() || exit_ || reset_; });
  if (chunks_.empty()) {
    return std::nullopt;
  }
  Chunk c = std::move(chunks_.front());
  chunks_.pop_front();
  unconsumed_ = c.data.size();
  return c;
}

absl::StatusOr<proto::ExitInfo> Exec::Wait() {
  std::unique_lock lock(client_->mu_);
  client_->cv_.wait(lock, [&] { return exit_ || reset_; });
  if (exit_) {
    return *exit_;
  }
  return absl::UnavailableError(*reset_);
}

absl::Status Exec::WriteStdin(absl::string_view data) {
  while (!data.empty()) {
    std::unique_lock lock(client_->mu_);
    client_->cv_.wait(lock, [&] {
      return client_->session_.StdinCredit(stream_) > 0 || exit_ || reset_ ||
             !client_->failure_.ok();
    });
    if (exit_ || reset_ || !client_->failure_.ok()) {
      return absl::FailedPreconditionError("the command is no longer reading stdin");
    }
    size_t n = client_->session_.SendStdin(stream_, data);
    data.remove_prefix(n);
    client_->Wake();
  }
  return absl::OkStatus();
}

void Exec::CloseStdin() {
  std::lock_guard lock(client_->mu_);
  client_->session_.CloseStdin(stream_);
  client_->Wake();
}

void Exec::Signal(int signal) {
  std::lock_guard lock(client_->mu_);
  client_->session_.Signal(stream_, signal);
  client_->Wake();
}

void Exec::Resize(proto::PtySize size) {
  std::lock_guard lock(client_->mu_);
  client_->session_.Resize(stream_, size);
  client_->Wake();
}

}  // namespace abox::runtime
