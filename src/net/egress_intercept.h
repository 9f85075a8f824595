// The egress proxy's path for a TLS connection to a host a secret (or a git-push rule) of the
// sandbox is bound to: terminate the guest's TLS with a leaf of abox's CA, open verified TLS to
// the upstream, and carry the plaintext HTTP through InterceptedHttp (placeholders swapped for
// values, leaks refused, pushes checked, values scrubbed from responses).
//
// Everything else (the decision to allow the host, resolving and filtering its addresses,
// connecting) happened before, in egress_connection.cc: this takes a connected socket to an
// address the host resolved for the SNI name, so SNI and the resolved address belong to the
// bound host; InterceptedHttp checks every request's Host against the same name.
//
// Trust boundary: the guest is hostile (its handshake is bounded by the sniff timeout), the
// upstream untrusted (its certificate must verify for the name against the host's trust store).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "src/net/egress_options.h"
#include "src/net/intercept_http.h"
#include "src/net/leaf_cache.h"
#include "src/net/splice.h"
#include "src/net/tls_stream.h"
#include "src/net/tunnel.h"

namespace abox::net {

// What a sandbox's proxy needs to intercept: supplied by the daemon for a sandbox given
// secrets or git pushes (none: every connection is spliced as before).
struct InterceptSource {
  // Whether TLS to host:port is terminated: some secret or push rule of the sandbox is bound
  // to it. Asked for every TLS connection.
  std::function<bool(const std::string& host, uint16_t port)> terminates;
  // The rules for one connection to host:port, with the values of the secrets bound there
  // read now (so a rotated secret reaches the next connection, and a removed one is gone).
  std::function<absl::StatusOr<std::shared_ptr<const InterceptRules>>(const std::string& host,
                                                                      uint16_t port)>
      rules;
  std::shared_ptr<LeafCache> leaves;
  std::shared_ptr<const UpstreamTrust> trust;
};

struct InterceptOutcome {
  SpliceResult splice;
  InterceptReport report;
  // Set when the connection ended before the HTTP could flow (handshakes, rules).
  absl::Status failed;
  bool guest_tls = false;     // the guest's handshake completed
  bool upstream_tls = false;  // the upstream's certificate verified
};

// Runs the connection to its end. `hello`: the ClientHello bytes already read from `guest`.
// `up`: connected to an address resolved for `host`.
InterceptOutcome RunInterceptedTls(TunnelStream& guest, absl::string_view hello,
                                   UpstreamConnection up, const std::string& host, uint16_t port,
                                   const InterceptSource& source, const EgressLimits& limits,
                                   int cancel_fd);

// One line for the log's reason: how it ended and what was swapped, refused or scrubbed.
std::string DescribeIntercept(const InterceptOutcome& outcome);

}  // namespace abox::net
