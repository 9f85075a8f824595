#include "src/net/model_routes.h"

#include <openssl/crypto.h>

#include <algorithm>
#include <array>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "nlohmann/json.hpp"
#include "src/net/address_filter.h"
#include "src/net/host_name.h"

namespace abox::net {
namespace {

// The forwarded routes: exact paths after the API's prefix. Each is what a supported CLI calls
// (Claude Code: messages and count_tokens with `?beta=true`; Codex: responses and models).
// Nothing else reaches the provider with the real key: files, batches, admin and fine-tuning
// endpoints are not an agent's business.
struct RouteRow {
  ModelApi api;
  absl::string_view method;
  absl::string_view path;  // after "/anthropic" or "/openai"
  ModelUsageKind usage;
};
constexpr std::array<RouteRow, 4> kRoutes = {{
    {ModelApi::kAnthropic, "POST", "/v1/messages", ModelUsageKind::kAnthropicMessages},
    {ModelApi::kAnthropic, "POST", "/v1/messages/count_tokens", ModelUsageKind::kNone},
    {ModelApi::kOpenAi, "POST", "/v1/responses", ModelUsageKind::kOpenAiResponses},
    {ModelApi::kOpenAi, "GET", "/v1/models", ModelUsageKind::kNone},
}};

// Paths a client probes to see whether its base URL answers.
constexpr std::array<absl::string_view, 6> kProbePaths = {"/",       "/anthropic", "/anthropic/",
                                                          "/openai", "/openai/v1", "/openai/v1/"};

// Only unreserved path characters and '/': a path with '%', ';', '\\' or anything else a
// provider's router could decode into another path is not a route (and so a 404).
bool IsPlainPath(absl::string_view path) {
  if (path.empty() || path.front() != '/') {
    return false;
  }
  for (char c : path) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '/' && c != '_' && c != '-' &&
        c != '.') {
      return false;
    }
  }
  for (absl::string_view segment : absl::StrSplit(path.substr(1), '/')) {
    if (segment == "." || segment == "..") {
      return false;
    }
  }
  return !absl::StrContains(path, "//");
}

bool IsLoopbackHost(absl::string_view host) {
  if (host == "localhost") {
    return true;
  }
  std::optional<IpAddress> ip = IpAddress::Parse(host);
  if (!ip) {
    return false;
  }
  if (ip->is_v4()) {
    return ip->bytes()[0] == 127;
  }
  return *ip == *IpAddress::Parse("::1");
}

absl::string_view ReasonPhrase(int status) {
  switch (status) {
    case 200:
      return "OK";
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 408:
      return "Request Timeout";
    case 429:
      return "Too Many Requests";
    case 502:
      return "Bad Gateway";
    case 503:
      return "Service Unavailable";
    default:
      return status >= 500 ? "Server Error" : "Error";
  }
}

// The error `type` each provider's SDK maps to its exception classes.
std::string AnthropicErrorType(int status) {
  switch (status) {
    case 400:
    case 405:
      return "invalid_request_error";
    case 401:
      return "authentication_error";
    case 404:
      return "not_found_error";
    case 408:
      return "timeout_error";
    case 429:
      return "rate_limit_error";
    default:
      return "api_error";
  }
}

std::pair<std::string, std::string> OpenAiTypeAndCode(int status) {
  switch (status) {
    case 401:
      return {"invalid_request_error", "invalid_api_key"};
    case 404:
      return {"invalid_request_error", "unknown_url"};
    case 405:
      return {"invalid_request_error", "method_not_allowed"};
    case 429:
      return {"requests", "rate_limit_exceeded"};
    default:
      return status >= 500
                 ? std::pair<std::string, std::string>{"server_error", "broker_error"}
                 : std::pair<std::string, std::string>{"invalid_request_error", "invalid_request"};
  }
}

