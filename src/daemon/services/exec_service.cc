#include "src/daemon/services/exec_service.h"

#include "absl/strings/str_cat.h"
#include "src/base/status_macros.h"
#include "src/daemon/lifecycle/transitions.h"
#include "src/proto/messages.h"

namespace abox::daemon {

absl::Status ExecService::GiveSecrets(const std::string& sandbox_id, const api::ExecCreate& request,
                                      proto::ExecRequest& wire, LiveExec::Options& options) {
  SecretGrants& grants = *ctx_->grants;
  for (const std::string& arg : request.argv) {
    ABOX_RETURN_IF_ERROR(grants.CheckNoValues("the command's argv", arg));
  }
  ABOX_RETURN_IF_ERROR(grants.CheckNoValues("the command's shell line", request.shell));
  ABOX_RETURN_IF_ERROR(grants.CheckNoValues("the command's working directory", request.cwd));
  for (const auto& [name, value] : request.env) {
    ABOX_RETURN_IF_ERROR(
        grants.CheckNoValues(absl::StrCat("the command's environment (", name, ")"), value));
  }
  // The placeholders and CA variables first: a variable the request sets itself wins.
  ABOX_ASSIGN_OR_RETURN(auto env, grants.Env(sandbox_id));
  for (auto& [name, value] : env) {
    wire.env.emplace(name, std::move(value));
  }
  if (request.stdin_open) {
    ABOX_ASSIGN_OR_RETURN(std::shared_ptr<const net::LeakPatterns> patterns,
                          grants.ValuePatterns());
    if (patterns != nullptr) {
      // One detector for the whole stream: a value split across writes is still found.
      auto detector = std::make_shared<net::LeakDetector>(patterns);
      options.stdin_check = [detector](absl::string_view data) -> absl::Status {
        if (std::optional<net::Leak> leak = detector->Feed(data)) {
          return absl::PermissionDeniedError(absl::StrCat(
              "stdin holds the real value of secret ", leak->name, " (", leak->encoding,
              "): secrets never enter a sandbox; this write and every later one is refused"));
        }
        return absl::OkStatus();
      };
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<LiveExec>> ExecService::Launch(const std::string& sandbox_id,
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
  if (wire.cwd.empty() && ctx_->workspaces != nullptr) {
    // Commands start in the workspace when one is bound.
    nlohmann::json ws = ctx_->workspaces->Describe(sandbox_id);
    if (ws.is_object() && ws.contains("guest_path") && ws["guest_path"].is_string()) {
      wire.cwd = ws["guest_path"].get<std::string>();
    }
  }
  wire.user = request.user;
  wire.timeout_ms = static_cast<uint64_t>(request.timeout_ms);
  wire.stdin_open = request.stdin_open;
  wire.kill_leftovers = request.kill_leftovers;
  if (request.pty) {
    wire.pty = proto::PtySize{static_cast<uint16_t>(request.pty->first),
                              static_cast<uint16_t>(request.pty->second)};
  }

  LiveExec::Options live_options{.stdin_open = request.stdin_open,
                                 .kill_on_disconnect = request.kill_on_disconnect};
  if (ctx_->grants != nullptr) {
    ABOX_RETURN_IF_ERROR(GiveSecrets(sandbox_id, request, wire, live_options));
  }

  ABOX_ASSIGN_OR_RETURN(store::ExecRecord stored, ctx_->execs->Insert(exec));
  absl::StatusOr<std::unique_ptr<runtime::Exec>> started = agent.StartExec(wire);
  if (!started.ok()) {
    store::ExecResult result;
    result.state = store::ExecState::kFailed;
    result.error = std::string(started.status().message());
    ctx_->recorder->Note(ctx_->execs->Finish(stored.id, result),
                         absl::StrCat("recording that exec ", stored.id, " did not start"));
    return absl::UnavailableError(absl::StrCat("cannot start the command in sandbox ", sandbox_id,
                                               ": ", started.status().message()));
  }
  std::shared_ptr<LiveExec> live =
      LiveExec::Start(*std::move(started), stored, std::move(live_options), *ctx_->execs,
                      *ctx_->events, std::move(on_done));
  if (request.kill_on_disconnect) {
    // Between the create and the attach no connection watches the command: a client killed
    // there would leave it running for ever. Not attached by the deadline, it is killed.
    std::weak_ptr<LiveExec> weak = live;
    absl::Duration deadline = ctx_->options.exec_attach_deadline;
    ctx_->timers->RunAfter(deadline, [weak, deadline] {
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
  ctx_->events->Publish(sandbox_id, store::event_type::kExecStarted, payload);
  return live;
}

absl::StatusOr<std::shared_ptr<LiveExec>> ExecService::Start(absl::string_view ref,
                                                             const api::ExecCreate& request) {
  ABOX_ASSIGN_OR_RETURN(store::SandboxRecord record, ctx_->sandboxes->Resolve(ref));
  if (record.state == SandboxState::kPaused && resume_) {
    // A command brings a paused sandbox back (the resume says why when it cannot).
    ABOX_RETURN_IF_ERROR(resume_(record.id));
    ABOX_ASSIGN_OR_RETURN(record, ctx_->sandboxes->Resolve(record.id));
  }
  if (Decision d = Decide(Operation::kExec, record); d.verdict == Verdict::kRefuse) {
    return d.refusal;
  }
  std::shared_ptr<LiveSandbox> live = ctx_->registry->Find(record.id);
  if (live == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("sandbox ", record.id, " is stopping: it runs no more commands"));
  }
  if (request.sync && ctx_->workspaces != nullptr && ctx_->workspaces->Has(record.id)) {
    absl::Status synced = gate_->WithGuestTools(
        record.id, [&](const store::SandboxRecord&, workspace::GuestTools& tools) {
          return ctx_->workspaces->Sync(record.id, tools).status();
        });
    if (!synced.ok()) {
      return absl::Status(synced.code(),
                          absl::StrCat(synced.message(),
                                       " (the command did not run; run it without the sync "
                                       "with --no-sync)"));
    }
  }
  std::weak_ptr<bool> alive = alive_;
  std::weak_ptr<LiveSandbox> weak_live = live;
  std::string sandbox_id = record.id;
  auto on_done = [this, alive, weak_live, sandbox_id](const store::ExecRecord& done) {
    if (alive.expired()) {
      return;
    }
    ctx_->recorder->Note(ctx_->sandboxes->Touch(sandbox_id),
                         absl::StrCat("recording activity of sandbox ", sandbox_id));
    std::string exec_id = done.id;
    ctx_->timers->Post([alive, weak_live, exec_id] {
      std::shared_ptr<LiveSandbox> owner = weak_live.lock();
      if (alive.expired() || owner == nullptr) {
        return;
      }
      if (std::shared_ptr<LiveExec> finished = owner->TakeExec(exec_id)) {
        finished->Join();
      }
    });
  };
  return live->Launch(
      [&](runtime::AgentClient& agent) { return Launch(record.id, agent, request, on_done); });
}

absl::StatusOr<ExecHandle> ExecService::Find(absl::string_view ref, absl::string_view exec_id) {
  ABOX_ASSIGN_OR_RETURN(store::SandboxRecord record, ctx_->sandboxes->Resolve(ref));
  // The live exec first, then its record: an exec leaves the live set only once its end is
  // recorded, so a record read after a miss is final (read before, it could say "running" of
  // an exec that ended in between).
  std::shared_ptr<LiveExec> live_exec;
  if (std::shared_ptr<LiveSandbox> live = ctx_->registry->Find(record.id)) {
    live_exec = live->FindExec(std::string(exec_id));
  }
  absl::StatusOr<store::ExecRecord> exec = ctx_->execs->Get(exec_id);
  if (!exec.ok() || exec->sandbox_id != record.id) {
    return absl::NotFoundError(absl::StrCat("no exec \"", exec_id, "\" in sandbox ", record.id,
                                            ": list them with GET /v1/sandboxes/", record.id,
                                            "/execs (abox logs ", record.id, ")"));
  }
  return ExecHandle{*std::move(exec), std::move(live_exec)};
}

absl::StatusOr<store::ExecWithOutput> ExecService::Output(absl::string_view exec_id) {
  return ctx_->execs->GetWithOutput(exec_id);
}

absl::StatusOr<std::vector<store::ExecRecord>> ExecService::List(absl::string_view ref, int limit) {
  ABOX_ASSIGN_OR_RETURN(store::SandboxRecord record, ctx_->sandboxes->Resolve(ref));
  return ctx_->execs->ListBySandbox(record.id, limit);
}

}  // namespace abox::daemon
