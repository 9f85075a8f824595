#include "src/net/host_resolver.h"

#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "nlohmann/json.hpp"
#include "src/base/status_macros.h"
#include "src/net/host_name.h"

namespace abox::net {
namespace {

using json = nlohmann::json;

std::atomic<int> g_lookups_in_flight{0};

// What a lookup thread hands back; shared so a caller that gave up can leave it behind.
struct LookupState {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  absl::StatusOr<std::vector<IpAddress>> result = absl::InternalError("lookup not run");
};

void AddUnique(std::vector<IpAddress>& out, const IpAddress& address) {
  if (out.size() < kMaxResolvedAddresses &&
      std::find(out.begin(), out.end(), address) == out.end()) {
    out.push_back(address);
  }
}

absl::StatusOr<std::vector<IpAddress>> RunGetAddrInfo(const std::string& name) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* list = nullptr;
  std::string absolute = AbsoluteLookupName(name);
  int rc = getaddrinfo(absolute.c_str(), nullptr, &hints, &list);
  if (rc != 0) {
    std::string what = absl::StrCat("getaddrinfo(", name, "): ", gai_strerror(rc));
    switch (rc) {
      case EAI_NONAME:
#ifdef EAI_NODATA
      case EAI_NODATA:
#endif
        return absl::NotFoundError(what);
      case EAI_AGAIN:
        return absl::UnavailableError(what);
      default:
        return absl::InternalError(what);
    }
  }
  std::vector<IpAddress> out;
  for (const addrinfo* ai = list; ai != nullptr; ai = ai->ai_next) {
    if (ai->ai_family == AF_INET && ai->ai_addrlen >= sizeof(sockaddr_in)) {
      sockaddr_in sin;
      std::memcpy(&sin, ai->ai_addr, sizeof(sin));
      std::array<uint8_t, 4> bytes;
      std::memcpy(bytes.data(), &sin.sin_addr, 4);
      AddUnique(out, IpAddress::V4(bytes));
    } else if (ai->ai_family == AF_INET6 && ai->ai_addrlen >= sizeof(sockaddr_in6)) {
      sockaddr_in6 sin6;
      std::memcpy(&sin6, ai->ai_addr, sizeof(sin6));
      std::array<uint8_t, 16> bytes;
      std::memcpy(bytes.data(), &sin6.sin6_addr, 16);
      AddUnique(out, IpAddress::V6(bytes));
    }
  }
  freeaddrinfo(list);
  if (out.empty()) {
    return absl::NotFoundError(absl::StrCat("getaddrinfo(", name, "): no IPv4 or IPv6 address"));
  }
  return out;
}

}  // namespace

std::string AbsoluteLookupName(absl::string_view name) {
  return absl::EndsWith(name, ".") ? std::string(name) : absl::StrCat(name, ".");
}

absl::StatusOr<std::vector<IpAddress>> SystemInterfaceAddresses() {
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) {
    return base::ErrnoError("getifaddrs");
  }
  std::vector<IpAddress> out;
  for (const ifaddrs* ifa = list; ifa != nullptr; ifa = ifa->ifa_next) {
    if (ifa->ifa_addr == nullptr) {
      continue;
    }
    std::optional<IpAddress> address;
    if (ifa->ifa_addr->sa_family == AF_INET) {
      sockaddr_in sin;
      std::memcpy(&sin, ifa->ifa_addr, sizeof(sin));
      std::array<uint8_t, 4> bytes;
      std::memcpy(bytes.data(), &sin.sin_addr, 4);
      address = IpAddress::V4(bytes);
    } else if (ifa->ifa_addr->sa_family == AF_INET6) {
      sockaddr_in6 sin6;
      std::memcpy(&sin6, ifa->ifa_addr, sizeof(sin6));
      std::array<uint8_t, 16> bytes;
      std::memcpy(bytes.data(), &sin6.sin6_addr, 16);
      address = IpAddress::V6(bytes);
    }
    if (address && std::find(out.begin(), out.end(), *address) == out.end()) {
      out.push_back(*address);
    }
  }
  ::freeifaddrs(list);
  return out;
}

absl::StatusOr<ResolverOverride> ParseResolverOverride(absl::string_view text) {
  json j = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return absl::InvalidArgumentError(
        R"(resolver override must be a JSON object {"name": ["address", ...]})");
  }
  ResolverOverride out;
  for (const auto& [key, value] : j.items()) {
    absl::StatusOr<std::string> name = NormalizeHostName(key);
    if (!name.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("resolver override key ", QuoteForLog(key), ": ", name.status().message()));
    }
    if (!value.is_array() || value.empty() || value.size() > kMaxResolvedAddresses) {
      return absl::InvalidArgumentError(absl::StrCat("resolver override for ", *name,
                                                     ": expected a list of 1 to ",
                                                     kMaxResolvedAddresses, " address strings"));
    }
    std::vector<IpAddress> addresses;
    for (const json& item : value) {
      std::optional<IpAddress> address =
          item.is_string() ? IpAddress::Parse(item.get<std::string>()) : std::nullopt;
      if (!address) {
        return absl::InvalidArgumentError(absl::StrCat("resolver override for ", *name, ": ",
                                                       QuoteForLog(item.dump()),
                                                       " is not an IPv4 or IPv6 address"));
      }
      AddUnique(addresses, *address);
    }
    if (!out.emplace(*name, std::move(addresses)).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("resolver override names ", *name, " twice (keys are case-insensitive)"));
    }
  }
  return out;
}

