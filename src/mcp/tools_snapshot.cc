// sandbox_checkpoint, sandbox_checkpoints, sandbox_restore, sandbox_fork, sandbox_pause,
// sandbox_resume: the snapshot verbs of issue 13 for agents ("checkpoint, try the upgrade, run
// the tests; if they fail, restore"; fork to try N approaches side by side).
#include <utility>

#include "absl/strings/str_cat.h"
#include "src/api/checkpoint.h"
#include "src/api/sandbox.h"
#include "src/client/answers.h"
#include "src/client/api_paths.h"
#include "src/mcp/tool_args.h"
#include "src/mcp/tools.h"

namespace abox::mcp {
namespace {

nlohmann::json CheckpointSchema() {
  return {{"type", "object"},
          {"properties",
           {{"id", {{"type", "string"}}},
            {"name", {{"type", "string"}}},
            {"sandbox_id", {{"type", "string"}}},
            {"bytes", {{"type", "integer"}}},
            {"created_at", {{"type", "string"}}}}},
          {"required", {"id", "name"}}};
}

// A sandbox a restore would roll back holds someone's work: only this session's, unless the
// person started abox-mcp with --allow-remove-any.
absl::StatusOr<std::string> OwnedSandbox(ToolEnv& env, CallContext& ctx, const std::string& ref,
                                         absl::string_view what) {
  absl::StatusOr<std::string> id = SandboxId(env, ctx, ref);
  if (!id.ok()) {
    return id.status();
  }
  if (!env.Owns(*id) && !env.options().allow_remove_any) {
    return absl::PermissionDeniedError(
        absl::StrCat("sandbox ", *id,
                     " was not created by this abox-mcp session, so only the "
                     "person may ",
                     what, " it (`abox ", what, " ", *id, " ...`)"));
  }
  return id;
}

absl::StatusOr<nlohmann::json> Checkpoint(ToolEnv& env, const nlohmann::json& args,
                                          CallContext& ctx) {
  const std::string sandbox = StringArg(args, "sandbox");
  ctx.Progress(0, absl::StrCat("saving sandbox ", sandbox));
  absl::StatusOr<client::ApiResponse> r =
      ApiPost(env, ctx, client::SandboxPath(sandbox, "/checkpoints"),
              api::ToJson(api::CheckpointCreate{StringArg(args, "name")}));
  if (!r.ok()) {
    return r.status();
  }
  absl::StatusOr<api::Checkpoint> c =
      client::DecodeAnswer(*r, "POST /v1/sandboxes/{id}/checkpoints", api::DecodeCheckpoint);
  if (!c.ok()) {
    return c.status();
  }
  return r->json;
}

absl::StatusOr<nlohmann::json> Checkpoints(ToolEnv& env, const nlohmann::json& args,
                                           CallContext& ctx) {
  absl::StatusOr<client::ApiResponse> r =
      ApiGet(env, ctx, client::SandboxPath(StringArg(args, "sandbox"), "/checkpoints"));
  if (!r.ok()) {
    return r.status();
  }
  absl::StatusOr<std::vector<api::Checkpoint>> list =
      client::DecodeAnswer(*r, "GET /v1/sandboxes/{id}/checkpoints", api::DecodeCheckpointList);
  if (!list.ok()) {
    return list.status();
  }
  return r->json;
}

absl::StatusOr<nlohmann::json> Restore(ToolEnv& env, const nlohmann::json& args, CallContext& ctx) {
  absl::StatusOr<std::string> id = OwnedSandbox(env, ctx, StringArg(args, "sandbox"), "restore");
  if (!id.ok()) {
    return id.status();
  }
  ctx.Progress(0, absl::StrCat("restoring sandbox ", *id));
  absl::StatusOr<client::ApiResponse> r =
      ApiPost(env, ctx, client::SandboxPath(*id, "/restore"),
              api::ToJson(api::RestoreRequest{StringArg(args, "checkpoint")}));
  if (!r.ok()) {
    return r.status();
  }
  return SandboxJson(env, *r, "POST /v1/sandboxes/{id}/restore");
}

absl::StatusOr<nlohmann::json> Fork(ToolEnv& env, const nlohmann::json& args, CallContext& ctx) {
  const std::string sandbox = StringArg(args, "sandbox");
  int64_t count = IntArg(args, "count", 1);
  ctx.Progress(0, absl::StrCat("forking sandbox ", sandbox, " into ", count));
  absl::StatusOr<client::ApiResponse> r = ApiPost(
      env, ctx, client::SandboxPath(sandbox, "/fork"),
      api::ToJson(api::ForkRequest{.count = count, .name_prefix = StringArg(args, "name")}));
  if (!r.ok()) {
    return r.status();
  }
  absl::StatusOr<std::vector<api::Sandbox>> forks =
      client::DecodeAnswer(*r, "POST /v1/sandboxes/{id}/fork", api::DecodeSandboxList);
  if (!forks.ok()) {
    return forks.status();
  }
  for (const api::Sandbox& s : *forks) {
    env.AddOwned(s.id);  // this session made them: it may remove or restore them
  }
  return SandboxListJson(env, *r, "POST /v1/sandboxes/{id}/fork");
}

absl::StatusOr<nlohmann::json> PauseOrResume(ToolEnv& env, const nlohmann::json& args,
                                             CallContext& ctx, const std::string& verb) {
  absl::StatusOr<client::ApiResponse> r =
      ApiPost(env, ctx, client::SandboxPath(StringArg(args, "sandbox"), "/" + verb), nullptr);
  if (!r.ok()) {
    return r.status();
  }
  return SandboxJson(env, *r, absl::StrCat("POST /v1/sandboxes/{id}/", verb));
}

}  // namespace

std::vector<Tool> SnapshotTools(ToolEnv& env) {
  std::vector<Tool> tools;
  const nlohmann::json one_sandbox = ObjectSchema({{"sandbox", SandboxProp()}}, {"sandbox"});
  tools.push_back(Tool{
      "sandbox_checkpoint", "Checkpoint a sandbox",
      "Saves the whole sandbox (memory, running processes, disk, workspace base) under a name, "
      "so sandbox_restore can bring it back later: checkpoint before a risky step (an upgrade, "
      "a migration), restore if it goes wrong. The sandbox keeps running.",
      ObjectSchema({{"sandbox", SandboxProp()},
                    {"name", Prop("string", "A name for it (default: one is made up).")}},
                   {"sandbox"}),
      CheckpointSchema(), Annotations(false, false, false, false),
      [&env](const nlohmann::json& a, CallContext& c) { return Checkpoint(env, a, c); }});
  tools.push_back(
      Tool{"sandbox_checkpoints",
           "List a sandbox's checkpoints",
           "Lists the checkpoints of a sandbox (name, id, size in bytes, when taken).",
           one_sandbox,
           {{"type", "object"},
            {"properties", {{"checkpoints", {{"type", "array"}, {"items", CheckpointSchema()}}}}},
            {"required", nlohmann::json::array({"checkpoints"})}},
           Annotations(true, false, true, false),
           [&env](const nlohmann::json& a, CallContext& c) { return Checkpoints(env, a, c); }});
  tools.push_back(
      Tool{"sandbox_restore", "Restore a sandbox to a checkpoint",
           "Puts a sandbox this session created back to one of its checkpoints: processes, files "
           "and the workspace base as they were then (everything done since is lost; running "
           "commands end). A restore that cannot be done leaves the sandbox as it was.",
           ObjectSchema({{"sandbox", SandboxProp()},
                         {"checkpoint", Prop("string", "The checkpoint's name or id.")}},
                        {"sandbox", "checkpoint"}),
           SandboxSchema(), Annotations(false, true, true, false),
           [&env](const nlohmann::json& a, CallContext& c) { return Restore(env, a, c); }});
  tools.push_back(Tool{
      "sandbox_fork",
      "Fork a sandbox",
      "Makes count new sandboxes from a running one, each a copy of it at this moment (processes, "
      "files, egress policy, workspace) with its own identity; they are independent from then "
      "on. Use it to try several approaches side by side; remove the ones you do not keep.",
      ObjectSchema({{"sandbox", SandboxProp()},
                    {"count", IntProp("How many (default 1).", 1, 32)},
                    {"name", Prop("string", "Name prefix: the forks are NAME-1, NAME-2, ...")}},
                   {"sandbox"}),
      {{"type", "object"},
       {"properties", {{"sandboxes", {{"type", "array"}, {"items", SandboxSchema()}}}}},
       {"required", nlohmann::json::array({"sandboxes"})}},
      Annotations(false, false, false, false),
      [&env](const nlohmann::json& a, CallContext& c) { return Fork(env, a, c); }});
  tools.push_back(
      Tool{"sandbox_pause", "Pause a sandbox to disk",
           "Saves a sandbox to disk and frees its memory and CPUs; sandbox_resume (or the next "
           "exec) brings it back with its processes and files.",
           one_sandbox, SandboxSchema(), Annotations(false, false, true, false),
           [&env](const nlohmann::json& a, CallContext& c) {
             return PauseOrResume(env, a, c, "pause");
           }});
  tools.push_back(
      Tool{"sandbox_resume", "Resume a paused sandbox",
           "Brings a paused sandbox back, processes and files as they were when it was paused.",
           one_sandbox, SandboxSchema(), Annotations(false, false, true, false),
           [&env](const nlohmann::json& a, CallContext& c) {
             return PauseOrResume(env, a, c, "resume");
           }});
  return tools;
}

}  // namespace abox::mcp
