#include "src/net/policy.h"

#include <algorithm>
#include <cstdlib>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "nlohmann/json.hpp"
#include "src/base/status_macros.h"
#include "src/net/host_name.h"

namespace abox::net {
namespace {

using nlohmann::json;

constexpr uint16_t kDefaultPort = 443;
constexpr size_t kMaxPortsPerRule = 16;
constexpr size_t kMaxRules = 1024;
constexpr absl::string_view kPresetPrefix = "preset:";
constexpr absl::string_view kRuleForms =
    "expected NAME, *.NAME, NAME:PORT[,PORT...], preset:NAME, IPV4:PORT or [IPV6]:PORT";

// The presets, as data. Each list is what the ecosystem's default client needs to install
// packages, and no more: a wildcard over a domain where anyone can publish pages (salsa.debian.org,
// people.debian.org, storage.googleapis.com) would be an exfiltration channel for every sandbox
// that asks only to install packages.
struct PresetText {
  const char* name;
  const char* source;
  std::vector<const char*> rules;
};

const std::vector<PresetText>& PresetTexts() {
  static const auto* texts = new std::vector<PresetText>{
      {"pypi",
       "https://docs.pypi.org/api/ (index pypi.org, files files.pythonhosted.org)",
       {"pypi.org", "files.pythonhosted.org"}},
      // Tarballs are served from registry.npmjs.org itself; *.npmjs.org is not needed.
      {"npm",
       "https://docs.npmjs.com/cli/using-npm/registry (registry.npmjs.org)",
       {"registry.npmjs.org"}},
      {"github",
       "https://api.github.com/meta (\"domains\": website, codeload, packages)",
       {"github.com", "*.github.com", "codeload.github.com", "*.githubusercontent.com"}},
      // apt fetches over plain HTTP by default (packages are signed), hence port 80.
      {"debian",
       "https://deb.debian.org/ (the CDN alias) and https://www.debian.org/security/",
       {"deb.debian.org:80,443", "security.debian.org:80,443"}},
      {"ubuntu",
       "https://help.ubuntu.com/community/Repositories/Ubuntu (archive, ports, mirrors)",
       {"archive.ubuntu.com:80,443", "*.archive.ubuntu.com:80,443", "security.ubuntu.com:80,443",
        "ports.ubuntu.com:80,443"}},
      {"crates",
       "https://doc.rust-lang.org/cargo/reference/registry-index.html (sparse index)",
       {"crates.io", "index.crates.io", "static.crates.io"}},
      // GOPROXY's default: modules from proxy.golang.org, checksums from sum.golang.org. Not
      // storage.googleapis.com: it would open every public GCS bucket. "direct" VCS fetches need
      // their host (e.g. preset:github) too.
      {"go",
       "https://go.dev/ref/mod#module-proxy and https://go.dev/ref/mod#checksum-database",
       {"proxy.golang.org", "sum.golang.org"}},
  };
  return *texts;
}

// By name only: ParseRule uses this, and Presets() is built with ParseRule.
bool IsPresetName(absl::string_view name) {
  const auto& texts = PresetTexts();
  return std::any_of(texts.begin(), texts.end(),
                     [name](const PresetText& t) { return name == t.name; });
}

absl::Status RuleError(absl::string_view text, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("egress rule '", QuoteForLog(text), "': ", why));
}

absl::StatusOr<std::vector<uint16_t>> ParsePorts(absl::string_view rule, absl::string_view text) {
  std::vector<uint16_t> ports;
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    uint32_t port = 0;
    bool digits =
        !part.empty() && part.size() <= 5 && std::all_of(part.begin(), part.end(), [](char c) {
          return absl::ascii_isdigit(static_cast<unsigned char>(c));
        });
    if (!digits || !absl::SimpleAtoi(part, &port) || port == 0 || port > 65535) {
      return RuleError(
          rule, absl::StrCat("port '", QuoteForLog(part), "' is not a number from 1 to 65535"));
    }
    ports.push_back(static_cast<uint16_t>(port));
  }
  std::sort(ports.begin(), ports.end());
  ports.erase(std::unique(ports.begin(), ports.end()), ports.end());
  if (ports.size() > kMaxPortsPerRule) {
    return RuleError(rule, absl::StrCat("more than ", kMaxPortsPerRule, " ports"));
  }
  return ports;
}

