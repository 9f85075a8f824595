#include "src/net/egress_connection.h"

#include <memory>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "src/net/egress_http_checks.h"
#include "src/net/host_name.h"
#include "src/net/http_request_head.h"
#include "src/net/http_request_stream.h"
#include "src/net/policy.h"
#include "src/net/splice.h"
#include "src/net/tls_client_hello.h"

namespace abox::net {
namespace {

constexpr size_t kSniffChunk = size_t{16} * 1024;
// After a refusal the guest gets this long to read the 403 before the tunnel goes away.
constexpr absl::Duration kDrainTime = absl::Seconds(1);
constexpr size_t kDrainLimit = size_t{64} * 1024;

enum class Sniffed : uint8_t {
  kTls,          // a complete ClientHello
  kHttp,         // a complete HTTP request head
  kNeither,      // the first bytes are neither: raw TCP
  kInvalidTls,   // TLS, but malformed or ambiguous
  kInvalidHttp,  // HTTP, but malformed or ambiguous
  kTimeout,      // not enough bytes within the sniff timeout (possibly none)
  kClosed,       // the guest closed before a decision
  kFailed,       // the tunnel was reset
};

struct Sniffer {
  ClientHelloSniffer tls;
  HttpRequestHeadParser http;
  std::string reason;

  // Feeds both parsers; the outcome once one of them is decisive.
  std::optional<Sniffed> Feed(absl::string_view data) {
    const TlsSniff& t = tls.Feed(data);
    const HttpSniff& h = http.Feed(data);
    if (t.result == SniffResult::kTls) {
      return Sniffed::kTls;
    }
    if (h.result == HttpSniffResult::kHttp) {
      return Sniffed::kHttp;
    }
    if (t.result == SniffResult::kInvalid) {
      reason = absl::StrCat("invalid TLS ClientHello: ", t.reason);
      return Sniffed::kInvalidTls;
    }
    if (h.result == HttpSniffResult::kInvalid) {
      reason = absl::StrCat("invalid HTTP request: ", h.reason);
      return Sniffed::kInvalidHttp;
    }
    if (t.result == SniffResult::kNotTls && h.result == HttpSniffResult::kNotHttp) {
      reason = "neither TLS nor HTTP";
      return Sniffed::kNeither;
    }
    return std::nullopt;
  }

  // Reads from the guest until a decision, starting with `already` (bytes read earlier).
  Sniffed Run(TunnelStream& stream, absl::Time deadline, absl::string_view already) {
    size_t total = already.size();
    if (!already.empty()) {
      if (std::optional<Sniffed> done = Feed(already)) {
        return *done;
      }
    }
    std::string buf(kSniffChunk, '\0');
    for (;;) {
      absl::StatusOr<size_t> n = stream.Read(buf.data(), buf.size(), deadline);
      if (!n.ok()) {
        if (absl::IsDeadlineExceeded(n.status())) {
          reason = total == 0 ? "sent nothing" : absl::StrCat("sent only ", total, " bytes");
          return Sniffed::kTimeout;
        }
        reason = absl::StrCat("tunnel failed: ", n.status().message());
        return Sniffed::kFailed;
      }
      if (*n == 0) {
        reason = absl::StrCat("closed after ", total, " bytes, before a request");
        return Sniffed::kClosed;
      }
      total += *n;
      if (std::optional<Sniffed> done = Feed(absl::string_view(buf.data(), *n))) {
        return *done;
      }
    }
  }
};

std::string PortSuffix(uint16_t port) { return port == 443 ? "" : absl::StrCat(":", port); }

class Connection {
 public:
  Connection(const ConnectionContext& ctx, TunnelStream& stream) : ctx_(ctx), stream_(stream) {
    record_.sandbox = ctx.sandbox_id;
    record_.started = absl::Now();
  }

  void Run();

