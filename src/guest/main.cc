// abox-guest: the agent inside every abox VM. As /init in the initramfs it is stage 1 (see
// stage1.h); as PID 1 on the real root (--stage2) it sets up the system and serves the host
// over the virtio-serial port; for tests and debugging it serves one inherited fd or socket.
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "src/base/status_macros.h"
#include "src/base/version.h"
#include "src/guest/agent.h"
#include "src/guest/channel.h"
#include "src/guest/egress_setup.h"
#include "src/guest/identity_tool.h"
#include "src/guest/log.h"
#include "src/guest/oom_kills.h"
#include "src/guest/pid1.h"
#include "src/guest/stage1.h"
#include "src/guest/tunnel_hub.h"
#include "src/guest/workspace_tool.h"

namespace abox::guest {
namespace {

constexpr char kUsage[] =
    "usage: abox-guest [--stage2] [--port PATH | --channel-fd N | --socket PATH]\n"
    "       abox-guest ws manifest|unpack|pack ROOT [...]\n"
    "       abox-guest identity\n"
    "\n"
    "The abox guest agent. In the VM it runs as PID 1 and serves the host over the\n"
    "virtio-serial port named org.abox.agent.0.\n"
    "\n"
    "  --stage2         run as init (PID 1): mount /proc, /sys, /dev/pts, /dev/shm, /tmp, set\n"
    "                   the hostname, bring up lo, set up egress (DNS stub on :53, HTTP\n"
    "                   proxy on :3128, TCP redirect to :15001, all tunnelled to the host),\n"
    "                   reap orphans, power off on shutdown;\n"
    "                   the default when started as PID 1\n"
    "  --port PATH      serve this virtio-serial port (default with --stage2: discovered\n"
    "                   through /sys/class/virtio-ports)\n"
    "  --channel-fd N   serve the host over inherited fd N (a socket or pipe); exit at EOF\n"
    "                   (as PID 1: power off at EOF)\n"
    "  --socket PATH    connect to the unix socket PATH and serve the host over it; exit at EOF\n"
    "                   (as PID 1: power off at EOF)\n"
    "  --version        print the agent and protocol versions\n"
    "  --help           show this help\n"
    "\n"
    "Workspace sync (the host runs these through the exec channel):\n"
    "  ws manifest ROOT [--cache FILE]   print the manifest (NDJSON) of the tree ROOT\n"
    "  ws unpack ROOT [--owner UID:GID]  apply the sync archive on stdin to ROOT\n"
    "  ws pack ROOT                      write a sync archive of the NUL-separated paths on\n"
    "                                    stdin (those that exist below ROOT) to stdout\n"
    "\n"
    "Identity (the host runs this as root before any command of a restored VM):\n"
    "  identity   read {\"seed\",\"unix_time_ns\",\"hostname\",\"machine_id\",\"sandbox_id\"} as\n"
    "             JSON on stdin; seed the kernel RNG, set the clock and hostname, write\n"
    "             /etc/machine-id and /run/abox/sandbox-id; print {\"ok\":true}\n"
    "\n"
    "Commands run as the user `agent` (or root on request) when abox-guest is root, else as\n"
    "the invoking user.\n";

struct Flags {
  bool stage2 = false;
  std::optional<std::string> port;
  std::optional<int> channel_fd;
  std::optional<std::string> socket;
};

int UsageError(absl::string_view message) {
  Log(message);
  std::fputs(kUsage, stderr);
  return 2;
}

// Keeps 0, 1 and 2 open so that no pipe or socket we create lands on a stdio number.
void EnsureStdio() {
  for (int fd = 0; fd < 3; ++fd) {
    if (::fcntl(fd, F_GETFD) < 0) {
      ::open("/dev/null", O_RDWR | O_CLOEXEC);  // Takes the lowest free number: `fd`.
    }
  }
}

absl::StatusOr<base::UniqueFd> OpenPort(const std::string& path) {
  base::UniqueFd fd(::open(path.c_str(), O_RDWR | O_NONBLOCK | O_CLOEXEC | O_NOCTTY));
  if (!fd) {
    return base::ErrnoError(absl::StrCat("open(", path, ")"));
  }
  return fd;
}

// Waits (forever: PID 1 has nothing better to do) for the agent port to appear and opens it.
base::UniqueFd WaitForPort() {
  auto start = std::chrono::steady_clock::now();
  auto next_log = start + std::chrono::seconds(1);
  for (;;) {
    absl::Status error =
        absl::NotFoundError(absl::StrCat("no virtio-serial port named ", kAgentPortName));
    if (std::optional<std::string> path = FindAgentPort()) {
      absl::StatusOr<base::UniqueFd> fd = OpenPort(*path);
      if (fd.ok()) {
        Log(absl::StrCat("serving the host on ", *path));
        return *std::move(fd);
      }
      error = fd.status();
    }
    if (std::chrono::steady_clock::now() >= next_log) {
      Log(absl::StrCat("still waiting for the agent port: ", error.message()));
      next_log += std::chrono::seconds(10);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

absl::StatusOr<base::UniqueFd> ConnectSocket(const std::string& path) {
  sockaddr_un addr{};
  if (path.size() >= sizeof(addr.sun_path)) {
    return absl::InvalidArgumentError(absl::StrCat("socket path too long: ", path));
  }
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.data(), path.size());
  base::UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd) {
    return base::ErrnoError("socket(AF_UNIX)");
  }
  int rc;
  do {
    rc = ::connect(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof(addr));
  } while (rc != 0 && errno == EINTR);
  if (rc != 0) {
    return base::ErrnoError(absl::StrCat("connect(", path, ")"));
  }
  return fd;
}

// Egress in the VM: the sockets first (the redirect must find them listening), then the system
// side. Failures are logged: the agent serves commands without egress.
std::unique_ptr<TunnelHub> StartEgress() {
  if (!IsMachineInit()) {
    return nullptr;  // PID 1 of a container (tests): not ours to reroute.
  }
  auto start = std::chrono::steady_clock::now();
  EgressPorts ports;
  absl::StatusOr<EgressSockets> sockets = OpenEgressSockets(ports);
  if (!sockets.ok()) {
    Log(absl::StrCat("egress disabled: ", sockets.status().message()));
    return nullptr;
  }
  (void)SetUpEgress(ports);
  Log(absl::StrCat("egress set up in ",
                   std::chrono::duration_cast<std::chrono::milliseconds>(
                       std::chrono::steady_clock::now() - start)
                       .count(),
                   " ms"));
  return std::make_unique<TunnelHub>(TunnelHub::Options{.sockets = *std::move(sockets)});
}

[[noreturn]] void RunStage2(const Flags& flags) {
  if (::chdir("/") != 0) {
    Log(absl::StrCat("chdir(/): ", ErrnoText(errno)));
  }
  (void)SetUpSystem();  // Failures are logged; the agent still serves what it can.
  std::unique_ptr<TunnelHub> egress = StartEgress();
  absl::StatusOr<base::UniqueFd> signals = TakeOverSignals();
  if (!signals.ok()) {
    PowerOffAfterFailure(signals.status().message());
  }
  absl::StatusOr<base::UniqueFd> fd;
  ChannelKind kind = ChannelKind::kVirtioPort;
  if (flags.port) {
    fd = OpenPort(*flags.port);
  } else if (flags.socket) {
    fd = ConnectSocket(*flags.socket);  // PID 1 of a container (tests): ends at EOF.
    kind = ChannelKind::kStream;
  } else if (flags.channel_fd) {
    fd = base::UniqueFd(*flags.channel_fd);
    kind = ChannelKind::kStream;
  } else {
    fd = WaitForPort();
  }
  if (!fd.ok()) {
    PowerOffAfterFailure(fd.status().message());
  }
  absl::StatusOr<Channel> channel = Channel::Adopt(*std::move(fd), kind);
  if (!channel.ok()) {
    PowerOffAfterFailure(channel.status().message());
  }
  Agent agent(*std::move(channel), {.pid1 = true,
                                    .signal_fd = signals->get(),
                                    .switch_user = ::geteuid() == 0,
                                    .egress = egress.get(),
                                    .oom_counter_path = kVmstatPath});
  absl::StatusOr<Agent::Outcome> outcome = agent.Run();
  if (!outcome.ok()) {
    PowerOffAfterFailure(outcome.status().message());
  }
  if (*outcome == Agent::Outcome::kShutdown) {
    PowerOff();
  }
  if (*outcome == Agent::Outcome::kPeerClosed || *outcome == Agent::Outcome::kViolation) {
    Log("the host closed the channel");
    PowerOff();
  }
  PowerOffAfterFailure("the agent loop ended");
}

int RunOnChannel(const Flags& flags) {
  absl::StatusOr<base::UniqueFd> fd;
  ChannelKind kind = ChannelKind::kStream;
  if (flags.channel_fd) {
    fd = base::UniqueFd(*flags.channel_fd);
  } else if (flags.socket) {
    fd = ConnectSocket(*flags.socket);
  } else {
    fd = OpenPort(*flags.port);
    kind = ChannelKind::kVirtioPort;
  }
  if (!fd.ok()) {
    Log(fd.status().message());
    return 1;
  }
  absl::StatusOr<Channel> channel = Channel::Adopt(*std::move(fd), kind);
  if (!channel.ok()) {
    Log(channel.status().message());
    return 1;
  }
  absl::StatusOr<base::UniqueFd> signals = TakeOverSignals();
  if (!signals.ok()) {
    Log(signals.status().message());
    return 1;
  }
  Agent agent(*std::move(channel),
              {.pid1 = false, .signal_fd = signals->get(), .switch_user = ::geteuid() == 0});
  absl::StatusOr<Agent::Outcome> outcome = agent.Run();
  if (!outcome.ok()) {
    Log(outcome.status().message());
    return 1;
  }
  return *outcome == Agent::Outcome::kViolation ? 1 : 0;
}

int Main(int argc, char** argv) {
  if (argc >= 2 && absl::string_view(argv[1]) == "ws") {
    return RunWorkspaceTool(argc - 1, argv + 1, STDIN_FILENO, STDOUT_FILENO, STDERR_FILENO);
  }
  if (argc >= 2 && absl::string_view(argv[1]) == "identity") {
    SystemIdentityEffects effects;
    return RunIdentityTool(argc - 1, argv + 1, STDIN_FILENO, STDOUT_FILENO, STDERR_FILENO, effects);
  }
  Flags flags;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    std::optional<std::string> value;
    if (size_t eq = arg.find('='); arg.rfind("--", 0) == 0 && eq != std::string::npos) {
      value = arg.substr(eq + 1);
      arg.resize(eq);
    }
    auto take_value = [&]() -> std::optional<std::string> {
      if (value) {
        return value;
      }
      if (i + 1 < argc) {
        return std::string(argv[++i]);
      }
      return std::nullopt;
    };
    if (arg == "--help" || arg == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (arg == "--version") {
      std::printf("abox-guest %s (protocol %u-%u)\n", kVersion, proto::kMinProtocolVersion,
                  proto::kProtocolVersion);
      return 0;
    }
    if (arg == "--stage2") {
      flags.stage2 = true;
    } else if (arg == "--port" || arg == "--socket" || arg == "--channel-fd") {
      std::optional<std::string> v = take_value();
      if (!v || v->empty()) {
        return UsageError(absl::StrCat(arg, " needs a value"));
      }
      if (arg == "--port") {
        flags.port = *v;
      } else if (arg == "--socket") {
        flags.socket = *v;
      } else {
        int fd = -1;
        if (!absl::SimpleAtoi(*v, &fd) || fd < 0) {
          return UsageError(absl::StrCat("--channel-fd: not a file descriptor: ", *v));
        }
        flags.channel_fd = fd;
      }
    } else {
      return UsageError(absl::StrCat("unknown argument: ", argv[i]));
    }
  }
  int channels = (flags.port ? 1 : 0) + (flags.channel_fd ? 1 : 0) + (flags.socket ? 1 : 0);
  if (channels > 1) {
    return UsageError("give at most one of --port, --channel-fd, --socket");
  }
  bool pid1 = ::getpid() == 1;
  if (flags.stage2 && !pid1) {
    return UsageError("--stage2 runs only as PID 1");
  }
  if (pid1) {
    RunStage2(flags);
  }
  if (channels == 0) {
    return UsageError("give one of --port, --channel-fd, --socket (or run as PID 1)");
  }
  return RunOnChannel(flags);
}

}  // namespace
}  // namespace abox::guest

int main(int argc, char** argv) {
  if (abox::guest::IsInitramfsStage()) {
    abox::guest::RunStage1();
  }
  abox::guest::EnsureStdio();
  int rc = abox::guest::Main(argc, argv);
  if (::getpid() == 1) {
    // PID 1 must never exit (the kernel would panic).
    abox::guest::PowerOffAfterFailure(absl::StrCat("abox-guest would exit with status ", rc));
  }
  return rc;
}
