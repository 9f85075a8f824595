#include "src/cli/mcp_guidance.h"

#include "absl/strings/str_cat.h"

namespace abox::cli {
namespace {

constexpr char kGuidance[] =
    R"(Run this repository's commands in an abox sandbox (a disposable Linux microVM, through
the `abox` MCP server's tools), not on the person's machine: builds, tests, package installs,
scripts, anything that runs code from the repository.

- Start with `sandbox_create` (one sandbox per task). Its `/workspace` is a copy of this
  project, so you can change anything there without touching the person's files. Reuse it:
  `sandbox_list` shows the sandboxes you made.
- Run commands with `exec` (the exit code, stdout and stderr come back as data; a non-zero
  exit is a result to read, not a failure of the tool). For anything that may take longer than
  about 50 seconds (a long test suite, a server, a watch task) use `exec_start`, then
  `exec_read` / `exec_wait`, `exec_write_stdin` and `exec_signal`.
- Read and edit files with `read_file`, `write_file` and `list_files`, or with commands.
  `workspace_diff` shows what changed in the sandbox against the project; `workspace_sync`
  brings in what the person changed on the host since.
- Your changes stay in the sandbox until the person applies them: tell them what you changed
  (summarize `workspace_diff`) and that they can run `abox apply` to copy it into the project.
  Only when they started the server with `--allow-apply` is there an `apply_changes` tool.
- The sandbox's network goes through an allowlist. When a command fails to reach a host (a
  package registry, an API), look at `egress_log`, then ask for that host by name with
  `egress_request` (e.g. `pypi.org`, with the reason); the person decides. Do not try to get
  around the proxy.
- When the task is done, `sandbox_remove` the sandbox (or `sandbox_stop` it to keep it).
)";

constexpr char kUninstallNote[] = "`; `abox mcp uninstall ";

}  // namespace

std::string ClaudeSkill() {
  return absl::StrCat(
      "---\n"
      "name: abox\n"
      "description: Run this repository's commands, builds and tests in a disposable abox "
      "microVM sandbox (the abox MCP server) instead of on the host. Use it whenever you would "
      "run code, tests or package installs from the repository.\n"
      "---\n"
      "<!-- ",
      kWrittenByAbox, " claude", kUninstallNote, "claude` removes it. -->\n\n",
      "# Work in an abox sandbox\n\n", kGuidance);
}

std::string AgentsSection() {
  return absl::StrCat(kSectionBegin, "\n<!-- ", kWrittenByAbox, " codex", kUninstallNote,
                      "codex` removes this section. -->\n", "## Sandbox (abox)\n\n", kGuidance,
                      kSectionEnd, "\n");
}

std::string CursorRule() {
  return absl::StrCat(
      "---\n"
      "description: Run repository commands, builds and tests in an abox sandbox (the abox MCP "
      "server) instead of on the host\n"
      "alwaysApply: true\n"
      "---\n"
      "<!-- ",
      kWrittenByAbox, " cursor", kUninstallNote, "cursor` removes it. -->\n\n",
      "# Work in an abox sandbox\n\n", kGuidance);
}

}  // namespace abox::cli
