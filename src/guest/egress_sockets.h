// The guest's local egress endpoints (see docs/protocol.md, "Tunnels"): where the transparent
// redirect, HTTP_PROXY-aware tools and the resolver connect. Only the agent listens there;
// everything accepted becomes a tunnel to the host, which decides.
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"
#include "src/base/unique_fd.h"
#include "src/proto/messages.h"

namespace abox::guest {

struct EgressPorts {
  uint16_t transparent = 15001;  // target of the nftables redirect of outgoing TCP
  uint16_t http_proxy = 3128;    // HTTP_PROXY / HTTPS_PROXY
  uint16_t dns = 53;             // resolv.conf's nameserver, UDP and TCP
  // aboxd's model broker (agents inside the VM: ANTHROPIC_BASE_URL / OPENAI_BASE_URL point here).
  uint16_t model_broker = proto::kModelBrokerPort;
};

// Non-blocking, close-on-exec sockets bound to 127.0.0.1.
struct EgressSockets {
  base::UniqueFd transparent;   // TCP listener
  base::UniqueFd http_proxy;    // TCP listener
  base::UniqueFd dns_tcp;       // TCP listener
  base::UniqueFd dns_udp;       // UDP socket
  base::UniqueFd model_broker;  // TCP listener
};

// Binds and listens. Port 0 (tests) picks an ephemeral port per socket.
[[nodiscard]] absl::StatusOr<EgressSockets> OpenEgressSockets(const EgressPorts& ports);

// The port a socket is bound to (0 on error).
uint16_t BoundPort(int fd);

// Where a connection accepted on the transparent port was originally going: the destination
// before the nftables redirect (getsockopt SO_ORIGINAL_DST), as a kTcp tunnel request. Fails
// for a connection that was not redirected (a program connecting to the port directly).
[[nodiscard]] absl::StatusOr<proto::TunnelRequest> OriginalDestination(int fd);

}  // namespace abox::guest
