// SandboxManager's exec path, shared by API execs (StartExec) and the setup commands of a
// create (RunSetup): both are recorded in the exec history the same way.
#include <condition_variable>
#include <mutex>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "src/base/status_macros.h"
#include "src/daemon/sandbox_manager.h"
#include "src/proto/messages.h"

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

absl::StatusOr<std::shared_ptr<LiveExec>> SandboxManager::LaunchExec(const std::string& sandbox_id,
                                                                     runtime::AgentClient& agent,
                                                                     const api::ExecCreate& request,
                                                                     LiveExec::DoneFn on_done) {
  store::ExecRecord exec;
  exec.id = runtime::NewSandboxId();
  exec.sandbox_id = sandbox_id;
  exec.argv = request.argv;
  exec.shell = request.shell;
  exec.env = request.env;
  exec.cwd = request.cwd;
  exec.user = request.user;
  exec.pty = request.pty.has_value();
  exec.timeout_ms = request.timeout_ms;

  proto::ExecRequest wire;
  wire.argv = request.argv;
  if (!request.shell.empty()) {
    wire.shell = request.shell;
  }
  wire.env = request.env;
  wire.cwd = request.cwd;
  if (wire.cwd.empty() && deps_.workspaces != nullptr) {
    // Commands start in the workspace when one is bound.
    nlohmann::json ws = deps_.workspaces->Describe(sandbox_id);
    if (ws.is_object() && ws.contains("guest_path") && ws["guest_path"].is_string()) {
      wire.cwd = ws["guest_path"].get<std::string>();
    }
  }
  wire.user = request.user;
  wire.timeout_ms = static_cast<uint64_t>(request.timeout_ms);
  wire.stdin_open = request.stdin_open;
  if (request.pty) {
    wire.pty = proto::PtySize{static_cast<uint16_t>(request.pty->first),
                              static_cast<uint16_t>(request.pty->second)};
  }

  ABOX_ASSIGN_OR_RETURN(store::ExecRecord stored, deps_.execs->Insert(exec));
  absl::StatusOr<std::unique_ptr<runtime::Exec>> started = agent.StartExec(wire);
  if (!started.ok()) {
    store::ExecResult result;
    result.state = store::ExecState::kFailed;
    result.error = std::string(started.status().message());
    (void)deps_.execs->Finish(stored.id, result);
    return absl::UnavailableError(absl::StrCat("cannot start the command in sandbox ", sandbox_id,
                                               ": ", started.status().message()));
  }
  std::shared_ptr<LiveExec> live = LiveExec::Start(
      *std::move(started), stored,
      {.stdin_open = request.stdin_open, .kill_on_disconnect = request.kill_on_disconnect},
      *deps_.execs, *deps_.events, std::move(on_done));
  if (request.kill_on_disconnect) {
    // Between the create and the attach no connection watches the command: a client killed
    // there would leave it running for ever. Not attached by the deadline, it is killed.
    std::weak_ptr<LiveExec> weak = live;
    absl::Duration deadline = options_.exec_attach_deadline;
    deps_.timers->RunAfter(deadline, [weak, deadline] {
      if (std::shared_ptr<LiveExec> exec = weak.lock()) {
        exec->KillIfNeverAttached(deadline);
      }
    });
  }
  nlohmann::json payload = {{"exec_id", stored.id}};
  if (!stored.argv.empty()) {
    payload["argv"] = stored.argv;
  } else {
    payload["shell"] = stored.shell;
  }
  deps_.events->Publish(sandbox_id, store::event_type::kExecStarted, payload);
  return live;
}

absl::Status SandboxManager::RunSetup(const std::string& id, runtime::Sandbox& sandbox,
                                      const api::SetupSpec& setup, std::vector<net::Rule> rules) {
  if (deps_.egress != nullptr) {
    deps_.egress->Widen(id, std::move(rules));
  }
  absl::Cleanup narrow = [&] {
    if (deps_.egress != nullptr) {
      deps_.egress->Narrow(id);
    }
  };
  deps_.events->Publish(id, "setup_started",
                        {{"commands", setup.commands}, {"allow", setup.allow}});
  for (const std::string& command : setup.commands) {
    api::ExecCreate exec;
    exec.shell = command;
    exec.user = "agent";
    exec.sync = false;
    struct Done {
      std::mutex mu;
      std::condition_variable cv;
      std::optional<store::ExecRecord> record;
    };
    auto done = std::make_shared<Done>();
    ABOX_ASSIGN_OR_RETURN(std::shared_ptr<LiveExec> live,
                          LaunchExec(id, sandbox.agent(), exec, nullptr));
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
    std::string tail = OutputTail(*deps_.execs, ended.id);
    deps_.events->Publish(id, "setup_failed", {{"command", command}, {"exec_id", ended.id}});
    return absl::AbortedError(absl::StrCat(
        "setup command \"", command, "\" ", how, " (exec ", ended.id, ")",
        tail.empty() ? "; it printed nothing" : absl::StrCat("; its last output:\n", tail)));
  }
  deps_.events->Publish(id, "setup_finished", {{"commands", setup.commands.size()}});
  return absl::OkStatus();
}

}  // namespace abox::daemon
