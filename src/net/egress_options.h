// What a sandbox's egress proxy and DNS resolver are configured with: where the policy comes
// from (asked again for every connection and query, so a change applies to a running sandbox
// at its next connection) and the limits that bound what one guest can make the host do.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "absl/time/time.h"
#include "src/net/policy.h"

namespace abox::net {

struct EgressPolicySource {
  // The sandbox's merged policy now (MergePolicies of global + sandbox). Required. Called
  // from connection threads: must be thread-safe.
  std::function<EgressPolicy()> current;
  // Optional one-shot approvals (`abox egress approve --once`): asked only when the policy
  // refuses `name` (normalised) on `port`; returning true consumes the approval and allows
  // this one connection.
  std::function<bool(const std::string& name, uint16_t port)> take_once;
  // Optional: whether a one-shot approval is pending for `name` on any port, so the DNS
  // resolver answers the lookup that precedes the approved connection (without consuming it).
  std::function<bool(const std::string& name)> has_once;
};

struct EgressLimits {
  // Concurrent tunnels per sandbox (connections and DNS streams); beyond it a tunnel is reset
  // at once and logged. Each connection costs two threads while it is spliced.
  size_t max_connections = 256;
  // How long the guest has to send the first bytes the proxy decides by (ClientHello / HTTP
  // request head), and after CONNECT, the tunnelled ClientHello.
  absl::Duration sniff_timeout = absl::Seconds(10);
  absl::Duration resolve_timeout = absl::Seconds(5);
  absl::Duration connect_timeout = absl::Seconds(10);
  // A spliced connection quiet in both directions this long is reset.
  absl::Duration idle_timeout = absl::Minutes(10);
  // A DNS stream with no query this long is closed.
  absl::Duration dns_idle_timeout = absl::Seconds(30);
  // TTL of DNS answers: short, so a policy change (or a new address) applies quickly.
  uint32_t dns_ttl_seconds = 5;
};

}  // namespace abox::net
