#include "src/cli/terminal.h"

#include <poll.h>
#include <pthread.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <cerrno>
#include <string>

namespace abox::cli {

sigset_t HandledSignals() {
  sigset_t set;
  sigemptyset(&set);
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGWINCH}) {
    sigaddset(&set, sig);
  }
  return set;
}

void BlockHandledSignals() {
  sigset_t handled = HandledSignals();
  pthread_sigmask(SIG_BLOCK, &handled, nullptr);
}

std::optional<WindowSize> TerminalSize() {
  winsize ws{};
  if (::ioctl(STDIN_FILENO, TIOCGWINSZ, &ws) != 0 || ws.ws_row == 0 || ws.ws_col == 0) {
    return std::nullopt;
  }
  return WindowSize{ws.ws_row, ws.ws_col};
}

RawTerminal::RawTerminal() {
  if (::isatty(STDIN_FILENO) && ::tcgetattr(STDIN_FILENO, &saved_) == 0) {
    termios raw = saved_;
    ::cfmakeraw(&raw);
    active_ = ::tcsetattr(STDIN_FILENO, TCSANOW, &raw) == 0;
  }
}

RawTerminal::~RawTerminal() {
  if (active_) {
    ::tcsetattr(STDIN_FILENO, TCSANOW, &saved_);
  }
}

SignalForwarder::SignalForwarder(Handlers handlers)
    : handlers_(std::move(handlers)), thread_([this] { Run(); }) {}

SignalForwarder::~SignalForwarder() { Stop(); }

void SignalForwarder::Run() {
  sigset_t handled = HandledSignals();
  int count[NSIG] = {};
  for (;;) {
    int sig = 0;
    if (sigwait(&handled, &sig) != 0 || done_) {
      return;
    }
    if (sig == SIGWINCH) {
      if (handlers_.on_resize) {
        handlers_.on_resize();
      }
      continue;
    }
    if (!handlers_.on_signal(sig, ++count[sig])) {
      return;
    }
  }
}

void SignalForwarder::Stop() {
  if (!thread_.joinable()) {
    return;
  }
  done_ = true;
  // Wakes sigwait() (the signal is blocked everywhere, so it goes to that thread's queue); a
  // thread that already returned just drops it.
  ::pthread_kill(thread_.native_handle(), SIGINT);
  thread_.join();
}

void ForwardStdin(int stop_fd, const std::function<bool(std::string_view data)>& write,
                  const std::function<void()>& close) {
  char buf[64 * 1024];
  for (;;) {
    pollfd fds[2] = {{STDIN_FILENO, POLLIN, 0}, {stop_fd, POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) {
        continue;
      }
      break;
    }
    if (fds[1].revents != 0) {
      return;
    }
    ssize_t n = ::read(STDIN_FILENO, buf, sizeof(buf));
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) {
      continue;
    }
    if (n <= 0) {
      break;
    }
    if (!write(std::string_view(buf, static_cast<size_t>(n)))) {
      return;
    }
  }
  close();
}

std::string SignalName(int sig) {
  switch (sig) {
    case SIGINT:
      return "INT";
    case SIGTERM:
      return "TERM";
    case SIGHUP:
      return "HUP";
    case SIGQUIT:
      return "QUIT";
    case SIGPIPE:
      return "PIPE";
    case SIGKILL:
      return "KILL";
    default:
      return std::to_string(sig);
  }
}

}  // namespace abox::cli
