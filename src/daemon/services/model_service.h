// aboxd's model broker (issue 16): agents inside a sandbox reach their model API through it,
// holding a token of the sandbox's own instead of the key.
//  - Providers: where each API ("anthropic", "openai") is sent and which secret holds its key
//    (`abox agent login`), kept in store::ModelRepo; an API not set up goes to its public
//    endpoint with the key in the secret of the usual name (ANTHROPIC_API_KEY, OPENAI_API_KEY).
//  - Serving: each connection to the guest's broker port is a kModelBroker tunnel, which the
//    sandbox's egress proxy hands to Serve. It runs net::ServeModelBroker with the sandbox's
//    token and APIs (SecretGrants), the key read per connection from the secret store, and
//    upstream TLS verified on the host. The broker is the host's own client of a provider the
//    person configured: the guest cannot choose where it connects, so the sandbox's egress
//    policy does not apply to it (the provider's address is still filtered like any other
//    answer, unless the base URL names a loopback server on purpose).
//  - Usage: every request is counted per sandbox and API (store::ModelRepo) and published as a
//    `model_request` event (route, status, tokens; never content or key).
//
// Thread-safe.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "src/daemon/services/event_bus.h"
#include "src/daemon/services/secret_grants.h"
#include "src/daemon/services/secret_service.h"
#include "src/net/host_resolver.h"
#include "src/net/model_broker.h"
#include "src/net/tls_stream.h"
#include "src/net/tunnel.h"
#include "src/store/model_repo.h"

namespace abox::daemon {

// One API's provider as the API shows it.
struct ModelProviderView {
  std::string api;
  std::string secret;       // the secret holding the key
  std::string base_url;     // where requests go
  bool configured = false;  // set with `abox agent login` (else the defaults above)
  bool key_stored = false;  // the secret exists
  std::optional<absl::Time> updated_at;
};

class ModelService final {
 public:
  // `upstream_ca_files`: tests only (aboxd --test-upstream-ca), trusted for provider TLS too.
  ModelService(store::ModelRepo& repo, SecretService& secrets, SecretGrants& grants,
               EventBus& events, std::shared_ptr<const net::HostResolver> resolver,
               std::vector<std::string> upstream_ca_files = {}, int requests_per_minute = 600);

  // Both APIs, by name, with the defaults filled in for one not set up.
  [[nodiscard]] absl::StatusOr<std::vector<ModelProviderView>> Providers();
  [[nodiscard]] absl::StatusOr<ModelProviderView> Provider(const std::string& api);
  // Sets where `api` goes and which secret holds its key. InvalidArgument for an unknown API,
  // a bad base URL or secret name; NotFound (saying how to add it) when the secret does not
  // exist. An empty `base_url` keeps the current one.
  [[nodiscard]] absl::StatusOr<ModelProviderView> SetProvider(const std::string& api,
                                                              const std::string& secret,
                                                              const std::string& base_url);
  // Back to the defaults. NotFound when it was not set up.
  [[nodiscard]] absl::Status RemoveProvider(const std::string& api);

  // For a create naming `api`: FailedPrecondition saying what to run when its key is not
  // stored.
  [[nodiscard]] absl::Status CheckUsable(const std::string& api);

  // What the sandbox's agents used, by API.
  [[nodiscard]] absl::StatusOr<std::vector<store::ModelUsageRow>> Usage(
      const std::string& sandbox_id);

  // Serves one broker connection of `sandbox_id` to its end (EgressService::ModelBroker). A
  // sandbox given no model API gets its connection reset.
  void Serve(const std::string& sandbox_id, net::TunnelStream& stream, int cancel_fd);
  // Drops the sandbox's limiter (it was removed).
  void Forget(const std::string& sandbox_id);

 private:
  void Record(const std::string& sandbox_id, const net::ModelRequestRecord& record);
  std::shared_ptr<net::ModelBrokerLimiter> LimiterFor(const std::string& sandbox_id);
  absl::StatusOr<std::shared_ptr<const net::UpstreamTrust>> Trust();

  store::ModelRepo* repo_;
  SecretService* secrets_;
  SecretGrants* grants_;
  EventBus* events_;
  std::shared_ptr<const net::HostResolver> resolver_;
  std::vector<std::string> upstream_ca_files_;
  int requests_per_minute_;

  std::mutex mu_;
  std::map<std::string, std::shared_ptr<net::ModelBrokerLimiter>> limiters_;
  std::shared_ptr<const net::UpstreamTrust> trust_;
};

}  // namespace abox::daemon
