// The workspace tools of a real sandbox: `abox-guest ws ...` run as root over the agent
// channel, with the copy of the agent that stage 1 put in /run/abox.
#pragma once

#include <string>
#include <vector>

#include "src/runtime/agent_client.h"
#include "src/workspace/guest_tools.h"

namespace abox::runtime {

// Where stage 1 copies the agent in every guest (see docs/decisions/0003).
inline constexpr char kGuestAgentPath[] = "/run/abox/abox-guest";

class AgentGuestTools final : public workspace::GuestTools {
 public:
  // `agent` must outlive this object. `tool_path`: the agent binary in the guest (tests with a
  // fake VMM, whose "guest" is this host, pass the built abox-guest).
  explicit AgentGuestTools(AgentClient& agent, std::string tool_path = kGuestAgentPath)
      : agent_(agent), tool_path_(std::move(tool_path)) {}

  [[nodiscard]] absl::Status Run(const std::vector<std::string>& args, const InputFn& input,
                                 const OutputFn& output) override;

 private:
  AgentClient& agent_;
  std::string tool_path_;
};

}  // namespace abox::runtime
