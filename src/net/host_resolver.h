// Resolves names the policy allowed on the HOST (the guest's own answers are never trusted),
// and the address filtering of those answers shared by the proxy and the DNS resolver.
//
// A test-only override (from config) maps names to fixed addresses. Overridden answers are
// the ONLY ones that skip the address filter, so hermetic tests can reach fake upstreams on
// 127.0.0.1 while every real answer still goes through RefusalReason; each use is flagged
// (`from_override`) and logged as such. The daemon leaves the override empty in production.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "src/net/address_filter.h"

namespace abox::net {

// Most addresses kept from one answer: enough to fall back across families and hosts, bounded
// so a hostile or broken resolver cannot make one connection try thousands.
inline constexpr size_t kMaxResolvedAddresses = 16;
// Most getaddrinfo calls in flight in the process (each on its own thread, see SystemLookup).
inline constexpr int kMaxLookupsInFlight = 64;

struct Resolution {
  std::vector<IpAddress> addresses;  // deduplicated, in resolver order, at most 16
  bool from_override = false;        // came from the test-only override: filter skipped
};

// Normalised name -> addresses. Test-only: see the file comment.
using ResolverOverride = std::map<std::string, std::vector<IpAddress>>;

// Parses {"name": ["127.0.0.1", "::1"], ...}. Names are normalised (NormalizeHostName); each
// needs 1..16 address literals. Errors name the offending key or value.
[[nodiscard]] absl::StatusOr<ResolverOverride> ParseResolverOverride(absl::string_view json);

// The name handed to getaddrinfo for `name`: absolute (a trailing dot), so the host's resolver
// never tries it under its search domains ("db" or "db.internal" becoming
// "db.internal.corp.example", a host on the host's own network).
std::string AbsoluteLookupName(absl::string_view name);

// The host's own interface addresses now (getifaddrs), every family, up or down.
[[nodiscard]] absl::StatusOr<std::vector<IpAddress>> SystemInterfaceAddresses();

// getaddrinfo(AbsoluteLookupName(name)) for A and AAAA, bounded by `deadline`. getaddrinfo cannot
// be cancelled, so it runs on a detached worker thread that outlives a missed deadline (the glibc
// stub gives up on its own after its timeouts); at most kMaxLookupsInFlight such threads exist.
// NotFound when the name does not exist, DeadlineExceeded, Unavailable (temporary failure or
// too many lookups in flight), Internal otherwise.
[[nodiscard]] absl::StatusOr<std::vector<IpAddress>> SystemLookup(const std::string& name,
                                                                  absl::Time deadline);

struct FilteredAddresses {
  std::vector<IpAddress> usable;
  // One "address (reason)" per refused address, for logs and the guest-facing explanation.
  std::vector<std::string> refused;
  bool from_override = false;
};

// Thread-safe (immutable after Create); one per daemon, shared by every sandbox's proxy.
class HostResolver final {
 public:
  // The lookup for names not in the override. Tests inject one to return private addresses
  // WITHOUT the override flag, which proves the filter path refuses them.
  using Lookup =
      std::function<absl::StatusOr<std::vector<IpAddress>>(const std::string&, absl::Time)>;

  // The host's own addresses, asked at every decision (interfaces come and go). Tests inject
  // them; an error refuses every resolved address (the filter cannot tell which are the host's).
  using InterfaceAddresses = std::function<absl::StatusOr<std::vector<IpAddress>>()>;

  struct Options {
    ResolverOverride override_map;
    Lookup lookup;                           // empty: SystemLookup
    InterfaceAddresses interface_addresses;  // empty: SystemInterfaceAddresses
  };

  static absl::StatusOr<std::unique_ptr<HostResolver>> Create(Options options);

  HostResolver(const HostResolver&) = delete;
  HostResolver& operator=(const HostResolver&) = delete;

  // Resolves a host name (normalised first; IP literals are InvalidArgument: the policy
  // decides addresses by address rules, never by resolving them). Not filtered: see
  // FilterAddresses.
  [[nodiscard]] absl::StatusOr<Resolution> Resolve(absl::string_view name,
                                                   absl::Time deadline) const;

  // FilterAddresses with the host's interface addresses as they are now.
  [[nodiscard]] FilteredAddresses Filter(const Resolution& resolution) const;

 private:
  explicit HostResolver(Options options) : options_(std::move(options)) {}

  Options options_;
};

// Drops every address RefusalReason names and every one of `host_addresses` (the host's own,
// see HostAddressReason), unless the answer came from the override.
FilteredAddresses FilterAddresses(const Resolution& resolution,
                                  const std::vector<IpAddress>& host_addresses = {});

// "example.com resolves only to refused addresses: 10.0.0.1 (private ...)" for a filter that
// left nothing.
std::string OnlyRefusedReason(absl::string_view name, const FilteredAddresses& filtered);

}  // namespace abox::net
