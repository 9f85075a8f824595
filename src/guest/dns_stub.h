// The guest's DNS stub on 127.0.0.1:53/udp: each query becomes a "dns" tunnel carrying it with a
// 2-byte length prefix (RFC 1035 TCP framing); the host's answer comes back the same way and is
// sent as the UDP reply. The host resolves and decides; the guest only carries bytes, except
// that it answers REFUSED / SERVFAIL itself when the host refuses the tunnel or sends nothing,
// so programs fail at once instead of waiting for their resolver's timeout.
#pragma once

#include <sys/socket.h>

#include <cstdint>
#include <optional>
#include <string>

#include "absl/strings/string_view.h"
#include "src/guest/guest_tunnel.h"

namespace abox::guest {

// Largest UDP query carried (a stub's query is < 512 bytes; EDNS adds a few); bigger ones are
// dropped as garbage.
inline constexpr size_t kMaxDnsQuery = 4096;
// Largest answer taken from the host (the length prefix's range).
inline constexpr size_t kMaxDnsAnswer = 65535;

inline constexpr uint8_t kDnsServFail = 2;
inline constexpr uint8_t kDnsRefused = 5;

// A reply to `query` with `rcode`, no records and the query's question echoed (resolvers drop
// replies whose question does not match). nullopt when the query is not a well-formed
// single-question query (then there is nobody sensible to answer).
std::optional<std::string> DnsErrorReply(absl::string_view query, uint8_t rcode);

// One UDP query in flight. Sends kTunnelOpen {"kind":"dns"}, the framed query and EOF at once
// (`query` <= kMaxDnsQuery, `send_window` >= kMaxDnsQuery + 2). The reply goes out through
// `udp_fd` (owned by the hub, which outlives this) to `client`.
class DnsQueryTunnel final : public GuestTunnel {
 public:
  DnsQueryTunnel(uint32_t id, int udp_fd, const sockaddr_storage& client, socklen_t client_len,
                 std::string query, uint32_t send_window, Clock::time_point deadline,
                 FrameSink& sink);

  [[nodiscard]] bool done() const override { return done_; }
  [[nodiscard]] std::optional<Clock::time_point> Deadline() const override;
  // No answer in time: the tunnel is reset and the client gets SERVFAIL.
  void OnTimer(Clock::time_point now, FrameSink& sink) override;
  [[nodiscard]] absl::Status OnData(absl::string_view data, bool eof, FrameSink& sink) override;
  [[nodiscard]] absl::Status OnCredit(uint32_t bytes) override;
  // The host refused the query (egress off, policy): the client gets REFUSED.
  void OnReset(absl::string_view error) override;
  void Abort() override;

 private:
  void Reply(absl::string_view answer);
  void ReplyError(uint8_t rcode);

  const int udp_fd_;
  const sockaddr_storage client_;
  const socklen_t client_len_;
  const std::string query_;
  const Clock::time_point deadline_;
  proto::CreditWindow send_;
  proto::CreditWindow recv_;
  std::string answer_;  // the framed answer as it arrives (<= 2 + kMaxDnsAnswer)
  bool answered_ = false;
  bool host_eof_ = false;
  bool done_ = false;
};

}  // namespace abox::guest
