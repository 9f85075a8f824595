// The exit status of commands that run something in a sandbox (`abox run`, `abox exec`,
// `abox shell`): the command's own, or one of the conventions below (shared with `env`,
// `timeout` and `docker run`).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "src/api/exec.h"

namespace abox::cli {

inline constexpr int kExitTimeout = 124;      // --timeout killed the command
inline constexpr int kExitAboxFailure = 125;  // abox, aboxd or the sandbox failed
inline constexpr int kExitCannotRun = 126;    // found but not executable
inline constexpr int kExitNotFound = 127;     // command not found
inline constexpr int kExitInterrupted = 130;  // a second Ctrl-C gave up on the command

// What an out-of-memory message says about the sandbox: how much memory it has and the command
// that gives one more ("abox create --memory MIB", "abox run --memory MIB").
struct SandboxMemory {
  int64_t memory_mib = 0;  // 0: not known
  std::string command = "abox create";
};

// How a command ended.
struct CommandOutcome {
  std::optional<int> exit_code;  // at most one of exit_code / signal
  std::optional<int> signal;
  bool timed_out = false;
  std::string error;           // why it could not start (e.g. "ls: command not found")
  double timeout_seconds = 0;  // the --timeout, for the message
  int64_t oom_kills = 0;       // processes the guest's OOM killer ended while it ran
  SandboxMemory memory;        // for the message when oom_kills > 0
};

// The exit code to use and the lines to print on stderr (without the "abox: " prefix).
struct ExitReport {
  int code = 0;
  std::vector<std::string> messages;
};

// A command that ended: its error is reported; a timeout is 124; otherwise the exit code, or
// 128 + the signal that killed it. OOM kills while it ran are reported (api::OomSentence) and
// change no exit code: "the command was killed for lack of memory (the sandbox has 512 MiB; give
// it more with --memory MIB, e.g. abox create --memory 1024)" when it died by SIGKILL itself,
// else "the OOM killer ended N processes during this command (...)".
[[nodiscard]] ExitReport ReportCommandEnd(const CommandOutcome& outcome);

// An exec as the API reports it when it ended (the `exec` of the output stream's `exit` line):
// state "exited" as ReportCommandEnd; "failed" (it could not start) 127 when the error says it
// was not found, 126 when it could not be executed, else 125; "interrupted" (the sandbox or
// aboxd stopped under it) 125. Each failure's `error` is reported, and its OOM kills as
// ReportCommandEnd does (`memory`: the sandbox's).
[[nodiscard]] ExitReport ReportExecEnd(const api::Exec& exec, const SandboxMemory& memory = {});

// Prints each message as "abox: <message>" on stderr (control characters shown on a terminal:
// terminal_text.h) and returns the code.
int PrintExitReport(const ExitReport& report);

}  // namespace abox::cli
