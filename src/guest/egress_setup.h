// PID 1 only (stage 2, in the VM): the system side of egress. Makes ordinary programs reach the
// agent's egress sockets without knowing about them: resolv.conf points at the DNS stub, a
// default route makes connect() to a public address proceed (the VM has no NIC, so without it
// connect() fails with ENETUNREACH before any redirect), and an nftables rule redirects every
// outgoing TCP connection (and DNS over UDP to any server) to the agent. IPv6 gets no route:
// connect() to an IPv6 address fails at once, which is the intended refusal. Nothing here is
// enforcement: the host decides about every tunnel.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "src/guest/egress_sockets.h"

namespace abox::guest {

// Kernel modules the redirect needs (Debian's cloud kernel builds them as modules); modprobe
// pulls in their dependencies (nf_nat, nf_conntrack, ...).
inline constexpr const char* kEgressModules[] = {"nf_tables", "nft_chain_nat", "nft_redir"};

// The resolver configuration: the agent's DNS stub only.
std::string ResolvConf();
// The nftables ruleset (nft's file syntax, passed as its argument) redirecting to `ports`.
std::string EgressRuleset(const EgressPorts& ports);

// Writes /etc/resolv.conf (replacing a symlink) and /etc/hosts if it is missing, adds the
// default route via lo, loads kEgressModules and the ruleset. Each failure is logged and the
// rest continues (commands still run; their network just fails); returns the first failure.
absl::Status SetUpEgress(const EgressPorts& ports);

}  // namespace abox::guest