absl::StatusOr<std::vector<IpAddress>> SystemLookup(const std::string& name, absl::Time deadline) {
  if (g_lookups_in_flight.fetch_add(1) >= kMaxLookupsInFlight) {
    g_lookups_in_flight.fetch_sub(1);
    return absl::UnavailableError(
        absl::StrCat("too many host lookups in flight (", kMaxLookupsInFlight, "); retry"));
  }
  auto state = std::make_shared<LookupState>();
  // Detached on purpose: see the header. The thread owns a reference to `state` only.
  std::thread([state, name] {
    absl::StatusOr<std::vector<IpAddress>> result = RunGetAddrInfo(name);
    g_lookups_in_flight.fetch_sub(1);
    std::lock_guard<std::mutex> lock(state->mu);
    state->result = std::move(result);
    state->done = true;
    state->cv.notify_all();
  }).detach();
  std::unique_lock<std::mutex> lock(state->mu);
  while (!state->done) {
    absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) {
      return absl::DeadlineExceededError(absl::StrCat("resolving ", name, " timed out"));
    }
    // Capped: an infinite deadline must not overflow the clock arithmetic in wait_for.
    state->cv.wait_for(lock, absl::ToChronoNanoseconds(std::min(left, absl::Hours(1))));
  }
  return state->result;
}

absl::StatusOr<std::unique_ptr<HostResolver>> HostResolver::Create(Options options) {
  for (const auto& [name, addresses] : options.override_map) {
    absl::StatusOr<std::string> normal = NormalizeHostName(name);
    if (!normal.ok() || *normal != name || addresses.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "resolver override entry ", QuoteForLog(name),
          " must be a normalised host name with at least one address (use ParseResolverOverride)"));
    }
  }
  if (!options.lookup) {
    options.lookup = SystemLookup;
  }
  if (!options.interface_addresses) {
    options.interface_addresses = SystemInterfaceAddresses;
  }
  return std::unique_ptr<HostResolver>(new HostResolver(std::move(options)));
}

absl::StatusOr<Resolution> HostResolver::Resolve(absl::string_view raw_name,
                                                 absl::Time deadline) const {
  if (IsIpLiteralHost(raw_name)) {
    return absl::InvalidArgumentError(
        absl::StrCat(QuoteForLog(raw_name), " is an IP address, not a name to resolve"));
  }
  ABOX_ASSIGN_OR_RETURN(std::string name, NormalizeHostName(raw_name));
  Resolution resolution;
  if (auto it = options_.override_map.find(name); it != options_.override_map.end()) {
    resolution.addresses = it->second;
    resolution.from_override = true;
    return resolution;
  }
  ABOX_ASSIGN_OR_RETURN(std::vector<IpAddress> addresses, options_.lookup(name, deadline));
  for (const IpAddress& address : addresses) {
    AddUnique(resolution.addresses, address);
  }
  if (resolution.addresses.empty()) {
    return absl::NotFoundError(absl::StrCat(name, " has no address"));
  }
  return resolution;
}

FilteredAddresses HostResolver::Filter(const Resolution& resolution) const {
  if (resolution.from_override) {
    return FilterAddresses(resolution);
  }
  absl::StatusOr<std::vector<IpAddress>> own = options_.interface_addresses();
  if (!own.ok()) {
    FilteredAddresses out;
    for (const IpAddress& address : resolution.addresses) {
      out.refused.push_back(absl::StrCat(
          address.ToString(),
          " (cannot tell whether it is this host's own: ", own.status().message(), ")"));
    }
    return out;
  }
  return FilterAddresses(resolution, *own);
}

FilteredAddresses FilterAddresses(const Resolution& resolution,
                                  const std::vector<IpAddress>& host_addresses) {
  FilteredAddresses out;
  out.from_override = resolution.from_override;
  for (const IpAddress& address : resolution.addresses) {
    if (resolution.from_override) {
      out.usable.push_back(address);
      continue;
    }
    std::optional<std::string> why = RefusalReason(address);
    if (!why) {
      why = HostAddressReason(address, host_addresses);
    }
    if (why) {
      out.refused.push_back(absl::StrCat(address.ToString(), " (", *why, ")"));
    } else {
      out.usable.push_back(address);
    }
  }
  return out;
}

std::string OnlyRefusedReason(absl::string_view name, const FilteredAddresses& filtered) {
  return absl::StrCat(name, " resolves only to addresses the proxy refuses: ",
                      absl::StrJoin(filtered.refused, ", "));
}

}  // namespace abox::net
