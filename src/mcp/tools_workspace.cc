// workspace_sync, workspace_diff, egress_log, and the two that are the person's decision:
// apply_changes (--allow-apply) and egress_request (--allow-egress-changes).
#include <cstdio>
#include <utility>

#include "absl/strings/str_cat.h"
#include "src/api/egress.h"
#include "src/client/api_paths.h"
#include "src/mcp/json_rpc.h"
#include "src/mcp/tool_args.h"
#include "src/mcp/tools.h"

namespace abox::mcp {
namespace {

constexpr size_t kMaxDiffBytes = 200000;  // of patches in one result

absl::StatusOr<nlohmann::json> JsonOf(const absl::StatusOr<client::ApiResponse>& r) {
  if (!r.ok()) {
    return r.status();
  }
  if (!r->json.is_object()) {
    return absl::InternalError("aboxd's answer is not a JSON object");
  }
  return r->json;
}

absl::StatusOr<nlohmann::json> Sync(ToolEnv& env, const nlohmann::json& args, CallContext& ctx) {
  ProgressTicker ticker(ctx, "syncing the workspace");
  return JsonOf(
      ApiPost(env, ctx, client::SandboxPath(StringArg(args, "sandbox"), "/sync"), nullptr));
}

absl::StatusOr<nlohmann::json> Diff(ToolEnv& env, const nlohmann::json& args, CallContext& ctx) {
  client::QueryParams query;
  for (const std::string& path : StringListArg(args, "paths")) {
    query.emplace_back("path", path);
  }
  if (BoolArg(args, "stat", false)) {
    query.emplace_back("stat", "true");
  }
  if (HasArg(args, "context")) {
    query.emplace_back("context", absl::StrCat(IntArg(args, "context", 3)));
  }
  ProgressTicker ticker(ctx, "diffing the workspace");
  absl::StatusOr<nlohmann::json> diff = JsonOf(
      ApiGet(env, ctx,
             client::WithQuery(client::SandboxPath(StringArg(args, "sandbox"), "/diff"), query)));
  if (!diff.ok()) {
    return diff;
  }
  // Patches past the budget are left out (the files stay listed, with their counts).
  size_t used = 0;
  bool truncated = false;
  if (diff->contains("files") && (*diff)["files"].is_array()) {
    for (nlohmann::json& file : (*diff)["files"]) {
      if (file.is_object() && file.contains("patch") && file["patch"].is_string()) {
        size_t n = file["patch"].get_ref<const std::string&>().size();
        if (used + n > kMaxDiffBytes) {
          file.erase("patch");
          file["patch_omitted"] = true;
          truncated = true;
        } else {
          used += n;
        }
      }
    }
  }
  (*diff)["truncated"] = truncated;
  return diff;
}

absl::StatusOr<nlohmann::json> EgressLog(ToolEnv& env, const nlohmann::json& args,
                                         CallContext& ctx) {
  return JsonOf(
      ApiGet(env, ctx,
             client::WithQuery(client::SandboxPath(StringArg(args, "sandbox"), "/egress/log"),
                               {{"limit", absl::StrCat(IntArg(args, "limit", 50))}})));
}

absl::StatusOr<nlohmann::json> Apply(ToolEnv& env, const nlohmann::json& args, CallContext& ctx) {
  absl::StatusOr<std::string> id = SandboxId(env, ctx, StringArg(args, "sandbox"));
  if (!id.ok()) {
    return id.status();
  }
  if (!env.options().allow_apply) {
    return absl::PermissionDeniedError(absl::StrCat(
        "writing the sandbox's changes into the host directory is the person's step (abox-mcp "
        "runs without --allow-apply). Tell them to review and apply: `abox diff ",
        *id, "` then `abox apply ", *id, "`"));
  }
  return JsonOf(ApiPost(env, ctx, client::SandboxPath(*id, "/apply"), nlohmann::json::object()));
}

// Asks the client's user about `target` with MCP elicitation, until `deadline`, and carries
// out their answer through aboxd as `abox egress approve / deny` would. Returns the request's
// new state; "pending" when the user declined or dismissed the question (it stays in the review
// queue, and waiting longer would only hold the model up); "" when no answer came (in time, or
// the client failed), so that the queue is watched instead.
absl::StatusOr<std::string> AskThroughClient(ToolEnv& env, CallContext& ctx, const std::string& id,
                                             const std::string& target, const std::string& reason,
                                             absl::Time deadline) {
  nlohmann::json params = {
      {"message",
       absl::StrCat("abox: sandbox ", id, " asks to reach ", target,
                    ". The agent's reason (its own words): \"", reason, "\". \"always\" adds ",
                    target,
                    " to the sandbox's egress policy, \"once\" lets one connection through, "
                    "\"deny\" keeps it blocked. (Also in `abox egress queue`.)")},
      {"requestedSchema",
       {{"type", "object"},
        {"properties",
         {{"decision",
           {{"type", "string"},
            {"title", absl::StrCat("Allow ", target, "?")},
            {"enum", {"always", "once", "deny"}}}}}},
        {"required", {"decision"}}}}};
  absl::StatusOr<nlohmann::json> answer =
      ctx.AskClient("elicitation/create", std::move(params), deadline - absl::Now());
  if (!answer.ok()) {
    if (absl::IsCancelled(answer.status())) {
      return answer.status();
    }
    std::fprintf(stderr, "abox-mcp: elicitation for %s: %s\n", target.c_str(),
                 std::string(answer.status().message()).c_str());
    return std::string();
  }
  std::string decision;
  if (answer->is_object() && answer->value("action", "") == "accept" &&
      answer->contains("content") && (*answer)["content"].is_object()) {
    decision = (*answer)["content"].value("decision", "");
  }
  if (decision != "always" && decision != "once" && decision != "deny") {
    return std::string("pending");  // declined, dismissed, or an answer that is not one of ours
  }
  absl::StatusOr<nlohmann::json> decided =
      decision == "deny"
          ? JsonOf(ApiPost(env, ctx, client::SandboxPath(id, "/egress/deny"),
                           api::ToJson(api::EgressName{.name = target})))
          : JsonOf(
                ApiPost(env, ctx, client::SandboxPath(id, "/egress/approve"),
                        api::ToJson(api::EgressName{.name = target, .once = decision == "once"})));
  if (!decided.ok()) {
    return decided.status();
  }
  absl::StatusOr<api::EgressDecision> d = api::DecodeEgressDecision(*decided);
  if (!d.ok()) {
    return d.status();
  }
  return d->request.state;
}

absl::StatusOr<nlohmann::json> EgressRequest(ToolEnv& env, const nlohmann::json& args,
                                             CallContext& ctx) {
  absl::StatusOr<std::string> id = SandboxId(env, ctx, StringArg(args, "sandbox"));
  if (!id.ok()) {
    return id.status();
  }
  std::string name = StringArg(args, "name");
  std::string reason = StringArg(args, "reason");
  if (env.options().allow_egress_changes) {
    api::EgressRuleChange change;
    change.add = {name};
    absl::StatusOr<nlohmann::json> policy =
        JsonOf(ApiPost(env, ctx, client::SandboxPath(*id, "/egress/rules"), api::ToJson(change)));
    if (!policy.ok()) {
      return policy;
    }
    return nlohmann::json{
        {"granted", true},
        {"pending", false},
        {"state", "approved"},
        {"message", absl::StrCat("added the rule ", name, " to sandbox ", *id, "'s egress policy")},
        {"person_commands", nlohmann::json::array()}};
  }
  // The person decides: the ask waits in the review queue (`abox egress queue`) with the
  // reason, and this call waits for the decision as long as the model allowed.
  absl::StatusOr<nlohmann::json> asked =
      JsonOf(ApiPost(env, ctx, client::SandboxPath(*id, "/egress/ask"),
                     api::ToJson(api::EgressAsk{.name = name, .reason = reason})));
  if (!asked.ok()) {
    return asked.status();
  }
  absl::StatusOr<api::EgressAskAnswer> answer = api::DecodeEgressAskAnswer(*asked);
  if (!answer.ok()) {
    return answer.status();
  }
  if (answer->allowed) {
    return nlohmann::json{
        {"granted", true},
        {"pending", false},
        {"state", "allowed"},
        {"message", absl::StrCat("the sandbox's egress policy already allows ", name, " (",
                                 answer->request.reason, "): retry the command")},
        {"person_commands", nlohmann::json::array()}};
  }
  if (answer->queue_full) {
    return absl::ResourceExhaustedError(
        absl::StrCat("the sandbox's review queue is full, so ", answer->request.name,
                     " was not queued: ask the person to review the queue (abox egress queue)"));
  }
  // The commands name what aboxd checked and normalised, never the model's text.
  std::string key = answer->request.name;
  std::string target = answer->request.port == 443 || answer->request.port == 0
                           ? key
                           : absl::StrCat(key, ":", answer->request.port);
  std::vector<std::string> commands = {
      "abox egress queue",
      absl::StrCat("abox egress approve ", *id, " ", target, " --always"),
      absl::StrCat("abox egress approve ", *id, " ", target, " --once"),
      absl::StrCat("abox egress deny ", *id, " ", target),
  };
  std::string state = answer->request.state;
  absl::Time deadline = absl::Now() + absl::Seconds(IntArg(args, "wait_seconds", 40));
  bool user_answered = false;
  if (state == "pending" && ctx.ClientCanElicit()) {
    // The client can ask its user directly; the queue and its commands stay the other way.
    absl::StatusOr<std::string> decided = AskThroughClient(env, ctx, *id, target, reason, deadline);
    if (!decided.ok()) {
      return decided.status();
    }
    if (!decided->empty()) {
      state = *decided;
      user_answered = true;
    }
  }
  if (state == "pending" && !user_answered) {
    ProgressTicker ticker(ctx, absl::StrCat("waiting for the person to allow or deny ", name,
                                            " (abox egress queue)"));
    while (state == "pending" && absl::Now() < deadline && !ctx.cancelled()) {
      absl::SleepFor(absl::Milliseconds(300));
      absl::StatusOr<nlohmann::json> queue = JsonOf(ApiGet(
          env, ctx, client::WithQuery("/v1/egress/queue", {{"sandbox", *id}, {"all", "true"}})));
      if (!queue.ok()) {
        return queue.status();
      }
      absl::StatusOr<api::EgressQueue> decoded = api::DecodeEgressQueue(*queue);
      if (!decoded.ok()) {
        return decoded.status();
      }
      for (const api::EgressRequest& r : decoded->requests) {
        if (r.name == key) {
          state = r.state;
        }
      }
    }
  }
  bool granted = state == "approved" || state == "approved_once";
  std::string message;
  if (state == "approved") {
    message = absl::StrCat("the person allowed ", name, ": retry the command");
  } else if (state == "approved_once") {
    message = absl::StrCat("the person allowed one connection to ", name,
                           ": retry the command once; ask again if it needs more");
  } else if (state == "pending" && user_answered) {
    message = absl::StrCat("the person did not allow ", name,
                           " when asked; it stays in their review queue (abox egress queue). Do "
                           "without it, or ask them.");
  } else if (state == "pending") {
    message = absl::StrCat(
        name,
        " is waiting in the person's review queue (abox egress queue) with your reason; "
        "no decision yet. Tell the person, and call egress_request again to wait for it.");
  } else {
    message = absl::StrCat("the person ", state == "ignored" ? "ignores requests for " : "denied ",
                           name, ": do not ask again; find a way without it or ask the person.");
  }
  return nlohmann::json{
      {"granted", granted},
      {"pending", state == "pending"},
      {"state", state},
      {"message", message},
      {"person_commands",
       granted || state != "pending" ? nlohmann::json::array() : nlohmann::json(commands)}};
}

nlohmann::json LooseObject(std::vector<std::string> required) {
  return {{"type", "object"}, {"required", required}};
}

}  // namespace

std::vector<Tool> WorkspaceTools(ToolEnv& env) {
  std::vector<Tool> tools;
  nlohmann::json sandbox_only = ObjectSchema({{"sandbox", SandboxProp()}}, {"sandbox"});
  tools.push_back(
      Tool{"workspace_sync", "Sync the workspace in",
           "Copies the host directory's latest changes into the sandbox now (exec does this before "
           "every command unless sync is false). One way: never changes the host.",
           sandbox_only, LooseObject({"changed"}), Annotations(false, false, true, false),
           [&env](const nlohmann::json& a, CallContext& c) { return Sync(env, a, c); }});
  tools.push_back(Tool{
      "workspace_diff",
      "Show the sandbox's changes",
      "The changes made in the sandbox's workspace since the last sync, per file, with unified "
      "patches (or only counts with stat: true). Patches beyond 200 KB are left out "
      "(patch_omitted).",
      ObjectSchema({{"sandbox", SandboxProp()},
                    {"paths", StringListProp("Only these files or directories.")},
                    {"stat", Prop("boolean", "Counts only, no patches.")},
                    {"context", IntProp("Context lines in patches (default 3).", 0, 1000)}},
                   {"sandbox"}),
      {{"type", "object"},
       {"properties",
        {{"files", {{"type", "array"}, {"items", {{"type", "object"}}}}},
         {"ignored", {{"type", "integer"}}},
         {"truncated", {{"type", "boolean"}}}}},
       {"required", {"files", "truncated"}}},
      Annotations(true, false, true, false),
      [&env](const nlohmann::json& a, CallContext& c) { return Diff(env, a, c); }});
  tools.push_back(Tool{
      "egress_log", "Show the sandbox's network log",
      "The sandbox's recent outbound connections and DNS lookups (newest first), with what the "
      "egress policy decided for each: use it when a download or request fails.",
      ObjectSchema({{"sandbox", SandboxProp()},
                    {"limit", IntProp("At most this many of each (default 50).", 1, 1000)}},
                   {"sandbox"}),
      LooseObject({"connections", "dns"}), Annotations(true, false, true, false),
      [&env](const nlohmann::json& a, CallContext& c) { return EgressLog(env, a, c); }});
  tools.push_back(Tool{
      "apply_changes", "Apply the sandbox's changes to the host",
      "Writes the sandbox's workspace changes into the host directory (three-way merge, with a "
      "backup). Unless the person started abox-mcp with --allow-apply this only answers with "
      "the command the person runs to review and apply them.",
      sandbox_only, LooseObject({}), Annotations(false, true, false, false),
      [&env](const nlohmann::json& a, CallContext& c) { return Apply(env, a, c); }});
  tools.push_back(
      Tool{"egress_request",
           "Ask for network access",
           "Asks the person to let the sandbox reach a host (NAME, NAME:PORT; 443 when no "
           "port), giving the reason, when a download or request failed because the egress "
           "policy refused it (see egress_log). The person is asked (in this client when it "
           "supports elicitation, and in their review queue); this waits up to wait_seconds "
           "for their decision. granted: retry the "
           "command. pending: tell the person, call again later. denied: do without it.",
           ObjectSchema({{"sandbox", SandboxProp()},
                         {"name", Prop("string", "The host name, or NAME:PORT.")},
                         {"reason", Prop("string",
                                         "Why the sandbox needs it, for the person "
                                         "(one line, at most 500 bytes).")},
                         {"wait_seconds", IntProp("How long to wait for the decision "
                                                  "(default 40).",
                                                  0, 50)}},
                        {"sandbox", "name", "reason"}),
           {{"type", "object"},
            {"properties",
             {{"granted", {{"type", "boolean"}}},
              {"pending", {{"type", "boolean"}}},
              {"state", {{"type", "string"}}},
              {"message", {{"type", "string"}}},
              {"person_commands", {{"type", "array"}, {"items", {{"type", "string"}}}}}}},
            {"required", {"granted", "pending", "state", "message", "person_commands"}}},
           Annotations(false, false, true, true),
           [&env](const nlohmann::json& a, CallContext& c) { return EgressRequest(env, a, c); }});
  return tools;
}

}  // namespace abox::mcp
