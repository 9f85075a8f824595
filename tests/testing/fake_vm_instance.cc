// The fake VM's thread: boot delay, then one real guest::Agent per host connection on the agent
// socket until the VM ends (fake_vm_instance.h).
#include "tests/testing/fake_vm_instance.h"

#include <poll.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <string_view>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "src/base/io.h"
#include "src/base/status_macros.h"
#include "src/guest/agent.h"
#include "src/guest/channel.h"

namespace abox::testing {
namespace {

std::string OutcomeName(guest::Agent::Outcome outcome) {
  switch (outcome) {
    case guest::Agent::Outcome::kPeerClosed:
      return "the host closed the channel";
    case guest::Agent::Outcome::kViolation:
      return "protocol violation";
    case guest::Agent::Outcome::kShutdown:
      return "shutdown requested by the host";
    case guest::Agent::Outcome::kTerminated:
      return "terminated";
  }
  return "unknown outcome";
}

}  // namespace

int64_t FakeVmInstance::NowUnixMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

void FakeVmInstance::Start(base::UniqueFd listen, base::Pipe stop, base::UniqueFd console,
                           const std::string& boot_line) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = std::move(stop);
    console_ = std::move(console);
  }
  Console(boot_line);
  std::lock_guard<std::mutex> lock(join_mu_);
  thread_ = std::thread([this, listen = std::move(listen)]() mutable { Serve(std::move(listen)); });
}

void FakeVmInstance::End(const std::string& reason) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (running_ && end_reason_.empty() && stop_.write) {
      end_reason_ = reason;
      // The stop pipe reads like the agent's signalfd: one SIGHUP record ends Agent::Run
      // as SIGHUP ends abox-guest (Outcome::kTerminated), without a real signal in a test
      // process whose daemon may handle SIGHUP itself. Unread, it also ends the accept wait.
      signalfd_siginfo record{};
      record.ssi_signo = SIGHUP;
      (void)base::WriteAll(
          stop_.write.get(),
          std::string_view(reinterpret_cast<const char*>(&record), sizeof(record)));
    }
  }
  std::lock_guard<std::mutex> join_lock(join_mu_);
  if (thread_.joinable()) {
    thread_.join();
  }
  std::lock_guard<std::mutex> lock(mu_);
  stop_.read.reset();
  stop_.write.reset();
  console_.reset();
}

vmm::VmState FakeVmInstance::InitialState() const {
  vmm::VmState state;
  state.id = p_.id;
  state.phase = vmm::VmPhase::kRunning;
  state.shim_pid = 0;           // no shim
  state.qemu_pid = ::getpid();  // the "VMM" is the test process (never signal it)
  state.accel = p_.accel;
  state.accel_note = p_.accel_note;
  state.tie_to_caller = p_.tie_to_caller;
  state.privileges = "unchanged (fake VMM)";
  state.started_at_ms = started_at_ms_;
  return state;
}

FakeVmInfo FakeVmInstance::Info() {
  std::lock_guard<std::mutex> lock(mu_);
  return FakeVmInfo{.id = p_.id,
                    .run_dir = p_.run_dir,
                    .running = running_,
                    .attached = attached_,
                    .tie_to_caller = p_.tie_to_caller,
                    .connections = connections_};
}

void FakeVmInstance::Console(const std::string& line) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!console_ || console_bytes_ + line.size() + 1 > p_.console_limit) {
    return;
  }
  console_bytes_ += line.size() + 1;
  (void)base::WriteAll(console_.get(), absl::StrCat(line, "\n"));
}

void FakeVmInstance::Serve(base::UniqueFd listen) {
  std::string natural_end = ServeUntilEnd(listen.get());
  listen.reset();  // Connections are refused from now on, as by a dead QEMU.
  std::string reason;
  {
    std::lock_guard<std::mutex> lock(mu_);
    // An empty natural end means End() asked, and end_reason_ says why.
    reason = natural_end.empty() ? end_reason_ : natural_end;
  }
  Console(absl::StrCat("fake VM ", p_.id, " exited: ", reason));
  vmm::VmState state = InitialState();
  state.phase = vmm::VmPhase::kExited;
  state.exit_reason = reason;
  state.exited_at_ms = NowUnixMs();
  (void)vmm::WriteVmState(p_.run_dir, state);
  std::lock_guard<std::mutex> lock(mu_);
  exit_reason_ = reason;
  running_ = false;
  cv_.notify_all();
}

std::string FakeVmInstance::ServeUntilEnd(int listen) {
  int stop = stop_.read.get();
  if (p_.boot_delay.count() > 0) {
    pollfd p{stop, POLLIN, 0};
    int r;
    do {
      r = ::poll(&p, 1, static_cast<int>(p_.boot_delay.count()));
    } while (r < 0 && errno == EINTR);
    if (r != 0) {
      return r < 0 ? base::ErrnoError("poll(stop pipe)").ToString() : "";
    }
  }
  Console("abox-guest: waiting for the host on the agent socket");
  for (;;) {
    pollfd fds[2] = {{stop, POLLIN, 0}, {listen, POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) {
        continue;
      }
      return absl::StrCat("fake VM failed: ", base::ErrnoError("poll").message());
    }
    if (fds[0].revents != 0) {
      return "";
    }
    base::UniqueFd conn(::accept4(listen, nullptr, nullptr, SOCK_CLOEXEC));
    if (!conn) {
      if (errno == EAGAIN || errno == EINTR || errno == ECONNABORTED) {
        continue;
      }
      return absl::StrCat("fake VM failed: ", base::ErrnoError("accept4").message());
    }
    int n;
    std::string stale;
    {
      std::lock_guard<std::mutex> lock(mu_);
      n = ++connections_;
      stale = std::exchange(stale_bytes_, "");
    }
    Console(absl::StrCat("abox-guest: host connected (connection ", n, ")"));
    if (!stale.empty()) {
      // What a real guest that missed the previous host's disconnect may still send.
      (void)base::WriteAll(conn.get(), stale);
    }
    absl::StatusOr<guest::Channel> channel =
        guest::Channel::Adopt(std::move(conn), guest::ChannelKind::kStream);
    if (!channel.ok()) {
      return absl::StrCat("abox-guest failed: ", channel.status().message());
    }
    absl::StatusOr<guest::Agent::Outcome> outcome;
    {
      // The stop pipe doubles as the agent's signal_fd (see End()). The Agent's destructor
      // kills and reaps the commands of this connection.
      guest::Agent agent(*std::move(channel), {.pid1 = false,
                                               .signal_fd = stop,
                                               .switch_user = false,
                                               .oom_counter_path = p_.oom_counter_path});
      outcome = agent.Run();
    }
    if (!outcome.ok()) {
      return absl::StrCat("abox-guest failed: ", outcome.status().message());
    }
    Console(absl::StrCat("abox-guest: session ended: ", OutcomeName(*outcome)));
    switch (*outcome) {
      case guest::Agent::Outcome::kShutdown:
        return "guest powered off";
      case guest::Agent::Outcome::kTerminated:
        return "";
      case guest::Agent::Outcome::kPeerClosed:
      case guest::Agent::Outcome::kViolation:
        break;  // The guest keeps serving: the host may reconnect.
    }
  }
}

void FakeVmInstance::LeaveStaleBytes(std::string bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  stale_bytes_ = std::move(bytes);
}

}  // namespace abox::testing
