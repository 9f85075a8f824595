#include "src/cli/sandbox_commands.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "src/api/sandbox.h"
#include "src/api/wire.h"
#include "src/cli/create_template.h"
#include "src/cli/flags.h"
#include "src/cli/output.h"
#include "src/cli/sandbox_format.h"
#include "src/cli/terminal_text.h"
#include "src/client/answers.h"
#include "src/client/api_paths.h"

namespace abox::cli {
namespace {

struct CreateOptions {
  std::string image;
  std::string name;
  int cpus = 0;
  int memory_mib = 0;
  std::string disk;
  std::vector<std::string> labels;
  std::string ttl;
  std::string idle_timeout;
  std::string accel;
  bool cold = false;
  bool json = false;
  bool no_wait = false;
  std::string workspace;
  std::string workspace_path;
  std::vector<std::string> exclude;
  std::vector<std::string> include;
  bool git_history = false;
  std::string egress;
  std::vector<std::string> allow;
  std::vector<std::string> setup;
  std::vector<std::string> setup_root;
  std::vector<std::string> setup_allow;
  int64_t setup_timeout = 0;         // seconds; 0: the daemon's default
  std::vector<std::string> secrets;  // NAME or NAME=VARIABLE
  std::vector<std::string> git_push;
  std::vector<std::string> models;  // anthropic | openai
  std::string template_mode;        // --template
  bool allow_template_egress = false;
};

int Create(const CreateOptions& o) {
  api::SandboxCreate body;
  if (!o.image.empty()) {
    body.image = o.image;
  }
  body.name = o.name;
  if (o.cpus > 0) {
    body.cpus = o.cpus;
  }
  if (o.memory_mib > 0) {
    body.memory_mib = o.memory_mib;
  }
  if (!o.disk.empty()) {
    absl::StatusOr<int64_t> disk = ParseSizeMib("--disk", o.disk);
    if (!disk.ok()) {
      return Fail(disk.status());
    }
    body.disk_mib = *disk;
  }
  absl::StatusOr<std::map<std::string, std::string>> labels =
      ParseKeyValues("-l/--label", "KEY=VALUE", o.labels);
  if (!labels.ok()) {
    return Fail(labels.status());
  }
  body.labels = *labels;
  for (const auto& [flag, text, field] :
       {std::tuple{"--ttl", o.ttl, &body.ttl_seconds},
        std::tuple{"--idle-timeout", o.idle_timeout, &body.idle_timeout_seconds}}) {
    if (text.empty()) {
      continue;
    }
    absl::StatusOr<int64_t> seconds = ParseDurationSeconds(flag, text);
    if (!seconds.ok()) {
      return Fail(seconds.status());
    }
    *field = *seconds;
  }
  if (!o.accel.empty()) {
    body.accel = o.accel;
  }
  body.cold = o.cold;
  if (!o.workspace.empty()) {
    api::WorkspaceSpec ws = WorkspaceSpecFor(o.workspace);
    if (!o.workspace_path.empty()) {
      ws.guest_path = o.workspace_path;
    }
    ws.exclude = o.exclude;
    ws.include = o.include;
    ws.git_history = o.git_history;
    body.workspace = std::move(ws);
  } else if (!o.workspace_path.empty() || !o.exclude.empty() || !o.include.empty() ||
             o.git_history) {
    return Fail(absl::InvalidArgumentError(
        "--workspace-path, --exclude, --include and --git-history need -w/--workspace DIR"));
  }
  body.egress = EgressSpecFor(o.egress, o.allow);
  if (!o.setup.empty() || !o.setup_root.empty()) {
    body.setup = api::SetupSpec{.commands = o.setup,
                                .root_commands = o.setup_root,
                                .allow = o.setup_allow,
                                .timeout_seconds = o.setup_timeout};
  } else if (!o.setup_allow.empty() || o.setup_timeout > 0) {
    return Fail(absl::InvalidArgumentError(
        "--setup-allow and --setup-timeout are for --setup commands: give at least one "
        "--setup CMD (or --setup-root CMD)"));
  }
  for (const std::string& text : o.secrets) {
    size_t eq = text.find('=');
    std::string name = text.substr(0, eq);
    std::string env = eq == std::string::npos ? "" : text.substr(eq + 1);
    if (name.empty() || (eq != std::string::npos && env.empty())) {
      return Fail(absl::InvalidArgumentError(absl::StrCat(
          "--secret \"", text, "\": write NAME or NAME=VARIABLE (e.g. GH=GITHUB_TOKEN)")));
    }
    if (!body.secrets.emplace(name, env).second) {
      return Fail(absl::InvalidArgumentError(absl::StrCat("--secret ", name, " is given twice")));
    }
  }
  body.git_push = o.git_push;
  body.models = o.models;
  if (absl::Status s = ApplyWorkspaceTemplate({.mode = o.template_mode,
                                               .allow_egress = o.allow_template_egress,
                                               .given = {.image = !o.image.empty(),
                                                         .cpus = o.cpus > 0,
                                                         .memory = o.memory_mib > 0,
                                                         .disk = !o.disk.empty()}},
                                              &body);
      !s.ok()) {
    return Fail(s);
  }
  absl::StatusOr<std::unique_ptr<client::ApiClient>> api = ConnectToDaemon();
  if (!api.ok()) {
    return Fail(api.status());
  }
  bool progress = !o.no_wait && ::isatty(STDERR_FILENO) != 0;
  if (progress) {
    std::fprintf(stderr, "booting sandbox...");
    std::fflush(stderr);
  }
  client::QueryParams query;
  if (o.no_wait) {
    query.emplace_back("wait", "false");
  }
  absl::StatusOr<client::ApiResponse> created =
      (*api)->Post(client::WithQuery("/v1/sandboxes", query), api::ToJson(body));
  if (progress) {
    std::fprintf(stderr, "\r\033[K");
  }
  if (!created.ok()) {
    return Fail(created.status());
  }
  if (o.json) {
    PrintVerbatim(created->body);
    return 0;
  }
  absl::StatusOr<api::Sandbox> sandbox =
      client::DecodeAnswer(*created, "POST /v1/sandboxes", api::DecodeSandbox);
  if (!sandbox.ok()) {
    return Fail(sandbox.status());
  }
  std::printf("%s\n", sandbox->id.c_str());
  return 0;
}

struct ListOptions {
  bool all = false;
  std::vector<std::string> labels;
  bool json = false;
  bool quiet = false;
};

int List(const ListOptions& o) {
  client::QueryParams query;
  absl::StatusOr<std::map<std::string, std::string>> labels =
      ParseKeyValues("-l/--label", "KEY=VALUE", o.labels);
  if (!labels.ok()) {
    return Fail(labels.status());
  }
  for (const auto& [key, value] : *labels) {
    query.emplace_back("label", absl::StrCat(key, "=", value));
  }
  if (!o.all) {
    query.emplace_back("state", "creating");
    query.emplace_back("state", "ready");
    query.emplace_back("state", "paused");
  }
  absl::StatusOr<std::unique_ptr<client::ApiClient>> api = ConnectToDaemon();
  if (!api.ok()) {
    return Fail(api.status());
  }
  absl::StatusOr<client::ApiResponse> listed =
      (*api)->Get(client::WithQuery("/v1/sandboxes", query));
  if (!listed.ok()) {
    return Fail(listed.status());
  }
  if (o.json) {
    PrintVerbatim(listed->body);
    return 0;
  }
  absl::StatusOr<std::vector<api::Sandbox>> sandboxes =
      client::DecodeAnswer(*listed, "GET /v1/sandboxes", api::DecodeSandboxList);
  if (!sandboxes.ok()) {
    return Fail(sandboxes.status());
  }
  if (o.quiet) {
    for (const api::Sandbox& s : *sandboxes) {
      std::printf("%s\n", s.id.c_str());
    }
    return 0;
  }
  std::printf("%s", ForTerminal(stdout, SandboxTable(*sandboxes, absl::Now())).c_str());
  return 0;
}

int Inspect(const std::vector<std::string>& ids, bool json) {
  absl::StatusOr<std::unique_ptr<client::ApiClient>> api = ConnectToDaemon();
  if (!api.ok()) {
    return Fail(api.status());
  }
  nlohmann::json found = nlohmann::json::array();
  int code = 0;
  for (const std::string& id : ids) {
    absl::StatusOr<client::ApiResponse> r = (*api)->Get(client::SandboxPath(id));
    if (!r.ok()) {
      code = Fail(r.status());
      continue;
    }
    if (json) {
      PrintVerbatim(r->body);  // one object per line (JSON Lines)
    } else {
      found.push_back(std::move(r->json));
    }
  }
  if (!json && !found.empty()) {
    std::printf(
        "%s\n",
        JsonForTerminal(stdout, api::Dump(found.size() == 1 ? found[0] : found, 2)).c_str());
  }
  return code;
}

// DELETE or POST .../stop for each id; prints the ids that worked, each failure, and returns 1
// when any failed.
int ForEachSandbox(const std::vector<std::string>& ids,
                   const std::function<absl::Status(client::ApiClient&, const std::string&)>& op) {
  absl::StatusOr<std::unique_ptr<client::ApiClient>> api = ConnectToDaemon();
  if (!api.ok()) {
    return Fail(api.status());
  }
  int code = 0;
  for (const std::string& id : ids) {
    if (absl::Status s = op(**api, id); !s.ok()) {
      code = Fail(s);
    } else {
      std::printf("%s\n", id.c_str());
      std::fflush(stdout);
    }
  }
  return code;
}

}  // namespace

api::WorkspaceSpec WorkspaceSpecFor(const std::string& dir) {
  std::error_code ec;
  std::filesystem::path absolute = std::filesystem::absolute(dir, ec);
  api::WorkspaceSpec ws;
  ws.path = ec ? dir : absolute.lexically_normal().string();
  return ws;
}

std::optional<api::EgressSpec> EgressSpecFor(const std::string& mode,
                                             const std::vector<std::string>& allow) {
  if (mode.empty() && allow.empty()) {
    return std::nullopt;
  }
  api::EgressSpec egress;
  if (!mode.empty()) {
    egress.mode = mode;
  }
  egress.allow = allow;
  return egress;
}

void AddSandboxCommands(CLI::App& app, Action* action) {
  auto create = std::make_shared<CreateOptions>();
  auto* create_cmd = app.add_subcommand(
      "create", "Create and boot a sandbox kept by aboxd; prints its id (and waits until ready)");
  create_cmd->add_option("--image", create->image, "Guest image to boot (default: default)");
  create_cmd->add_option("--name", create->name,
                         "Unique name, usable wherever an id is ([A-Za-z0-9][A-Za-z0-9_.-]*)");
  create_cmd->add_option("--cpus", create->cpus, "Virtual CPUs (default 1)")
      ->check(CLI::Range(1, 64));
  create_cmd
      ->add_option("--memory", create->memory_mib,
                   absl::StrCat("Guest memory in MiB (default ", api::kDefaultMemoryMib, ")"))
      ->check(CLI::Range(128, 262144));
  create_cmd->add_option("--disk", create->disk,
                         "Guest disk: 32G, 500M or MiB (default 16G; sparse: the host stores only "
                         "what the guest writes, shown by `abox ls`)");
  create_cmd->add_option("-l,--label", create->labels, "Label KEY=VALUE (repeatable)")
      ->allow_extra_args(false);
  create_cmd->add_option("--ttl", create->ttl,
                         "Stop the sandbox this long after creation: 30s, 10m, 2h, 1d (0 = never)");
  create_cmd->add_option("--idle-timeout", create->idle_timeout,
                         "Stop it after this long without a running exec (0 = never)");
  create_cmd
      ->add_option("--accel", create->accel, "Accelerator: auto (probe KVM, else TCG), kvm or tcg")
      ->check(CLI::IsMember({"auto", "kvm", "tcg"}));
  create_cmd->add_flag("--cold", create->cold,
                       "Boot a kernel instead of restoring the image's golden snapshot (slower; "
                       "the snapshot is made by the first create of an image and size)");
  create_cmd->add_option("-w,--workspace", create->workspace,
                         "Bind a host directory: a copy goes to /workspace in the guest (synced "
                         "before every exec); changes come back only with diff / apply / pull");
  create_cmd->add_option("--workspace-path", create->workspace_path,
                         "Where the guest sees the workspace (default /workspace)");
  create_cmd->add_option("--exclude", create->exclude,
                         "Also keep files matching PATTERN out of the sandbox (repeatable)");
  create_cmd->add_option("--include", create->include,
                         "Let files matching this default secret pattern in, e.g. '*.pem' "
                         "(repeatable; see abox help workspace)");
  create_cmd->add_flag("--git-history", create->git_history,
                       "Give the sandbox the repository's full git history (refused while an "
                       "excluded path is anywhere in it) instead of one commit of HEAD");
  create_cmd
      ->add_option("--egress", create->egress,
                   "Network mode: none, allowlist (only --allow rules and the global ones; the "
                   "default) or open (any public address, logged)")
      ->check(CLI::IsMember({"none", "allowlist", "open"}));
  create_cmd
      ->add_option("--allow", create->allow,
                   "Allow RULE (repeatable): NAME, *.SUFFIX, NAME:80,443, preset:NAME (pypi, npm, "
                   "github, debian, ubuntu, crates, go), ADDRESS:PORT")
      ->allow_extra_args(false);
  create_cmd
      ->add_option("--setup", create->setup,
                   "Run this shell command before the sandbox is ready, e.g. 'npm ci' "
                   "(repeatable, in order; the create fails if one fails)")
      ->allow_extra_args(false);
  create_cmd
      ->add_option("--setup-root", create->setup_root,
                   "Like --setup, as root (no sudo needed), before the --setup commands")
      ->allow_extra_args(false);
  create_cmd
      ->add_option("--setup-allow", create->setup_allow,
                   "Allow RULE or preset name only while the --setup commands run (repeatable)")
      ->allow_extra_args(false);
  create_cmd
      ->add_option("--setup-timeout", create->setup_timeout,
                   "Fail the create when the --setup commands take longer than this many "
                   "seconds together (default 600)")
      ->check(CLI::Range(int64_t{1}, int64_t{604800}));
  create_cmd
      ->add_option("--secret", create->secrets,
                   "Give the sandbox secret NAME (abox secret set) as a placeholder in $NAME, or "
                   "in $VARIABLE with NAME=VARIABLE; the proxy swaps the real value in for the "
                   "secret's hosts, which are allowed too (repeatable)")
      ->allow_extra_args(false);
  create_cmd
      ->add_option("--git-push", create->git_push,
                   "Let git push to HOST/OWNER/REPO branches matching PATTERN "
                   "(HOST/OWNER/REPO:PATTERN, e.g. github.com/acme/app:agent/*), with the token "
                   "of the --secret bound to HOST added on the host (repeatable)")
      ->allow_extra_args(false);
  create_cmd
      ->add_option("--model", create->models,
                   "Let the sandbox's agents reach this model API (anthropic, openai) through "
                   "aboxd's broker: commands get its guest URL and a token of the sandbox's own, "
                   "the real key (abox agent login) stays on the host (repeatable)")
      ->check(CLI::IsMember({"anthropic", "openai"}))
      ->allow_extra_args(false);
  create_cmd->add_option("--template", create->template_mode,
                         "With -w: the repository's .abox.toml is used when present; auto also "
                         "guesses one from its files (package.json, pyproject.toml, go.mod, ...) "
                         "when there is none; none leaves it out (docs/templates.md)");
  create_cmd->add_flag("--allow-template-egress", create->allow_template_egress,
                       "Accept the egress rules the repository's template asks for (a template "
                       "cannot widen egress on its own)");
  create_cmd->add_flag("--json", create->json, "Print the created sandbox as the API's JSON");
  create_cmd->add_flag("--no-wait", create->no_wait,
                       "Return as soon as the sandbox is accepted (state creating); follow it "
                       "with `abox events` or `abox ls`");
  create_cmd->callback([create, action] { *action = [create] { return Create(*create); }; });

  auto list = std::make_shared<ListOptions>();
  auto* ls_cmd = app.add_subcommand("ls", "List sandboxes (running and paused ones; -a for all)");
  ls_cmd->add_flag("-a,--all", list->all, "Also show stopping, stopped and failed sandboxes");
  ls_cmd
      ->add_option("-l,--label", list->labels,
                   "Only sandboxes with label KEY=VALUE (repeatable: all must match)")
      ->allow_extra_args(false);
  ls_cmd->add_flag("--json", list->json, "Print the API's JSON ({\"sandboxes\": [...]})");
  ls_cmd->add_flag("-q,--quiet", list->quiet, "Print only the full ids, one per line");
  ls_cmd->callback([list, action] { *action = [list] { return List(*list); }; });

  auto inspect_ids = std::make_shared<std::vector<std::string>>();
  auto inspect_json = std::make_shared<bool>(false);
  auto* inspect_cmd = app.add_subcommand(
      "inspect", "Show sandboxes in full as JSON (one object, or an array for several)");
  inspect_cmd->add_option("id", *inspect_ids, "Sandbox ids, names or unique id prefixes")
      ->required();
  inspect_cmd->add_flag("--json", *inspect_json,
                        "Print the API's JSON verbatim, one object per line");
  inspect_cmd->callback([=] { *action = [=] { return Inspect(*inspect_ids, *inspect_json); }; });

  auto rm_ids = std::make_shared<std::vector<std::string>>();
  auto force = std::make_shared<bool>(false);
  auto* rm_cmd = app.add_subcommand(
      "rm", "Remove sandboxes with their files and exec history; prints each removed one");
  rm_cmd->add_option("id", *rm_ids, "Sandbox ids, names or unique id prefixes")->required();
  rm_cmd->add_flag("-f,--force", *force,
                   "Also remove running sandboxes (they are stopped first; running execs end as "
                   "interrupted)");
  rm_cmd->callback([=] {
    *action = [=] {
      return ForEachSandbox(*rm_ids, [force](client::ApiClient& api, const std::string& id) {
        client::QueryParams q;
        if (*force) {
          q.emplace_back("force", "true");
        }
        return api.Delete(client::WithQuery(client::SandboxPath(id), q)).status();
      });
    };
  });

  auto stop_ids = std::make_shared<std::vector<std::string>>();
  auto* stop_cmd = app.add_subcommand(
      "stop", "Stop sandboxes (the VM goes, its vCPUs and memory are freed; record and logs stay)");
  stop_cmd->add_option("id", *stop_ids, "Sandbox ids, names or unique id prefixes")->required();
  stop_cmd->callback([=] {
    *action = [=] {
      return ForEachSandbox(*stop_ids, [](client::ApiClient& api, const std::string& id) {
        return api.Post(client::SandboxPath(id, "/stop"), nullptr).status();
      });
    };
  });

  struct Verb {
    const char* name;
    const char* help;
    const char* doing;  // said on a terminal while it runs (a save or restore takes seconds)
  };
  for (const Verb& verb :
       {Verb{"pause",
             "Pause sandboxes to disk: memory, processes and disk saved, the VM ends and its "
             "vCPUs and memory are freed; it stays paused across aboxd restarts and reboots "
             "until abox resume or a command in it",
             "saving"},
        Verb{"resume", "Bring paused sandboxes back, processes and files as they were",
             "restoring"}}) {
    auto ids = std::make_shared<std::vector<std::string>>();
    auto* cmd = app.add_subcommand(verb.name, verb.help);
    cmd->add_option("id", *ids, "Sandbox ids, names or unique id prefixes")->required();
    const std::string name = verb.name;
    const std::string doing = verb.doing;
    cmd->callback([=] {
      *action = [=] {
        return ForEachSandbox(*ids, [&](client::ApiClient& api, const std::string& id) {
          if (::isatty(STDERR_FILENO) == 1) {
            std::fprintf(stderr, "%s %s...\n", doing.c_str(), id.c_str());
          }
          return api.Post(client::SandboxPath(id, "/" + name), nullptr).status();
        });
      };
    });
  }
}

}  // namespace abox::cli
