#include "src/cli/agent_run.h"

#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "src/api/exec.h"
#include "src/api/sandbox.h"
#include "src/api/workspace.h"
#include "src/base/status_macros.h"
#include "src/cli/create_template.h"
#include "src/cli/diff_format.h"
#include "src/cli/exec_command.h"
#include "src/cli/exit_status.h"
#include "src/cli/flags.h"
#include "src/cli/sandbox_commands.h"
#include "src/cli/terminal.h"
#include "src/cli/terminal_text.h"
#include "src/client/answers.h"
#include "src/client/api_paths.h"

namespace abox::cli {
namespace {

std::string ApiOf(const std::string& agent) { return agent == "claude" ? "anthropic" : "openai"; }

bool HasModel(const api::Sandbox& s, const std::string& api) {
  return std::find(s.models.begin(), s.models.end(), api) != s.models.end();
}

// Creates the agent's sandbox: the repository as its workspace, the model API granted.
absl::StatusOr<api::Sandbox> CreateSandbox(client::ApiClient& api, const AgentRunOptions& o) {
  api::SandboxCreate body;
  body.image = o.image;
  if (o.memory_mib > 0) {
    body.memory_mib = o.memory_mib;
  }
  if (!o.disk.empty()) {
    ABOX_ASSIGN_OR_RETURN(body.disk_mib, ParseSizeMib("--disk", o.disk));
  }
  if (o.cpus > 0) {
    body.cpus = o.cpus;
  }
  body.labels["abox.agent"] = o.invocation.agent;
  std::string dir = o.workspace.empty() ? std::filesystem::current_path().string() : o.workspace;
  body.workspace = WorkspaceSpecFor(dir);
  body.models = {ApiOf(o.invocation.agent)};
  // The repository's template: resources, setup and (accepted) egress; the image stays the
  // agent's.
  ABOX_RETURN_IF_ERROR(ApplyWorkspaceTemplate(
      {.mode = o.template_mode,
       .allow_egress = o.allow_template_egress,
       .given = {.cpus = o.cpus > 0, .memory = o.memory_mib > 0, .disk = !o.disk.empty()},
       .keep_image = true},
      &body));
  bool progress = ::isatty(STDERR_FILENO) != 0;
  if (progress) {
    std::fprintf(stderr, "starting a sandbox for %s on %s...", o.invocation.agent.c_str(),
                 ShowControlCharacters(dir).c_str());
    std::fflush(stderr);
  }
  absl::StatusOr<client::ApiResponse> created = api.Post("/v1/sandboxes", api::ToJson(body));
  if (progress) {
    std::fprintf(stderr, "\r\033[K");
  }
  if (!created.ok()) {
    if (absl::IsNotFound(created.status()) &&
        absl::StrContains(created.status().message(), "image")) {
      return absl::NotFoundError(absl::StrCat(
          created.status().message(), "; build the agent's image first: abox image build --name ",
          o.image, " --agent ", o.invocation.agent));
    }
    return created.status();
  }
  return client::DecodeAnswer(*created, "POST /v1/sandboxes", api::DecodeSandbox);
}

absl::StatusOr<api::Sandbox> ExistingSandbox(client::ApiClient& api, const AgentRunOptions& o) {
  absl::StatusOr<client::ApiResponse> r = api.Get(client::SandboxPath(o.sandbox));
  if (!r.ok()) {
    return r.status();
  }
  ABOX_ASSIGN_OR_RETURN(api::Sandbox s,
                        client::DecodeAnswer(*r, "GET /v1/sandboxes/{id}", api::DecodeSandbox));
  std::string wanted = ApiOf(o.invocation.agent);
  if (!HasModel(s, wanted)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "sandbox ", s.id, " was not given the ", wanted,
        " API, so the agent would have no way to its model: run without --sandbox (a new "
        "sandbox gets it), or create one with `abox create --model ",
        wanted, " -w DIR`"));
  }
  return s;
}

// `abox diff --stat` and what to do next.
void ShowOutcome(client::ApiClient& api, const std::string& id, const std::string& agent) {
  absl::StatusOr<client::ApiResponse> r = api.Get(client::SandboxPath(id, "/diff"));
  absl::StatusOr<api::Diff> diff =
      r.ok() ? client::DecodeAnswer(*r, "GET /v1/sandboxes/{id}/diff", api::DecodeDiff)
             : absl::StatusOr<api::Diff>(r.status());
  std::FILE* out = stderr;
  if (!diff.ok()) {
    std::fprintf(out, "abox: the sandbox's changes cannot be shown: %s\n",
                 ShowControlCharacters(std::string(diff.status().message())).c_str());
  } else if (diff->files.empty()) {
    std::fprintf(out, "\nno changes in the workspace\n");
  } else {
    MarkControlCharacters(*diff);
    std::string text = FormatDiff(*diff, /*stat=*/true, IsTerminal(out));
    std::fprintf(out, "\nchanges in sandbox %s:\n%s", id.c_str(), text.c_str());
  }
  std::fprintf(out,
               "\n  review:  abox diff %s\n"
               "  apply:   abox apply %s        (backs up every file it touches; abox undo)\n"
               "  go on:   abox agent %s --sandbox %s\n"
               "  usage:   abox agent usage %s\n"
               "  remove:  abox rm -f %s\n",
               id.c_str(), id.c_str(), agent.c_str(), id.c_str(), id.c_str(), id.c_str());
}

}  // namespace

