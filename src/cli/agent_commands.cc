// `abox agent login|logout|status|usage` and the registration of `abox agent claude|codex`
// (whose run is in agent_run.cc).
#include "src/cli/agent_commands.h"

#include <unistd.h>

#include <cstdio>
#include <memory>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "src/api/model.h"
#include "src/api/secret.h"
#include "src/cli/agent_run.h"
#include "src/cli/flags.h"
#include "src/cli/output.h"
#include "src/cli/secret_commands.h"
#include "src/cli/terminal_text.h"
#include "src/client/answers.h"
#include "src/client/api_paths.h"

namespace abox::cli {
namespace {

struct LoginOptions {
  std::string api;
  std::string secret;  // default: the API's usual variable name
  std::string base_url;
  std::string from_env;
  std::string from_file;
  bool from_stdin = false;
  bool json = false;
};

// The API's defaults: the secret's name and the host its key is bound to.
struct ApiInfo {
  const char* api;
  const char* secret;
  const char* host;
  const char* header;
  const char* format;
  const char* title;
};
constexpr ApiInfo kApis[] = {
    {"anthropic", "ANTHROPIC_API_KEY", "api.anthropic.com", "x-api-key", "{}", "Anthropic"},
    {"openai", "OPENAI_API_KEY", "api.openai.com", "Authorization", "Bearer {}", "OpenAI"},
};

const ApiInfo* InfoOf(const std::string& api) {
  for (const ApiInfo& info : kApis) {
    if (api == info.api) {
      return &info;
    }
  }
  return nullptr;
}

// The host part of an http(s) base URL ("" when it has none).
std::string HostOf(const std::string& url) {
  size_t start = url.find("://");
  if (start == std::string::npos) {
    return "";
  }
  start += 3;
  size_t end = url.find_first_of(":/", start);
  if (url.compare(start, 1, "[") == 0) {
    end = url.find(']', start);
    return end == std::string::npos ? "" : url.substr(start + 1, end - start - 1);
  }
  return url.substr(start, end == std::string::npos ? std::string::npos : end - start);
}

std::string ProviderLine(const api::ModelProvider& p) {
  return absl::StrCat(p.api, ": key in secret ", p.secret, p.key_stored ? "" : " (NOT STORED)",
                      ", requests to ", p.base_url);
}

int Login(LoginOptions o) {
  const ApiInfo* info = InfoOf(o.api);
  if (info == nullptr) {
    return Fail(absl::InvalidArgumentError(
                    absl::StrCat("unknown model API \"", o.api, "\": use anthropic or openai")),
                2);
  }
  if (o.secret.empty()) {
    o.secret = info->secret;
  }
  // No source given: on a terminal, ask for the key; piped, read it from stdin; with
  // --secret alone (and no terminal), point at that stored secret.
  bool any_source = !o.from_env.empty() || !o.from_file.empty() || o.from_stdin;
  if (!any_source && (::isatty(STDIN_FILENO) != 0)) {
    o.from_stdin = true;
  }
  absl::StatusOr<std::optional<std::string>> value =
      ReadSecretValue(o.secret, o.from_env, o.from_file, o.from_stdin);
  if (!value.ok()) {
    return Fail(value.status(), 2);
  }
  if (*value && (*value)->empty()) {
    return Fail(absl::InvalidArgumentError("the key is empty: nothing was stored"), 2);
  }
  return WithApi([&](client::ApiClient& api) {
    if (*value) {
      std::string host = o.base_url.empty() ? info->host : HostOf(o.base_url);
      // A secret is bound to names, not addresses: a local server's key to "localhost".
      if (!host.empty() && (host.find_first_not_of("0123456789.") == std::string::npos ||
                            host.find(':') != std::string::npos)) {
        host = "localhost";
      }
      if (host.empty()) {
        return Fail(
            absl::InvalidArgumentError(absl::StrCat(
                "--base-url ", o.base_url, " is not a URL: use https://HOST[:PORT][/PATH]")),
            2);
      }
      api::SecretSet set{.spec = {{"name", o.secret},
                                  {"hosts", {host}},
                                  {"header", info->header},
                                  {"format", info->format},
                                  {"source", {{"kind", "stored"}}}},
                         .value = std::move(**value)};
      WipeString(**value);
      nlohmann::json body = api::ToJson(set);
      WipeString(*set.value);
      absl::StatusOr<client::ApiResponse> r = api.Post("/v1/secrets", body);
      WipeString(body["value"].get_ref<std::string&>());
      if (!r.ok()) {
        return Fail(r.status());
      }
    }
    absl::StatusOr<client::ApiResponse> r =
        api.Put(absl::StrCat("/v1/models/providers/", o.api),
                api::ToJson(api::ModelProviderSet{.secret = o.secret, .base_url = o.base_url}));
    if (!r.ok()) {
      return Fail(r.status());
    }
    if (o.json) {
      PrintVerbatim(r->body);
      return 0;
    }
    absl::StatusOr<api::ModelProvider> p =
        client::DecodeAnswer(*r, "PUT /v1/models/providers/{api}", api::DecodeModelProvider);
    if (!p.ok()) {
      return Fail(p.status());
    }
    std::printf("%s\n", ForTerminal(stdout, ProviderLine(*p)).c_str());
    std::printf(
        "the key stays on this host: agents in sandboxes get a token for aboxd's broker "
        "(abox agent %s)\n",
        o.api == "anthropic" ? "claude" : "codex");
    return 0;
  });
}

int Logout(const std::string& api_name) {
  return WithApi([&](client::ApiClient& api) {
    absl::Status s =
        api.Delete(absl::StrCat("/v1/models/providers/", client::UrlEscape(api_name))).status();
    if (!s.ok()) {
      return Fail(s);
    }
    const ApiInfo* info = InfoOf(api_name);
    std::printf("%s: back to the defaults (the stored key is kept: abox secret rm %s removes it)\n",
                api_name.c_str(), info != nullptr ? info->secret : "NAME");
    return 0;
  });
}

int Status(bool json) {
  return WithApi([&](client::ApiClient& api) {
    absl::StatusOr<client::ApiResponse> r = api.Get("/v1/models/providers");
    if (!r.ok()) {
      return Fail(r.status());
    }
    if (json) {
      PrintVerbatim(r->body);
      return 0;
    }
    absl::StatusOr<std::vector<api::ModelProvider>> all =
        client::DecodeAnswer(*r, "GET /v1/models/providers", api::DecodeModelProviderList);
    if (!all.ok()) {
      return Fail(all.status());
    }
    std::vector<std::vector<std::string>> rows;
    for (const api::ModelProvider& p : *all) {
      rows.push_back({p.api, p.secret,
                      p.key_stored ? "stored" : absl::StrCat("missing: abox agent login ", p.api),
                      p.base_url, p.configured ? "set" : "default"});
    }
    std::printf(
        "%s", ForTerminal(stdout, FormatTable({"API", "SECRET", "KEY", "BASE URL", "CONFIG"}, rows))
                  .c_str());
    return 0;
  });
}

int Usage(const std::string& id, bool json) {
  return WithApi([&](client::ApiClient& api) {
    absl::StatusOr<client::ApiResponse> r = api.Get(client::SandboxPath(id, "/models/usage"));
    if (!r.ok()) {
      return Fail(r.status());
    }
    if (json) {
      PrintVerbatim(r->body);
      return 0;
    }
    absl::StatusOr<std::vector<api::ModelUsage>> usage =
        client::DecodeAnswer(*r, "GET /v1/sandboxes/{id}/models/usage", api::DecodeModelUsageList);
    if (!usage.ok()) {
      return Fail(usage.status());
    }
    if (usage->empty()) {
      std::printf("no model requests from this sandbox\n");
      return 0;
    }
    std::vector<std::vector<std::string>> rows;
    absl::Time now = absl::Now();
    for (const api::ModelUsage& u : *usage) {
      rows.push_back({u.api, absl::StrCat(u.requests), absl::StrCat(u.errors),
                      absl::StrCat(u.refused), absl::StrCat(u.input_tokens),
                      absl::StrCat(u.output_tokens),
                      u.last_at ? FormatAge(now - *u.last_at) + " ago" : "-"});
    }
    std::printf("%s", FormatTable({"API", "REQUESTS", "ERRORS", "REFUSED", "INPUT TOKENS",
                                   "OUTPUT TOKENS", "LAST"},
                                  rows)
                          .c_str());
    return 0;
  });
}

void AddRunCommand(CLI::App* agent, const std::string& name, const std::string& what,
                   Action* action, const std::vector<std::string>* tail) {
  auto o = std::make_shared<AgentRunOptions>();
  o->invocation.agent = name;
  o->image = name;
  auto* cmd = agent->add_subcommand(name, what);
  cmd->add_option("-w,--workspace", o->workspace,
                  "The repository the agent works on (a copy goes in; default: the current "
                  "directory)");
  cmd->add_option("--sandbox", o->sandbox,
                  "Run in this existing sandbox instead of a new one (it must have been given the "
                  "model API: abox create --model)");
  cmd->add_option("-p,--prompt", o->invocation.prompt,
                  "Run headless with this task; the agent's stream output goes to stdout");
  cmd->add_option("--model", o->invocation.model, "The model the agent asks for");
  cmd->add_option("--image", o->image, "Guest image with the agent installed")
      ->capture_default_str();
  cmd->add_option("--memory", o->memory_mib, "Guest memory in MiB (default 2048)")
      ->check(CLI::Range(256, 262144));
  cmd->add_option("--disk", o->disk, "Guest disk: 32G, 500M or MiB (default 16G, sparse)");
  cmd->add_option("--template", o->template_mode,
                  "The repository's .abox.toml is used when present; auto also guesses one; "
                  "none leaves it out (the image stays the agent's)");
  cmd->add_flag("--allow-template-egress", o->allow_template_egress,
                "Accept the egress rules the repository's template asks for");
  cmd->add_option("--cpus", o->cpus, "Virtual CPUs")->check(CLI::Range(1, 64));
  cmd->add_flag("--ask-permissions", o->ask_permissions,
                "Keep the agent's own permission prompts (by default they are skipped: the VM is "
                "the boundary)");
  cmd->footer(absl::StrCat("Arguments after -- go to ", name,
                           " itself. The model key never enters the VM: set it up once with `abox "
                           "agent login ",
                           name == "claude" ? "anthropic" : "openai", "`."));
  cmd->callback([=] {
    o->invocation.skip_permissions = !o->ask_permissions;
    o->invocation.extra = *tail;
    *action = [=] { return RunAgent(*o); };
  });
}

}  // namespace

void AddAgentCommands(CLI::App& app, Action* action, const std::vector<std::string>* tail) {
  auto* agent = app.add_subcommand(
      "agent",
      "Run Claude Code or Codex inside a sandbox, their model key held on the host by aboxd's "
      "broker");
  agent->require_subcommand(1);

  auto login = std::make_shared<LoginOptions>();
  auto* in = agent->add_subcommand(
      "login", "Store a model API key on the host (never in a VM), or point at a stored secret");
  in->add_option("api", login->api, "anthropic or openai")->required();
  in->add_option("--secret", login->secret,
                 "The secret that holds the key (default ANTHROPIC_API_KEY / OPENAI_API_KEY)");
  in->add_option("--base-url", login->base_url,
                 "Send the API's requests here instead: https://HOST[:PORT][/PATH], or http:// "
                 "for a server on this host's loopback (a local model server)");
  in->add_option("--from-env", login->from_env, "Read the key from this environment variable");
  in->add_option("--from-file", login->from_file, "Read the key from this file");
  in->add_flag("--stdin", login->from_stdin,
               "Read the key from stdin (asked for, not shown, on a terminal: the default there)");
  in->add_flag("--json", login->json, "Print the API's JSON");
  in->footer("Example: printf %s \"$ANTHROPIC_API_KEY\" | abox agent login anthropic --stdin");
  in->callback([=] { *action = [=] { return Login(*login); }; });

  auto out_api = std::make_shared<std::string>();
  auto* out = agent->add_subcommand("logout", "Forget where an API goes (its key is kept)");
  out->add_option("api", *out_api, "anthropic or openai")->required();
  out->callback([=] { *action = [=] { return Logout(*out_api); }; });

  auto status_json = std::make_shared<bool>(false);
  auto* status =
      agent->add_subcommand("status", "Where each model API goes and whether its key is stored");
  status->add_flag("--json", *status_json, "Print the API's JSON");
  status->callback([=] { *action = [=] { return Status(*status_json); }; });

  auto usage_id = std::make_shared<std::string>();
  auto usage_json = std::make_shared<bool>(false);
  auto* usage = agent->add_subcommand(
      "usage", "What a sandbox's agents used through the broker: requests, errors, tokens");
  usage->add_option("id", *usage_id, "Sandbox id or name")->required();
  usage->add_flag("--json", *usage_json, "Print the API's JSON");
  usage->callback([=] { *action = [=] { return Usage(*usage_id, *usage_json); }; });

  AddRunCommand(agent, "claude", "Run Claude Code inside a sandbox on the repository", action,
                tail);
  AddRunCommand(agent, "codex", "Run the Codex CLI inside a sandbox on the repository", action,
                tail);
}

}  // namespace abox::cli
