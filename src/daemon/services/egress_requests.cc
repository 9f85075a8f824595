// EgressService, the review queue: a person's decisions (approve, deny, ignore) and an
// agent's asks.
#include <algorithm>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "src/base/status_macros.h"
#include "src/daemon/services/egress_service.h"
#include "src/net/address_filter.h"
#include "src/net/host_name.h"
#include "src/net/policy.h"

namespace abox::daemon {
namespace {

constexpr uint16_t kDefaultPort = 443;

// What a person names when approving, denying or ignoring: the request's key (a normalised
// name, or an address as the proxy reports raw TCP: "192.0.2.10", "[2001:db8::5]") and a port.
struct Target {
  std::string key;
  bool address = false;
  std::optional<uint16_t> port;
};

absl::StatusOr<Target> ParseTarget(absl::string_view text) {
  text = absl::StripAsciiWhitespace(text);
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat("\"", net::QuoteForLog(text), "\": ", why,
                                                   " (give NAME, NAME:PORT or ADDRESS:PORT)"));
  };
  if (text.empty()) {
    return bad("empty name");
  }
  absl::string_view host = text;
  absl::string_view port;
  bool has_port = false;
  if (text.front() == '[') {
    size_t close = text.find(']');
    if (close == absl::string_view::npos) {
      return bad("'[' without ']'");
    }
    host = text.substr(0, close + 1);
    absl::string_view rest = text.substr(close + 1);
    if (!rest.empty()) {
      if (rest.front() != ':') {
        return bad("unexpected text after ']'");
      }
      port = rest.substr(1);
      has_port = true;
    }
  } else if (std::count(text.begin(), text.end(), ':') == 1) {
    size_t colon = text.find(':');
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
    has_port = true;
  }
  Target target;
  if (has_port) {
    uint32_t value = 0;
    if (!absl::SimpleAtoi(port, &value) || value == 0 || value > 65535) {
      return bad("the port must be 1-65535");
    }
    target.port = static_cast<uint16_t>(value);
  }
  if (std::optional<net::IpAddress> ip = net::ParseIpLiteralHost(host)) {
    target.address = true;
    target.key = ip->ToUriHost();
    return target;
  }
  if (std::optional<net::IpAddress> ip = net::IpAddress::Parse(host)) {  // bare IPv6
    target.address = true;
    target.key = ip->ToUriHost();
    return target;
  }
  absl::StatusOr<std::string> name = net::NormalizeHostName(host);
  if (!name.ok()) {
    return bad(name.status().message());
  }
  target.key = *std::move(name);
  return target;
}

}  // namespace

absl::StatusOr<ApprovalResult> EgressService::Approve(const std::string& sandbox_id,
                                                      absl::string_view name, bool once) {
  ABOX_ASSIGN_OR_RETURN(Target target, ParseTarget(name));
  ABOX_ASSIGN_OR_RETURN(std::vector<store::EgressRequest> requests,
                        repo_.ListRequests({.sandbox_id = sandbox_id}));
  // The port the guest last asked for: named in hints only, never filled in. A person who
  // approves "name" approves it on the default port; the guest's choice (its SSH, its
  // database, a port it picked to reach something else) needs the person to write it.
  std::optional<int> guest_port;
  for (const store::EgressRequest& r : requests) {
    if (r.name == target.key && r.port != 0) {
      guest_port = r.port;
    }
  }
  std::optional<int> port;
  if (target.port) {
    port = *target.port;
  } else if (!target.address) {
    port = kDefaultPort;
  }
  if (!target.address && target.key.find('.') == std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat(
        "\"", target.key,
        "\" is not a fully qualified name (no dot): the host would resolve it under its own "
        "search domains, so it cannot be approved; approve the full name (e.g. ",
        target.key, ".example.com)"));
  }
  if (target.address && once) {
    return absl::InvalidArgumentError(
        absl::StrCat("one-time approvals are for names; raw TCP to ", target.key,
                     " needs an address rule: approve it always (abox egress approve ", sandbox_id,
                     " ", target.key, ":PORT --always)"));
  }
  if (!port) {
    return absl::InvalidArgumentError(
        absl::StrCat("give the port to allow on ", target.key,
                     guest_port ? absl::StrCat(" (the sandbox tried port ", *guest_port, ")") : "",
                     ", e.g. abox egress approve ", sandbox_id, " ", target.key, ":",
                     guest_port.value_or(5432), " --always"));
  }
  ApprovalResult result;
  if (!target.port && guest_port && *guest_port != *port) {
    result.note =
        absl::StrCat("approved on port ", *port, " only; the sandbox asked for port ", *guest_port,
                     ": approve ", target.key, ":", *guest_port, " if that port is meant too");
  }
  if (once) {
    ABOX_ASSIGN_OR_RETURN(
        result.request,
        repo_.Decide(sandbox_id, target.key, store::EgressRequestState::kApprovedOnce, *port));
  } else {
    std::string text =
        target.address || *port != kDefaultPort ? absl::StrCat(target.key, ":", *port) : target.key;
    absl::StatusOr<net::Rule> rule = net::ParseRule(text);
    if (!rule.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("cannot allow ", target.key, ": ", rule.status().message()));
    }
    ABOX_RETURN_IF_ERROR(ChangeRules(EgressScope{sandbox_id}, {*rule}, {}).status());
    ABOX_ASSIGN_OR_RETURN(
        result.request, repo_.Decide(sandbox_id, target.key, store::EgressRequestState::kApproved));
    result.rule = rule->ToString();
  }
  events_.Publish(sandbox_id, "egress_approved",
                  {{"name", target.key}, {"port", *port}, {"once", once}, {"rule", result.rule}});
  return result;
}

