#include "src/vmm/shim.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>  // NOLINT(modernize-deprecated-headers): sigabbrev_np, signalfd types
#include <sys/signalfd.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <optional>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "spdlog/spdlog.h"
#include "src/base/io.h"
#include "src/base/status_macros.h"
#include "src/vmm/bounded_log.h"
#include "src/vmm/qemu_launch.h"
#include "src/vmm/qmp_client.h"
#include "src/vmm/shim_protocol.h"
#include "src/vmm/vm_uid.h"

namespace abox::vmm {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr size_t kTailBytes = 4096;       // console/QEMU output kept in memory for messages
constexpr size_t kErrorTailBytes = 1500;  // QEMU output quoted in a startup error
constexpr milliseconds kPollWhileStarting(25);

int64_t UnixMs() {
  return std::chrono::duration_cast<milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// "KILL" for SIGKILL; the number for anything unknown.
std::string SignalName(int sig) {
  const char* name = ::sigabbrev_np(sig);
  return name != nullptr ? absl::StrCat("SIG", name) : absl::StrCat("signal ", sig);
}

// Keeps the last kTailBytes of a stream.
void AppendTail(std::string& tail, std::string_view data) {
  tail.append(data.data(), data.size());
  if (tail.size() > kTailBytes) {
    tail.erase(0, tail.size() - kTailBytes);
  }
}

// One line of untrusted text, printable ASCII only, at most 200 characters.
std::string Sanitize(absl::string_view line) {
  std::string out;
  for (char c : line.substr(0, 200)) {
    out.push_back(c >= 0x20 && c < 0x7f ? c : '?');
  }
  return out;
}

// The line of `text` containing `needle`, if any.
std::optional<std::string> LineWith(const std::string& text, absl::string_view needle) {
  size_t at = text.rfind(std::string(needle));
  if (at == std::string::npos) {
    return std::nullopt;
  }
  size_t begin = text.rfind('\n', at);
  begin = begin == std::string::npos ? 0 : begin + 1;
  size_t end = text.find('\n', at);
  std::string line = text.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
  // Drop the "[    1.234567] " printk timestamp.
  if (size_t bracket = line.find("] ");
      !line.empty() && line[0] == '[' && bracket != std::string::npos) {
    line.erase(0, bracket + 2);
  }
  return Sanitize(absl::StripTrailingAsciiWhitespace(line));
}

std::string LastLine(const std::string& text) {
  std::vector<absl::string_view> lines = absl::StrSplit(text, '\n', absl::SkipWhitespace());
  return lines.empty() ? "" : Sanitize(absl::StripTrailingAsciiWhitespace(lines.back()));
}

class Shim {
 public:
  Shim(ShimArgs args, ShimConfig config) : args_(std::move(args)), config_(std::move(config)) {}
  int Run();

 private:
  void SendReady(const ShimReady& ready);
  void FailStartup(const std::string& why);
  void Drain(int& fd, bool console);
  bool TryQmpReady(Clock::time_point deadline);
  void KillQemu();
  void QuitQemu();
  void RecordExit(const std::string& reason);
  int CallerGone();
  absl::StatusOr<LaunchedQemu> LaunchJailed();

  ShimArgs args_;
  ShimConfig config_;
  std::optional<BoundedLog> console_log_;
  std::optional<BoundedLog> qemu_log_;
  std::string console_tail_;
  std::string output_tail_;
  LaunchedQemu qemu_;
  // The per-VM uid QEMU runs as (root only), held for the shim's life.
  std::optional<VmUidLease> uid_lease_;
  int console_fd_ = -1;
  int output_fd_ = -1;
  VmState state_;
  bool ready_ = false;
  bool log_write_failed_ = false;
};

void Shim::SendReady(const ShimReady& ready) {
  if (args_.ready_fd < 0) {
    return;
  }
  // The caller may be gone already (SIGPIPE is ignored); nothing to do about that.
  (void)base::WriteAll(args_.ready_fd, ShimReadyToJson(ready) + "\n");
  ::close(args_.ready_fd);
  args_.ready_fd = -1;
}

void Shim::Drain(int& fd, bool console) {
  char buf[65536];
  while (fd >= 0) {
    absl::StatusOr<size_t> n = base::ReadSome(fd, buf, sizeof(buf));
    if (!n.ok() && absl::IsUnavailable(n.status())) {
      return;  // EAGAIN: all read for now
    }
    if (!n.ok() || *n == 0) {
      fd = -1;  // EOF: QEMU closed its end (the descriptor itself stays owned by qemu_)
      return;
    }
    std::string_view data(buf, *n);
    BoundedLog& log = console ? *console_log_ : *qemu_log_;
    if (absl::Status s = log.Append(data); !s.ok() && !log_write_failed_) {
      log_write_failed_ = true;  // once: shim.log must stay small even when the disk is full
      spdlog::warn("writing {}: {}", log.path(), s.ToString());
    }
    AppendTail(console ? console_tail_ : output_tail_, data);
  }
}

bool Shim::TryQmpReady(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now());
  absl::StatusOr<QmpClient> qmp = QmpClient::Connect(RunDirPath(config_.run_dir, kQmpSocket),
                                                     std::min(left, milliseconds(2000)));
  if (!qmp.ok()) {
    return false;  // not up yet; the caller of TryQmpReady enforces the deadline
  }
  // The connection closes here: QEMU serves one QMP client at a time, and that is the caller.
  state_.phase = VmPhase::kRunning;
  if (absl::Status s = WriteVmState(config_.run_dir, state_); !s.ok()) {
    spdlog::warn("writing state: {}", s.ToString());
  }
  SendReady({.ok = true, .shim_pid = state_.shim_pid, .qemu_pid = state_.qemu_pid});
  ready_ = true;
  spdlog::info("QEMU pid {} is up", state_.qemu_pid);
  return true;
}

void Shim::KillQemu() {
  (void)qemu_.process.Kill(SIGKILL);
  if (absl::StatusOr<base::ExitStatus> s = qemu_.process.Wait(milliseconds(10000)); !s.ok()) {
    spdlog::error("QEMU pid {} did not die after SIGKILL: {}", state_.qemu_pid,
                  s.status().ToString());
  }
}

void Shim::QuitQemu() {
  absl::StatusOr<QmpClient> qmp =
      QmpClient::Connect(RunDirPath(config_.run_dir, kQmpSocket), milliseconds(1000));
  if (qmp.ok() && qmp->Quit(milliseconds(1000)).ok() &&
      qemu_.process.Wait(milliseconds(2000)).ok()) {
    return;
  }
  KillQemu();
}

void Shim::RecordExit(const std::string& reason) {
  std::optional<base::ExitStatus> st = qemu_.process.TryWait();
  state_.phase = VmPhase::kExited;
  state_.exited_at_ms = UnixMs();
  state_.exit_reason = reason;
  if (st) {
    state_.exit_code = st->exit_code;
    state_.exit_signal = st->signal;
  }
  spdlog::info("QEMU ended: {}", reason);
  if (absl::Status s = WriteVmState(config_.run_dir, state_); !s.ok()) {
    spdlog::warn("writing state: {}", s.ToString());
  }
}

void Shim::FailStartup(const std::string& why) {
  std::string message = why;
  std::string tail(absl::StripAsciiWhitespace(
      ReadLogTail(RunDirPath(config_.run_dir, kQemuLog), kErrorTailBytes)));
  if (!tail.empty() && !absl::StrContains(message, tail)) {
    absl::StrAppend(&message, "; QEMU said:\n", tail);
  }
  SendReady(
      {.ok = false, .error = message, .shim_pid = state_.shim_pid, .qemu_pid = state_.qemu_pid});
}

int Shim::CallerGone() {
  spdlog::info("the caller went away; stopping QEMU and removing {}", config_.run_dir);
  QuitQemu();
  console_log_.reset();
  qemu_log_.reset();
  qemu_.console.reset();
  qemu_.output.reset();
  if (absl::Status s = RemoveRunDir(config_.run_dir); !s.ok()) {
    spdlog::error("removing the run_dir: {}", s.ToString());
    return 1;
  }
  return 0;
}

// Starts QEMU in its jail (decision 0021): a per-VM uid when root, new namespaces and a new
// root. Where the host refuses the namespaces (no user namespaces for this user, a container that
// forbids them), QEMU starts without them and state.json and the shim's log say so.
absl::StatusOr<LaunchedQemu> Shim::LaunchJailed() {
  const bool as_root = ::geteuid() == 0;
  if (config_.jail && config_.drop) {
    ABOX_ASSIGN_OR_RETURN(VmUidLease lease, LeaseVmUid(kVmUidLockDir, config_.id));
    config_.drop->uid = lease.uid;
    config_.drop->gid = lease.uid;
    uid_lease_ = std::move(lease);
  }
  std::string who = config_.drop
                        ? absl::StrCat("uid ", config_.drop->uid, ", gid ", config_.drop->gid)
                        : absl::StrCat("your own uid ", ::geteuid());
  if (!config_.jail) {
    state_.privileges = absl::StrCat(who, "; jail off (ABOX_JAIL=off): no namespaces");
    return LaunchQemu(config_, JailOptionsFor(config_, false), 0);
  }
  absl::StatusOr<LaunchedQemu> launched =
      LaunchQemu(config_, JailOptionsFor(config_, config_.namespaces != 0), config_.namespaces);
  if (launched.ok()) {
    state_.privileges = absl::StrCat(
        who, (config_.namespaces & CLONE_NEWUSER) != 0 ? " mapped in its own user namespace" : "",
        "; namespaces: ", NamespaceNames(config_.namespaces),
        "; root: a read-only tmpfs with /usr, /dev/{null,zero,urandom",
        config_.accel == Accel::kKvm ? ",kvm" : "", "} and its own /proc");
    return launched;
  }
  if (!absl::StrContains(launched.status().message(), "clone(new namespaces)")) {
    return launched;
  }
  std::string why = absl::StrCat(
      "QEMU runs without its own namespaces and root: the host refused them (",
      launched.status().message(), ")",
      as_root ? ""
              : "; allow unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1, "
                "or AppArmor's kernel.apparmor_restrict_unprivileged_userns=0)");
  spdlog::warn("{}", why);
  state_.privileges = absl::StrCat(who, "; ", why);
  // The first attempt bound the sockets; they are made again for the second.
  for (const char* socket : {kQmpSocket, kAgentSocket}) {
    ::unlink(RunDirPath(config_.run_dir, socket).c_str());
  }
  return LaunchQemu(config_, JailOptionsFor(config_, false), 0);
}

int Shim::Run() {
  state_.id = config_.id;
  state_.shim_pid = ::getpid();
  state_.accel = config_.accel;
  state_.accel_note = config_.accel_note;
  state_.tie_to_caller = config_.tie_to_caller;
  state_.started_at_ms = UnixMs();

  sigset_t mask;
  ::sigemptyset(&mask);
  for (int sig : {SIGTERM, SIGINT, SIGHUP}) {
    ::sigaddset(&mask, sig);
  }
  ::pthread_sigmask(SIG_BLOCK, &mask, nullptr);
  base::UniqueFd sigfd(::signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK));
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  ::sigaction(SIGPIPE, &ignore, nullptr);

