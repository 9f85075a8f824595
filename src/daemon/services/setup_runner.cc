#include "src/daemon/services/setup_runner.h"

#include <algorithm>
#include <condition_variable>
#include <csignal>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "src/base/status_macros.h"

namespace abox::daemon {
namespace {

// The last lines of an exec's kept output, at most ~2 KiB, for an error message.
std::string OutputTail(store::ExecRepo& execs, const std::string& exec_id) {
  absl::StatusOr<store::ExecWithOutput> exec = execs.GetWithOutput(exec_id);
  if (!exec.ok()) {
    return "";
  }
  std::string all;
  for (const store::OutputChunk& chunk : exec->output) {
    all += chunk.data;
  }
  std::vector<std::string> lines = absl::StrSplit(all, '\n');
  while (!lines.empty() && lines.back().empty()) {
    lines.pop_back();
  }
  constexpr size_t kTailLines = 15;
  if (lines.size() > kTailLines) {
    lines.erase(lines.begin(), lines.end() - kTailLines);
  }
  std::string tail = absl::StrJoin(lines, "\n");
  if (tail.size() > 2048) {
    tail.erase(0, tail.size() - 2048);
  }
  return tail;
}

}  // namespace

absl::Status SetupRunner::Run(const std::string& id, runtime::Sandbox& sandbox,
                              const api::SetupSpec& setup, std::vector<net::Rule> rules) {
  if (ctx_->egress != nullptr) {
    ctx_->egress->Widen(id, std::move(rules));
  }
  absl::Status ran = RunCommands(id, sandbox, setup);
  // Before the sandbox is handed over, whatever happened: the setup policy's connections end
  // with it (a background process holding a tunnel open included).
  if (ctx_->egress != nullptr) {
    if (absl::Status narrowed = ctx_->egress->Narrow(id); ran.ok() && !narrowed.ok()) {
      return narrowed;
    }
  }
  return ran;
}

absl::Status SetupRunner::RunCommands(const std::string& id, runtime::Sandbox& sandbox,
                                      const api::SetupSpec& setup) {
  const absl::Duration budget = setup.timeout_seconds > 0 ? absl::Seconds(setup.timeout_seconds)
                                                          : ctx_->options.setup_timeout;
  const absl::Time deadline = ctx_->clock->Now() + budget;
  ctx_->events->Publish(id, "setup_started",
                        {{"commands", setup.commands},
                         {"root_commands", setup.root_commands},
                         {"allow", setup.allow},
                         {"timeout_seconds", absl::ToInt64Seconds(budget)}});
  auto timed_out = [&](const std::string& command, const std::string& exec_id) {
    ctx_->events->Publish(id, "setup_failed",
                          {{"command", command}, {"exec_id", exec_id}, {"timed_out", true}});
    std::string exec = exec_id.empty() ? "" : absl::StrCat(" (exec ", exec_id, ")");
    return absl::DeadlineExceededError(absl::StrCat(
        "setup timed out: command \"", command, "\" was still running when the setup's ",
        absl::FormatDuration(budget), " ran out", exec,
        "; give setup more time (setup.timeout_seconds) or make the command faster"));
  };
  // Root's commands first (system setup: packages, services), then the agent's.
  std::vector<std::pair<std::string, const char*>> steps;
  for (const std::string& command : setup.root_commands) {
    steps.emplace_back(command, "root");
  }
  for (const std::string& command : setup.commands) {
    steps.emplace_back(command, "agent");
  }
  for (const auto& [command, user] : steps) {
    const absl::Duration left = deadline - ctx_->clock->Now();
    if (left <= absl::ZeroDuration()) {
      return timed_out(command, "");
    }
    api::ExecCreate exec;
    exec.shell = command;
    exec.user = user;
    // Whatever the command leaves running (`sleep 1000 &`, a daemon that called setsid) is
    // killed as it ends, so nothing setup started runs on under the narrowed policy: in the VM
    // the agent runs it in a cgroup of its own and kills that (docs/protocol.md).
    exec.kill_leftovers = true;
    exec.sync = false;
    // The agent kills the command's process group at the deadline, and the host holds it even
    // when the agent does not (AgentClient::Options::timeout_grace).
    exec.timeout_ms =
        std::max<int64_t>(1, absl::ToInt64Milliseconds(absl::Ceil(left, absl::Milliseconds(1))));
    struct Done {
      std::mutex mu;
      std::condition_variable cv;
      std::optional<store::ExecRecord> record;
    };
    auto done = std::make_shared<Done>();
    ABOX_ASSIGN_OR_RETURN(std::shared_ptr<LiveExec> live,
                          execs_->Launch(id, sandbox.agent(), exec, nullptr));
    live->OnDone([done](const store::ExecRecord& record) {
      std::lock_guard lock(done->mu);
      done->record = record;
      done->cv.notify_all();
    });
    {
      // Ends when the command does, or when the agent connection fails (the VM died).
      std::unique_lock lock(done->mu);
      done->cv.wait(lock, [&] { return done->record.has_value(); });
    }
    live->Join();
    const store::ExecRecord& ended = *done->record;
    const store::ExecResult& result = ended.result;
    if (result.timed_out) {
      return timed_out(command, ended.id);
    }
    if (ended.state == store::ExecState::kExited && result.exit_code == 0) {
      continue;
    }
    std::string how;
    if (result.exit_code) {
      how = absl::StrCat("exited with code ", *result.exit_code);
    } else if (result.signal) {
      how = absl::StrCat("was killed by signal ", *result.signal);
    } else {
      how = absl::StrCat("failed: ", result.error.empty() ? "no exit status" : result.error);
    }
    if (result.oom_kills > 0) {
      absl::StrAppend(&how, result.signal == SIGKILL ? " for lack of memory" : "",
                      " (the OOM killer ended ", result.oom_kills,
                      result.oom_kills == 1 ? " process" : " processes",
                      " meanwhile; give the sandbox more with --memory MIB)");
    }
    std::string tail = OutputTail(*ctx_->execs, ended.id);
    ctx_->events->Publish(id, "setup_failed", {{"command", command}, {"exec_id", ended.id}});
    return absl::AbortedError(absl::StrCat(
        "setup command \"", command, "\" ", how, " (exec ", ended.id, ")",
        tail.empty() ? "; it printed nothing" : absl::StrCat("; its last output:\n", tail)));
  }
  ctx_->events->Publish(id, "setup_finished", {{"commands", steps.size()}});
  return absl::OkStatus();
}

}  // namespace abox::daemon
