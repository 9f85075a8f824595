#include "src/guest/egress_setup.h"

#include <fcntl.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "src/base/child_process.h"
#include "src/base/io.h"
#include "src/base/status_macros.h"
#include "src/guest/log.h"
#include "src/guest/pid1.h"

namespace abox::guest {
namespace {

constexpr char kModprobe[] = "/sbin/modprobe";
constexpr char kNft[] = "/usr/sbin/nft";

// Replaces `path` (a file or a symlink, e.g. to systemd-resolved's stub) with `content`.
absl::Status ReplaceFile(const std::string& path, const std::string& content) {
  std::string tmp = absl::StrCat(path, ".abox-tmp");
  base::UniqueFd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (!fd) {
    return base::ErrnoError(absl::StrCat("open(", tmp, ")"));
  }
  ABOX_RETURN_IF_ERROR(base::WriteAll(fd.get(), content));
  fd.reset();
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    return base::ErrnoError(absl::StrCat("rename(", tmp, ", ", path, ")"));
  }
  return absl::OkStatus();
}

// `ip route replace default dev lo src 127.0.0.1` over rtnetlink. The source matters: without
// it the kernel picks 0.0.0.0 for a route via lo, and the redirected connection never completes.
absl::Status AddDefaultRouteViaLoopback() {
  unsigned int lo = ::if_nametoindex("lo");
  if (lo == 0) {
    return base::ErrnoError("if_nametoindex(lo)");
  }
  base::UniqueFd sock(::socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE));
  if (!sock) {
    return base::ErrnoError("socket(AF_NETLINK)");
  }
  struct Request {
    nlmsghdr header;
    rtmsg route;
    char attrs[64];
  } req{};
  req.header.nlmsg_type = RTM_NEWROUTE;
  req.header.nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_REPLACE;
  req.header.nlmsg_seq = 1;
  req.route.rtm_family = AF_INET;
  req.route.rtm_dst_len = 0;  // default
  req.route.rtm_table = RT_TABLE_MAIN;
  req.route.rtm_protocol = RTPROT_BOOT;
  req.route.rtm_scope = RT_SCOPE_LINK;
  req.route.rtm_type = RTN_UNICAST;
  size_t len = NLMSG_LENGTH(sizeof(rtmsg));
  auto add_attr = [&](uint16_t type, const void* data, size_t size) {
    auto* rta = reinterpret_cast<rtattr*>(reinterpret_cast<char*>(&req) + NLMSG_ALIGN(len));
    rta->rta_type = type;
    rta->rta_len = static_cast<uint16_t>(RTA_LENGTH(size));
    std::memcpy(RTA_DATA(rta), data, size);
    len = NLMSG_ALIGN(len) + RTA_ALIGN(rta->rta_len);
  };
  uint32_t oif = lo;
  add_attr(RTA_OIF, &oif, sizeof(oif));
  in_addr src{htonl(INADDR_LOOPBACK)};
  add_attr(RTA_PREFSRC, &src, sizeof(src));
  req.header.nlmsg_len = static_cast<uint32_t>(len);
  sockaddr_nl kernel{};
  kernel.nl_family = AF_NETLINK;
  if (::sendto(sock.get(), &req, len, 0, reinterpret_cast<const sockaddr*>(&kernel),
               sizeof(kernel)) < 0) {
    return base::ErrnoError("sendto(rtnetlink, RTM_NEWROUTE)");
  }
  char reply[512];
  ssize_t n;
  do {
    n = ::recv(sock.get(), reply, sizeof(reply), 0);
  } while (n < 0 && errno == EINTR);
  if (n < static_cast<ssize_t>(NLMSG_LENGTH(sizeof(nlmsgerr)))) {
    return n < 0 ? base::ErrnoError("recv(rtnetlink)")
                 : absl::InternalError("rtnetlink: short reply to RTM_NEWROUTE");
  }
  const auto* header = reinterpret_cast<const nlmsghdr*>(reply);
  if (header->nlmsg_type != NLMSG_ERROR) {
    return absl::InternalError("rtnetlink: unexpected reply to RTM_NEWROUTE");
  }
  int error = reinterpret_cast<const nlmsgerr*>(NLMSG_DATA(header))->error;
  if (error != 0) {
    return base::ErrnoError("rtnetlink RTM_NEWROUTE (default dev lo src 127.0.0.1)", -error);
  }
  return absl::OkStatus();
}

absl::Status Run(const std::vector<std::string>& argv) {
  ABOX_ASSIGN_OR_RETURN(base::CommandResult result, base::RunCommand(argv, 64 << 10));
  if (result.status.exit_code != 0) {
    return absl::InternalError(
        absl::StrCat(absl::StrJoin(argv, " "), ": ", result.status.ToString(), ": ", result.err));
  }
  return absl::OkStatus();
}

}  // namespace

std::string ResolvConf() {
  return "# Written by abox-guest: the agent's DNS stub; the host resolves and decides.\n"
         "nameserver 127.0.0.1\n";
}

std::string EgressRuleset(const EgressPorts& ports) {
  // Output hook, before conntrack's own NAT: loopback stays local, every other TCP connection
  // goes to the transparent port, DNS over UDP to any server to the stub. (nft needs the line
  // breaks: "; }" does not end a block on its command line.)
  return absl::StrCat(
      "table ip abox {\n"
      "  chain out {\n"
      "    type nat hook output priority -100; policy accept;\n"
      "    ip daddr != 127.0.0.0/8 tcp dport != 0 redirect to :",
      ports.transparent,
      "\n"
      "    ip daddr != 127.0.0.0/8 udp dport 53 redirect to :",
      ports.dns,
      "\n"
      "  }\n"
      "}\n");
}

absl::Status SetUpEgress(const EgressPorts& ports) {
  absl::Status first;
  auto note = [&](const absl::Status& s) {
    if (!s.ok()) {
      Log(absl::StrCat("egress setup: ", s.message()));
      first.Update(s);
    }
  };
  note(ReplaceFile("/etc/resolv.conf", ResolvConf()));
  struct stat st {};
  if (::stat("/etc/hosts", &st) != 0) {
    note(ReplaceFile("/etc/hosts", absl::StrCat("127.0.0.1\tlocalhost\n::1\tlocalhost\n127.0.1.1\t",
                                                kHostname, "\n")));
  }
  note(AddDefaultRouteViaLoopback());
  std::vector<std::string> modprobe = {kModprobe, "-a"};
  modprobe.insert(modprobe.end(), std::begin(kEgressModules), std::end(kEgressModules));
  note(Run(modprobe));
  note(Run({kNft, EgressRuleset(ports)}));
  return first;
}

}  // namespace abox::guest