absl::StatusOr<Rule> ParseAddressRule(absl::string_view text, const IpAddress& address,
                                      absl::string_view ports, RuleOptions options) {
  AddressClass c = ClassifyAddress(address).address_class;
  // The host's loopback, not the guest's (the guest's own localhost never reaches the proxy):
  // a rule for it opens the host's local services to the sandbox.
  if (c == AddressClass::kLoopback && !options.allow_loopback) {
    return RuleError(text, absl::StrCat(address.ToString(),
                                        " is loopback: the HOST's own, not the sandbox's; if "
                                        "the sandbox really must reach a service on the host, "
                                        "add the rule with --allow-loopback "
                                        "(API: \"allow_loopback\": true)"));
  }
  // These are never a TCP server the user could mean, or (metadata) one that hands out the
  // host's cloud credentials: no rule may open them.
  if (c == AddressClass::kUnspecified || c == AddressClass::kMulticast ||
      c == AddressClass::kBroadcast || c == AddressClass::kCloudMetadata) {
    return RuleError(text, absl::StrCat(address.ToString(), " is ", AddressClassName(c),
                                        " and cannot be allowed"));
  }
  if (ports.empty()) {
    return RuleError(text, "an address rule needs its port, e.g. 10.0.0.5:5432");
  }
  Rule rule;
  rule.kind = Rule::Kind::kAddress;
  rule.address = address;
  ABOX_ASSIGN_OR_RETURN(rule.ports, ParsePorts(text, ports));
  return rule;
}

bool NameMatches(const Rule& rule, absl::string_view name) {
  if (rule.kind == Rule::Kind::kExact) {
    return name == rule.name;
  }
  return rule.kind == Rule::Kind::kWildcard && name.size() > rule.name.size() &&
         IsSubdomainOrSelf(name, rule.name);
}

bool HasPort(const Rule& rule, uint16_t port) {
  return std::binary_search(rule.ports.begin(), rule.ports.end(), port);
}

// IPv4-mapped IPv6 is the same peer as the IPv4 address: compare them as one.
IpAddress Unmapped(const IpAddress& address) {
  const auto& b = address.bytes();
  if (!address.is_v4() &&
      std::all_of(b.begin(), b.begin() + 10, [](uint8_t x) { return x == 0; }) && b[10] == 0xff &&
      b[11] == 0xff) {
    return IpAddress::V4({b[12], b[13], b[14], b[15]});
  }
  return address;
}

Decision Allowed(std::string rule) { return {true, std::move(rule), ""}; }
Decision Refused(std::string reason) { return {false, "", std::move(reason)}; }

}  // namespace

std::string Rule::ToString() const {
  std::string ports_text = absl::StrJoin(ports, ",");
  switch (kind) {
    case Kind::kExact:
      return ports == std::vector<uint16_t>{kDefaultPort} ? name
                                                          : absl::StrCat(name, ":", ports_text);
    case Kind::kWildcard:
      return ports == std::vector<uint16_t>{kDefaultPort}
                 ? absl::StrCat("*.", name)
                 : absl::StrCat("*.", name, ":", ports_text);
    case Kind::kPreset:
      return absl::StrCat(kPresetPrefix, name);
    case Kind::kAddress:
      return absl::StrCat(address ? address->ToUriHost() : "?", ":", ports_text);
  }
  return "?";
}

bool IsLoopbackRule(const Rule& rule) {
  return rule.kind == Rule::Kind::kAddress && rule.address &&
         ClassifyAddress(*rule.address).address_class == AddressClass::kLoopback;
}

