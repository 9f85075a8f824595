#include "src/daemon/services/egress_service.h"

#include <algorithm>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "spdlog/spdlog.h"
#include "src/base/status_macros.h"
#include "src/net/address_filter.h"
#include "src/net/host_name.h"

namespace abox::daemon {
namespace {

std::string ScopeName(const EgressScope& scope) {
  return scope.global() ? "the global egress policy"
                        : absl::StrCat("the egress policy of sandbox ", scope.sandbox);
}

std::vector<std::string> RuleTexts(const std::vector<net::Rule>& rules) {
  std::vector<std::string> out;
  out.reserve(rules.size());
  for (const net::Rule& r : rules) {
    out.push_back(r.ToString());
  }
  return out;
}

}  // namespace

absl::StatusOr<net::EgressPolicy> PolicyFromRecord(const store::EgressPolicyRecord& record) {
  net::EgressPolicy policy;
  if (record.mode) {
    absl::StatusOr<net::EgressPolicy::Mode> mode = net::ParseMode(*record.mode);
    if (!mode.ok()) {
      return absl::DataLossError(absl::StrCat("stored egress mode: ", mode.status().message()));
    }
    policy.mode = *mode;
  }
  for (const std::string& text : record.allow) {
    // Stored rules were admitted when added (a loopback one explicitly, with a warning).
    absl::StatusOr<net::Rule> rule = net::ParseRule(text, {.allow_loopback = true});
    if (!rule.ok()) {
      return absl::DataLossError(absl::StrCat("stored egress rule: ", rule.status().message()));
    }
    policy.allow.push_back(*std::move(rule));
  }
  return policy;
}

store::EgressPolicyRecord PolicyToRecord(const net::EgressPolicy& policy) {
  store::EgressPolicyRecord record;
  if (policy.mode) {
    record.mode = std::string(net::ModeName(*policy.mode));
  }
  record.allow = RuleTexts(policy.allow);
  return record;
}

// Stores the records and turns refusals into requests and events. Called on proxy threads.
class EgressService::Sink final : public net::EgressSink {
 public:
  Sink(store::EgressRepo& repo, EventBus& events) : repo_(repo), events_(events) {}

  void OnConnection(const net::ConnectionRecord& r) override {
    store::EgressConnectionRow row;
    row.sandbox_id = r.sandbox;
    row.time = r.started;
    row.kind = std::string(net::ConnectionKindName(r.kind));
    row.name = r.name;
    row.address = r.address;
    row.port = r.port;
    row.verdict = std::string(net::VerdictName(r.verdict));
    row.reason = r.reason;
    row.matched_rule = r.matched_rule;
    row.via_override = r.via_override;
    row.bytes_up = static_cast<int64_t>(r.bytes_up);
    row.bytes_down = static_cast<int64_t>(r.bytes_down);
    row.duration_ms = std::max<int64_t>(0, absl::ToInt64Milliseconds(r.duration));
    if (absl::Status s = repo_.AddConnection(row); !s.ok()) {
      spdlog::warn("{}: egress log: {}", r.sandbox, s.ToString());
    }
    if (!r.leak_secret.empty()) {
      spdlog::warn("{}: exfiltration attempt blocked: {}", r.sandbox, r.leak_message);
      events_.Publish(r.sandbox, kSecretLeakEvent,
                      {{"secret", r.leak_secret},
                       {"name", r.name},
                       {"port", r.port},
                       {"message", r.leak_message}});
    }
  }

  void OnDns(const net::DnsRecord& r) override {
    store::EgressDnsRow row;
    row.sandbox_id = r.sandbox;
    row.time = r.time;
    row.name = r.name;
    row.qtype = r.qtype;
    row.verdict = std::string(net::VerdictName(r.verdict));
    row.rcode = r.rcode;
    row.answers = r.answers;
    row.reason = r.reason;
    row.matched_rule = r.matched_rule;
    row.via_override = r.via_override;
    if (absl::Status s = repo_.AddDns(row); !s.ok()) {
      spdlog::warn("{}: egress DNS log: {}", r.sandbox, s.ToString());
    }
  }

