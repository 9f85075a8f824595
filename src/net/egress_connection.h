// One guest TCP connection through the egress proxy, from its first bytes to its log record
// (used by EgressProxy; separate so the decision flow reads on its own).
//
// The flow, each step with the reason it is there:
//  1. Mode none: reset before reading anything.
//  2. kTransparent with an address rule for the guest's original ip:port: raw TCP, connected
//     as is (an address rule is the user's explicit choice, so the address filter does not
//     apply), no sniffing (server-speaks-first protocols such as SSH would otherwise wait).
//  3. Sniff the first bytes (ClientHelloSniffer + HttpRequestHeadParser, sniff_timeout):
//     TLS -> decide by SNI (none: refused); HTTP -> by Host / absolute target; CONNECT -> by its
//     target, then the tunnelled ClientHello's SNI (or HTTP Host) must name the same host;
//     neither / nothing sent -> raw TCP, refused (step 2 found no rule).
//  4. The port decided by: the guest's original port for kTransparent (where its bytes were
//     going), the request's port for kHttpProxy and for CONNECT.
//  5. Refused by policy: HTTP and CONNECT get a 403 naming the host and how to allow it, TLS
//     and raw TCP a reset; the sink hears OnDenied.
//  6. Allowed: resolve on the host, drop refused addresses and the host's own (only the test
//     override skips this), connect, forward the sniffed bytes unchanged, splice.
//  7. Plain HTTP (and plain HTTP inside a CONNECT): every later request on the connection is
//     checked too (HttpRequestStream): another host gets a 403 after the earlier answers; bad
//     framing a 400; Upgrade and CONNECT a 403. Framing / Upgrade of the first request are
//     refused before connecting.
//  8. A sandbox with secrets (ConnectionContext::intercept): TLS (direct or inside CONNECT) to
//     a host a secret or push rule is bound to is terminated (egress_intercept.h) instead of
//     spliced; plain HTTP to any host goes through InterceptedHttp too, so a placeholder sent
//     in clear anywhere it is not bound is refused as a leak.
#pragma once

#include <string>

#include "src/net/egress_intercept.h"
#include "src/net/egress_log.h"
#include "src/net/egress_options.h"
#include "src/net/host_resolver.h"
#include "src/net/tunnel.h"

namespace abox::net {

struct ConnectionContext {
  std::string sandbox_id;
  const EgressPolicySource* policy = nullptr;
  const HostResolver* resolver = nullptr;
  EgressSink* sink = nullptr;
  EgressLimits limits;
  int cancel_fd = -1;  // readable when the proxy shuts down
  // The sandbox's secrets and pushes; null when it has none (every connection is spliced).
  const InterceptSource* intercept = nullptr;
};

// Runs a kTransparent or kHttpProxy tunnel to its end and reports one ConnectionRecord.
void RunConnection(const ConnectionContext& context, TunnelStream& stream);

// The plain-text HTTP response the guest gets instead of a connection: status line, headers
// (Content-Length, Connection: close) and `body`.
std::string HttpErrorResponse(int code, absl::string_view status_text, absl::string_view body);

}  // namespace abox::net