absl::StatusOr<Rule> ParseRule(absl::string_view text, RuleOptions options) {
  if (text.empty() || text.size() > 300) {
    return RuleError(text, absl::StrCat("must be 1 to 300 characters; ", kRuleForms));
  }
  if (absl::StartsWith(text, kPresetPrefix)) {
    absl::string_view name = text.substr(kPresetPrefix.size());
    if (!IsPresetName(name)) {
      std::vector<std::string> names;
      for (const PresetText& p : PresetTexts()) {
        names.push_back(p.name);
      }
      return RuleError(text,
                       absl::StrCat("unknown preset; known presets: ", absl::StrJoin(names, ", ")));
    }
    Rule rule;
    rule.kind = Rule::Kind::kPreset;
    rule.name = std::string(name);
    return rule;
  }
  absl::string_view host = text;
  absl::string_view ports;
  if (absl::StartsWith(text, "[")) {
    size_t close = text.find(']');
    std::optional<IpAddress> v6 = close == absl::string_view::npos
                                      ? std::nullopt
                                      : ParseIpLiteralHost(text.substr(0, close + 1));
    if (!v6) {
      return RuleError(text, "'[...]' must hold an IPv6 address");
    }
    absl::string_view rest = text.substr(close + 1);
    if (!absl::ConsumePrefix(&rest, ":")) {
      return RuleError(text, "an address rule needs its port, e.g. [2001:db8::5]:5432");
    }
    return ParseAddressRule(text, *v6, rest, options);
  }
  if (std::count(text.begin(), text.end(), ':') > 1) {
    return RuleError(text, "write an IPv6 address rule as [ADDRESS]:PORT");
  }
  if (size_t colon = text.find(':'); colon != absl::string_view::npos) {
    host = text.substr(0, colon);
    ports = text.substr(colon + 1);
    if (ports.empty()) {
      return RuleError(text, "nothing after ':'; give a port, e.g. example.com:80");
    }
  }
  if (std::optional<IpAddress> v4 = IpAddress::Parse(host)) {
    return ParseAddressRule(text, *v4, ports, options);
  }
  Rule rule;
  rule.kind = Rule::Kind::kExact;
  if (absl::ConsumePrefix(&host, "*.")) {
    rule.kind = Rule::Kind::kWildcard;
  }
  if (absl::StrContains(host, '*')) {
    return RuleError(text, "'*' is only allowed as a leading '*.' (or use mode open)");
  }
  absl::StatusOr<std::string> name = NormalizeHostName(host);
  if (!name.ok()) {
    return RuleError(text, name.status().message());
  }
  if (!absl::StrContains(*name, '.')) {
    if (IsPresetName(*name)) {
      return RuleError(text, absl::StrCat("did you mean preset:", *name, "?"));
    }
    return RuleError(text, rule.kind == Rule::Kind::kWildcard
                               ? "a wildcard over a top-level domain is too broad (use mode open)"
                               : "a name rule needs a fully qualified name such as example.com");
  }
  rule.name = *std::move(name);
  rule.ports = {kDefaultPort};
  if (!ports.empty()) {
    ABOX_ASSIGN_OR_RETURN(rule.ports, ParsePorts(text, ports));
  }
  return rule;
}

const std::vector<Preset>& Presets() {
  static const auto* presets = [] {
    auto* out = new std::vector<Preset>();
    for (const PresetText& text : PresetTexts()) {
      Preset preset{text.name, text.source, {}};
      for (const char* rule_text : text.rules) {
        absl::StatusOr<Rule> rule = ParseRule(rule_text);
        if (!rule.ok() || rule->kind == Rule::Kind::kPreset || rule->kind == Rule::Kind::kAddress) {
          std::abort();  // A typo in PresetTexts().
        }
        preset.rules.push_back(*std::move(rule));
      }
      out->push_back(std::move(preset));
    }
    return out;
  }();
  return *presets;
}

const Preset* FindPreset(absl::string_view name) {
  for (const Preset& preset : Presets()) {
    if (name == preset.name) {
      return &preset;
    }
  }
  return nullptr;
}

absl::string_view ModeName(EgressPolicy::Mode mode) {
  switch (mode) {
    case EgressPolicy::Mode::kNone:
      return "none";
    case EgressPolicy::Mode::kAllowlist:
      return "allowlist";
    case EgressPolicy::Mode::kOpen:
      return "open";
  }
  return "none";
}

absl::StatusOr<EgressPolicy::Mode> ParseMode(absl::string_view text) {
  for (auto mode :
       {EgressPolicy::Mode::kNone, EgressPolicy::Mode::kAllowlist, EgressPolicy::Mode::kOpen}) {
    if (text == ModeName(mode)) {
      return mode;
    }
  }
  return absl::InvalidArgumentError(
      absl::StrCat("egress mode '", QuoteForLog(text), "' is not one of none, allowlist, open"));
}

