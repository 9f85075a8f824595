// aboxd's egress: the policies (global and per sandbox) with the cache every connection reads,
// one net::EgressProxy per running sandbox behind its agent's tunnels, the connection and DNS
// logs, and the "ask to allow" requests (the review queue) with their approvals.
//
// Policy changes write the store, then the cache: a running sandbox's proxy asks the cache at
// every connection and DNS query, so a change applies at its next connection, no restart.
// One HostResolver serves every sandbox; its override (aboxd --test-resolver-override) is for
// tests only and is the one way a private address gets through (see net/host_resolver.h).
//
// Thread-safe. The tunnel handler runs on agent I/O threads and never blocks: it only hands the
// tunnel to the proxy (which starts a thread). The sink runs on proxy threads: SQLite writes
// and EventBus::Publish (which only queues).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "src/daemon/services/event_bus.h"
#include "src/net/egress_options.h"
#include "src/net/egress_proxy.h"
#include "src/net/host_resolver.h"
#include "src/net/policy.h"
#include "src/net/tunnel.h"
#include "src/store/egress_repo.h"

namespace abox::daemon {

// Event types on the bus.
inline constexpr char kEgressDeniedEvent[] = "egress_denied";    // {name, port, reason, state}
inline constexpr char kEgressPendingEvent[] = "egress_pending";  // {name, port}: entered queue
// A placeholder was sent where its secret is not bound: {secret, name, port, message}.
inline constexpr char kSecretLeakEvent[] = "secret_leak_blocked";

struct EgressServiceOptions {
  // Test-only answers that skip the address filter (aboxd --test-resolver-override).
  net::ResolverOverride resolver_override;
  // Tests: the lookup for names not in the override (empty: getaddrinfo).
  net::HostResolver::Lookup lookup;
  net::EgressLimits limits;
};

// Which policy a call is about: the global one (sandbox empty) or a sandbox's own.
struct EgressScope {
  std::string sandbox;  // a sandbox id; empty: global
  [[nodiscard]] bool global() const { return sandbox.empty(); }
};

// What an approval did.
struct ApprovalResult {
  store::EgressRequest request;
  std::string rule;  // the rule added (always); empty for once
  // Set when the guest asked for another port than the one approved (a name approved without
  // a port gets the default port, 443, never the guest's).
  std::string note;
};

// What an agent's ask did.
struct AskResult {
  // The request as it stands: pending (waiting for a person), approved / approved_once, or a
  // decision made before (denied, ignored) which the ask does not reopen.
  store::EgressRequest request;
  bool allowed = false;     // the sandbox's effective policy already allows it: nothing queued
  bool queue_full = false;  // the sandbox's queue is full: nothing queued
};

// "rule 127.0.0.1:5432 lets the sandbox reach the HOST's loopback ..." for each loopback
// address rule in `rules` (admitted only with allow_loopback); also logged when set.
[[nodiscard]] std::vector<std::string> LoopbackWarnings(const std::vector<net::Rule>& rules);

class EgressService final {
 public:
  static absl::StatusOr<std::unique_ptr<EgressService>> Create(store::EgressRepo& repo,
                                                               EventBus& events,
                                                               EgressServiceOptions options);
  EgressService(const EgressService&) = delete;
  EgressService& operator=(const EgressService&) = delete;
  // Shuts every proxy down.
  ~EgressService();

  // --- Sandbox lifecycle (SandboxService) ---
  // Loads the sandbox's policy and creates its proxy: call before its agent connects.
  [[nodiscard]] absl::Status Start(const std::string& sandbox_id);
  // What the sandbox's runtime config gets as on_tunnel: mode none resets the tunnel, else the
  // proxy takes it. Never blocks.
  [[nodiscard]] std::function<void(std::unique_ptr<net::TunnelStream>)> TunnelHandler(
      const std::string& sandbox_id);
  // Hands one tunnel to the sandbox's proxy (what TunnelHandler's function does).
  void Handle(const std::string& sandbox_id, std::unique_ptr<net::TunnelStream> tunnel);
  // Shuts the sandbox's proxy down (resets its tunnels, joins their threads). Idempotent.
  void Stop(const std::string& sandbox_id);
  // The setup phase: `rules` are allowed too until Narrow (a sandbox in mode none gets an
  // allowlist of just these meanwhile). Not stored: a daemon restart mid-setup fails the create.
  void Widen(const std::string& sandbox_id, std::vector<net::Rule> rules);
  // Ends the setup phase: takes the setup rules away, then resets every tunnel open now (their
  // upstream connections are closed), since each was decided under the wider policy; later
  // tunnels go to a fresh proxy under the narrowed one. An error (the fresh proxy could not be
  // made) leaves the sandbox without egress: the caller fails the create.
  [[nodiscard]] absl::Status Narrow(const std::string& sandbox_id);

  // --- Policies ---
  // A scope's own policy (a sandbox's mode is unset when it inherits the global one).
  [[nodiscard]] absl::StatusOr<net::EgressPolicy> Policy(const EgressScope& scope);
  // Replaces a scope's policy; the global one needs a mode.
  [[nodiscard]] absl::Status SetPolicy(const EgressScope& scope, const net::EgressPolicy& policy);
  // Adds and removes rules of a scope in one step (adding a rule already there does nothing;
  // removing one that is not there is kNotFound naming it). Returns the new policy.
  [[nodiscard]] absl::StatusOr<net::EgressPolicy> ChangeRules(const EgressScope& scope,
                                                              const std::vector<net::Rule>& add,
                                                              const std::vector<net::Rule>& remove);
  // What a sandbox's connections are decided by now: global + own (+ setup rules).
  [[nodiscard]] absl::StatusOr<net::EgressPolicy> Effective(const std::string& sandbox_id);