  absl::StatusOr<BoundedLog> console =
      BoundedLog::Create(RunDirPath(config_.run_dir, kConsoleLog), config_.console_log_limit);
  absl::StatusOr<BoundedLog> qemu_log =
      BoundedLog::Create(RunDirPath(config_.run_dir, kQemuLog), config_.qemu_log_limit);
  if (!sigfd || !console.ok() || !qemu_log.ok()) {
    FailStartup(absl::StrCat(
        "abox-shim setup failed: ",
        !sigfd ? "signalfd" : (!console.ok() ? console : qemu_log).status().ToString()));
    return 1;
  }
  console_log_ = *std::move(console);
  qemu_log_ = *std::move(qemu_log);

  absl::StatusOr<LaunchedQemu> launched = LaunchJailed();
  if (!launched.ok()) {
    FailStartup(std::string(launched.status().message()));
    return 1;
  }
  qemu_ = *std::move(launched);
  if (config_.memory_fd >= 0) {
    // QEMU has its own copy; the shim must not keep a guest's memory alive.
    ::close(config_.memory_fd);
    config_.memory_fd = -1;
  }
  console_fd_ = qemu_.console.get();
  output_fd_ = qemu_.output.get();
  state_.qemu_pid = qemu_.process.pid();
  spdlog::info("started QEMU pid {}: {}", state_.qemu_pid, absl::StrJoin(qemu_.argv, " "));
  if (absl::Status s = WriteVmState(config_.run_dir, state_); !s.ok()) {
    spdlog::warn("writing state: {}", s.ToString());
  }

