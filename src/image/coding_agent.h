// Coding agent CLIs (Claude Code, Codex) that `abox image build --agent` installs into an image:
// the table of known agents, `--agent` spec parsing and where an agent lives inside the image.
// Trust boundary: specs come from the command line and are validated here before they reach an
// npm command line; versions and integrity strings come from the npm registry and are checked
// (ValidateResolvedAgent) before they name paths or enter the rootfs build.
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace abox::image {

// Where agents live inside the image: <kAgentsDir>/<name>/<version>/...
inline constexpr char kAgentsDir[] = "/opt/abox/agents";
// Where each agent's command is linked: /usr/local/bin/<command>.
inline constexpr char kAgentCommandDir[] = "/usr/local/bin";

// One known agent. Both ship their native Linux x86-64 build in an optional dependency of the
// npm package, so npm can fetch it with --ignore-scripts (no package code runs on the host).
struct AgentKind {
  const char* name;            // --agent NAME
  const char* package;         // npm package installed (and pinned by version + integrity)
  const char* native_package;  // its optional dependency holding the native build
  // What is copied into <kAgentsDir>/<name>/<version>/, relative to the native package: a file
  // (copied under its own name) or a directory (its contents are copied).
  const char* payload;
  const char* entry;    // the executable, relative to <kAgentsDir>/<name>/<version>/
  const char* command;  // linked as /usr/local/bin/<command>
};

// Claude Code: one Bun-compiled, glibc-linked executable (it embeds ripgrep; libc6 suffices).
// Codex: a static musl package dir; bin/codex finds its codex-path/rg and codex-resources/bwrap
// relative to its own (resolved) path, so the whole directory is kept together.
inline constexpr AgentKind kAgentKinds[] = {
    {"claude", "@anthropic-ai/claude-code", "@anthropic-ai/claude-code-linux-x64", "claude",
     "claude", "claude"},
    {"codex", "@openai/codex", "@openai/codex-linux-x64", "vendor/x86_64-unknown-linux-musl",
     "bin/codex", "codex"},
};

// The known agent called `name`, or nullptr.
[[nodiscard]] const AgentKind* FindAgentKind(absl::string_view name);

// "claude, codex" (for error messages and --help).
[[nodiscard]] std::string KnownAgentNames();

// `--agent NAME[@VERSION]` as given; version is an npm version, range or dist-tag ("latest").
struct AgentSpec {
  std::string name;
  std::string version = "latest";

  bool operator==(const AgentSpec&) const = default;
};

// Parses "claude", "claude@2.1.3", "codex@latest". kInvalidArgument for unknown agents (listing
// the known ones), empty or odd versions, or anything that could be read as an npm option.
[[nodiscard]] absl::StatusOr<AgentSpec> ParseAgentSpec(absl::string_view text);

// Parses every spec; refuses the same agent twice.
[[nodiscard]] absl::StatusOr<std::vector<AgentSpec>> ParseAgentSpecs(
    const std::vector<std::string>& texts);

// An agent pinned to one published version: what the image holds and the cache key covers.
struct ResolvedAgent {
  std::string name;
  std::string package;
  std::string version;    // exact, e.g. "2.1.332"
  std::string integrity;  // npm dist.integrity of `package`@`version`, e.g. "sha512-..."

  bool operator==(const ResolvedAgent&) const = default;
};

// Checks a resolution before it is used in paths and argv: known name and package, an exact
// version of safe characters, an SRI integrity string.
[[nodiscard]] absl::Status ValidateResolvedAgent(const ResolvedAgent& agent);

// "/opt/abox/agents/<name>/<version>"
[[nodiscard]] std::string AgentInstallDir(const ResolvedAgent& agent);
// Absolute in-image path of the agent's executable.
[[nodiscard]] std::string AgentEntryPath(const ResolvedAgent& agent);
// "/usr/local/bin/<command>"
[[nodiscard]] std::string AgentCommandPath(const ResolvedAgent& agent);

// mmdebstrap --customize-hook run after `sync-in <staged agents> /opt/abox/agents`: makes the
// tree root-owned and not writable by others (copy-in keeps the host owner's uid, which in the
// image could be the agent user's), links each agent's command into /usr/local/bin and checks
// it is executable. Empty for no agents. Its text is part of the rootfs cache key.
[[nodiscard]] std::string AgentInstallHook(const std::vector<ResolvedAgent>& agents);

}  // namespace abox::image
