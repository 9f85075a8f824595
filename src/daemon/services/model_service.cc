#include "src/daemon/services/model_service.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "spdlog/spdlog.h"
#include "src/base/status_macros.h"
#include "src/daemon/services/model_grants.h"
#include "src/net/splice.h"

namespace abox::daemon {
namespace {

struct ApiDefaults {
  absl::string_view api;
  absl::string_view secret;
  absl::string_view base_url;
  absl::string_view title;
};

constexpr ApiDefaults kDefaults[] = {
    {kAnthropicApi, "ANTHROPIC_API_KEY", "https://api.anthropic.com", "Anthropic"},
    {kOpenAiApi, "OPENAI_API_KEY", "https://api.openai.com", "OpenAI"},
};

absl::StatusOr<const ApiDefaults*> DefaultsOf(absl::string_view api) {
  for (const ApiDefaults& d : kDefaults) {
    if (d.api == api) {
      return &d;
    }
  }
  return absl::InvalidArgumentError(
      absl::StrCat("\"", api.substr(0, 64), "\" is not a model API: use anthropic or openai"));
}

absl::StatusOr<net::ModelApi> ApiOf(absl::string_view api) {
  if (api == kAnthropicApi) {
    return net::ModelApi::kAnthropic;
  }
  if (api == kOpenAiApi) {
    return net::ModelApi::kOpenAi;
  }
  return DefaultsOf(api).status();
}

absl::string_view NameOf(net::ModelApi api) {
  return api == net::ModelApi::kAnthropic ? kAnthropicApi : kOpenAiApi;
}

// Resolves and connects to a provider. A loopback literal or "localhost" (a local model server
// the person named) is connected to as given; any other name is resolved on the host and its
// answers filtered like every egress answer (so a provider name cannot point the broker at the
// host's own services), except the test-only resolver override.
absl::StatusOr<net::UpstreamConnection> ConnectProvider(const net::HostResolver& resolver,
                                                        const std::string& host, uint16_t port,
                                                        absl::Time deadline, int cancel_fd) {
  std::vector<net::IpAddress> addresses;
  if (host == "localhost") {
    addresses = {*net::IpAddress::Parse("127.0.0.1"), *net::IpAddress::Parse("::1")};
  } else if (std::optional<net::IpAddress> literal = net::ParseIpLiteralHost(host)) {
    addresses = {*literal};
  } else {
    ABOX_ASSIGN_OR_RETURN(net::Resolution resolution, resolver.Resolve(host, deadline));
    net::FilteredAddresses filtered = resolver.Filter(resolution);
    if (filtered.usable.empty()) {
      return absl::UnavailableError(absl::StrCat(
          host, " has no address the broker may use (",
          filtered.refused.empty() ? "no answer" : absl::StrJoin(filtered.refused, ", "), ")"));
    }
    addresses = std::move(filtered.usable);
  }
  return net::ConnectToAny(addresses, port, deadline, cancel_fd);
}

}  // namespace

ModelService::ModelService(store::ModelRepo& repo, SecretService& secrets, SecretGrants& grants,
                           EventBus& events, std::shared_ptr<const net::HostResolver> resolver,
                           std::vector<std::string> upstream_ca_files, int requests_per_minute)
    : repo_(&repo),
      secrets_(&secrets),
      grants_(&grants),
      events_(&events),
      resolver_(std::move(resolver)),
      upstream_ca_files_(std::move(upstream_ca_files)),
      requests_per_minute_(requests_per_minute) {}

absl::StatusOr<ModelProviderView> ModelService::Provider(const std::string& api) {
  ABOX_ASSIGN_OR_RETURN(const ApiDefaults* defaults, DefaultsOf(api));
  ModelProviderView view{.api = std::string(defaults->api),
                         .secret = std::string(defaults->secret),
                         .base_url = std::string(defaults->base_url)};
  ABOX_ASSIGN_OR_RETURN(std::optional<store::ModelProviderRow> row, repo_->GetProvider(api));
  if (row) {
    view.secret = row->secret;
    view.base_url = row->base_url;
    view.configured = true;
    view.updated_at = row->updated_at;
  }
  absl::StatusOr<SecretView> secret = secrets_->Get(view.secret);
  if (!secret.ok() && !absl::IsNotFound(secret.status())) {
    return secret.status();
  }
  view.key_stored = secret.ok();
  return view;
}

absl::StatusOr<std::vector<ModelProviderView>> ModelService::Providers() {
  std::vector<ModelProviderView> out;
  for (const ApiDefaults& d : kDefaults) {
    ABOX_ASSIGN_OR_RETURN(ModelProviderView view, Provider(std::string(d.api)));
    out.push_back(std::move(view));
  }
  return out;
}

absl::StatusOr<ModelProviderView> ModelService::SetProvider(const std::string& api,
                                                            const std::string& secret,
                                                            const std::string& base_url) {
  ABOX_ASSIGN_OR_RETURN(net::ModelApi which, ApiOf(api));
  ABOX_ASSIGN_OR_RETURN(ModelProviderView current, Provider(api));
  std::string url = base_url.empty() ? current.base_url : base_url;
  if (absl::StatusOr<net::ModelUpstream> parsed = net::ParseModelBaseUrl(which, url);
      !parsed.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("base_url: ", parsed.status().message()));
  }
  if (absl::Status s = secrets::ValidateSecretName(secret); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("secret: ", s.message()));
  }
  absl::StatusOr<SecretView> view = secrets_->Get(secret);
  if (!view.ok()) {
    if (absl::IsNotFound(view.status())) {
      return absl::NotFoundError(absl::StrCat("there is no secret named ", secret,
                                              ": store the key first (abox agent login ", api,
                                              " reads it from the terminal or --stdin)"));
    }
    return view.status();
  }
  ABOX_RETURN_IF_ERROR(
      repo_->PutProvider({.api = api, .secret = secret, .base_url = url}).status());
  return Provider(api);
}