absl::StatusOr<AskResult> EgressService::Ask(const std::string& sandbox_id, absl::string_view name,
                                             absl::string_view reason) {
  ABOX_ASSIGN_OR_RETURN(Target target, ParseTarget(name));
  if (target.address && !target.port) {
    return absl::InvalidArgumentError(absl::StrCat("ask for ", target.key,
                                                   " with its port (ADDRESS:PORT): raw TCP is "
                                                   "allowed port by port"));
  }
  uint16_t port = target.port.value_or(kDefaultPort);
  ABOX_ASSIGN_OR_RETURN(net::EgressPolicy effective, Effective(sandbox_id));
  net::Decision decision;
  if (target.address) {
    std::optional<net::IpAddress> ip = net::ParseIpLiteralHost(target.key);
    if (!ip) {
      ip = net::IpAddress::Parse(target.key);
    }
    decision = ip ? net::DecideAddress(effective, *ip, port) : net::Decision{};
  } else {
    decision = net::Decide(effective, target.key, port);
  }
  AskResult result;
  if (decision.allowed) {
    result.allowed = true;
    result.request = {.sandbox_id = sandbox_id,
                      .name = target.key,
                      .port = port,
                      .state = store::EgressRequestState::kApproved,
                      .reason = absl::StrCat("allowed by ", decision.matched_rule)};
    return result;
  }
  if (!decision.rule_can_allow) {
    return absl::InvalidArgumentError(
        absl::StrCat("no rule can allow ", target.key, ": ", decision.reason));
  }
  // The reason is the guest's text: kept to one line of printable characters.
  std::string why(absl::StripAsciiWhitespace(reason));
  for (char& c : why) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      c = ' ';
    }
  }
  if (why.empty()) {
    return absl::InvalidArgumentError("give the reason the sandbox needs it (for the person)");
  }
  ABOX_ASSIGN_OR_RETURN(
      store::DenialOutcome outcome,
      repo_.RecordDenial(sandbox_id, target.key, port, absl::StrCat("asked by the agent: ", why)));
  result.request = outcome.request;
  result.queue_full = outcome.dropped;
  if (outcome.newly_pending) {
    events_.Publish(
        sandbox_id, kEgressPendingEvent,
        {{"name", target.key}, {"port", port}, {"count", outcome.request.count}, {"asked", true}});
  }
  return result;
}

absl::StatusOr<store::EgressRequest> EgressService::Deny(const std::string& sandbox_id,
                                                         absl::string_view name) {
  ABOX_ASSIGN_OR_RETURN(Target target, ParseTarget(name));
  return repo_.Decide(sandbox_id, target.key, store::EgressRequestState::kDenied);
}

absl::StatusOr<int64_t> EgressService::Ignore(absl::string_view name) {
  ABOX_ASSIGN_OR_RETURN(Target target, ParseTarget(name));
  return repo_.Ignore(target.key);
}

absl::StatusOr<std::vector<store::EgressRequest>> EgressService::Requests(
    const store::EgressRequestFilter& filter) {
  return repo_.ListRequests(filter);
}

}  // namespace abox::daemon
