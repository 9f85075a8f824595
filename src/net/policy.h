// Egress policy: which destinations a sandbox's guest may reach through the host proxy.
//
// Decisions are by NAME (TLS SNI, HTTP Host, CONNECT target, DNS question), never by an
// address the guest chose, except for explicit address rules, which are the only way to allow
// raw TCP that is neither TLS nor HTTP. Whatever a name decision allows, the proxy still
// resolves on the host and refuses private/loopback/metadata addresses (address_filter.h).
//
// Rule forms (the CLI's --allow and the stored JSON use the same text):
//   api.github.com            exact name, port 443
//   *.example.com             any name BELOW example.com (a.example.com, a.b.example.com), but
//                             not example.com itself: add both rules to allow both. Keeping the
//                             two apart lets a user open a CDN's subdomains without the apex.
//   example.com:80            ports replace the default {443}; ":80,443" for both
//   preset:pypi               a named set of rules (see Presets()); ports come from the preset
//   10.0.0.5:5432, [::1]:22   address rule: raw TCP to exactly that address and port
//                             (loopback only with RuleOptions::allow_loopback)
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "src/net/address_filter.h"

namespace abox::net {

struct Rule {
  enum class Kind : uint8_t { kExact, kWildcard, kPreset, kAddress };

  Kind kind = Kind::kExact;
  // kExact: the name; kWildcard: the suffix without "*."; kPreset: the preset's name.
  std::string name;
  // kAddress only.
  std::optional<IpAddress> address;
  // Sorted, unique, non-zero. Empty for kPreset (each preset entry has its own ports).
  std::vector<uint16_t> ports;

  // The rule's text form, which ParseRule reads back: "*.example.com:80,443".
  std::string ToString() const;
  friend bool operator==(const Rule& a, const Rule& b) {
    return a.kind == b.kind && a.name == b.name && a.address == b.address && a.ports == b.ports;
  }
};

struct RuleOptions {
  // Admit an address rule for loopback (127.0.0.0/8, ::1): the HOST's own loopback, not the
  // guest's, so only when a person asks for it explicitly (`--allow-loopback`, which warns).
  // Rules read back from the store were admitted once and pass this.
  bool allow_loopback = false;
};

// Parses one rule in the forms above. Errors say what is wrong and show the accepted forms.
[[nodiscard]] absl::StatusOr<Rule> ParseRule(absl::string_view text, RuleOptions options = {});

// An address rule for a loopback address (what RuleOptions::allow_loopback admits).
bool IsLoopbackRule(const Rule& rule);

// A named, documented set of rules for a package ecosystem.
struct Preset {
  const char* name;
  const char* source;  // where the host list comes from
  std::vector<Rule> rules;
};
// All presets, in a stable order.
const std::vector<Preset>& Presets();
const Preset* FindPreset(absl::string_view name);

struct EgressPolicy {
  enum class Mode : uint8_t {
    kNone,       // no egress at all
    kAllowlist,  // names and addresses matching `allow`
    kOpen,       // any name (still resolved on the host and address-filtered, and logged)
  };

  // Unset means "inherit" when merged and "none" when deciding.
  std::optional<Mode> mode;
  std::vector<Rule> allow;
};

absl::string_view ModeName(EgressPolicy::Mode mode);
[[nodiscard]] absl::StatusOr<EgressPolicy::Mode> ParseMode(absl::string_view text);

struct Decision {
  bool allowed = false;
  // The rule that allowed it ("preset:pypi (files.pythonhosted.org)", "mode:open"); empty when
  // refused.
  std::string matched_rule;
  // Why it was refused, in words a user can act on; empty when allowed.
  std::string reason;
  // False when no rule could allow it (an invalid or single-label name): such a refusal does
  // not become an "ask to allow" request.
  bool rule_can_allow = true;
};

// Decides a connection to host `name` (any case, trailing dot allowed) on `port`. An invalid
// name or an IP literal is refused: names are what rules and logs speak about, so a guest that
// connects to an address must be allowed by DecideAddress. A single-label name ("db",
// "localhost") is refused in every mode, open included: the host's resolver would look it up
// under the host's own search domains (the host's network), and no rule can name it.
Decision Decide(const EgressPolicy& policy, absl::string_view name, uint16_t port);

// Decides raw TCP to `address`:`port`. Only address rules allow it, in allowlist and open mode
// alike (open mode opens names, not raw TCP). An address rule is the user's explicit choice and
// so also admits a private address such as a database on the LAN; ParseRule refuses the
// addresses no rule may open (see there).
Decision DecideAddress(const EgressPolicy& policy, const IpAddress& address, uint16_t port);

// The policy for a sandbox: the global rules plus the sandbox's, the sandbox's mode if set,
// else the global one. Duplicate rules are dropped.
EgressPolicy MergePolicies(const EgressPolicy& global, const EgressPolicy& sandbox);

// JSON for storage: {"mode": "allowlist", "allow": ["api.github.com", "preset:pypi"]} ("mode"
// absent when unset). Parsing validates every rule and refuses unknown keys; it reads what was
// stored, so loopback address rules (admitted explicitly when added) pass.
std::string PolicyToJson(const EgressPolicy& policy);
[[nodiscard]] absl::StatusOr<EgressPolicy> PolicyFromJson(absl::string_view json);

}  // namespace abox::net
