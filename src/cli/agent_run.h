// `abox agent claude|codex`: the run (see agent_commands.h).
#pragma once

#include <cstdint>
#include <string>

#include "src/cli/agent_commands.h"

namespace abox::cli {

struct AgentRunOptions {
  AgentInvocation invocation;
  std::string workspace;  // empty: the current directory
  std::string sandbox;    // reuse this one
  std::string image;
  int64_t memory_mib = 0;     // 0: aboxd's default (2 GiB)
  std::string disk;           // --disk; empty: aboxd's default
  std::string template_mode;  // --template: "", auto or none (see create_template.h)
  bool allow_template_egress = false;
  int64_t cpus = 0;  // 0: aboxd's default
  bool ask_permissions = false;
};

// Returns the agent's exit status (kExitAboxFailure with the error printed when abox failed).
int RunAgent(const AgentRunOptions& options);

}  // namespace abox::cli