  // --- Requests ---
  // `name` as the guest was refused it: "host", "host:port", "192.0.2.10:5432", "[::1]:22".
  // once: one connection (names only); always: adds the rule for the name and port. Without a
  // port a name is approved on 443 and an address is refused: the port the guest asked for is
  // never filled in. Loopback addresses and single-label names cannot be approved.
  [[nodiscard]] absl::StatusOr<ApprovalResult> Approve(const std::string& sandbox_id,
                                                       absl::string_view name, bool once);
  // An agent (e.g. through abox-mcp) asks for `name` (as Approve takes it; a name without a
  // port means 443) with `reason`: it enters the review queue as a refusal would put it there,
  // the reason kept for the person, and an egress_pending event is published. A name the
  // sandbox may reach already is not queued; a denial or an ignore stands.
  [[nodiscard]] absl::StatusOr<AskResult> Ask(const std::string& sandbox_id, absl::string_view name,
                                              absl::string_view reason);
  [[nodiscard]] absl::StatusOr<store::EgressRequest> Deny(const std::string& sandbox_id,
                                                          absl::string_view name);
  // Leaves `name` denied everywhere and takes it out of the queue. Returns requests changed.
  [[nodiscard]] absl::StatusOr<int64_t> Ignore(absl::string_view name);
  [[nodiscard]] absl::StatusOr<std::vector<store::EgressRequest>> Requests(
      const store::EgressRequestFilter& filter);

  // --- Logs ---
  [[nodiscard]] absl::StatusOr<std::vector<store::EgressConnectionRow>> Connections(
      const std::string& sandbox_id, int limit);
  [[nodiscard]] absl::StatusOr<std::vector<store::EgressDnsRow>> Lookups(
      const std::string& sandbox_id, int limit);

  // What the sandbox lost to its caps (names not queued, log rows and events pruned).
  [[nodiscard]] absl::StatusOr<store::RetentionCounters> Dropped(const std::string& sandbox_id);
  // Sandboxes with names not queued (their queue was full), and how many.
  [[nodiscard]] absl::StatusOr<std::vector<std::pair<std::string, int64_t>>> QueueDropped();
  // The pending names a sandbox's queue holds at most.
  [[nodiscard]] int64_t queue_cap() const { return repo_.options().pending_per_sandbox; }

  // The host resolver every proxy shares (the model broker resolves providers with it).
  [[nodiscard]] std::shared_ptr<const net::HostResolver> resolver() const { return resolver_; }

  // Proxies running now (tests).
  [[nodiscard]] size_t running() const;

  // What a sandbox's proxy intercepts for its secrets (SecretGrants::InterceptFor); unset or
  // null: nothing (every connection is spliced).
  using InterceptProvider =
      std::function<absl::StatusOr<std::shared_ptr<const net::InterceptSource>>(
          const std::string& sandbox_id)>;
  void set_intercept_provider(InterceptProvider provider) {
    intercept_provider_ = std::move(provider);
  }
  // Serves a sandbox's model-broker connections (ModelService::Serve); unset: they are reset.
  using ModelBroker =
      std::function<void(const std::string& sandbox_id, net::TunnelStream& stream, int cancel_fd)>;
  void set_model_broker(ModelBroker broker) { model_broker_ = std::move(broker); }

 private:
  class Sink;
  struct Running {
    net::EgressPolicy own;
    std::vector<net::Rule> setup;
    net::EgressPolicy merged;  // what current() returns
    std::shared_ptr<net::EgressProxy> proxy;
  };

  EgressService(store::EgressRepo& repo, EventBus& events, EgressServiceOptions options,
                std::shared_ptr<const net::HostResolver> resolver);
  [[nodiscard]] absl::StatusOr<net::EgressPolicy> Load(const EgressScope& scope);
  // Recomputes `running.merged` from global_ (mu_ held).
  void MergeLocked(Running& running);
  net::EgressPolicySource SourceFor(const std::string& sandbox_id);
  [[nodiscard]] absl::StatusOr<std::unique_ptr<net::EgressProxy>> MakeProxy(
      const std::string& sandbox_id);

  store::EgressRepo& repo_;
  EventBus& events_;
  const EgressServiceOptions options_;
  const std::shared_ptr<const net::HostResolver> resolver_;
  std::shared_ptr<Sink> sink_;
  InterceptProvider intercept_provider_;  // set once, before any sandbox starts
  ModelBroker model_broker_;              // likewise

  std::mutex write_mu_;    // serialises policy read-modify-writes (store, then cache)
  mutable std::mutex mu_;  // the cache below
  net::EgressPolicy global_;
  std::map<std::string, Running> running_;
};

// Store <-> policy. A stored rule that no longer parses is kDataLoss naming it.
[[nodiscard]] absl::StatusOr<net::EgressPolicy> PolicyFromRecord(
    const store::EgressPolicyRecord& record);
[[nodiscard]] store::EgressPolicyRecord PolicyToRecord(const net::EgressPolicy& policy);

}  // namespace abox::daemon
