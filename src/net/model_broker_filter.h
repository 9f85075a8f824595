// The HTTP of one model-broker connection, both directions, in Splice's filter shape (FeedUp /
// RefusalReply / FeedDown / FinishDown): each guest request head is checked (route, token, the
// connection's API, the sandbox's caps) and rewritten for the provider (model_routes.h); each
// response is followed (HttpResponseStream) and its usage read (model_usage.h) without holding
// back a byte; one ModelRequestRecord per request, refused ones too.
//
// Thread-safe: FeedUp runs on one thread while FeedDown runs on another (one lock, no I/O
// under it; records are handed to on_request outside it).
//
// Trust boundary: guest bytes are hostile (every head is checked, framing followed strictly
// by HttpRequestStream); provider bytes untrusted (followed strictly, the key masked if echoed).
// The real key is only ever written into the forwarded heads.
#pragma once

#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "src/net/http_request_stream.h"
#include "src/net/http_response_stream.h"
#include "src/net/model_broker.h"
#include "src/net/model_usage.h"
#include "src/net/value_scrubber.h"

namespace abox::net {

class ModelBrokerFilter final : private ResponseObserver {
 public:
  // `config` must outlive the filter.
  explicit ModelBrokerFilter(const ModelBrokerConfig& config);
  ModelBrokerFilter(const ModelBrokerFilter&) = delete;
  ModelBrokerFilter& operator=(const ModelBrokerFilter&) = delete;
  ~ModelBrokerFilter() override;

  // Guest -> provider: appends the rewritten requests to `*out`. An error refuses the request
  // it stopped at (PermissionDenied for a refusal, InvalidArgument for framing); every later
  // call returns it again. A health probe "refuses" too: its answer is the reply.
  [[nodiscard]] absl::Status FeedUp(absl::string_view in, std::string* out);
  // What the guest gets after FeedUp stopped: the probe answer, or a provider-shaped error.
  std::string RefusalReply(const absl::Status& why) const;
  // Provider -> guest: appends the bytes for the guest (unchanged, but for a masked key).
  [[nodiscard]] absl::Status FeedDown(absl::string_view in, std::string* out);
  [[nodiscard]] absl::Status FinishDown(std::string* out);

  // Where the connection's requests go, once FeedUp accepted the first.
  std::optional<ModelUpstream> upstream() const;
  // Request heads accepted (forwarded or to be).
  uint64_t requests() const;
  // The provider could not be reached (`why` names it, never the key): the requests waiting
  // are recorded with `status`; returns the reply for the guest.
  std::string FailUpstream(int status, const std::string& why);
  // The connection ended: requests without a complete response are recorded as failed.
  void Finish(absl::string_view why);

 private:
  struct InFlight {
    ModelRequestRecord record;
    ModelUsageKind usage = ModelUsageKind::kNone;
    absl::Time start;
    std::optional<ModelUsageReader> reader;
    ModelBrokerLimiter::Permit permit;
  };
  struct Refusal {
    std::optional<ModelApi> api;
    ModelReply reply;
    bool head_request = false;
    bool probe = false;
  };

  absl::StatusOr<std::string> OnHead(const HttpRequestHead& head);
  // Ends the connection's requests with `reply` (a record too); the error FeedUp returns.
  absl::Status Refuse(const HttpRequestHead& head, std::optional<ModelApi> api, ModelReply reply,
                      bool probe = false);
  // Chooses the connection's API and reads its upstream and key (first request only).
  absl::Status Bind(ModelApi api, ModelReply* refusal);
  // Hands the records made so far to on_request (takes the lock briefly; call without it).
  void Emit();

  void OnResponseHead(const HttpResponseHead& head, const PendingRequest& request) override;
  void OnResponseBody(absl::string_view data) override;
  void OnResponseEnd() override;

  const ModelBrokerConfig& config_;
  mutable std::mutex mu_;
  HttpRequestStream requests_;
  HttpResponseStream responses_;
  std::optional<ModelApi> api_;
  std::optional<ModelUpstream> upstream_;
  std::string key_;                    // the real key: only ever written into forwarded heads
  std::optional<ValueScrubber> mask_;  // the key, masked in responses (same length)
  std::deque<InFlight> in_flight_;
  std::optional<Refusal> refusal_;
  std::vector<ModelRequestRecord> ready_;
  uint64_t accepted_ = 0;
};

}  // namespace abox::net
