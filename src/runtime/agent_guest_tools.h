// The workspace tools of a real sandbox: `abox-guest ws ...` run as root over the agent
// channel, with the copy of the agent that stage 1 put in /run/abox.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "src/runtime/agent_client.h"
#include "src/workspace/guest_tools.h"

namespace abox::runtime {

// Where stage 1 copies the agent in every guest (see docs/decisions/0003).
inline constexpr char kGuestAgentPath[] = "/run/abox/abox-guest";

// How long one guest tool may run: `floor`, plus one second per `bytes_per_second` that went
// to or came from it (a big honest tree earns its time as it flows; a tool that stops reading
// or answering earns none). On a miss the tool is killed (SIGKILL); a guest that does not end
// it within `kill_grace` has its agent connection failed, which fails the sandbox.
struct GuestToolDeadline {
  absl::Duration floor = absl::Minutes(2);
  uint64_t bytes_per_second = 1 << 20;
  absl::Duration kill_grace = absl::Seconds(5);
};

class AgentGuestTools final : public workspace::GuestTools {
 public:
  // `agent` must outlive this object. `tool_path`: the agent binary in the guest (tests with a
  // fake VMM, whose "guest" is this host, pass the built abox-guest). `sandbox_id` names the
  // sandbox in errors.
  explicit AgentGuestTools(AgentClient& agent, std::string tool_path = kGuestAgentPath,
                           GuestToolDeadline deadline = {}, std::string sandbox_id = "")
      : agent_(agent),
        tool_path_(std::move(tool_path)),
        deadline_(deadline),
        sandbox_id_(std::move(sandbox_id)) {}

  [[nodiscard]] absl::Status Run(const std::vector<std::string>& args, const InputFn& input,
                                 const OutputFn& output) override;

  // The same agent and deadline with another tool binary (tests: the tool a hostile guest root
  // put in place of the real one).
  [[nodiscard]] std::unique_ptr<AgentGuestTools> WithToolPath(std::string tool_path) const {
    return std::make_unique<AgentGuestTools>(agent_, std::move(tool_path), deadline_, sandbox_id_);
  }

 private:
  AgentClient& agent_;
  std::string tool_path_;
  GuestToolDeadline deadline_;
  std::string sandbox_id_;
};

}  // namespace abox::runtime