Decision Decide(const EgressPolicy& policy, absl::string_view raw_name, uint16_t port) {
  if (std::optional<IpAddress> ip = ParseIpLiteralHost(raw_name)) {
    return Refused(absl::StrCat("destination ", ip->ToString(),
                                " is an IP address, not a name; only an address rule "
                                "(IP:PORT) allows one"));
  }
  absl::StatusOr<std::string> name = NormalizeHostName(raw_name);
  if (!name.ok()) {
    Decision d = Refused(std::string(name.status().message()));
    d.rule_can_allow = false;
    return d;
  }
  EgressPolicy::Mode mode = policy.mode.value_or(EgressPolicy::Mode::kNone);
  if (mode == EgressPolicy::Mode::kNone) {
    return Refused("egress is off for this sandbox (mode none)");
  }
  if (!absl::StrContains(*name, '.')) {
    Decision d = Refused(absl::StrCat(
        "'", *name,
        "' is not a fully qualified name (no dot): the host's resolver would look it up under "
        "the host's own search domains; use the full name (e.g. ",
        *name, ".example.com)"));
    d.rule_can_allow = false;
    return d;
  }
  if (mode == EgressPolicy::Mode::kOpen) {
    return Allowed("mode:open");
  }
  std::string port_hint;
  auto consider = [&](const Rule& rule, const std::string& label) -> bool {
    if (!NameMatches(rule, *name)) {
      return false;
    }
    if (HasPort(rule, port)) {
      return true;
    }
    if (port_hint.empty()) {
      port_hint = absl::StrCat("; rule ", label, " matches ", *name, " but only on port(s) ",
                               absl::StrJoin(rule.ports, ","), " (add a rule ", *name, ":", port,
                               " to allow it)");
    }
    return false;
  };
  for (const Rule& rule : policy.allow) {
    if (rule.kind == Rule::Kind::kPreset) {
      const Preset* preset = FindPreset(rule.name);
      for (const Rule& inner : preset ? preset->rules : std::vector<Rule>{}) {
        std::string label = absl::StrCat(rule.ToString(), " (", inner.ToString(), ")");
        if (consider(inner, label)) {
          return Allowed(std::move(label));
        }
      }
    } else if (consider(rule, rule.ToString())) {
      return Allowed(rule.ToString());
    }
  }
  return Refused(absl::StrCat("no egress rule allows ", *name, ":", port, port_hint));
}

Decision DecideAddress(const EgressPolicy& policy, const IpAddress& raw_address, uint16_t port) {
  EgressPolicy::Mode mode = policy.mode.value_or(EgressPolicy::Mode::kNone);
  if (mode == EgressPolicy::Mode::kNone) {
    return Refused("egress is off for this sandbox (mode none)");
  }
  IpAddress address = Unmapped(raw_address);
  for (const Rule& rule : policy.allow) {
    if (rule.kind == Rule::Kind::kAddress && rule.address && Unmapped(*rule.address) == address &&
        HasPort(rule, port)) {
      return Allowed(rule.ToString());
    }
  }
  return Refused(absl::StrCat("no address rule allows raw TCP to ", address.ToUriHost(), ":", port,
                              " (only TLS with a server name or HTTP with a Host header is "
                              "decided by name; add a rule IP:PORT for other protocols)"));
}

EgressPolicy MergePolicies(const EgressPolicy& global, const EgressPolicy& sandbox) {
  EgressPolicy merged;
  merged.mode = sandbox.mode.has_value() ? sandbox.mode : global.mode;
  for (const auto* rules : {&global.allow, &sandbox.allow}) {
    for (const Rule& rule : *rules) {
      if (std::find(merged.allow.begin(), merged.allow.end(), rule) == merged.allow.end()) {
        merged.allow.push_back(rule);
      }
    }
  }
  return merged;
}

std::string PolicyToJson(const EgressPolicy& policy) {
  json j = json::object();
  if (policy.mode) {
    j["mode"] = std::string(ModeName(*policy.mode));
  }
  json allow = json::array();
  for (const Rule& rule : policy.allow) {
    allow.push_back(rule.ToString());
  }
  j["allow"] = std::move(allow);
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

absl::StatusOr<EgressPolicy> PolicyFromJson(absl::string_view text) {
  json j = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return absl::InvalidArgumentError("egress policy: not a JSON object");
  }
  EgressPolicy policy;
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (it.key() == "mode") {
      if (!it->is_string()) {
        return absl::InvalidArgumentError("egress policy: 'mode' must be a string");
      }
      ABOX_ASSIGN_OR_RETURN(policy.mode, ParseMode(it->get_ref<const std::string&>()));
    } else if (it.key() == "allow") {
      if (!it->is_array() || it->size() > kMaxRules) {
        return absl::InvalidArgumentError(absl::StrCat(
            "egress policy: 'allow' must be an array of at most ", kMaxRules, " rule strings"));
      }
      for (size_t i = 0; i < it->size(); ++i) {
        const json& item = (*it)[i];
        if (!item.is_string()) {
          return absl::InvalidArgumentError(
              absl::StrCat("egress policy: allow[", i, "] must be a string"));
        }
        // Stored rules were admitted when added (loopback ones explicitly).
        absl::StatusOr<Rule> rule =
            ParseRule(item.get_ref<const std::string&>(), RuleOptions{.allow_loopback = true});
        if (!rule.ok()) {
          return absl::InvalidArgumentError(
              absl::StrCat("egress policy: allow[", i, "]: ", rule.status().message()));
        }
        policy.allow.push_back(*std::move(rule));
      }
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          "egress policy: unknown key '", QuoteForLog(it.key()), "' (expected mode, allow)"));
    }
  }
  return policy;
}

}  // namespace abox::net
