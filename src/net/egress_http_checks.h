// What the egress proxy checks and rewrites on plain-HTTP requests (egress_connection.cc):
// every request on a connection must name the host it was allowed for, absolute-form targets
// become origin-form, and a refusal becomes the HTTP answer the guest reads.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "src/net/http_request_head.h"
#include "src/net/http_request_stream.h"

namespace abox::net {

// The request in origin-form ("GET /x ...") when its target is absolute-form
// ("GET http://h:p/x ..."); otherwise `bytes` unchanged.
std::string OriginForm(const HttpRequestHead& head, const std::string& bytes);

// 403 for what the policy refuses on this connection, 400 for framing the proxy cannot follow.
std::string RefusalResponse(const absl::Status& why);

// Checks every request on a plain-HTTP connection (or inside a CONNECT) names `host` (and on
// the proxy port, `port`); `origin_form`: rewrite absolute-form targets.
std::unique_ptr<HttpRequestStream> CheckEveryRequest(std::string host, std::optional<uint16_t> port,
                                                     bool origin_form);

}  // namespace abox::net
