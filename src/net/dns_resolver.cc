#include "src/net/dns_resolver.h"

#include <algorithm>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "src/net/dns_message.h"
#include "src/net/host_name.h"

namespace abox::net {
namespace {

void AddPorts(const Rule& rule, std::vector<uint16_t>& ports) {
  if (rule.kind != Rule::Kind::kExact && rule.kind != Rule::Kind::kWildcard) {
    return;
  }
  for (uint16_t port : rule.ports) {
    if (std::find(ports.begin(), ports.end(), port) == ports.end()) {
      ports.push_back(port);
    }
  }
}

bool IsModeNone(const EgressPolicy& policy) {
  return policy.mode.value_or(EgressPolicy::Mode::kNone) == EgressPolicy::Mode::kNone;
}

}  // namespace

Decision DecideNameAnyPort(const EgressPolicy& policy, absl::string_view name) {
  // Every port any name rule speaks of: Decide with each until one allows. 443 first, so the
  // refusal reported is the one for the common case.
  std::vector<uint16_t> ports = {443, 80};
  for (const Rule& rule : policy.allow) {
    if (rule.kind == Rule::Kind::kPreset) {
      if (const Preset* preset = FindPreset(rule.name)) {
        for (const Rule& inner : preset->rules) {
          AddPorts(inner, ports);
        }
      }
    } else {
      AddPorts(rule, ports);
    }
  }
  Decision first;
  for (size_t i = 0; i < ports.size(); ++i) {
    Decision d = Decide(policy, name, ports[i]);
    if (d.allowed) {
      return d;
    }
    if (i == 0) {
      first = std::move(d);
    }
  }
  return first;
}

absl::StatusOr<std::unique_ptr<DnsResolver>> DnsResolver::Create(Options options) {
  if (!options.policy.current || !options.resolver || !options.sink) {
    return absl::InvalidArgumentError("DnsResolver needs a policy source, a resolver and a sink");
  }
  return std::unique_ptr<DnsResolver>(new DnsResolver(std::move(options)));
}

std::optional<std::string> DnsResolver::Answer(absl::string_view message) const {
  DnsRecord record;
  record.sandbox = options_.sandbox_id;
  record.time = absl::Now();
  absl::StatusOr<DnsQuery> query = ParseDnsQuery(message);
  if (!query.ok()) {
    std::optional<std::string> response = BuildResponseForUnparsable(message);
    record.verdict = Verdict::kError;
    record.rcode = static_cast<uint8_t>(absl::IsUnimplemented(query.status()) ? DnsRcode::kNotImp
                                                                              : DnsRcode::kFormErr);
    record.reason = absl::StrCat("unparsable query: ", query.status().message(),
                                 response ? "" : " (not answered)");
    options_.sink->OnDns(record);
    return response;
  }
  record.name = query->question.name;
  record.qtype = query->question.qtype;
  auto finish = [&](std::string response, DnsRcode rcode, Verdict verdict, std::string reason) {
    record.rcode = static_cast<uint8_t>(rcode);
    record.verdict = verdict;
    record.reason = std::move(reason);
    options_.sink->OnDns(record);
    return response;
  };
  if (query->question.qclass != kDnsClassIn) {
    return finish(BuildErrorResponse(*query, DnsRcode::kNotImp), DnsRcode::kNotImp, Verdict::kError,
                  absl::StrCat("class ", query->question.qclass, " is not IN"));
  }

  EgressPolicy policy = options_.policy.current();
  if (IsModeNone(policy)) {
    return finish(BuildErrorResponse(*query, DnsRcode::kRefused), DnsRcode::kRefused,
                  Verdict::kDenied, "egress is off for this sandbox (mode none)");
  }
  Decision decision = DecideNameAnyPort(policy, record.name);
  if (!decision.allowed && decision.rule_can_allow && options_.policy.has_once &&
      NormalizeHostName(record.name).ok() && options_.policy.has_once(record.name)) {
    decision = Decision{true, "approved once", ""};
  }
  if (!decision.allowed) {
    // Only a name a rule could allow becomes an "ask to allow" request.
    if (decision.rule_can_allow && NormalizeHostName(record.name).ok()) {
      options_.sink->OnDenied(options_.sandbox_id, record.name, 0, decision.reason);
    }
    return finish(BuildErrorResponse(*query, DnsRcode::kNxDomain), DnsRcode::kNxDomain,
                  Verdict::kDenied, decision.reason);
  }
  record.matched_rule = decision.matched_rule;
  uint16_t qtype = query->question.qtype;
  if (qtype != kDnsTypeA && qtype != kDnsTypeAaaa) {
    return finish(BuildNoDataResponse(*query), DnsRcode::kNoError, Verdict::kAllowed,
                  absl::StrCat("type ", qtype, ": only A and AAAA are answered"));
  }

  absl::StatusOr<Resolution> resolution =
      options_.resolver->Resolve(record.name, absl::Now() + options_.limits.resolve_timeout);
  if (!resolution.ok()) {
    bool missing = absl::IsNotFound(resolution.status());
    DnsRcode rcode = missing ? DnsRcode::kNxDomain : DnsRcode::kServFail;
    return finish(BuildErrorResponse(*query, rcode), rcode, Verdict::kError,
                  std::string(resolution.status().message()));
  }
  FilteredAddresses filtered = options_.resolver->Filter(*resolution);
  record.via_override = filtered.from_override;
  if (filtered.usable.empty()) {
    return finish(BuildNoDataResponse(*query), DnsRcode::kNoError, Verdict::kDenied,
                  OnlyRefusedReason(record.name, filtered));
  }
  for (const IpAddress& address : filtered.usable) {
    if (address.is_v4() == (qtype == kDnsTypeA)) {
      record.answers.push_back(address.ToString());
    }
  }
  std::string reason = filtered.from_override ? "override" : "";
  return finish(BuildAddressResponse(*query, filtered.usable, options_.limits.dns_ttl_seconds,
                                     MaxUdpResponseSize(*query)),
                DnsRcode::kNoError, Verdict::kAllowed, std::move(reason));
}

void DnsResolver::Serve(TunnelStream& stream) const {
  std::string buffer;
  char chunk[4096];
  for (;;) {
    // Answer every complete frame already buffered.
    for (;;) {
      absl::StatusOr<DnsTcpFrame> frame = NextDnsTcpFrame(buffer);
      if (!frame.ok()) {
        stream.Reset(absl::StrCat("DNS stream: ", frame.status().message()));
        return;
      }
      if (!frame->complete) {
        break;
      }
      std::optional<std::string> answer = Answer(frame->message);
      size_t consumed = frame->consumed;
      if (answer) {
        absl::Status written = stream.Write(FrameDnsTcp(*answer));
        if (!written.ok()) {
          return;
        }
      }
      buffer.erase(0, consumed);
    }
    absl::StatusOr<size_t> n =
        stream.Read(chunk, sizeof(chunk), absl::Now() + options_.limits.dns_idle_timeout);
    if (!n.ok()) {
      if (absl::IsDeadlineExceeded(n.status())) {
        stream.CloseWrite();
      }
      return;
    }
    if (*n == 0) {
      stream.CloseWrite();
      return;
    }
    // A frame is at most 2 + 65535 bytes, so the buffer stays bounded by one frame + a chunk.
    buffer.append(chunk, *n);
  }
}

}  // namespace abox::net
