#include "src/cli/exit_status.h"

#include <cstdio>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "src/cli/terminal_text.h"

namespace abox::cli {

ExitReport ReportCommandEnd(const CommandOutcome& outcome) {
  ExitReport report;
  if (!outcome.error.empty()) {
    report.messages.push_back(outcome.error);
  }
  if (outcome.timed_out) {
    report.messages.push_back(
        absl::StrFormat("the command timed out after %gs and was killed", outcome.timeout_seconds));
    report.code = kExitTimeout;
  } else {
    report.code = outcome.exit_code ? *outcome.exit_code : 128 + outcome.signal.value_or(0);
  }
  api::Exec ended;
  ended.signal = outcome.signal;
  ended.timed_out = outcome.timed_out;
  ended.oom_kills = outcome.oom_kills;
  std::string oom = api::OomSentence(
      ended, outcome.memory.memory_mib,
      absl::StrCat("give it more with --memory MIB, e.g. ", outcome.memory.command, " --memory ",
                   api::SuggestedMemoryMib(outcome.memory.memory_mib)));
  if (!oom.empty()) {
    report.messages.push_back(std::move(oom));
  }
  return report;
}

ExitReport ReportExecEnd(const api::Exec& exec, const SandboxMemory& memory) {
  CommandOutcome outcome;
  if (exec.exit_code) {
    outcome.exit_code = static_cast<int>(*exec.exit_code);
  }
  if (exec.signal) {
    outcome.signal = static_cast<int>(*exec.signal);
  }
  outcome.timed_out = exec.timed_out;
  outcome.error = exec.error;
  outcome.timeout_seconds = static_cast<double>(exec.timeout_ms) / 1000.0;
  outcome.oom_kills = exec.oom_kills;
  outcome.memory = memory;
  const std::string& state = exec.state;
  bool ended_by_itself = outcome.exit_code || outcome.signal || outcome.timed_out;
  if (state == "exited" || (state == "failed" && ended_by_itself)) {
    return ReportCommandEnd(outcome);
  }
  ExitReport report;
  report.code = kExitAboxFailure;
  if (state == "failed") {
    const std::string& e = outcome.error;
    if (absl::StrContains(e, "not found") || absl::StrContains(e, "No such file or directory")) {
      report.code = kExitNotFound;
    } else if (absl::StrContains(e, "Permission denied") ||
               absl::StrContains(e, "Exec format error") ||
               absl::StrContains(e, "Is a directory")) {
      report.code = kExitCannotRun;
    }
    report.messages.push_back(e.empty() ? "the command could not be started" : e);
  } else if (state == "interrupted") {
    report.messages.push_back(
        outcome.error.empty()
            ? "the command was interrupted (its sandbox stopped or aboxd restarted)"
            : "the command was interrupted: " + outcome.error);
  } else {
    report.messages.push_back(absl::StrFormat(
        "aboxd reported the command as \"%s\" instead of ended; see `abox logs --execs`", state));
  }
  return report;
}

int PrintExitReport(const ExitReport& report) {
  for (const std::string& m : report.messages) {
    // The exec's error text comes from the guest: shown, not obeyed, on a terminal.
    std::fprintf(stderr, "abox: %s\n", ForTerminal(stderr, m).c_str());
  }
  return report.code;
}

}  // namespace abox::cli