 private:
  void Finish() {
    record_.duration = absl::Now() - record_.started;
    ctx_.sink->OnConnection(record_);
  }
  void Reset(Verdict verdict, std::string reason) {
    record_.verdict = verdict;
    record_.reason = std::move(reason);
    stream_.Reset(record_.reason);
  }
  // Answers with an HTTP error instead of a connection, then lets the guest read it.
  void Respond(int code, absl::string_view text, absl::string_view body, Verdict verdict,
               std::string reason) {
    record_.verdict = verdict;
    record_.reason = std::move(reason);
    if (!stream_.Write(HttpErrorResponse(code, text, body)).ok()) {
      return;
    }
    stream_.CloseWrite();
    char buf[4096];
    size_t drained = 0;
    absl::Time deadline = absl::Now() + kDrainTime;
    while (drained < kDrainLimit) {
      absl::StatusOr<size_t> n = stream_.Read(buf, sizeof(buf), deadline);
      if (!n.ok() || *n == 0) {
        break;
      }
      drained += *n;
    }
  }
  // The policy refused `name`:`port`: tell the sink (when a rule could allow it), and the
  // guest (403 or reset).
  void Deny(const std::string& name, uint16_t port, const Decision& d, bool http) {
    const std::string& why = d.reason;
    if (d.rule_can_allow) {
      ctx_.sink->OnDenied(ctx_.sandbox_id, name, port, why);
    }
    if (!http) {
      Reset(Verdict::kDenied, why);
      return;
    }
    std::string body = absl::StrCat("abox: sandbox ", ctx_.sandbox_id, " may not connect to ", name,
                                    ":", port, ".\n", why, "\n");
    if (d.rule_can_allow) {
      absl::StrAppend(&body, "To allow it, run on the host: abox egress approve ", ctx_.sandbox_id,
                      " ", name, PortSuffix(port), "\n");
    }
    Respond(403, "Forbidden", body, Verdict::kDenied, why);
  }
  void Fail(const absl::Status& status, bool http) {
    Verdict verdict = absl::IsPermissionDenied(status) ? Verdict::kDenied : Verdict::kError;
    std::string why(status.message());
    if (!http) {
      Reset(verdict, why);
      return;
    }
    if (verdict == Verdict::kDenied) {
      Respond(403, "Forbidden", absl::StrCat("abox: ", why, "\n"), verdict, why);
    } else {
      Respond(502, "Bad Gateway", absl::StrCat("abox: ", why, "\n"), verdict, why);
    }
  }

  [[nodiscard]] Decision DecideName(const std::string& name, uint16_t port) const {
    Decision d = Decide(policy_, name, port);
    if (!d.allowed && d.rule_can_allow && ctx_.policy->take_once &&
        ctx_.policy->take_once(name, port)) {
      return Decision{true, "approved once", ""};
    }
    return d;
  }

  // Resolves on the host, filters, connects. PermissionDenied when the filter left nothing.
  absl::StatusOr<UpstreamConnection> ConnectName(const std::string& name, uint16_t port) {
    absl::StatusOr<Resolution> resolution =
        ctx_.resolver->Resolve(name, absl::Now() + ctx_.limits.resolve_timeout);
    if (!resolution.ok()) {
      return absl::Status(resolution.status().code(), absl::StrCat("cannot resolve ", name, ": ",
                                                                   resolution.status().message()));
    }
    FilteredAddresses filtered = ctx_.resolver->Filter(*resolution);
    record_.via_override = filtered.from_override;
    if (filtered.usable.empty()) {
      return absl::PermissionDeniedError(OnlyRefusedReason(name, filtered));
    }
    record_.address = filtered.usable.front().ToString();
    return ConnectAddresses(filtered.usable, port);
  }
  absl::StatusOr<UpstreamConnection> ConnectAddresses(const std::vector<IpAddress>& addresses,
                                                      uint16_t port) {
    absl::StatusOr<UpstreamConnection> up =
        ConnectToAny(addresses, port, absl::Now() + ctx_.limits.connect_timeout, ctx_.cancel_fd);
    if (up.ok()) {
      record_.address = up->address.ToString();
    }
    return up;
  }