  Clock::time_point ready_deadline = Clock::now() + milliseconds(config_.ready_timeout_ms);
  for (;;) {
    pollfd fds[5] = {{console_fd_, POLLIN, 0},
                     {output_fd_, POLLIN, 0},
                     {qemu_.process.pidfd(), POLLIN, 0},
                     {sigfd.get(), POLLIN, 0},
                     {args_.caller_fd, POLLIN, 0}};
    int timeout = ready_ ? -1 : static_cast<int>(kPollWhileStarting.count());
    if (::poll(fds, 5, timeout) < 0 && errno != EINTR) {
      spdlog::error("{}", base::ErrnoError("poll").ToString());
      KillQemu();
      RecordExit("abox-shim failed (poll) and killed QEMU");
      return 1;
    }
    if (fds[0].revents != 0) {
      Drain(console_fd_, /*console=*/true);
    }
    if (fds[1].revents != 0) {
      Drain(output_fd_, /*console=*/false);
    }
    if (fds[4].revents != 0) {
      char byte;
      absl::StatusOr<size_t> n = base::ReadSome(args_.caller_fd, &byte, 1);
      if (!n.ok() || *n == 0) {
        return CallerGone();
      }
    }
    if (fds[3].revents != 0) {
      signalfd_siginfo info{};
      (void)!::read(sigfd.get(), &info, sizeof(info));
      KillQemu();
      Drain(console_fd_, true);
      Drain(output_fd_, false);
      std::string reason = absl::StrCat("stopped by the host (abox-shim got ",
                                        SignalName(static_cast<int>(info.ssi_signo)), ")");
      if (!ready_) {
        FailStartup(reason);
      }
      RecordExit(reason);
      return 0;
    }
    if (fds[2].revents != 0) {
      // QEMU has exited: collect the last of its output, then say why it ended.
      Drain(console_fd_, true);
      Drain(output_fd_, false);
      std::optional<base::ExitStatus> st = qemu_.process.TryWait();
      std::string reason = DescribeQemuExit(st.value_or(base::ExitStatus{.exit_code = 255}),
                                            console_tail_, output_tail_);
      if (!ready_) {
        FailStartup(absl::StrCat("QEMU exited during startup: ", reason));
      }
      RecordExit(reason);
      return 0;
    }
    if (!ready_ && !TryQmpReady(ready_deadline) && Clock::now() >= ready_deadline) {
      KillQemu();
      std::string why =
          absl::StrCat("QEMU's QMP socket did not answer within ", config_.ready_timeout_ms, " ms");
      FailStartup(why);
      RecordExit(why);
      return 1;
    }
  }
}

}  // namespace

