// A sandbox's egress proxy: the host end of every tunnel the guest opens (TCP connections
// caught by the guest's redirect, connections to its HTTP proxy port, and DNS streams).
//
// Owns one thread per live tunnel (two while a connection is spliced), at most
// limits.max_connections at once: beyond that a tunnel is reset at once and logged, so a guest
// cannot make the host start unbounded threads. The flow of one connection is described in
// egress_connection.h, DNS in dns_resolver.h. The policy is asked again for every connection
// and query, so a change applies to a running sandbox without a restart.
//
// Trust boundary: everything read from a tunnel is hostile guest input; the upstream servers
// are untrusted too. Thread-safe: Handle may be called from any thread.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "src/base/unique_fd.h"
#include "src/net/dns_resolver.h"
#include "src/net/egress_connection.h"
#include "src/net/egress_log.h"
#include "src/net/egress_options.h"
#include "src/net/host_resolver.h"
#include "src/net/tunnel.h"

namespace abox::net {

class EgressProxy final {
 public:
  struct Options {
    std::string sandbox_id;
    EgressPolicySource policy;                     // `current` required
    std::shared_ptr<const HostResolver> resolver;  // shared by every sandbox
    std::shared_ptr<EgressSink> sink;              // required
    EgressLimits limits;
    // The sandbox's secrets and pushes (egress_intercept.h); null: none.
    std::shared_ptr<const InterceptSource> intercept;
    // Serves a connection to the guest's model broker port (kModelBroker tunnels) to its end;
    // `cancel_fd` becomes readable at Shutdown. Null: such tunnels are reset and logged. Counted
    // in limits.max_connections like every tunnel.
    std::function<void(TunnelStream& stream, int cancel_fd)> model_broker;
  };

  static absl::StatusOr<std::unique_ptr<EgressProxy>> Create(Options options);

  EgressProxy(const EgressProxy&) = delete;
  EgressProxy& operator=(const EgressProxy&) = delete;
  // Shutdown().
  ~EgressProxy();

  // Takes a new tunnel and returns at once: the tunnel runs on its own thread. Over the
  // connection limit, or after Shutdown, the tunnel is reset and logged instead.
  void Handle(std::unique_ptr<TunnelStream> stream);

  // Resets every live tunnel, aborts their upstream connections and joins their threads.
  // Waits at most for lookups in flight (resolve_timeout). Idempotent. Not from a sink
  // callback (it waits for the thread making the call).
  void Shutdown();

  // Tunnels being served now.
  size_t active() const;

 private:
  struct Worker {
    std::thread thread;
    TunnelStream* stream = nullptr;  // owned by the thread; valid while registered
  };

  EgressProxy(Options options, base::UniqueFd shutdown_event, std::unique_ptr<DnsResolver> dns);
  void Serve(uint64_t id, std::unique_ptr<TunnelStream> stream);
  // Joins threads that have finished (called with mu_ held).
  void ReapLocked(std::vector<std::thread>& to_join);
  void Refuse(TunnelStream& stream, std::string reason);

  const Options options_;
  // An eventfd written once by Shutdown: every poll in the proxy's threads watches it.
  const base::UniqueFd shutdown_event_;
  const std::unique_ptr<DnsResolver> dns_;
  ConnectionContext context_;

  mutable std::mutex mu_;
  std::condition_variable idle_cv_;
  bool shut_down_ = false;
  uint64_t next_id_ = 1;
  std::map<uint64_t, Worker> workers_;  // live and finished-but-not-joined
  std::vector<uint64_t> finished_;
  size_t active_ = 0;
};

}  // namespace abox::net