  void SpliceWith(UpstreamConnection up, absl::string_view first_up,
                  std::unique_ptr<HttpRequestStream> http = nullptr) {
    SpliceOptions options;
    options.idle_timeout = ctx_.limits.idle_timeout;
    options.cancel_fd = ctx_.cancel_fd;
    options.first_up = first_up;
    if (http != nullptr) {
      // Every request on a plain-HTTP connection is checked, not only the one decided on.
      options.filter_up = [stream = http.get()](absl::string_view in, std::string* out) {
        return stream->Feed(in, out);
      };
      options.refusal_reply = [](const absl::Status& why) { return RefusalResponse(why); };
    }
    SpliceResult result = Splice(stream_, std::move(up.fd), options);
    record_.verdict = Verdict::kAllowed;
    record_.bytes_up = result.bytes_up;
    record_.bytes_down = result.bytes_down;
    record_.reason = result.ended;
    if (!result.refused.ok()) {
      record_.verdict =
          absl::IsPermissionDenied(result.refused) ? Verdict::kDenied : Verdict::kError;
      record_.reason = absl::StrCat("after ", http->requests(), " request(s): ", result.ended);
    }
  }

  // TLS to a host the sandbox's secrets are bound to: terminated (egress_intercept.h).
  void Intercept(UpstreamConnection up, absl::string_view hello, const std::string& name,
                 uint16_t port) {
    InterceptOutcome out = RunInterceptedTls(stream_, hello, std::move(up), name, port,
                                             *ctx_.intercept, ctx_.limits, ctx_.cancel_fd);
    record_.intercepted = true;
    record_.bytes_up = out.splice.bytes_up;
    record_.bytes_down = out.splice.bytes_down;
    record_.reason = DescribeIntercept(out);
    NoteReport(out.report);
    if (!out.failed.ok()) {
      record_.verdict = Verdict::kError;
    } else if (out.report.leak || out.report.git_refusal ||
               absl::IsPermissionDenied(out.splice.refused)) {
      record_.verdict = Verdict::kDenied;
    } else if (!out.splice.refused.ok()) {
      record_.verdict = Verdict::kError;  // framing the proxy cannot follow
    } else {
      record_.verdict = Verdict::kAllowed;
    }
  }
  [[nodiscard]] bool Terminates(const std::string& name, uint16_t port) const {
    return ctx_.intercept != nullptr && ctx_.intercept->terminates(name, port);
  }
  void NoteReport(const InterceptReport& report) {
    if (report.leak && report.leak->kind == SecretRefusal::Kind::kLeak) {
      record_.leak_secret = report.leak->secret;
      record_.leak_message = report.leak->message;
    }
  }
  // Plain HTTP in a sandbox with secrets: `check` (every request names the host) and then
  // InterceptedHttp (leaks refused, values swapped where bound, responses scrubbed).
  void SpliceWatched(UpstreamConnection up, absl::string_view first_up,
                     std::unique_ptr<HttpRequestStream> check, const std::string& host,
                     uint16_t port) {
    absl::StatusOr<std::shared_ptr<const InterceptRules>> rules = ctx_.intercept->rules(host, port);
    absl::StatusOr<std::unique_ptr<InterceptedHttp>> http =
        rules.ok() ? InterceptedHttp::Create(*std::move(rules), host, port)
                   : absl::StatusOr<std::unique_ptr<InterceptedHttp>>(rules.status());
    if (!http.ok()) {
      return Fail(http.status(), /*http=*/true);
    }
    InterceptedHttp* h = http->get();
    HttpRequestStream* c = check.get();
    // Which of the two refused, for the reply.
    auto intercepted_refused = std::make_shared<bool>(false);
    SpliceOptions options;
    options.idle_timeout = ctx_.limits.idle_timeout;
    options.cancel_fd = ctx_.cancel_fd;
    options.first_up = first_up;
    options.filter_up = [c, h, intercepted_refused](absl::string_view in, std::string* out) {
      std::string checked;
      absl::Status s = c->Feed(in, &checked);
      absl::Status t = h->FeedUp(checked, out);
      if (!t.ok()) {
        *intercepted_refused = true;
        return t;
      }
      return s;
    };
    options.refusal_reply = [h, intercepted_refused](const absl::Status& why) {
      return *intercepted_refused ? h->RefusalReply(why) : RefusalResponse(why);
    };
    options.filter_down = [h](absl::string_view in, std::string* out) {
      return h->FeedDown(in, out);
    };
    options.finish_down = [h](std::string* out) { return h->FinishDown(out); };
    SpliceResult result = Splice(stream_, std::move(up.fd), options);
    record_.intercepted = true;
    record_.verdict = Verdict::kAllowed;
    record_.bytes_up = result.bytes_up;
    record_.bytes_down = result.bytes_down;
    record_.reason = result.ended;
    InterceptReport report = h->report();
    NoteReport(report);
    if (!result.refused.ok()) {
      record_.verdict =
          absl::IsPermissionDenied(result.refused) ? Verdict::kDenied : Verdict::kError;
      record_.reason = absl::StrCat("after ", c->requests(), " request(s): ", result.ended);
    }
  }

