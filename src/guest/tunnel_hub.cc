#include "src/guest/tunnel_hub.h"

#include <sys/socket.h>

#include <cerrno>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "src/guest/dns_stub.h"
#include "src/guest/log.h"

namespace abox::guest {
namespace {

using proto::FrameType;

// Datagrams read from the DNS socket per wake-up, so a query flood cannot starve the rest.
constexpr int kDnsReadsPerWake = 16;

}  // namespace

TunnelHub::TunnelHub(Options options) : options_(std::move(options)) {}

TunnelHub::~TunnelHub() { Stop(); }

void TunnelHub::Start(uint32_t send_window, uint32_t max_payload) {
  Stop();
  active_ = true;
  send_window_ = send_window;
  max_payload_ = max_payload;
}

void TunnelHub::Stop() {
  for (auto& [id, tunnel] : tunnels_) {
    tunnel->Abort();
  }
  tunnels_.clear();
  active_ = false;
  next_id_ = 2;
}

std::optional<uint32_t> TunnelHub::TakeId() {
  if (next_id_ == 0) {
    return std::nullopt;  // wrapped: 2^31 tunnels in one session
  }
  uint32_t id = next_id_;
  next_id_ += 2;
  return id;
}

size_t TunnelHub::dns_in_flight() const {
  size_t n = 0;
  for (const auto& [id, tunnel] : tunnels_) {
    n += dynamic_cast<const DnsQueryTunnel*>(tunnel.get()) != nullptr ? 1 : 0;
  }
  return n;
}

void TunnelHub::AppendPollFds(bool may_send, std::vector<pollfd>* fds) {
  polled_.clear();
  bool room = tunnels_.size() < options_.max_tunnels;
  // Without a session the listeners are still served: connections are refused at once.
  bool accept = room || !active_;
  const EgressSockets& s = options_.sockets;
  const std::pair<const base::UniqueFd*, proto::TunnelKind> listeners[] = {
      {&s.transparent, proto::TunnelKind::kTcp},
      {&s.http_proxy, proto::TunnelKind::kProxy},
      {&s.dns_tcp, proto::TunnelKind::kDns},
      {&s.model_broker, proto::TunnelKind::kModel},
  };
  for (const auto& [fd, kind] : listeners) {
    if (*fd && accept) {
      fds->push_back({fd->get(), POLLIN, 0});
      polled_.push_back({PollEntry::kListener, fd->get(), kind});
    }
  }
  if (s.dns_udp) {
    fds->push_back({s.dns_udp.get(), POLLIN, 0});
    polled_.push_back({PollEntry::kDnsUdp, s.dns_udp.get()});
  }
  for (const auto& [id, tunnel] : tunnels_) {
    pollfd p = tunnel->PollFor(may_send);
    if (p.fd >= 0) {
      fds->push_back(p);
      polled_.push_back({PollEntry::kTunnel, p.fd, proto::TunnelKind::kTcp, id});
    }
  }
}

void TunnelHub::OnPolled(const pollfd* fds, size_t count, char* scratch, FrameSink& sink,
                         const std::function<bool()>& may_send) {
  for (size_t i = 0; i < count && i < polled_.size(); ++i) {
    if (fds[i].revents == 0) {
      continue;
    }
    const PollEntry& entry = polled_[i];
    switch (entry.kind) {
      case PollEntry::kListener:
        Accept(entry, sink);
        break;
      case PollEntry::kDnsUdp:
        ReceiveDns(scratch, sink);
        break;
      case PollEntry::kTunnel: {
        auto it = tunnels_.find(entry.id);
        short revents = fds[i].revents;
        if (!may_send()) {
          revents = static_cast<short>(revents & ~POLLIN);  // the data waits in the socket
        }
        if (it != tunnels_.end() && revents != 0) {
          it->second->OnPollReady(revents, scratch, sink);
        }
        break;
      }
    }
  }
  polled_.clear();
  Reap();
}

void TunnelHub::Accept(const PollEntry& listener, FrameSink& sink) {
  base::UniqueFd conn(::accept4(listener.fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
  if (!conn) {
    if (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED) {
      Log(absl::StrCat("egress: accept: ", ErrnoText(errno)));
    }
    return;
  }
  if (!active_ || tunnels_.size() >= options_.max_tunnels) {
    CloseWithReset(conn);  // No host to carry it: fail now rather than hang.
    return;
  }
  proto::TunnelRequest request{.kind = listener.tunnel_kind};
  if (listener.tunnel_kind == proto::TunnelKind::kTcp) {
    absl::StatusOr<proto::TunnelRequest> original = options_.original_destination(conn.get());
    // A connection made to the port itself, not redirected, has nowhere to go.
    if (!original.ok() || absl::StartsWith(original->dst, "127.")) {
      CloseWithReset(conn);
      return;
    }
    request = *std::move(original);
  }
  std::optional<uint32_t> id = TakeId();
  if (!id) {
    CloseWithReset(conn);
    return;
  }
  tunnels_.emplace(*id, std::make_unique<SpliceTunnel>(*id, std::move(conn), request, send_window_,
                                                       max_payload_, sink));
}

void TunnelHub::ReceiveDns(char* scratch, FrameSink& sink) {
  int udp = options_.sockets.dns_udp.get();
  for (int i = 0; i < kDnsReadsPerWake; ++i) {
    sockaddr_storage client{};
    socklen_t client_len = sizeof(client);
    ssize_t n;
    do {
      n = ::recvfrom(udp, scratch, proto::kMaxPayload, MSG_DONTWAIT,
                     reinterpret_cast<sockaddr*>(&client), &client_len);
    } while (n < 0 && errno == EINTR);
    if (n < 0) {
      return;  // EAGAIN, or an ICMP error for an earlier reply
    }
    absl::string_view query(scratch, static_cast<size_t>(n));
    if (query.size() > kMaxDnsQuery) {
      continue;
    }
    bool can_open =
        active_ && tunnels_.size() < options_.max_tunnels && send_window_ >= kMaxDnsQuery + 2;
    if (!can_open) {
      if (std::optional<std::string> reply = DnsErrorReply(query, kDnsRefused)) {
        ::sendto(udp, reply->data(), reply->size(), MSG_DONTWAIT | MSG_NOSIGNAL,
                 reinterpret_cast<const sockaddr*>(&client), client_len);
      }
      continue;
    }
    if (dns_in_flight() >= options_.max_dns_in_flight) {
      continue;  // Dropped: the resolver retries, as it would after a lost datagram.
    }
    std::optional<uint32_t> id = TakeId();
    if (!id) {
      continue;
    }
    tunnels_.emplace(*id, std::make_unique<DnsQueryTunnel>(
                              *id, udp, client, client_len, std::string(query), send_window_,
                              Clock::now() + options_.dns_timeout, sink));
  }
}

std::optional<Clock::time_point> TunnelHub::NextDeadline() const {
  std::optional<Clock::time_point> next;
  for (const auto& [id, tunnel] : tunnels_) {
    if (auto d = tunnel->Deadline(); d && (!next || *d < *next)) {
      next = d;
    }
  }
  return next;
}

void TunnelHub::OnTimer(Clock::time_point now, FrameSink& sink) {
  for (auto& [id, tunnel] : tunnels_) {
    if (auto d = tunnel->Deadline(); d && *d <= now) {
      tunnel->OnTimer(now, sink);
    }
  }
  Reap();
}

absl::Status TunnelHub::HandleFrame(const proto::Frame& frame, FrameSink& sink) {
  uint32_t id = frame.header.stream;
  FrameType type = frame.header.type;
  std::optional<uint32_t> credit;
  std::optional<std::string> error;
  switch (type) {
    case FrameType::kTunnelData:
      break;
    case FrameType::kCredit: {
      absl::StatusOr<uint32_t> n = proto::DecodeCredit(frame.payload);
      if (!n.ok()) {
        return n.status();
      }
      credit = *n;
      break;
    }
    case FrameType::kReset: {
      absl::StatusOr<std::string> text = proto::DecodeError(frame.payload);
      if (!text.ok()) {
        return text.status();
      }
      error = *text;
      break;
    }
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("the host sent ", proto::FrameTypeName(static_cast<uint8_t>(type)),
                       " on tunnel stream ", id));
  }
  auto it = tunnels_.find(id);
  if (it == tunnels_.end()) {
    if (id % 2 == 0 && id != 0 && (id < next_id_ || next_id_ == 0)) {
      return absl::OkStatus();  // The tunnel has ended; the frame crossed our reset or EOF.
    }
    return absl::InvalidArgumentError(absl::StrCat(proto::FrameTypeName(static_cast<uint8_t>(type)),
                                                   " on tunnel stream ", id,
                                                   ", which was never opened"));
  }
  GuestTunnel& tunnel = *it->second;
  absl::Status status;
  switch (type) {
    case FrameType::kTunnelData:
      status = tunnel.OnData(frame.payload, (frame.header.flags & proto::kFlagEof) != 0, sink);
      break;
    case FrameType::kCredit:
      status = tunnel.OnCredit(*credit);
      break;
    default:
      tunnel.OnReset(*error);
      break;
  }
  Reap();
  return status;
}

void TunnelHub::Reap() {
  std::erase_if(tunnels_, [](const auto& entry) { return entry.second->done(); });
}

}  // namespace abox::guest