bool IsDroppedHeader(absl::string_view name, const std::vector<std::string>& named_by_connection) {
  // Credentials of the guest (its token, or anything a client adds) never reach the provider,
  // and hop-by-hop headers are the broker's connection's, not the provider's (RFC 9110 7.6.1).
  // Transfer-Encoding and Content-Length frame the body, which is forwarded as it is: kept.
  // Accept-Encoding goes too: without it the provider answers uncompressed, so the usage in
  // the response can be read (Codex asks for zstd or gzip).
  static constexpr std::array<absl::string_view, 11> kDropped = {
      "authorization",  "x-api-key",        "proxy-authorization", "cookie", "host",
      "connection",     "proxy-connection", "keep-alive",          "te",     "upgrade",
      "accept-encoding"};
  for (absl::string_view d : kDropped) {
    if (absl::EqualsIgnoreCase(name, d)) {
      return true;
    }
  }
  for (const std::string& n : named_by_connection) {
    if (absl::EqualsIgnoreCase(name, n) && !absl::EqualsIgnoreCase(name, "transfer-encoding") &&
        !absl::EqualsIgnoreCase(name, "content-length")) {
      return true;
    }
  }
  return false;
}

}  // namespace

absl::string_view ModelApiPrefix(ModelApi api) {
  return api == ModelApi::kAnthropic ? "anthropic" : "openai";
}

absl::string_view ModelApiDisplayName(ModelApi api) {
  return api == ModelApi::kAnthropic ? "Anthropic" : "OpenAI";
}

std::string ModelUpstream::HostHeader() const {
  std::string host_text = absl::StrContains(host, ':') ? absl::StrCat("[", host, "]") : host;
  if (port == (tls ? 443 : 80)) {
    return host_text;
  }
  return absl::StrCat(host_text, ":", port);
}

std::string ModelUpstream::Authority() const {
  std::string host_text = absl::StrContains(host, ':') ? absl::StrCat("[", host, "]") : host;
  return absl::StrCat(host_text, ":", port);
}

absl::StatusOr<ModelUpstream> ParseModelBaseUrl(ModelApi api, absl::string_view url) {
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat(
        ModelApiDisplayName(api), " base URL '", QuoteForLog(url), "': ", why,
        " (accepted: https://host[:port][/path], or http:// for localhost, 127.0.0.0/8 and "
        "[::1] only)"));
  };
  ModelUpstream up;
  up.api = api;
  absl::string_view rest = url;
  if (absl::ConsumePrefix(&rest, "https://")) {
    up.tls = true;
    up.port = 443;
  } else if (absl::ConsumePrefix(&rest, "http://")) {
    up.tls = false;
    up.port = 80;
  } else {
    return bad("the scheme must be https:// (or http:// for a loopback host)");
  }
  if (rest.find_first_of("?#") != absl::string_view::npos) {
    return bad("a query or fragment is not allowed");
  }
  size_t slash = rest.find('/');
  absl::string_view authority = rest.substr(0, slash);
  absl::string_view path = slash == absl::string_view::npos ? "" : rest.substr(slash);
  if (absl::StrContains(authority, '@')) {
    return bad("userinfo ('user@') is not allowed: the key is added by the broker");
  }
  absl::string_view host = authority;
  absl::string_view port_text;
  if (absl::StartsWith(authority, "[")) {
    size_t close = authority.find(']');
    if (close == absl::string_view::npos) {
      return bad("unterminated '[' in the host");
    }
    host = authority.substr(1, close - 1);
    absl::string_view after = authority.substr(close + 1);
    if (!after.empty() && !absl::ConsumePrefix(&after, ":")) {
      return bad("junk after ']'");
    }
    port_text = after;
    if (!IpAddress::Parse(host) || IpAddress::Parse(host)->is_v4()) {
      return bad("brackets must hold an IPv6 address");
    }
  } else if (size_t colon = authority.find(':'); colon != absl::string_view::npos) {
    host = authority.substr(0, colon);
    port_text = authority.substr(colon + 1);
    if (port_text.empty()) {
      return bad("empty port");
    }
  }
  if (!port_text.empty()) {
    uint32_t port = 0;
    if (port_text.size() > 5 ||
        !std::all_of(port_text.begin(), port_text.end(),
                     [](char c) { return absl::ascii_isdigit(static_cast<unsigned char>(c)); }) ||
        !absl::SimpleAtoi(port_text, &port) || port == 0 || port > 65535) {
      return bad("the port must be a number from 1 to 65535");
    }
    up.port = static_cast<uint16_t>(port);
  }
  if (host.empty()) {
    return bad("no host");
  }
  if (std::optional<IpAddress> ip = IpAddress::Parse(host)) {
    up.host = ip->ToString();
  } else if (host == "localhost") {
    up.host = "localhost";
  } else {
    absl::StatusOr<std::string> name = NormalizeHostName(host);
    if (!name.ok()) {
      return bad(name.status().message());
    }
    up.host = *std::move(name);
  }
  if (!up.tls && !IsLoopbackHost(up.host)) {
    return bad("plain http:// would send the key unencrypted; use https://");
  }
  while (absl::ConsumeSuffix(&path, "/")) {
  }
  if (!path.empty() && !IsPlainPath(path)) {
    return bad("the path may hold only letters, digits, '-', '_', '.' and single '/'");
  }
  up.path_prefix = std::string(path);
  return up;
}

