#include "src/net/egress_intercept.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "src/net/egress_connection.h"
#include "src/net/fd_stream.h"
#include "src/net/stream_splice.h"

namespace abox::net {

InterceptOutcome RunInterceptedTls(TunnelStream& guest, absl::string_view hello,
                                   UpstreamConnection up, const std::string& host, uint16_t port,
                                   const InterceptSource& source, const EgressLimits& limits,
                                   int cancel_fd) {
  InterceptOutcome out;
  absl::StatusOr<std::shared_ptr<const InterceptRules>> rules = source.rules(host, port);
  if (!rules.ok()) {
    out.failed = absl::Status(
        rules.status().code(),
        absl::StrCat("the secrets for ", host, " could not be read: ", rules.status().message()));
    guest.Reset(out.failed.message());
    return out;
  }
  absl::StatusOr<std::unique_ptr<InterceptedHttp>> http =
      InterceptedHttp::Create(*std::move(rules), host, port);
  absl::StatusOr<std::shared_ptr<const LeafCache::Entry>> leaf =
      http.ok() ? source.leaves->Get(host)
                : absl::StatusOr<std::shared_ptr<const LeafCache::Entry>>(http.status());
  if (!leaf.ok()) {
    out.failed = leaf.status();
    guest.Reset(out.failed.message());
    return out;
  }

  absl::StatusOr<std::unique_ptr<TlsStream>> guest_tls = TlsStream::Server(
      guest, (*leaf)->server_ctx.get(), hello, absl::Now() + limits.sniff_timeout);
  if (!guest_tls.ok()) {
    out.failed = guest_tls.status();
    guest.Reset(out.failed.message());
    return out;
  }
  out.guest_tls = true;

  TunnelInfo info;
  absl::StatusOr<std::unique_ptr<FdStream>> socket = FdStream::Create(
      std::move(up.fd),
      {.info = info, .write_timeout = limits.idle_timeout, .cancel_fd = cancel_fd});
  absl::StatusOr<std::unique_ptr<TlsStream>> up_tls =
      socket.ok()
          ? TlsStream::Client(**socket, *source.trust, host, absl::Now() + limits.connect_timeout)
          : absl::StatusOr<std::unique_ptr<TlsStream>>(socket.status());
  if (!up_tls.ok()) {
    // The guest's TLS is up: it can read why (curl prints the body with -i, git as remote:).
    out.failed = up_tls.status();
    std::string body = absl::StrCat("abox: ", out.failed.message(), "\n");
    if ((*guest_tls)->Write(HttpErrorResponse(502, "Bad Gateway", body)).ok()) {
      (*guest_tls)->CloseWrite();
    }
    if (socket.ok()) {
      (*socket)->Reset("upstream TLS failed");
    }
    return out;
  }
  out.upstream_tls = true;

  InterceptedHttp* h = http->get();
  StreamSpliceOptions options;
  options.idle_timeout = limits.idle_timeout;
  options.filter_up = [h](absl::string_view in, std::string* o) { return h->FeedUp(in, o); };
  options.refusal_reply = [h](const absl::Status& why) { return h->RefusalReply(why); };
  options.filter_down = [h](absl::string_view in, std::string* o) { return h->FeedDown(in, o); };
  options.finish_down = [h](std::string* o) { return h->FinishDown(o); };
  out.splice = SpliceStreams(**guest_tls, **up_tls, options);
  out.report = h->report();
  return out;
}

std::string DescribeIntercept(const InterceptOutcome& outcome) {
  const InterceptReport& r = outcome.report;
  std::vector<std::string> parts;
  if (!outcome.failed.ok()) {
    parts.push_back(std::string(outcome.failed.message()));
  } else {
    parts.push_back(outcome.splice.ended);
  }
  parts.push_back("TLS terminated for secrets");
  if (!r.swapped.empty()) {
    parts.push_back(absl::StrCat("swapped ", absl::StrJoin(r.swapped, ",")));
  }
  if (r.leak) {
    parts.push_back(absl::StrCat("refused: ", r.leak->message));
  }
  if (r.git_refusal) {
    parts.push_back(absl::StrCat("push refused: ", *r.git_refusal));
  }
  if (r.tokens_added > 0) {
    parts.push_back(absl::StrCat("git token added to ", r.tokens_added, " request(s)"));
  }
  if (r.scrubbed > 0) {
    parts.push_back(absl::StrCat(r.scrubbed, " value(s) scrubbed from responses"));
  }
  return absl::StrJoin(parts, "; ");
}

}  // namespace abox::net
