// The setup phase of a create: its commands run (as agent, in the workspace) one after the
// other within the setup's timeout, with the setup's extra egress rules allowed only meanwhile.
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "src/api/exec.h"
#include "src/api/sandbox.h"
#include "src/daemon/lifecycle/sandbox_context.h"
#include "src/daemon/services/exec_service.h"
#include "src/net/policy.h"

namespace abox::daemon {

// Thread-safe (no state of its own).
class SetupRunner final {
 public:
  SetupRunner(SandboxContext& ctx, ExecService& execs) : ctx_(&ctx), execs_(&execs) {}

  // `rules` widen the egress policy while each command runs; the first command that fails
  // ends it with an error naming it, its exit and the tail of its output. The policy is
  // narrowed again either way, and then every tunnel still open (opened under the wider
  // policy) is reset. What a command leaves running (in its process group or, in a VM, in its
  // cgroup: setsid'd daemons too) is killed as the command ends (kill_leftovers).
  [[nodiscard]] absl::Status Run(const std::string& id, runtime::Sandbox& sandbox,
                                 const api::SetupSpec& setup, std::vector<net::Rule> rules);

 private:
  // The commands, in order, within the setup's timeout (setup.timeout_seconds, else
  // SandboxOptions::setup_timeout): kDeadlineExceeded when it runs out.
  absl::Status RunCommands(const std::string& id, runtime::Sandbox& sandbox,
                           const api::SetupSpec& setup);

  SandboxContext* ctx_;
  ExecService* execs_;
};

}  // namespace abox::daemon