ModelUpstream DefaultModelUpstream(ModelApi api) {
  return *ParseModelBaseUrl(
      api, api == ModelApi::kAnthropic ? kDefaultAnthropicBaseUrl : kDefaultOpenAiBaseUrl);
}

ModelRoute ClassifyModelRoute(absl::string_view method, absl::string_view target) {
  ModelRoute route;
  size_t question = target.find('?');
  absl::string_view path = target.substr(0, question);
  absl::string_view query = question == absl::string_view::npos ? "" : target.substr(question);
  route.path = std::string(path);
  absl::string_view rest = path;
  if (absl::ConsumePrefix(&rest, "/anthropic") && (rest.empty() || rest.front() == '/')) {
    route.api = ModelApi::kAnthropic;
  } else if (rest = path;
             absl::ConsumePrefix(&rest, "/openai") && (rest.empty() || rest.front() == '/')) {
    route.api = ModelApi::kOpenAi;
  }
  if (!IsPlainPath(path) || absl::StrContains(target, '#')) {
    return route;  // kNotFound: absolute-form, '*', encoded or dotted paths
  }
  if (std::find(kProbePaths.begin(), kProbePaths.end(), path) != kProbePaths.end() &&
      query.empty()) {
    if (method == "GET" || method == "HEAD") {
      route.kind = ModelRouteKind::kProbe;
    } else {
      route.kind = ModelRouteKind::kMethodNotAllowed;
      route.allow = "GET, HEAD";
    }
    return route;
  }
  if (!route.api) {
    return route;
  }
  for (const RouteRow& row : kRoutes) {
    if (row.api != *route.api || row.path != rest) {
      continue;
    }
    if (row.method != method) {
      route.kind = ModelRouteKind::kMethodNotAllowed;
      route.allow = std::string(row.method);
      return route;
    }
    route.kind = ModelRouteKind::kForward;
    route.usage = row.usage;
    route.upstream_target = absl::StrCat(rest, query);
    return route;
  }
  return route;
}

bool HasModelToken(const HttpRequestHead& head, absl::string_view token) {
  bool seen = false;
  bool all_match = true;
  for (const HttpHeader& h : head.headers) {
    absl::string_view presented;
    if (absl::EqualsIgnoreCase(h.name, "x-api-key")) {
      presented = h.value;
    } else if (absl::EqualsIgnoreCase(h.name, "authorization")) {
      presented = h.value;
      if (presented.size() < 7 || !absl::EqualsIgnoreCase(presented.substr(0, 7), "bearer ")) {
        all_match = false;
        continue;
      }
      presented = absl::StripLeadingAsciiWhitespace(presented.substr(7));
    } else {
      continue;
    }
    seen = true;
    // Constant time in the token's bytes: the length is not a secret (it is fixed per install).
    if (presented.size() != token.size() ||
        CRYPTO_memcmp(presented.data(), token.data(), token.size()) != 0) {
      all_match = false;
    }
  }
  return seen && all_match && !token.empty();
}

