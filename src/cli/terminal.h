// The local terminal and signals of commands that run something interactively (`abox run`,
// `abox exec`, `abox shell`): raw mode, window size, and a thread that receives the signals a
// person sends (Ctrl-C, window resizes) so they can be forwarded to the remote command.
#pragma once

#include <signal.h>
#include <termios.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <thread>

namespace abox::cli {

// The signals these commands handle themselves: SIGINT, SIGTERM, SIGHUP and SIGQUIT (forwarded
// to the command) and SIGWINCH (the window size changed).
[[nodiscard]] sigset_t HandledSignals();

// Blocks HandledSignals() in the calling thread; threads started afterwards inherit the mask,
// so only SignalForwarder's sigwait() sees them. Call before starting any thread.
void BlockHandledSignals();

struct WindowSize {
  uint16_t rows = 0;
  uint16_t cols = 0;
};

// The window size of the terminal on stdin (TIOCGWINSZ), or nullopt when stdin is no terminal.
[[nodiscard]] std::optional<WindowSize> TerminalSize();

// Puts the terminal on stdin in raw mode for the lifetime of the object (keys go to the remote
// PTY, whose line discipline echoes and interprets them), restoring it afterwards. Does nothing
// when stdin is no terminal.
class RawTerminal final {
 public:
  RawTerminal();
  ~RawTerminal();
  RawTerminal(const RawTerminal&) = delete;
  RawTerminal& operator=(const RawTerminal&) = delete;

 private:
  termios saved_{};
  bool active_ = false;
};

// Receives HandledSignals() on its own thread (block them first with BlockHandledSignals()).
// The handlers run on that thread.
class SignalForwarder final {
 public:
  struct Handlers {
    // SIGINT/SIGTERM/SIGHUP/SIGQUIT with how many times this signal has arrived (1 for the
    // first). Returning false stops the thread: later signals stay pending, unhandled.
    std::function<bool(int sig, int count)> on_signal;
    // SIGWINCH.
    std::function<void()> on_resize;
  };

  explicit SignalForwarder(Handlers handlers);
  // Stop()s.
  ~SignalForwarder();
  SignalForwarder(const SignalForwarder&) = delete;
  SignalForwarder& operator=(const SignalForwarder&) = delete;

  // Ends the thread and joins it. Idempotent.
  void Stop();

 private:
  void Run();

  Handlers handlers_;
  std::atomic<bool> done_{false};
  std::thread thread_;
};

// Forwards our stdin until EOF or until `stop_fd` becomes readable: `write` gets each chunk read
// (returning false stops the forwarding at once), `close` runs at EOF.
void ForwardStdin(int stop_fd, const std::function<bool(std::string_view data)>& write,
                  const std::function<void()>& close);

// The name the API takes for a signal ("INT", "TERM", ...), or its number as text.
[[nodiscard]] std::string SignalName(int sig);

}  // namespace abox::cli
