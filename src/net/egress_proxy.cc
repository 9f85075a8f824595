#include "src/net/egress_proxy.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "src/base/status_macros.h"

namespace abox::net {

absl::StatusOr<std::unique_ptr<EgressProxy>> EgressProxy::Create(Options options) {
  if (options.sandbox_id.empty() || !options.policy.current || !options.resolver || !options.sink) {
    return absl::InvalidArgumentError(
        "EgressProxy needs a sandbox id, a policy source, a host resolver and a sink");
  }
  if (options.limits.max_connections == 0) {
    return absl::InvalidArgumentError("EgressProxy: max_connections must be at least 1");
  }
  base::UniqueFd event(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!event) {
    return base::ErrnoError("eventfd");
  }
  ABOX_ASSIGN_OR_RETURN(std::unique_ptr<DnsResolver> dns,
                        DnsResolver::Create({options.sandbox_id, options.policy, options.resolver,
                                             options.sink, options.limits}));
  return std::unique_ptr<EgressProxy>(
      new EgressProxy(std::move(options), std::move(event), std::move(dns)));
}

EgressProxy::EgressProxy(Options options, base::UniqueFd shutdown_event,
                         std::unique_ptr<DnsResolver> dns)
    : options_(std::move(options)),
      shutdown_event_(std::move(shutdown_event)),
      dns_(std::move(dns)) {
  context_.sandbox_id = options_.sandbox_id;
  context_.policy = &options_.policy;
  context_.resolver = options_.resolver.get();
  context_.sink = options_.sink.get();
  context_.limits = options_.limits;
  context_.cancel_fd = shutdown_event_.get();
  context_.intercept = options_.intercept.get();
}

EgressProxy::~EgressProxy() { Shutdown(); }

void EgressProxy::Handle(std::unique_ptr<TunnelStream> stream) {
  std::vector<std::thread> to_join;
  std::string refusal;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ReapLocked(to_join);
    if (shut_down_) {
      refusal = "egress proxy shut down (sandbox stopping)";
    } else if (active_ >= options_.limits.max_connections) {
      refusal = absl::StrCat("too many connections (limit ", options_.limits.max_connections,
                             " per sandbox)");
    } else {
      uint64_t id = next_id_++;
      ++active_;
      Worker& worker = workers_[id];
      worker.stream = stream.get();
      worker.thread = std::thread(&EgressProxy::Serve, this, id, std::move(stream));
    }
  }
  for (std::thread& t : to_join) {
    t.join();
  }
  if (!refusal.empty()) {
    // Only the accepted branch above moved `stream`; a refusal keeps it.
    Refuse(*stream, std::move(refusal));  // NOLINT(bugprone-use-after-move)
  }
}

void EgressProxy::Serve(uint64_t id, std::unique_ptr<TunnelStream> stream) {
  if (stream->info().kind == TunnelInfo::Kind::kDns) {
    dns_->Serve(*stream);
  } else if (stream->info().kind == TunnelInfo::Kind::kModelBroker) {
    if (options_.model_broker) {
      options_.model_broker(*stream, shutdown_event_.get());
    } else {
      Refuse(*stream, "no model broker for this sandbox (start the agent with `abox agent`)");
    }
  } else {
    RunConnection(context_, *stream);
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    // From here Shutdown no longer touches the stream, so it can be destroyed below.
    workers_[id].stream = nullptr;
    finished_.push_back(id);
    --active_;
    idle_cv_.notify_all();
  }
  stream.reset();
}

void EgressProxy::ReapLocked(std::vector<std::thread>& to_join) {
  for (uint64_t id : finished_) {
    auto it = workers_.find(id);
    if (it != workers_.end()) {
      to_join.push_back(std::move(it->second.thread));
      workers_.erase(it);
    }
  }
  finished_.clear();
}

void EgressProxy::Refuse(TunnelStream& stream, std::string reason) {
  stream.Reset(reason);
  ConnectionRecord record;
  record.sandbox = options_.sandbox_id;
  record.kind = ConnectionKind::kUnknown;
  record.port = stream.info().original_port;
  if (stream.info().original_ip) {
    record.address = stream.info().original_ip->ToString();
  }
  record.verdict = Verdict::kError;
  record.reason = std::move(reason);
  record.started = absl::Now();
  record.duration = absl::ZeroDuration();
  options_.sink->OnConnection(record);
}

void EgressProxy::Shutdown() {
  std::vector<std::thread> to_join;
  {
    std::unique_lock<std::mutex> lock(mu_);
    if (!shut_down_) {
      shut_down_ = true;
      uint64_t one = 1;
      // Level-triggered from now on: every current and later poll on it wakes at once.
      if (::write(shutdown_event_.get(), &one, sizeof(one)) != sizeof(one)) {
        // Cannot fail for a fresh eventfd counter; the resets below still end every tunnel.
      }
    }
    for (auto& [id, worker] : workers_) {
      if (worker.stream != nullptr) {
        worker.stream->Reset("sandbox egress shutting down");
      }
    }
    idle_cv_.wait(lock, [this] { return active_ == 0; });
    for (auto& [id, worker] : workers_) {
      to_join.push_back(std::move(worker.thread));
    }
    workers_.clear();
    finished_.clear();
  }
  for (std::thread& t : to_join) {
    if (t.joinable()) {
      t.join();
    }
  }
}

size_t EgressProxy::active() const {
  std::lock_guard<std::mutex> lock(mu_);
  return active_;
}

}  // namespace abox::net