std::string RewriteModelHead(const HttpRequestHead& head, const ModelRoute& route,
                             const ModelUpstream& upstream, absl::string_view key) {
  std::vector<std::string> named_by_connection;
  for (const HttpHeader& h : head.headers) {
    if (absl::EqualsIgnoreCase(h.name, "connection")) {
      for (absl::string_view n : absl::StrSplit(h.value, ',', absl::SkipWhitespace())) {
        named_by_connection.emplace_back(absl::StripAsciiWhitespace(n));
      }
    }
  }
  std::string out = absl::StrCat(head.method, " ", upstream.path_prefix, route.upstream_target,
                                 " HTTP/1.", head.minor_version, "\r\n");
  bool host_written = false;
  for (const HttpHeader& h : head.headers) {
    if (absl::EqualsIgnoreCase(h.name, "host") && !host_written) {
      absl::StrAppend(&out, h.name, ": ", upstream.HostHeader(), "\r\n");
      host_written = true;
      continue;
    }
    if (IsDroppedHeader(h.name, named_by_connection)) {
      continue;
    }
    absl::StrAppend(&out, h.name, ": ", h.value, "\r\n");
  }
  if (!host_written) {
    absl::StrAppend(&out, "Host: ", upstream.HostHeader(), "\r\n");
  }
  if (upstream.api == ModelApi::kAnthropic) {
    absl::StrAppend(&out, "x-api-key: ", key, "\r\n\r\n");
  } else {
    absl::StrAppend(&out, "Authorization: Bearer ", key, "\r\n\r\n");
  }
  return out;
}

absl::Status CheckModelKey(ModelApi api, absl::string_view key) {
  bool printable = std::all_of(key.begin(), key.end(), [](char c) {
    unsigned char u = static_cast<unsigned char>(c);
    return u > 0x20 && u < 0x7f;
  });
  if (key.size() < 8 || key.size() > 8192 || !printable) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the ", ModelApiDisplayName(api),
        " API key stored on the host is not a valid key (8 to 8192 visible ASCII characters): "
        "run `abox agent login ",
        ModelApiPrefix(api), "` again"));
  }
  return absl::OkStatus();
}

std::string BuildModelErrorReply(std::optional<ModelApi> api, const ModelReply& reply,
                                 bool head_request) {
  std::string message = absl::StrCat("abox model broker: ", reply.message);
  nlohmann::json body;
  if (api == ModelApi::kAnthropic) {
    body = {{"type", "error"},
            {"error", {{"type", AnthropicErrorType(reply.status)}, {"message", message}}}};
  } else {
    auto [type, code] = OpenAiTypeAndCode(reply.status);
    body = {{"error", {{"message", message}, {"type", type}, {"code", code}}}};
  }
  // Replacement instead of an exception: messages may quote guest bytes that are not UTF-8.
  std::string text = body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  std::string out = absl::StrCat("HTTP/1.1 ", reply.status, " ", ReasonPhrase(reply.status),
                                 "\r\ncontent-type: application/json\r\ncontent-length: ",
                                 head_request ? 0 : text.size(), "\r\nconnection: close\r\n");
  // Claude Code retries most failures for minutes unless told not to: only a rate limit and an
  // unreachable provider are worth another try.
  if (reply.status != 429 && reply.status != 502) {
    out.append("x-should-retry: false\r\n");
  }
  for (const HttpHeader& h : reply.headers) {
    absl::StrAppend(&out, h.name, ": ", h.value, "\r\n");
  }
  out.append("\r\n");
  if (!head_request) {
    out.append(text);
  }
  return out;
}

std::string BuildModelProbeReply(bool head_request) {
  constexpr absl::string_view kBody = R"({"ok":true})";
  return absl::StrCat("HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: ",
                      head_request ? 0 : kBody.size(), "\r\nconnection: close\r\n\r\n",
                      head_request ? "" : kBody);
}

}  // namespace abox::net