absl::Status ModelService::RemoveProvider(const std::string& api) {
  ABOX_RETURN_IF_ERROR(DefaultsOf(api).status());
  return repo_->DeleteProvider(api);
}

absl::Status ModelService::CheckUsable(const std::string& api) {
  ABOX_ASSIGN_OR_RETURN(ModelProviderView view, Provider(api));
  if (!view.key_stored) {
    ABOX_ASSIGN_OR_RETURN(const ApiDefaults* defaults, DefaultsOf(api));
    return absl::FailedPreconditionError(
        absl::StrCat("models: no ", defaults->title, " API key is stored on the host (secret ",
                     view.secret, "): run `abox agent login ", api, "` first"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<store::ModelUsageRow>> ModelService::Usage(
    const std::string& sandbox_id) {
  return repo_->Usage(sandbox_id);
}

std::shared_ptr<net::ModelBrokerLimiter> ModelService::LimiterFor(const std::string& sandbox_id) {
  std::lock_guard lock(mu_);
  std::shared_ptr<net::ModelBrokerLimiter>& limiter = limiters_[sandbox_id];
  if (limiter == nullptr) {
    limiter = net::ModelBrokerLimiter::Create(
        {.per_minute = requests_per_minute_, .burst = std::max(1, requests_per_minute_ / 10)});
  }
  return limiter;
}

void ModelService::Forget(const std::string& sandbox_id) {
  std::lock_guard lock(mu_);
  limiters_.erase(sandbox_id);
}

absl::StatusOr<std::shared_ptr<const net::UpstreamTrust>> ModelService::Trust() {
  std::lock_guard lock(mu_);
  if (trust_ == nullptr) {
    ABOX_ASSIGN_OR_RETURN(trust_, net::UpstreamTrust::Create(upstream_ca_files_));
  }
  return trust_;
}

void ModelService::Record(const std::string& sandbox_id, const net::ModelRequestRecord& r) {
  if (r.refused && r.status == 200) {
    return;  // a health probe the broker answered: neither a request nor a refusal
  }
  store::ModelUsageRow delta{.sandbox_id = sandbox_id, .api = std::string(NameOf(r.api))};
  if (r.refused) {
    delta.refused = 1;
  } else {
    delta.requests = 1;
    delta.errors = (r.status >= 400 || r.status == 0) ? 1 : 0;
    delta.input_tokens = r.input_tokens;
    delta.output_tokens = r.output_tokens;
  }
  if (absl::Status s = repo_->AddUsage(delta); !s.ok()) {
    spdlog::warn("{}: model usage not recorded: {}", sandbox_id, std::string(s.message()));
  }
  nlohmann::json payload{{"api", delta.api},
                         {"method", r.method},
                         {"route", r.route},
                         {"status", r.status},
                         {"refused", r.refused},
                         {"input_tokens", r.input_tokens},
                         {"output_tokens", r.output_tokens},
                         {"first_byte_ms", absl::ToInt64Milliseconds(r.first_byte)},
                         {"duration_ms", absl::ToInt64Milliseconds(r.total)}};
  if (!r.error.empty()) {
    payload["error"] = r.error;
  }
  if (r.refused) {
    spdlog::info("{}: model broker refused {} {}: {}", sandbox_id, r.method, r.route, r.error);
  }
  events_->Publish(sandbox_id, "model_request", std::move(payload));
}

void ModelService::Serve(const std::string& sandbox_id, net::TunnelStream& stream, int cancel_fd) {
  absl::StatusOr<store::SandboxGrants> grants = grants_->Of(sandbox_id);
  if (!grants.ok() || grants->models.empty()) {
    stream.Reset(grants.ok() ? "this sandbox was given no model API (abox create --model, or "
                               "abox agent)"
                             : "the sandbox's grants cannot be read");
    return;
  }
  absl::StatusOr<std::shared_ptr<const net::UpstreamTrust>> trust = Trust();
  if (!trust.ok()) {
    spdlog::warn("{}: model broker: {}", sandbox_id, std::string(trust.status().message()));
    stream.Reset("the broker cannot verify providers on this host");
    return;
  }
  std::vector<std::string> apis = grants->models;
  net::ModelBrokerConfig config;
  config.token = grants->model_token;
  config.upstream = [this, apis](net::ModelApi api) -> absl::StatusOr<net::ModelUpstream> {
    std::string name(NameOf(api));
    if (std::find(apis.begin(), apis.end(), name) == apis.end()) {
      return absl::NotFoundError(absl::StrCat("this sandbox was not given the ", name,
                                              " API (abox create --model ", name, ")"));
    }
    ABOX_ASSIGN_OR_RETURN(ModelProviderView view, Provider(name));
    return net::ParseModelBaseUrl(api, view.base_url);
  };
  config.key = [this](net::ModelApi api) -> absl::StatusOr<std::string> {
    std::string name(NameOf(api));
    ABOX_ASSIGN_OR_RETURN(ModelProviderView view, Provider(name));
    absl::StatusOr<secrets::SecretValue> value = secrets_->Resolve(view.secret);
    if (!value.ok()) {
      if (absl::IsNotFound(value.status())) {
        return absl::NotFoundError(absl::StrCat(
            "no ", name, " API key is stored on the host: run `abox agent login ", name, "`"));
      }
      return value.status();
    }
    return std::string(value->Reveal());
  };
  config.connect = [resolver = resolver_](const std::string& host, uint16_t port,
                                          absl::Time deadline, int cancel) {
    return ConnectProvider(*resolver, host, port, deadline, cancel);
  };
  config.trust = *std::move(trust);
  config.limiter = LimiterFor(sandbox_id);
  config.on_request = [this, sandbox_id](const net::ModelRequestRecord& record) {
    Record(sandbox_id, record);
  };
  net::ServeModelBroker(stream, config, cancel_fd);
}

}  // namespace abox::daemon
