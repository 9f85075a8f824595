// The model broker: agent CLIs in the sandbox (Claude Code, Codex) talk plain HTTP/1.1 to a
// loopback listener in the guest, whose connections reach aboxd as tunnels; the broker checks
// each request against the sandbox's token and the route table (model_routes.h), adds the real
// API key on the host and streams the provider's answer back as it comes (Server-Sent Events),
// so the key never enters the VM.
//
// Trust boundary: the guest is hostile: every byte of the tunnel is untrusted, every request
// on a kept-alive connection is checked (token, route, same API as the first), and anything
// refused is answered by the broker itself and never forwarded. The provider is reached over
// verified TLS (plain HTTP only for a loopback base URL). The real key appears in no record,
// message or reply; a response that echoes it has it masked.
//
// Cost: a connection holds two threads while spliced (SpliceStreams); requests are capped per
// sandbox by ModelBrokerLimiter.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "src/net/model_broker_limiter.h"
#include "src/net/model_routes.h"
#include "src/net/splice.h"
#include "src/net/tls_stream.h"
#include "src/net/tunnel.h"

namespace abox::net {

// One request as the sandbox's usage log keeps it. Never holds a credential or a body.
struct ModelRequestRecord {
  ModelApi api = ModelApi::kAnthropic;
  std::string method;
  std::string route;     // the guest's path without the query (quoted for logs when refused)
  int status = 0;        // the provider's, or the broker's own answer; 0: none arrived
  bool refused = false;  // answered by the broker (refusals, probes, unreachable provider)
  std::string error;     // why, for refused or failed requests; "" when it went well
  uint64_t input_tokens = 0;
  uint64_t output_tokens = 0;
  absl::Duration first_byte = absl::ZeroDuration();  // request head to response head
  absl::Duration total = absl::ZeroDuration();       // request head to response end
};

struct ModelBrokerConfig {
  // This sandbox's broker token (the guest's credential): at least 32 characters.
  std::string token;
  // Where each API goes; NotFound: the API is not configured for this sandbox.
  std::function<absl::StatusOr<ModelUpstream>(ModelApi)> upstream;
  // The real key, read at each connection's first request (so a new login applies to the next
  // connection); NotFound: none is stored.
  std::function<absl::StatusOr<std::string>(ModelApi)> key;
  // Resolves and connects (aboxd: its host resolver and address filter, which allows loopback
  // only for a loopback base URL). Bounded by the deadline and the cancel fd.
  std::function<absl::StatusOr<UpstreamConnection>(const std::string& host, uint16_t port,
                                                   absl::Time deadline, int cancel_fd)>
      connect;
  std::shared_ptr<const UpstreamTrust> trust;  // for https upstreams
  // Once per request, refused ones too. May be called from two threads at once.
  std::function<void(const ModelRequestRecord&)> on_request;
  std::shared_ptr<ModelBrokerLimiter> limiter;  // per sandbox; null: no caps
  absl::Duration head_timeout = absl::Seconds(30);
  absl::Duration connect_timeout = absl::Seconds(10);
  absl::Duration idle_timeout = absl::Minutes(10);
};

// InvalidArgument saying what is missing or too weak in `config`.
[[nodiscard]] absl::Status ValidateModelBrokerConfig(const ModelBrokerConfig& config);

struct ModelBrokerOutcome {
  std::optional<ModelApi> api;  // chosen by the first accepted request
  uint64_t requests = 0;        // request heads accepted and forwarded
  bool connected = false;       // the provider was reached (TLS verified when https)
  SpliceResult splice;          // when connected
  // Why the connection ended before any request was forwarded ("" otherwise).
  std::string ended_early;
};

// Serves one guest connection to its end: reads the first request head (bounded by
// head_timeout), answers probes and refusals itself, connects to the API's upstream, then
// splices request by request until either side closes. The guest closing aborts the provider
// request at once (an agent that gave up should not keep spending). `cancel_fd` readable
// (aboxd shutting down): everything is aborted.
ModelBrokerOutcome ServeModelBroker(TunnelStream& guest, const ModelBrokerConfig& config,
                                    int cancel_fd);

}  // namespace abox::net
