#include "src/guest/egress_sockets.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "absl/strings/str_cat.h"
#include "src/base/status_macros.h"

namespace abox::guest {
namespace {

// From <linux/netfilter_ipv4.h>, which does not mix with the libc network headers.
constexpr int kSoOriginalDst = 80;
constexpr int kBacklog = 128;

absl::StatusOr<base::UniqueFd> Bind(int type, uint16_t port, const char* what) {
  base::UniqueFd fd(::socket(AF_INET, type | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd) {
    return base::ErrnoError(absl::StrCat("socket(", what, ")"));
  }
  int one = 1;
  if (type == SOCK_STREAM &&
      ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0) {
    return base::ErrnoError(absl::StrCat("setsockopt(", what, ", SO_REUSEADDR)"));
  }
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0) {
    return base::ErrnoError(absl::StrCat("bind(", what, ", 127.0.0.1:", port, ")"));
  }
  if (type == SOCK_STREAM && ::listen(fd.get(), kBacklog) != 0) {
    return base::ErrnoError(absl::StrCat("listen(", what, ")"));
  }
  return fd;
}

}  // namespace

absl::StatusOr<EgressSockets> OpenEgressSockets(const EgressPorts& ports) {
  EgressSockets s;
  ABOX_ASSIGN_OR_RETURN(s.transparent, Bind(SOCK_STREAM, ports.transparent, "transparent"));
  ABOX_ASSIGN_OR_RETURN(s.http_proxy, Bind(SOCK_STREAM, ports.http_proxy, "http proxy"));
  ABOX_ASSIGN_OR_RETURN(s.dns_udp, Bind(SOCK_DGRAM, ports.dns, "dns/udp"));
  ABOX_ASSIGN_OR_RETURN(s.dns_tcp, Bind(SOCK_STREAM, ports.dns, "dns/tcp"));
  ABOX_ASSIGN_OR_RETURN(s.model_broker, Bind(SOCK_STREAM, ports.model_broker, "model broker"));
  return s;
}

uint16_t BoundPort(int fd) {
  sockaddr_in addr{};
  socklen_t len = sizeof(addr);
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0 ||
      addr.sin_family != AF_INET) {
    return 0;
  }
  return ntohs(addr.sin_port);
}

absl::StatusOr<proto::TunnelRequest> OriginalDestination(int fd) {
  sockaddr_in addr{};
  socklen_t len = sizeof(addr);
  if (::getsockopt(fd, SOL_IP, kSoOriginalDst, &addr, &len) != 0) {
    return base::ErrnoError("getsockopt(SO_ORIGINAL_DST)");
  }
  char text[INET_ADDRSTRLEN];
  if (addr.sin_family != AF_INET ||
      ::inet_ntop(AF_INET, &addr.sin_addr, text, sizeof(text)) == nullptr) {
    return absl::InvalidArgumentError("SO_ORIGINAL_DST: not an IPv4 address");
  }
  proto::TunnelRequest r{
      .kind = proto::TunnelKind::kTcp, .dst = text, .port = ntohs(addr.sin_port)};
  if (r.port == 0) {
    return absl::InvalidArgumentError("SO_ORIGINAL_DST: port 0");
  }
  return r;
}

}  // namespace abox::guest