std::string DescribeQemuExit(const base::ExitStatus& status, const std::string& console_tail,
                             const std::string& qemu_log_tail) {
  if (status.signal) {
    return absl::StrCat("QEMU killed by signal ", *status.signal, " (", SignalName(*status.signal),
                        ")");
  }
  int code = status.exit_code.value_or(255);
  if (code != 0) {
    std::string last = LastLine(qemu_log_tail);
    return absl::StrCat("QEMU failed with exit code ", code, last.empty() ? "" : ": ", last);
  }
  if (auto panic = LineWith(console_tail, "Kernel panic - not syncing")) {
    return absl::StrCat("guest kernel panic: ", *panic);
  }
  if (LineWith(console_tail, "reboot: Power down")) {
    return "guest powered off";
  }
  if (LineWith(console_tail, "reboot: Restarting system")) {
    return "guest rebooted (a reboot ends the VM)";
  }
  return "QEMU exited with code 0";
}

absl::StatusOr<ShimArgs> ParseShimArgs(int argc, const char* const* argv) {
  ShimArgs args;
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i];
    if (i + 1 >= argc) {
      return absl::InvalidArgumentError(absl::StrCat(flag, ": missing value"));
    }
    std::string value = argv[++i];
    if (flag == "--run-dir") {
      args.run_dir = value;
    } else if (flag == "--ready-fd" || flag == "--caller-fd") {
      int fd = -1;
      if (!absl::SimpleAtoi(value, &fd) || fd < 3) {
        return absl::InvalidArgumentError(absl::StrCat(flag, ": bad descriptor \"", value, "\""));
      }
      (flag == "--ready-fd" ? args.ready_fd : args.caller_fd) = fd;
    } else {
      return absl::InvalidArgumentError(absl::StrCat("unknown flag ", flag));
    }
  }
  if (args.run_dir.empty() || args.ready_fd < 0) {
    return absl::InvalidArgumentError(
        "usage: abox-shim --run-dir DIR --ready-fd N [--caller-fd N] (started by abox, not by "
        "hand)");
  }
  return args;
}

int RunShim(const ShimArgs& args) {
  // Inherited descriptors must not leak into QEMU: a QEMU holding the ready pipe would hide the
  // shim's death from the caller.
  for (int fd : {args.ready_fd, args.caller_fd}) {
    if (fd >= 0) {
      ::fcntl(fd, F_SETFD, FD_CLOEXEC);
    }
  }
  std::string config_path = RunDirPath(args.run_dir, kShimConfigFile);
  absl::StatusOr<ShimConfig> config = [&]() -> absl::StatusOr<ShimConfig> {
    ABOX_ASSIGN_OR_RETURN(std::string text, base::ReadFile(config_path, 1 << 20));
    return ShimConfigFromJson(text);
  }();
  if (!config.ok()) {
    std::string error = absl::StrCat("abox-shim: ", config_path, ": ", config.status().message());
    spdlog::error("{}", error);
    (void)base::WriteAll(args.ready_fd, ShimReadyToJson({.ok = false, .error = error}) + "\n");
    return 2;
  }
  if (!config->tie_to_caller) {
    // Detach: the caller reaps this process at once and the shim carries on as an orphan (its
    // parent becomes init or the nearest subreaper), so it outlives the caller.
    pid_t pid = ::fork();
    if (pid < 0) {
      (void)base::WriteAll(
          args.ready_fd, ShimReadyToJson({.ok = false, .error = "abox-shim: fork failed"}) + "\n");
      return 1;
    }
    if (pid > 0) {
      ::_exit(0);
    }
  }
  Shim shim(args, *std::move(config));
  return shim.Run();
}

}  // namespace abox::vmm