  void OnDenied(absl::string_view sandbox, absl::string_view name, uint16_t port,
                absl::string_view reason) override {
    absl::StatusOr<store::DenialOutcome> outcome = repo_.RecordDenial(sandbox, name, port, reason);
    if (!outcome.ok()) {
      spdlog::warn("{}: egress request for {}: {}", std::string(sandbox), std::string(name),
                   outcome.status().ToString());
      return;
    }
    // Publish only queues: the proxy thread does not wait for listeners or SQLite.
    nlohmann::json denied = {{"name", name},
                             {"port", port},
                             {"reason", reason},
                             {"state", store::EgressRequestStateName(outcome->request.state)}};
    if (outcome->dropped) {
      denied["queue_full"] = true;  // still denied; counted, not queued
    }
    events_.Publish(sandbox, kEgressDeniedEvent, denied);
    if (outcome->newly_pending) {
      events_.Publish(sandbox, kEgressPendingEvent,
                      {{"name", name}, {"port", port}, {"count", outcome->request.count}});
    }
  }

 private:
  store::EgressRepo& repo_;
  EventBus& events_;
};

absl::StatusOr<std::unique_ptr<EgressService>> EgressService::Create(store::EgressRepo& repo,
                                                                     EventBus& events,
                                                                     EgressServiceOptions options) {
  if (!options.resolver_override.empty()) {
    spdlog::warn(
        "egress: the TEST-ONLY resolver override is active for {} name(s): their "
        "answers skip the address filter",
        options.resolver_override.size());
  }
  ABOX_ASSIGN_OR_RETURN(std::unique_ptr<net::HostResolver> resolver,
                        net::HostResolver::Create({options.resolver_override, options.lookup}));
  std::unique_ptr<EgressService> service(
      new EgressService(repo, events, std::move(options), std::move(resolver)));
  ABOX_ASSIGN_OR_RETURN(service->global_, service->Load(EgressScope{}));
  return service;
}

EgressService::EgressService(store::EgressRepo& repo, EventBus& events,
                             EgressServiceOptions options,
                             std::shared_ptr<const net::HostResolver> resolver)
    : repo_(repo),
      events_(events),
      options_(std::move(options)),
      resolver_(std::move(resolver)),
      sink_(std::make_shared<Sink>(repo, events)) {}

EgressService::~EgressService() {
  std::map<std::string, Running> running;
  {
    std::lock_guard lock(mu_);
    running.swap(running_);
  }
  for (auto& [id, r] : running) {
    r.proxy->Shutdown();
  }
}

absl::StatusOr<net::EgressPolicy> EgressService::Load(const EgressScope& scope) {
  absl::StatusOr<store::EgressPolicyRecord> record =
      scope.global() ? repo_.GetGlobalPolicy() : repo_.GetSandboxPolicy(scope.sandbox);
  if (!record.ok()) {
    return record.status();
  }
  return PolicyFromRecord(*record);
}

void EgressService::MergeLocked(Running& running) {
  net::EgressPolicy merged = net::MergePolicies(global_, running.own);
  if (!running.setup.empty()) {
    if (merged.mode == net::EgressPolicy::Mode::kNone) {
      merged = net::EgressPolicy{net::EgressPolicy::Mode::kAllowlist, running.setup};
    } else {
      merged = net::MergePolicies(merged, net::EgressPolicy{std::nullopt, running.setup});
    }
  }
  running.merged = std::move(merged);
}

net::EgressPolicySource EgressService::SourceFor(const std::string& sandbox_id) {
  net::EgressPolicySource source;
  source.current = [this, sandbox_id] {
    std::lock_guard lock(mu_);
    auto it = running_.find(sandbox_id);
    // A proxy outlives its entry only while it shuts down: nothing is allowed then.
    return it == running_.end() ? net::EgressPolicy{net::EgressPolicy::Mode::kNone, {}}
                                : it->second.merged;
  };
  source.take_once = [this, sandbox_id](const std::string& name, uint16_t port) {
    absl::StatusOr<bool> taken = repo_.TakeOnce(sandbox_id, name, port);
    return taken.ok() && *taken;
  };
  source.has_once = [this, sandbox_id](const std::string& name) {
    absl::StatusOr<bool> has = repo_.HasOnce(sandbox_id, name);
    return has.ok() && *has;
  };
  return source;
}

absl::StatusOr<std::unique_ptr<net::EgressProxy>> EgressService::MakeProxy(
    const std::string& sandbox_id) {
  net::EgressProxy::Options proxy_options;
  proxy_options.sandbox_id = sandbox_id;
  proxy_options.policy = SourceFor(sandbox_id);
  proxy_options.resolver = resolver_;
  proxy_options.sink = sink_;
  proxy_options.limits = options_.limits;
  if (intercept_provider_) {
    absl::StatusOr<std::shared_ptr<const net::InterceptSource>> intercept =
        intercept_provider_(sandbox_id);
    if (!intercept.ok()) {
      return absl::Status(
          intercept.status().code(),
          absl::StrCat("the sandbox's secrets cannot be served: ", intercept.status().message()));
    }
    proxy_options.intercept = *std::move(intercept);
  }
  if (model_broker_) {
    proxy_options.model_broker = [broker = model_broker_, sandbox_id](net::TunnelStream& stream,
                                                                      int cancel_fd) {
      broker(sandbox_id, stream, cancel_fd);
    };
  }
  return net::EgressProxy::Create(std::move(proxy_options));
}

absl::Status EgressService::Start(const std::string& sandbox_id) {
  ABOX_ASSIGN_OR_RETURN(net::EgressPolicy own, Load(EgressScope{sandbox_id}));
  Stop(sandbox_id);  // a re-attach after a failed boot must not keep the old proxy
  ABOX_ASSIGN_OR_RETURN(std::unique_ptr<net::EgressProxy> proxy, MakeProxy(sandbox_id));
  std::lock_guard lock(mu_);
  Running& running = running_[sandbox_id];
  running.own = std::move(own);
  running.setup.clear();
  running.proxy = std::move(proxy);
  MergeLocked(running);
  return absl::OkStatus();
}

std::function<void(std::unique_ptr<net::TunnelStream>)> EgressService::TunnelHandler(
    const std::string& sandbox_id) {
  return [this, sandbox_id](std::unique_ptr<net::TunnelStream> tunnel) {
    Handle(sandbox_id, std::move(tunnel));
  };
}

void EgressService::Handle(const std::string& sandbox_id,
                           std::unique_ptr<net::TunnelStream> tunnel) {
  std::shared_ptr<net::EgressProxy> proxy;
  {
    std::lock_guard lock(mu_);
    auto it = running_.find(sandbox_id);
    // Mode none leaves the guest no way out, but the model broker is not a way out: it is the
    // host's own client of the provider the person set up (decision 0019), so its tunnels
    // still reach the proxy, which hands them to the broker.
    bool broker = tunnel->info().kind == net::TunnelInfo::Kind::kModelBroker;
    if (it != running_.end() &&
        (broker || it->second.merged.mode != net::EgressPolicy::Mode::kNone)) {
      proxy = it->second.proxy;
    }
  }
  if (proxy == nullptr) {
    // Mode none: no tunnel at all (not even a thread for it); nothing to log.
    tunnel->Reset("egress is off for this sandbox (mode none)");
    return;
  }
  proxy->Handle(std::move(tunnel));
}

void EgressService::Stop(const std::string& sandbox_id) {
  std::shared_ptr<net::EgressProxy> proxy;
  {
    std::lock_guard lock(mu_);
    auto it = running_.find(sandbox_id);
    if (it == running_.end()) {
      return;
    }
    proxy = std::move(it->second.proxy);
    running_.erase(it);
  }
  proxy->Shutdown();
}

void EgressService::Widen(const std::string& sandbox_id, std::vector<net::Rule> rules) {
  std::lock_guard lock(mu_);
  auto it = running_.find(sandbox_id);
  if (it != running_.end()) {
    it->second.setup = std::move(rules);
    MergeLocked(it->second);
  }
}

absl::Status EgressService::Narrow(const std::string& sandbox_id) {
  absl::StatusOr<std::unique_ptr<net::EgressProxy>> fresh = MakeProxy(sandbox_id);
  std::shared_ptr<net::EgressProxy> old;
  {
    std::lock_guard lock(mu_);
    auto it = running_.find(sandbox_id);
    if (it == running_.end()) {
      return absl::OkStatus();  // stopped meanwhile: no tunnel left
    }
    it->second.setup.clear();
    MergeLocked(it->second);
    old = std::move(it->second.proxy);
    if (fresh.ok()) {
      it->second.proxy = *std::move(fresh);
    } else {
      running_.erase(it);  // fail closed: no proxy, every later tunnel is reset
    }
  }
  // A connection the setup policy let through (a package mirror, a tunnel a background process
  // keeps open) must not outlive it: Shutdown resets every tunnel and closes its upstream.
  if (old != nullptr) {
    old->Shutdown();
  }
  if (!fresh.ok()) {
    return absl::Status(fresh.status().code(),
                        absl::StrCat("the setup phase's connections were reset, but egress could "
                                     "not restart for the sandbox: ",
                                     fresh.status().message()));
  }
  return absl::OkStatus();
}

absl::StatusOr<net::EgressPolicy> EgressService::Policy(const EgressScope& scope) {
  return Load(scope);
}

std::vector<std::string> LoopbackWarnings(const std::vector<net::Rule>& rules) {
  std::vector<std::string> out;
  for (const net::Rule& rule : rules) {
    if (net::IsLoopbackRule(rule)) {
      out.push_back(absl::StrCat("rule ", rule.ToString(),
                                 " lets the sandbox reach the HOST's loopback (its local "
                                 "services), not the sandbox's own"));
    }
  }
  return out;
}

absl::Status EgressService::SetPolicy(const EgressScope& scope, const net::EgressPolicy& policy) {
  if (scope.global() && !policy.mode) {
    return absl::InvalidArgumentError(
        "the global egress policy needs a mode: none, allowlist or open");
  }
  for (const std::string& warning : LoopbackWarnings(policy.allow)) {
    spdlog::warn("egress: {}: {}", ScopeName(scope), warning);
  }
  std::lock_guard write(write_mu_);
  store::EgressPolicyRecord record = PolicyToRecord(policy);
  ABOX_RETURN_IF_ERROR(scope.global() ? repo_.PutGlobalPolicy(record)
                                      : repo_.PutSandboxPolicy(scope.sandbox, record));
  std::lock_guard lock(mu_);
  if (scope.global()) {
    global_ = policy;
    for (auto& [id, running] : running_) {
      MergeLocked(running);
    }
  } else if (auto it = running_.find(scope.sandbox); it != running_.end()) {
    it->second.own = policy;
    MergeLocked(it->second);
  }
  return absl::OkStatus();
}

absl::StatusOr<net::EgressPolicy> EgressService::ChangeRules(const EgressScope& scope,
                                                             const std::vector<net::Rule>& add,
                                                             const std::vector<net::Rule>& remove) {
  net::EgressPolicy policy;
  {
    std::lock_guard write(write_mu_);
    ABOX_ASSIGN_OR_RETURN(policy, Load(scope));
    for (const net::Rule& rule : remove) {
      auto it = std::find(policy.allow.begin(), policy.allow.end(), rule);
      if (it == policy.allow.end()) {
        std::vector<std::string> have = RuleTexts(policy.allow);
        return absl::NotFoundError(
            absl::StrCat("rule \"", rule.ToString(), "\" is not in ", ScopeName(scope),
                         " (it has: ", have.empty() ? "no rules" : absl::StrJoin(have, ", "), ")"));
      }
      policy.allow.erase(it);
    }
    for (const net::Rule& rule : add) {
      if (std::find(policy.allow.begin(), policy.allow.end(), rule) == policy.allow.end()) {
        policy.allow.push_back(rule);
      }
    }
  }
  // SetPolicy takes write_mu_ again; two ChangeRules racing on one scope is the API's
  // last-writer-wins, the same as two PUTs.
  ABOX_RETURN_IF_ERROR(SetPolicy(scope, policy));
  return policy;
}

absl::StatusOr<net::EgressPolicy> EgressService::Effective(const std::string& sandbox_id) {
  {
    std::lock_guard lock(mu_);
    if (auto it = running_.find(sandbox_id); it != running_.end()) {
      return it->second.merged;
    }
  }
  ABOX_ASSIGN_OR_RETURN(net::EgressPolicy global, Load(EgressScope{}));
  ABOX_ASSIGN_OR_RETURN(net::EgressPolicy own, Load(EgressScope{sandbox_id}));
  return net::MergePolicies(global, own);
}

absl::StatusOr<store::RetentionCounters> EgressService::Dropped(const std::string& sandbox_id) {
  return repo_.Counters(sandbox_id);
}

absl::StatusOr<std::vector<std::pair<std::string, int64_t>>> EgressService::QueueDropped() {
  return repo_.QueueDropped();
}

absl::StatusOr<std::vector<store::EgressConnectionRow>> EgressService::Connections(
    const std::string& sandbox_id, int limit) {
  return repo_.ListConnections(sandbox_id, limit);
}

absl::StatusOr<std::vector<store::EgressDnsRow>> EgressService::Lookups(
    const std::string& sandbox_id, int limit) {
  return repo_.ListDns(sandbox_id, limit);
}

size_t EgressService::running() const {
  std::lock_guard lock(mu_);
  return running_.size();
}

}  // namespace abox::daemon