std::vector<std::string> AgentArgv(const AgentInvocation& in) {
  std::vector<std::string> argv;
  if (in.agent == "claude") {
    argv = {"claude"};
    if (!in.prompt.empty()) {
      argv.insert(argv.end(), {"-p", in.prompt, "--output-format", "stream-json", "--verbose"});
    }
    if (in.skip_permissions) {
      argv.emplace_back("--dangerously-skip-permissions");
    }
    if (!in.model.empty()) {
      argv.insert(argv.end(), {"--model", in.model});
    }
  } else {
    argv = {"codex"};
    if (!in.prompt.empty()) {
      argv.insert(argv.end(), {"exec", "--skip-git-repo-check", "--json"});
    }
    if (in.skip_permissions) {
      // The VM is the boundary; Codex's own sandbox (Landlock, seccomp) adds nothing there.
      argv.emplace_back("--dangerously-bypass-approvals-and-sandbox");
    }
    if (!in.model.empty()) {
      argv.insert(argv.end(), {"--model", in.model});
    }
  }
  argv.insert(argv.end(), in.extra.begin(), in.extra.end());
  if (in.agent != "claude" && !in.prompt.empty()) {
    argv.push_back(in.prompt);
  }
  return argv;
}

std::string AgentSetupScript(const std::string& agent) {
  if (agent == "claude") {
    // Onboarding done and the broker token accepted as the API key, so an interactive start
    // goes straight to work (headless runs need none of it). An existing config is kept.
    return R"sh(set -eu
f="$HOME/.claude.json"
[ -e "$f" ] && exit 0
key="${ANTHROPIC_API_KEY:-}"
tail=$(printf %s "$key" | tail -c 20)
umask 077
printf '{"hasCompletedOnboarding":true,"bypassPermissionsModeAccepted":true,"customApiKeyResponses":{"approved":["%s"],"rejected":[]}}\n' "$tail" > "$f"
)sh";
  }
  // Codex reads its provider from config.toml: the broker's Responses API, the token from the
  // environment (never written to a file), no update check or analytics.
  return R"sh(set -eu
d="${CODEX_HOME:-$HOME/.codex}"
mkdir -p "$d"
umask 077
cat > "$d/config.toml" <<EOF
model_provider = "abox"
check_for_update_on_startup = false

[model_providers.abox]
name = "abox model broker"
base_url = "${OPENAI_BASE_URL:-http://127.0.0.1:15080/openai/v1}"
env_key = "OPENAI_API_KEY"
wire_api = "responses"

[analytics]
enabled = false

[feedback]
enabled = false
EOF
)sh";
}

int RunAgent(const AgentRunOptions& o) {
  ::signal(SIGPIPE, SIG_IGN);
  absl::StatusOr<std::unique_ptr<client::ApiClient>> api = ConnectToDaemon();
  if (!api.ok()) {
    return Fail(api.status(), kExitAboxFailure);
  }
  absl::StatusOr<api::Sandbox> sandbox =
      o.sandbox.empty() ? CreateSandbox(**api, o) : ExistingSandbox(**api, o);
  if (!sandbox.ok()) {
    return Fail(sandbox.status(), kExitAboxFailure);
  }
  const std::string id = sandbox->id;
  if (o.sandbox.empty()) {
    std::fprintf(stderr, "sandbox %s: %s with the %s API through aboxd's broker\n", id.c_str(),
                 o.invocation.agent.c_str(), ApiOf(o.invocation.agent).c_str());
  }
  BlockHandledSignals();
  api::ExecCreate setup;
  setup.shell = AgentSetupScript(o.invocation.agent);
  setup.sync = false;
  if (int code = RelayExec(**api, id, setup); code != 0) {
    std::fprintf(stderr, "abox: setting up %s in sandbox %s failed (exit %d)\n",
                 o.invocation.agent.c_str(), id.c_str(), code);
    return kExitAboxFailure;
  }
  api::ExecCreate run;
  run.argv = AgentArgv(o.invocation);
  run.cwd = sandbox->workspace.is_object() ? sandbox->workspace.value("guest_path", "/workspace")
                                           : "/workspace";
  run.sync = !o.sandbox.empty();  // a reused sandbox gets the host's newer files first
  bool interactive = o.invocation.prompt.empty();
  if (interactive) {
    if (!IsTerminal(stdin) || !IsTerminal(stdout)) {
      return Fail(absl::InvalidArgumentError(
                      "an interactive agent needs a terminal: run it from one, or give the task "
                      "with --prompt TEXT (headless)"),
                  2);
    }
    run.stdin_open = true;
    const char* term = std::getenv("TERM");  // NOLINT(concurrency-mt-unsafe)
    run.env.emplace("TERM", term != nullptr && *term != '\0' ? term : "xterm-256color");
    WindowSize size = TerminalSize().value_or(WindowSize{24, 80});
    run.pty = std::make_pair(int64_t{size.rows}, int64_t{size.cols});
  }
  // A sandbox made here gets more memory from `abox agent NAME --memory`; a reused one is the
  // user's own, made by `abox create`.
  int code = RelayExec(**api, id, run,
                       o.sandbox.empty() ? "abox agent " + o.invocation.agent : "abox create");
  ShowOutcome(**api, id, o.invocation.agent);
  return code;
}

}  // namespace abox::cli
