#include <utility>

#include "absl/strings/str_cat.h"
#include "src/api/sandbox.h"
#include "src/client/answers.h"
#include "src/client/api_paths.h"
#include "src/mcp/text.h"
#include "src/mcp/tools.h"

namespace abox::mcp {
namespace {

template <typename Fn>
absl::StatusOr<client::ApiResponse> Exchange(ToolEnv& env, CallContext& ctx, Fn fn) {
  absl::StatusOr<std::unique_ptr<client::ApiClient>> api = env.daemon().NewClient();
  if (!api.ok()) {
    return api.status();
  }
  client::ApiClient* raw = api->get();
  CallContext::CancelHook hook(ctx, [raw] { raw->Cancel(); });
  return fn(*raw);
}

}  // namespace

void ToolEnv::AddOwned(const std::string& id) {
  std::lock_guard<std::mutex> lock(mu_);
  owned_.insert(id);
}

bool ToolEnv::Owns(const std::string& id) {
  std::lock_guard<std::mutex> lock(mu_);
  return owned_.count(id) != 0;
}

std::vector<Tool> AllTools(ToolEnv& env) {
  std::vector<Tool> all;
  for (auto group : {SandboxTools, SnapshotTools, ExecTools, FileTools, WorkspaceTools}) {
    for (Tool& tool : group(env)) {
      all.push_back(std::move(tool));
    }
  }
  return all;
}

std::string Instructions() {
  return "abox runs commands in disposable microVM sandboxes on this machine. Use it to run "
         "code you did not write, installs, builds and tests that could harm the host, or "
         "anything that needs an isolated Linux. sandbox_create makes one (by default with a "
         "copy of the current directory at /workspace); exec runs a command and returns its "
         "exit code and output (a non-zero exit code is a result, not a failure); long "
         "commands go through exec_start / exec_read / exec_wait. Changes stay in the sandbox: "
         "workspace_diff shows them, and the person applies them to the host themselves "
         "(apply_changes says how). Network access is limited by the egress policy; "
         "egress_request asks the person for more.";
}

nlohmann::json SandboxSchema() {
  return {{"type", "object"},
          {"properties",
           {{"id", {{"type", "string"}}},
            {"name", {{"type", "string"}}},
            {"image", {{"type", "string"}}},
            {"state", {{"type", "string"}}},
            {"cpus", {{"type", "integer"}}},
            {"memory_mib", {{"type", "integer"}}},
            {"created_here", {{"type", "boolean"}}}}},
          {"required", {"id", "state"}}};
}

// The daemon's sandbox object, plus whether this abox-mcp created it.
absl::StatusOr<nlohmann::json> SandboxJson(ToolEnv& env, const client::ApiResponse& r,
                                           absl::string_view request) {
  absl::StatusOr<api::Sandbox> sandbox = client::DecodeAnswer(r, request, api::DecodeSandbox);
  if (!sandbox.ok()) {
    return sandbox.status();
  }
  nlohmann::json out = r.json;
  out["created_here"] = env.Owns(sandbox->id);
  return out;
}

absl::StatusOr<nlohmann::json> SandboxListJson(ToolEnv& env, const client::ApiResponse& r,
                                               absl::string_view request) {
  absl::StatusOr<std::vector<api::Sandbox>> list =
      client::DecodeAnswer(r, request, api::DecodeSandboxList);
  if (!list.ok()) {
    return list.status();
  }
  nlohmann::json out = nlohmann::json::array();
  for (const api::Sandbox& s : *list) {
    nlohmann::json item = {{"id", s.id},
                           {"name", s.name},
                           {"image", s.image},
                           {"state", s.state},
                           {"cpus", s.cpus},
                           {"memory_mib", s.memory_mib},
                           {"created_here", env.Owns(s.id)}};
    if (s.workspace.is_object() && s.workspace.contains("path")) {
      item["workspace"] = s.workspace["path"];
    }
    if (!s.failure.empty()) {
      item["failure"] = s.failure;
    }
    out.push_back(std::move(item));
  }
  return nlohmann::json{{"sandboxes", std::move(out)}};
}

nlohmann::json Annotations(bool read_only, bool destructive, bool idempotent, bool open_world) {
  return {{"readOnlyHint", read_only},
          {"destructiveHint", destructive},
          {"idempotentHint", idempotent},
          {"openWorldHint", open_world}};
}

absl::StatusOr<client::ApiResponse> ApiGet(ToolEnv& env, CallContext& ctx,
                                           absl::string_view target) {
  return Exchange(env, ctx, [&](client::ApiClient& api) { return api.Get(target); });
}

absl::StatusOr<client::ApiResponse> ApiPost(ToolEnv& env, CallContext& ctx,
                                            absl::string_view target, const nlohmann::json& body) {
  return Exchange(env, ctx, [&](client::ApiClient& api) { return api.Post(target, body); });
}

absl::StatusOr<client::ApiResponse> ApiDelete(ToolEnv& env, CallContext& ctx,
                                              absl::string_view target) {
  return Exchange(env, ctx, [&](client::ApiClient& api) { return api.Delete(target); });
}

absl::StatusOr<std::string> SandboxId(ToolEnv& env, CallContext& ctx, const std::string& asked) {
  absl::StatusOr<client::ApiResponse> r = ApiGet(env, ctx, client::SandboxPath(asked));
  if (!r.ok()) {
    return r.status();
  }
  absl::StatusOr<api::Sandbox> s =
      client::DecodeAnswer(*r, "GET /v1/sandboxes/{id}", api::DecodeSandbox);
  if (!s.ok()) {
    return s.status();
  }
  return s->id;
}

ProgressTicker::ProgressTicker(CallContext& ctx, std::string message) {
  thread_ = std::thread([this, &ctx, message = std::move(message)] {
    absl::Time start = absl::Now();
    std::unique_lock<std::mutex> lock(mu_);
    while (!cv_.wait_for(lock, std::chrono::seconds(1), [&] { return done_; })) {
      double seconds = absl::ToDoubleSeconds(absl::Now() - start);
      ctx.Progress(seconds, absl::StrCat(message, " (", static_cast<int>(seconds), " s)"));
    }
  });
}

ProgressTicker::~ProgressTicker() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    done_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

absl::StatusOr<Captured> RunCaptured(ToolEnv& env, CallContext& ctx, const std::string& sandbox,
                                     api::ExecCreate create, const std::string& stdin_bytes,
                                     absl::Duration timeout, absl::string_view progress_message) {
  create.stdin_open = !stdin_bytes.empty();
  create.timeout_ms = absl::ToInt64Milliseconds(timeout);
  absl::StatusOr<std::shared_ptr<ExecSession>> session =
      env.sessions().Start(sandbox, std::move(create), stdin_bytes, true);
  if (!session.ok()) {
    return session.status();
  }
  ExecSession& s = **session;
  CallContext::CancelHook hook(ctx, [&] {
    (void)env.sessions().Signal(s, "KILL");
    s.Interrupt();
  });
  // aboxd enforces the timeout (timeout_ms) and reports timed_out; this deadline only guards
  // against a daemon that does not.
  absl::Time deadline = absl::Now() + timeout + absl::Seconds(5);
  absl::Time start = absl::Now();
  bool ended = false;
  while (!ended && !ctx.cancelled() && absl::Now() < deadline) {
    ended = s.WaitFor(absl::Seconds(1));
    if (!ended) {
      ExecState now = s.State();
      ctx.Progress(
          absl::ToDoubleSeconds(absl::Now() - start),
          absl::StrCat(progress_message, ": running ", absl::ToInt64Seconds(absl::Now() - start),
                       " s, ", now.stdout_bytes + now.stderr_bytes, " bytes of output"));
    }
  }
  if (ctx.cancelled()) {
    return absl::CancelledError("cancelled: the command was killed");
  }
  bool killed_here = false;
  if (!ended) {
    (void)env.sessions().Signal(s, "KILL");
    killed_here = true;
    (void)s.WaitFor(absl::Seconds(5));  // for its exit line, which says how it ended
  }
  Captured out;
  out.stdout_raw = s.OutputBytes(false);
  out.stdout_text = SanitizeUtf8(out.stdout_raw);
  out.stderr_text = s.Output(true);
  out.state = s.State();
  out.state.timed_out = out.state.timed_out || killed_here;
  out.sandbox_id = s.sandbox_id();
  return out;
}

}  // namespace abox::mcp
