// `abox agent`: coding agents run whole inside a sandbox, their model key held on the host
// (issue 16).
//   abox agent login anthropic|openai   store the key (or point at a stored secret)
//   abox agent logout anthropic|openai  back to the defaults
//   abox agent status                   where each API goes, whether its key is stored
//   abox agent usage ID                 what a sandbox's agents used through the broker
//   abox agent claude|codex [-w DIR] [--sandbox ID] [--prompt TEXT] [--model M] [-- ARGS]
// The last creates (or reuses) a sandbox on the repository with the agent's image and the
// model API granted, runs the agent in /workspace (interactive on a terminal, headless with
// --prompt), then shows `abox diff --stat` and the commands to review and apply.
#pragma once

#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "src/cli/command.h"

namespace abox::cli {

// `tail`: the words after `abox agent ... --` (the agent's own arguments).
void AddAgentCommands(CLI::App& app, Action* action, const std::vector<std::string>* tail);

// The agent's command line inside the VM. `prompt` empty: interactive. `skip_permissions`: the
// agent's own approval prompts are off (the VM is the boundary).
struct AgentInvocation {
  std::string agent;  // "claude" | "codex"
  std::string prompt;
  std::string model;
  bool skip_permissions = true;
  std::vector<std::string> extra;  // after `--`
};
[[nodiscard]] std::vector<std::string> AgentArgv(const AgentInvocation& invocation);
// The shell script run (as the sandbox's agent user) before the agent: its config (for Codex, a
// provider pointing at the broker; for Claude Code, onboarding done), nothing of the key.
[[nodiscard]] std::string AgentSetupScript(const std::string& agent);

}  // namespace abox::cli
