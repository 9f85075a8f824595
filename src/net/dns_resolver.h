// The guest's only DNS server: answers names the sandbox's policy allows with addresses the
// host resolved (address-filtered like proxy connections), NXDOMAIN for everything else, and
// logs every query.
//
// Policy: a name gets an answer when the policy allows it on ANY port (the resolver cannot
// know which port the guest will use; the proxy decides the port per connection). Mode none
// answers REFUSED. Denied names are reported to the sink (OnDenied with port 0) so the daemon
// can raise an "ask to allow" request: a failed lookup is usually the first sign of a
// destination the user may want to open.
//
// Answers: A/AAAA with the filtered addresses of that family and a short TTL (a policy change
// applies within seconds); other types of an allowed name get NODATA; a name that resolves only
// to refused addresses gets NODATA; resolve failure SERVFAIL (NXDOMAIN when the name does not
// exist); a malformed query FORMERR. Answers are sized for UDP (MaxUdpResponseSize, TC set
// beyond) because the guest agent relays the stub's UDP queries over the stream.
//
// Thread-safe: one per sandbox, Serve runs on a proxy connection thread per DNS stream.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "src/net/egress_log.h"
#include "src/net/egress_options.h"
#include "src/net/host_resolver.h"
#include "src/net/policy.h"
#include "src/net/tunnel.h"

namespace abox::net {

// Whether `policy` allows `name` on any port (for DNS). Open mode allows every valid name.
Decision DecideNameAnyPort(const EgressPolicy& policy, absl::string_view name);

class DnsResolver final {
 public:
  struct Options {
    std::string sandbox_id;
    EgressPolicySource policy;
    std::shared_ptr<const HostResolver> resolver;
    std::shared_ptr<EgressSink> sink;
    EgressLimits limits;
  };

  static absl::StatusOr<std::unique_ptr<DnsResolver>> Create(Options options);

  DnsResolver(const DnsResolver&) = delete;
  DnsResolver& operator=(const DnsResolver&) = delete;

  // The answer to one query message (no TCP framing), logged to the sink; nullopt when the
  // message deserves no answer (shorter than a header, or a response).
  [[nodiscard]] std::optional<std::string> Answer(absl::string_view message) const;

  // Serves a kDns tunnel: length-prefixed queries in, length-prefixed answers out, until the
  // guest closes its side (answered with CloseWrite), stays idle (dns_idle_timeout), sends a
  // zero-length frame (reset) or the tunnel is reset.
  void Serve(TunnelStream& stream) const;

 private:
  explicit DnsResolver(Options options) : options_(std::move(options)) {}

  Options options_;
};

}  // namespace abox::net
