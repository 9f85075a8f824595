// sandbox_create, sandbox_list, sandbox_inspect, sandbox_stop, sandbox_remove.
#include <algorithm>
#include <filesystem>
#include <optional>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "src/api/sandbox.h"
#include "src/base/status_macros.h"
#include "src/client/answers.h"
#include "src/client/api_paths.h"
#include "src/mcp/tool_args.h"
#include "src/mcp/tools.h"
#include "src/template/apply_template.h"

namespace abox::mcp {
namespace {

// What the template did, for the tool's answer.
struct TemplateUse {
  std::vector<std::string> lines;
  std::string image;
  std::string build_command;
};

absl::StatusOr<std::optional<TemplateUse>> ApplyTemplateArg(ToolEnv& env,
                                                            const nlohmann::json& args,
                                                            api::SandboxCreate* create) {
  std::string mode = StringArg(args, "template");
  if (mode != "" && mode != "auto" && mode != "none") {
    return absl::InvalidArgumentError(
        "template: use auto (the workspace's .abox.toml, else a guess from its files) or none");
  }
  if (!create->workspace || mode == "none") {
    return std::nullopt;
  }
  ABOX_ASSIGN_OR_RETURN(std::optional<tmpl::ProjectTemplate> t,
                        tmpl::ReadTemplate(create->workspace->path));
  if (!t && mode == "auto") {
    ABOX_ASSIGN_OR_RETURN(t, tmpl::DetectTemplate(create->workspace->path));
  }
  if (!t) {
    return std::nullopt;
  }
  tmpl::GivenFields given{.image = args.contains("image"),
                          .cpus = args.contains("cpus"),
                          .memory = args.contains("memory_mib"),
                          .disk = args.contains("disk_mib")};
  absl::StatusOr<tmpl::AppliedTemplate> applied =
      tmpl::ApplyTemplate(*t, given, env.options().allow_egress_changes, create);
  if (!applied.ok()) {
    if (applied.status().code() == absl::StatusCode::kPermissionDenied) {
      return absl::PermissionDeniedError(absl::StrCat(
          applied.status().message(),
          ". From here that is the person's --allow-egress-changes (abox-mcp); or pass "
          "template: \"none\""));
    }
    return applied.status();
  }
  return TemplateUse{.lines = applied->lines,
                     .image = applied->image,
                     .build_command = tmpl::TemplateImageBuildCommand(*t)};
}

absl::StatusOr<nlohmann::json> Create(ToolEnv& env, const nlohmann::json& args, CallContext& ctx) {
  api::SandboxCreate create;
  create.image = StringArg(args, "image", "default");
  create.name = StringArg(args, "name");
  create.cpus = IntArg(args, "cpus", 1);
  create.memory_mib = IntArg(args, "memory_mib", api::kDefaultMemoryMib);
  create.disk_mib = IntArg(args, "disk_mib", api::kDefaultDiskMib);
  create.ttl_seconds = IntArg(args, "ttl_seconds", 0);
  // workspace: absent or true = the directory abox-mcp runs in; false or null = none.
  const std::string& start = env.options().start_dir;
  auto ws = args.find("workspace");
  std::string path;
  std::string note;
  if (ws == args.end() || (ws->is_boolean() && ws->get<bool>())) {
    // Never the whole host or the person's home by default: only a project directory.
    if (start == "/" || start == env.options().home_dir) {
      note = absl::StrCat("no workspace bound: abox-mcp runs in ", start,
                          ", which is not a project directory; pass workspace: PATH to copy "
                          "one in");
    } else {
      path = start;
    }
  } else if (ws->is_string()) {
    path = std::filesystem::path(start) / ws->get<std::string>();  // absolute stays absolute
  }
  if (!path.empty()) {
    api::WorkspaceSpec spec;
    spec.path = std::filesystem::path(path).lexically_normal().string();
    spec.guest_path = StringArg(args, "workspace_guest_path", "/workspace");
    create.workspace = spec;
  }
  std::string mode = StringArg(args, "egress_mode");
  std::vector<std::string> allow = StringListArg(args, "egress_allow");
  if ((!mode.empty() && mode != "none") || !allow.empty()) {
    if (!env.options().allow_egress_changes) {
      return absl::PermissionDeniedError(
          "widening the egress policy (egress_mode allowlist/open, egress_allow) is the "
          "person's decision and abox-mcp was started without --allow-egress-changes; create "
          "the sandbox without them and use egress_request to ask for a name");
    }
  }
  if (!mode.empty() || !allow.empty()) {
    api::EgressSpec egress;
    if (!mode.empty()) {
      egress.mode = mode;
    }
    egress.allow = allow;
    create.egress = egress;
  }
  for (const std::string& name : StringListArg(args, "secrets")) {
    const std::vector<std::string>& allowed = env.options().allowed_secrets;
    if (std::find(allowed.begin(), allowed.end(), name) == allowed.end()) {
      return absl::PermissionDeniedError(absl::StrCat(
          "secret ", name,
          " was not allowed for this session: the person gives secrets to abox-mcp with "
          "--allow-secret ",
          name, " (abox mcp install --allow-secret ", name, ")"));
    }
    create.secrets[name] = "";
  }
  for (const std::string& rule : StringListArg(args, "git_push")) {
    if (!env.options().allow_egress_changes) {
      return absl::PermissionDeniedError(
          "git_push lets the sandbox push to a forge: the person's decision, and abox-mcp was "
          "started without --allow-egress-changes; create the sandbox without it");
    }
    create.git_push.push_back(rule);
  }
  // The workspace's .abox.toml (or, with template: "auto", a guess from its files): it fills what
  // the call did not set; the egress it asks for needs the person's --allow-egress-changes.
  ABOX_ASSIGN_OR_RETURN(std::optional<TemplateUse> applied, ApplyTemplateArg(env, args, &create));
  // wait=false, then poll: the sandbox's id is known at once, so a cancelled create removes
  // what it started instead of leaving it booting.
  absl::StatusOr<client::ApiResponse> r = ApiPost(
      env, ctx, client::WithQuery("/v1/sandboxes", {{"wait", "false"}}), api::ToJson(create));
  if (!r.ok()) {
    if (applied && !applied->image.empty() && absl::StrContains(r.status().message(), "no image")) {
      return absl::Status(r.status().code(),
                          absl::StrCat("the workspace's template needs image ", applied->image,
                                       ", which is not built: the person runs `",
                                       applied->build_command, "` once"));
    }
    return r.status();
  }
  absl::StatusOr<api::Sandbox> sandbox =
      client::DecodeAnswer(*r, "POST /v1/sandboxes", api::DecodeSandbox);
  if (!sandbox.ok()) {
    return sandbox.status();
  }
  std::string id = sandbox->id;
  env.AddOwned(id);
  absl::Time start_time = absl::Now();
  absl::Time last_progress = start_time;
  while (sandbox->state == "creating") {
    if (ctx.cancelled()) {
      // A fresh context: this call's is cancelled, and so would be its requests.
      CallContext cleanup(nullptr, nullptr);
      (void)ApiDelete(env, cleanup,
                      client::WithQuery(client::SandboxPath(id), {{"force", "true"}}));
      return absl::CancelledError(absl::StrCat("cancelled: sandbox ", id, " was removed"));
    }
    absl::SleepFor(absl::Milliseconds(200));
    if (absl::Now() - last_progress >= absl::Seconds(1)) {
      last_progress = absl::Now();
      ctx.Progress(absl::ToDoubleSeconds(last_progress - start_time),
                   absl::StrCat("creating sandbox ", id, " (", sandbox->state, ")"));
    }
    r = ApiGet(env, ctx, client::SandboxPath(id));
    if (!r.ok()) {
      return r.status();
    }
    sandbox = client::DecodeAnswer(*r, "GET /v1/sandboxes/{id}", api::DecodeSandbox);
    if (!sandbox.ok()) {
      return sandbox.status();
    }
  }
  if (sandbox->state != "ready") {
    return absl::FailedPreconditionError(
        absl::StrCat("sandbox ", id, " did not become ready: it is ", sandbox->state,
                     sandbox->failure.empty() ? "" : absl::StrCat(" (", sandbox->failure, ")"),
                     ". sandbox_inspect shows it; sandbox_remove removes it"));
  }
  absl::StatusOr<nlohmann::json> out = SandboxJson(env, *r, "GET /v1/sandboxes/{id}");
  if (out.ok() && !note.empty()) {
    (*out)["workspace_note"] = note;
  }
  if (out.ok() && applied) {
    (*out)["template"] = applied->lines;
  }
  return out;
}

absl::StatusOr<nlohmann::json> List(ToolEnv& env, CallContext& ctx) {
  absl::StatusOr<client::ApiResponse> r = ApiGet(env, ctx, "/v1/sandboxes");
  if (!r.ok()) {
    return r.status();
  }
  return SandboxListJson(env, *r, "GET /v1/sandboxes");
}

absl::StatusOr<nlohmann::json> Inspect(ToolEnv& env, const nlohmann::json& args, CallContext& ctx) {
  absl::StatusOr<client::ApiResponse> r =
      ApiGet(env, ctx, client::SandboxPath(StringArg(args, "sandbox")));
  if (!r.ok()) {
    return r.status();
  }
  return SandboxJson(env, *r, "GET /v1/sandboxes/{id}");
}

absl::StatusOr<nlohmann::json> Stop(ToolEnv& env, const nlohmann::json& args, CallContext& ctx) {
  absl::StatusOr<client::ApiResponse> r =
      ApiPost(env, ctx, client::SandboxPath(StringArg(args, "sandbox"), "/stop"), nullptr);
  if (!r.ok()) {
    return r.status();
  }
  return SandboxJson(env, *r, "POST /v1/sandboxes/{id}/stop");
}

absl::StatusOr<nlohmann::json> Remove(ToolEnv& env, const nlohmann::json& args, CallContext& ctx) {
  absl::StatusOr<std::string> id = SandboxId(env, ctx, StringArg(args, "sandbox"));
  if (!id.ok()) {
    return id.status();
  }
  if (!env.Owns(*id) && !env.options().allow_remove_any) {
    return absl::PermissionDeniedError(
        absl::StrCat("sandbox ", *id,
                     " was not created by this abox-mcp session, so only the "
                     "person removes it: `abox rm ",
                     *id, "`"));
  }
  absl::StatusOr<client::ApiResponse> removed =
      ApiDelete(env, ctx, client::WithQuery(client::SandboxPath(*id), {{"force", "true"}}));
  if (!removed.ok()) {
    return removed.status();
  }
  return nlohmann::json{{"removed", *id}};
}

}  // namespace

std::vector<Tool> SandboxTools(ToolEnv& env) {
  std::vector<Tool> tools;
  tools.push_back(Tool{
      "sandbox_create", "Create a sandbox",
      "Creates and boots a disposable microVM sandbox and returns it (use its id with the other "
      "tools). By default the directory abox-mcp was started in (the project) is copied in at "
      "/workspace and re-synced before every command; pass workspace: false for an empty "
      "sandbox, or a host directory path. Changes made inside never touch the host. Network: "
      "the egress policy of the person's configuration (egress_mode none cuts it off).",
      ObjectSchema({
          {"image",
           Prop("string", "Guest image (default \"default\"); `abox image ls` lists them.")},
          {"name", Prop("string", "A name to refer to it by (letters, digits, _ . and -).")},
          {"cpus", IntProp("vCPUs (default 1).", 1, 64)},
          {"memory_mib", IntProp("Memory in MiB (default 2048).", 128, 262144)},
          {"disk_mib",
           IntProp("Disk in MiB (default 16384; sparse: the host stores what is written).", 1024,
                   1048576)},
          {"template",
           {{"type", "string"},
            {"enum", {"auto", "none"}},
            {"description",
             "The workspace's .abox.toml is used when present (image, resources, setup "
             "commands). auto: also guess one from its files (package.json, pyproject.toml, "
             "go.mod, ...) when there is none. none: leave it out. Egress a template asks for "
             "needs the person's --allow-egress-changes."}}},
          {"ttl_seconds", IntProp("Stop it after this long (default: never).", 0, 604800)},
          {"workspace",
           {{"type", {"string", "boolean", "null"}},
            {"description",
             "Host directory to copy in (relative to abox-mcp's directory). Absent or true: "
             "abox-mcp's directory; false or null: none."}}},
          {"workspace_guest_path",
           Prop("string", "Where the guest sees the workspace (default /workspace).")},
          {"egress_mode",
           {{"type", "string"},
            {"enum", {"none", "allowlist", "open"}},
            {"description",
             "none cuts the network; allowlist and open need the person's "
             "--allow-egress-changes."}}},
          {"egress_allow",
           StringListProp("Allow rules (NAME, *.SUFFIX, preset:npm ...); needs the person's "
                          "--allow-egress-changes.")},
          {"secrets",
           StringListProp("Secrets to give the sandbox, by name (e.g. GITHUB_TOKEN): each is in "
                          "the environment variable of its name as a placeholder, which the "
                          "host swaps for the real value only in requests to the secret's "
                          "hosts. Only names the person allowed (--allow-secret).")},
          {"git_push",
           StringListProp("\"HOST/OWNER/REPO:BRANCH-PATTERN\" (e.g. github.com/acme/app:agent/*): "
                          "git may push branches matching the pattern to that repository, with "
                          "the token of the given secret bound to HOST added on the host; other "
                          "pushes are refused. Needs the person's --allow-egress-changes.")},
      }),
      SandboxSchema(), Annotations(false, false, false, false),
      [&env](const nlohmann::json& a, CallContext& c) { return Create(env, a, c); }});
  tools.push_back(
      Tool{"sandbox_list",
           "List sandboxes",
           "Lists the sandboxes on this machine (newest first) with their state; created_here "
           "marks the ones this session created.",
           ObjectSchema({}),
           {{"type", "object"},
            {"properties", {{"sandboxes", {{"type", "array"}, {"items", SandboxSchema()}}}}},
            {"required", nlohmann::json::array({"sandboxes"})}},
           Annotations(true, false, true, false),
           [&env](const nlohmann::json&, CallContext& c) { return List(env, c); }});
  tools.push_back(
      Tool{"sandbox_inspect", "Inspect a sandbox",
           "Everything about one sandbox: state, resources, workspace, egress mode, running "
           "commands, why it failed.",
           ObjectSchema({{"sandbox", SandboxProp()}}, {"sandbox"}), SandboxSchema(),
           Annotations(true, false, true, false),
           [&env](const nlohmann::json& a, CallContext& c) { return Inspect(env, a, c); }});
  tools.push_back(
      Tool{"sandbox_stop", "Stop a sandbox",
           "Stops the sandbox's VM and frees its CPUs and memory; its record, logs and diff stay. "
           "A stopped sandbox cannot run commands.",
           ObjectSchema({{"sandbox", SandboxProp()}}, {"sandbox"}), SandboxSchema(),
           Annotations(false, true, true, false),
           [&env](const nlohmann::json& a, CallContext& c) { return Stop(env, a, c); }});
  tools.push_back(
      Tool{"sandbox_remove",
           "Remove a sandbox",
           "Stops and deletes a sandbox this session created, with its files and its changes (run "
           "workspace_diff first if they matter). Sandboxes created elsewhere are the person's.",
           ObjectSchema({{"sandbox", SandboxProp()}}, {"sandbox"}),
           {{"type", "object"},
            {"properties", {{"removed", {{"type", "string"}}}}},
            {"required", nlohmann::json::array({"removed"})}},
           Annotations(false, true, true, false),
           [&env](const nlohmann::json& a, CallContext& c) { return Remove(env, a, c); }});
  return tools;
}

}  // namespace abox::mcp