  void RunTls(Sniffer& sniffer);
  void RunHttp(Sniffer& sniffer);
  void RunConnect(Sniffer& sniffer);

  const ConnectionContext& ctx_;
  TunnelStream& stream_;
  EgressPolicy policy_;
  ConnectionRecord record_;
};

void Connection::Run() {
  policy_ = ctx_.policy->current();
  const TunnelInfo& info = stream_.info();
  record_.port = info.original_port;
  if (policy_.mode.value_or(EgressPolicy::Mode::kNone) == EgressPolicy::Mode::kNone) {
    Reset(Verdict::kDenied, "egress is off for this sandbox (mode none)");
    return Finish();
  }
  bool transparent = info.kind == TunnelInfo::Kind::kTransparent;
  Decision raw = transparent && info.original_ip
                     ? DecideAddress(policy_, *info.original_ip, info.original_port)
                     : Decision{false, "", "the guest reported no original destination"};
  if (raw.allowed) {
    record_.kind = ConnectionKind::kTcp;
    record_.matched_rule = raw.matched_rule;
    absl::StatusOr<UpstreamConnection> up =
        ConnectAddresses({*info.original_ip}, info.original_port);
    if (!up.ok()) {
      record_.address = info.original_ip->ToString();
      Fail(up.status(), /*http=*/false);
    } else {
      SpliceWith(std::move(*up), "");
    }
    return Finish();
  }

  Sniffer sniffer;
  Sniffed what = sniffer.Run(stream_, absl::Now() + ctx_.limits.sniff_timeout, "");
  switch (what) {
    case Sniffed::kTls:
      record_.kind = ConnectionKind::kTls;
      RunTls(sniffer);
      break;
    case Sniffed::kHttp:
      record_.kind = sniffer.http.Feed("").head.is_connect() ? ConnectionKind::kConnect
                                                             : ConnectionKind::kHttp;
      if (record_.kind == ConnectionKind::kConnect) {
        RunConnect(sniffer);
      } else {
        RunHttp(sniffer);
      }
      break;
    case Sniffed::kInvalidTls:
      record_.kind = ConnectionKind::kTls;
      Reset(Verdict::kError, sniffer.reason);
      break;
    case Sniffed::kInvalidHttp:
      record_.kind = ConnectionKind::kHttp;
      Respond(400, "Bad Request", absl::StrCat("abox: ", sniffer.reason, "\n"), Verdict::kError,
              sniffer.reason);
      break;
    case Sniffed::kNeither:
    case Sniffed::kTimeout:
      record_.kind = ConnectionKind::kTcp;
      if (!transparent) {
        Respond(400, "Bad Request", "abox: this is an HTTP proxy; send an HTTP request\n",
                Verdict::kError, absl::StrCat("proxy port: ", sniffer.reason));
      } else if (info.original_ip) {
        record_.address = info.original_ip->ToString();
        ctx_.sink->OnDenied(ctx_.sandbox_id, info.original_ip->ToUriHost(), info.original_port,
                            raw.reason);
        Reset(Verdict::kDenied, absl::StrCat(sniffer.reason, "; ", raw.reason));
      } else {
        Reset(Verdict::kDenied, absl::StrCat(sniffer.reason, "; ", raw.reason));
      }
      break;
    case Sniffed::kClosed:
    case Sniffed::kFailed:
      record_.verdict = Verdict::kError;
      record_.reason = sniffer.reason;
      break;
  }
  Finish();
}

void Connection::RunTls(Sniffer& sniffer) {
  const TlsSniff& tls = sniffer.tls.Feed("");
  if (stream_.info().kind != TunnelInfo::Kind::kTransparent) {
    return Reset(Verdict::kDenied, "TLS on the HTTP proxy port (HTTPS goes through CONNECT)");
  }
  if (!tls.hello.server_name) {
    return Reset(Verdict::kDenied,
                 "TLS ClientHello without a server name (SNI): nothing to decide by");
  }
  const std::string& name = *tls.hello.server_name;
  uint16_t port = stream_.info().original_port;
  record_.name = name;
  record_.port = port;
  Decision d = DecideName(name, port);
  if (!d.allowed) {
    return Deny(name, port, d, /*http=*/false);
  }
  record_.matched_rule = d.matched_rule;
  absl::StatusOr<UpstreamConnection> up = ConnectName(name, port);
  if (!up.ok()) {
    return Fail(up.status(), /*http=*/false);
  }
  if (Terminates(name, port)) {
    return Intercept(std::move(*up), sniffer.tls.bytes(), name, port);
  }
  SpliceWith(std::move(*up), sniffer.tls.bytes());
}

void Connection::RunHttp(Sniffer& sniffer) {
  const HttpRequestHead& head = sniffer.http.Feed("").head;
  const TunnelInfo& info = stream_.info();
  // Framing the proxy cannot follow, or an Upgrade: refused before connecting.
  if (absl::StatusOr<RequestFraming> framing = CheckRequestFraming(head); !framing.ok()) {
    record_.name = head.destination.host;
    record_.port = head.destination.port;
    std::string why(framing.status().message());
    Verdict verdict =
        absl::IsPermissionDenied(framing.status()) ? Verdict::kDenied : Verdict::kError;
    return absl::IsPermissionDenied(framing.status())
               ? Respond(403, "Forbidden", absl::StrCat("abox: ", why, "\n"), verdict, why)
               : Respond(400, "Bad Request", absl::StrCat("abox: ", why, "\n"), verdict, why);
  }
  // Transparent: the port the guest's bytes were going to; proxy port: the request's.
  uint16_t port =
      info.kind == TunnelInfo::Kind::kTransparent ? info.original_port : head.destination.port;
  const std::string& host = head.destination.host;
  record_.name = host;
  record_.port = port;
  absl::StatusOr<UpstreamConnection> up;
  if (head.destination.is_ip_literal) {
    // Only an address rule speaks about addresses; it is the user's explicit choice, so the
    // address filter does not apply (as for raw TCP).
    std::optional<IpAddress> ip = IpAddress::Parse(host);
    Decision d = ip ? DecideAddress(policy_, *ip, port) : Decision{false, "", "bad address"};
    if (!d.allowed) {
      return Deny(ip ? ip->ToUriHost() : host, port, d, /*http=*/true);
    }
    record_.matched_rule = d.matched_rule;
    up = ConnectAddresses({*ip}, port);
  } else {
    Decision d = DecideName(host, port);
    if (!d.allowed) {
      return Deny(host, port, d, /*http=*/true);
    }
    record_.matched_rule = d.matched_rule;
    up = ConnectName(host, port);
  }
  if (!up.ok()) {
    return Fail(up.status(), /*http=*/true);
  }
  bool proxy_port = info.kind != TunnelInfo::Kind::kTransparent;
  // The sniffed bytes (the first request and whatever followed it) go through the same check.
  std::unique_ptr<HttpRequestStream> check = CheckEveryRequest(
      host, proxy_port ? std::optional<uint16_t>(port) : std::nullopt, /*origin_form=*/true);
  if (ctx_.intercept != nullptr && !head.destination.is_ip_literal) {
    return SpliceWatched(std::move(*up), sniffer.http.bytes(), std::move(check), host, port);
  }
  SpliceWith(std::move(*up), sniffer.http.bytes(), std::move(check));
}

void Connection::RunConnect(Sniffer& sniffer) {
  const HttpRequestHead& head = sniffer.http.Feed("").head;
  const std::string& host = head.destination.host;
  uint16_t port = head.destination.port;
  record_.name = host;
  record_.port = port;
  std::optional<IpAddress> ip =
      head.destination.is_ip_literal ? IpAddress::Parse(host) : std::nullopt;
  Decision d = ip ? DecideAddress(policy_, *ip, port) : DecideName(host, port);
  if (!d.allowed) {
    return Deny(ip ? ip->ToUriHost() : host, port, d, /*http=*/true);
  }
  record_.matched_rule = d.matched_rule;
  absl::StatusOr<UpstreamConnection> up =
      ip ? ConnectAddresses({*ip}, port) : ConnectName(host, port);
  if (!up.ok()) {
    return Fail(up.status(), /*http=*/true);
  }
  if (!stream_.Write("HTTP/1.1 200 Connection established\r\n\r\n").ok()) {
    record_.verdict = Verdict::kError;
    record_.reason = "guest went away after CONNECT";
    return;
  }
  absl::string_view rest = absl::string_view(sniffer.http.bytes()).substr(head.head_size);
  if (ip) {
    // An address rule allows any protocol to that address: nothing inside to check.
    return SpliceWith(std::move(*up), rest);
  }
  // The tunnelled stream must name the host the policy allowed, or an allowed CONNECT target
  // could carry a connection meant for (and routed by the upstream to) another name.
  Sniffer inner;
  Sniffed what = inner.Run(stream_, absl::Now() + ctx_.limits.sniff_timeout, rest);
  if (what == Sniffed::kTls) {
    const std::optional<std::string>& sni = inner.tls.Feed("").hello.server_name;
    if (sni && *sni == host) {
      if (Terminates(host, port)) {
        return Intercept(std::move(*up), inner.tls.bytes(), host, port);
      }
      return SpliceWith(std::move(*up), inner.tls.bytes());
    }
    return Reset(Verdict::kDenied,
                 absl::StrCat("CONNECT to ", host, " but the tunnelled TLS names ",
                              sni ? *sni : std::string("no server (no SNI)")));
  }
  if (what == Sniffed::kHttp) {
    const std::string& inner_host = inner.http.Feed("").head.destination.host;
    if (inner_host == host) {
      // Plain HTTP inside the tunnel: every request in it is checked the same way.
      std::unique_ptr<HttpRequestStream> check =
          CheckEveryRequest(host, std::nullopt, /*origin_form=*/false);
      if (ctx_.intercept != nullptr) {
        return SpliceWatched(std::move(*up), inner.http.bytes(), std::move(check), host, port);
      }
      return SpliceWith(std::move(*up), inner.http.bytes(), std::move(check));
    }
    return Reset(Verdict::kDenied,
                 absl::StrCat("CONNECT to ", host, " but the tunnelled HTTP request names ",
                              QuoteForLog(inner_host)));
  }
  Reset(what == Sniffed::kNeither || what == Sniffed::kInvalidTls ||
                what == Sniffed::kInvalidHttp || what == Sniffed::kTimeout
            ? Verdict::kDenied
            : Verdict::kError,
        absl::StrCat("CONNECT to ", host, ": the tunnelled stream must be TLS or HTTP naming ",
                     host, " (", inner.reason, ")"));
}

}  // namespace

std::string HttpErrorResponse(int code, absl::string_view status_text, absl::string_view body) {
  return absl::StrCat("HTTP/1.1 ", code, " ", status_text,
                      "\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: ",
                      body.size(), "\r\nConnection: close\r\n\r\n", body);
}

void RunConnection(const ConnectionContext& context, TunnelStream& stream) {
  Connection(context, stream).Run();
}

}  // namespace abox::net
