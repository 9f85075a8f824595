#include "src/net/egress_http_checks.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "src/net/egress_connection.h"
#include "src/net/host_name.h"

namespace abox::net {

// What a proxy sends an origin server: the request line's absolute-form target
// ("GET http://h:p/x HTTP/1.1", as clients send to HTTP_PROXY) in origin-form ("GET /x ..."),
// which every server understands (many, e.g. Python's http.server, do not take absolute-form).
// The authority it drops was checked against Host by the parser; the rest goes unchanged.
std::string OriginForm(const HttpRequestHead& head, const std::string& bytes) {
  constexpr absl::string_view kScheme = "http://";
  std::string prefix = absl::StrCat(head.method, " ", head.target, " ");
  if (!absl::StartsWithIgnoreCase(head.target, kScheme) || !absl::StartsWith(bytes, prefix)) {
    return bytes;
  }
  absl::string_view rest = absl::string_view(head.target).substr(kScheme.size());
  size_t slash = rest.find_first_of("/?");
  std::string path = slash == absl::string_view::npos ? "/" : std::string(rest.substr(slash));
  if (path[0] == '?') {
    path = absl::StrCat("/", path);
  }
  return absl::StrCat(head.method, " ", path, " ", bytes.substr(prefix.size()));
}

// What the guest gets instead of a refused request: 403 for what the policy refuses on this
// connection, 400 for framing the proxy cannot follow.
std::string RefusalResponse(const absl::Status& why) {
  std::string body = absl::StrCat("abox: ", why.message(), "\n");
  return absl::IsPermissionDenied(why) ? HttpErrorResponse(403, "Forbidden", body)
                                       : HttpErrorResponse(400, "Bad Request", body);
}

// The requests after the first on a plain-HTTP connection (or inside a CONNECT) must name the
// host the connection was allowed for (and on the proxy port, its port): an upstream that
// serves many sites (a CDN) would otherwise route them anywhere. `origin_form`: rewrite
// absolute-form targets as the first request's was.
std::unique_ptr<HttpRequestStream> CheckEveryRequest(std::string host, std::optional<uint16_t> port,
                                                     bool origin_form) {
  return std::make_unique<HttpRequestStream>(
      [host = std::move(host), port, origin_form](
          const HttpRequestHead& head, absl::string_view raw) -> absl::StatusOr<std::string> {
        const HttpDestination& d = head.destination;
        if (d.host != host || (port && d.port != *port)) {
          return absl::PermissionDeniedError(absl::StrCat(
              "this connection was allowed for ", host, port ? absl::StrCat(":", *port) : "",
              "; a request on it for ", QuoteForLog(d.host), ":", d.port,
              " is refused (send requests for another host on a new connection)"));
        }
        std::string bytes(raw);
        return origin_form ? OriginForm(head, bytes) : bytes;
      });
}

}  // namespace abox::net
