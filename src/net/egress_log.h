// What the egress proxy and the DNS resolver report about each guest connection and query,
// and the sink the daemon implements to store them and raise "ask to allow" requests.
//
// Every field that came from the guest (names, reasons quoting guest bytes) has been
// normalised or quoted (QuoteForLog) before it reaches a record, so a sink may store and show
// it as text.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace abox::net {

// How the proxy recognised a connection (what it decided by).
enum class ConnectionKind : uint8_t {
  kUnknown,  // refused before the first bytes were read (mode none, too many connections)
  kTls,      // TLS ClientHello: decided by SNI
  kHttp,     // plain HTTP: decided by Host (or the absolute-form target)
  kConnect,  // HTTP CONNECT on the proxy port: decided by the target, inner SNI must match
  kTcp,      // neither: decided by an address rule on the guest's original destination
};

enum class Verdict : uint8_t {
  kAllowed,  // the policy allowed it and the proxy connected (or answered)
  kDenied,   // the policy or the address filter refused it
  kError,    // allowed, but failed: resolve, connect, timeout, the guest's bytes were invalid
};

inline absl::string_view ConnectionKindName(ConnectionKind kind) {
  switch (kind) {
    case ConnectionKind::kUnknown:
      return "unknown";
    case ConnectionKind::kTls:
      return "tls";
    case ConnectionKind::kHttp:
      return "http";
    case ConnectionKind::kConnect:
      return "connect";
    case ConnectionKind::kTcp:
      return "tcp";
  }
  return "?";
}

inline absl::string_view VerdictName(Verdict verdict) {
  switch (verdict) {
    case Verdict::kAllowed:
      return "allowed";
    case Verdict::kDenied:
      return "denied";
    case Verdict::kError:
      return "error";
  }
  return "?";
}

// One guest TCP connection, reported once when it ends.
struct ConnectionRecord {
  std::string sandbox;
  ConnectionKind kind = ConnectionKind::kUnknown;
  std::string name;     // the normalised name decided by; empty for raw TCP / before sniffing
  std::string address;  // the upstream address connected to (or tried); empty if none
  uint16_t port = 0;    // the destination port decided by
  Verdict verdict = Verdict::kDenied;
  std::string reason;         // why denied / what failed; for allowed, how the splice ended
  std::string matched_rule;   // the rule that allowed it ("api.github.com", "once", "mode:open")
  bool via_override = false;  // the address came from the test-only resolver override
  uint64_t bytes_up = 0;      // guest -> upstream, including the sniffed first bytes
  uint64_t bytes_down = 0;    // upstream -> guest (the proxy's own 403/200 lines excluded)
  absl::Time started;
  absl::Duration duration;
  // A sandbox's secrets (issue 15): the connection went through InterceptedHttp (TLS
  // terminated, or plain HTTP watched), and what it refused as a leak of which secret.
  bool intercepted = false;
  std::string leak_secret;   // the secret's name; empty: no leak
  std::string leak_message;  // names the secret and the host, never a value
};

// One DNS query from the guest, reported when it is answered.
struct DnsRecord {
  std::string sandbox;
  std::string name;  // the question as parsed (lowercase); empty when unparsable
  uint16_t qtype = 0;
  Verdict verdict = Verdict::kDenied;
  uint8_t rcode = 0;                 // the DnsRcode sent
  std::vector<std::string> answers;  // addresses answered, canonical text
  std::string reason;
  std::string matched_rule;
  bool via_override = false;
  absl::Time time;
};

// Receives the records. Called from the proxy's connection threads concurrently: an
// implementation must be thread-safe and should not block for long (it delays the guest).
class EgressSink {
 public:
  virtual ~EgressSink() = default;
  virtual void OnConnection(const ConnectionRecord& record) = 0;
  virtual void OnDns(const DnsRecord& record) = 0;
  // The POLICY refused `name` (normalised) on `port`: the daemon may raise a pending "ask to
  // allow" request. `port` is 0 when the denial came from a DNS query (no port known yet).
  // Not called for refusals a rule cannot fix (address filter, malformed bytes, no SNI).
  virtual void OnDenied(absl::string_view sandbox, absl::string_view name, uint16_t port,
                        absl::string_view reason) = 0;
};

}  // namespace abox::net
