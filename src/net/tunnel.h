// One guest connection as the host's egress code sees it: a byte stream carried over the agent
// channel (runtime::AgentClient implements it for real sandboxes; tests use socketpairs). The
// guest is hostile: everything read from a tunnel is untrusted input.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "src/net/address_filter.h"

namespace abox::net {

struct TunnelInfo {
  enum class Kind : uint8_t {
    kTransparent,  // a TCP connection the guest's redirect caught; original_* say where to
    kHttpProxy,    // a connection to the guest's HTTP proxy port (HTTP_PROXY / HTTPS_PROXY)
    kDns,          // DNS queries, each framed with a 2-byte length (RFC 1035 TCP framing)
    kModelBroker,  // a connection to the guest's model broker port: plain HTTP for aboxd's broker
  };
  Kind kind = Kind::kTransparent;
  // kTransparent: the address and port the guest program connected to (as the guest reports
  // it: untrusted, used for raw-TCP rules and logs only).
  std::optional<IpAddress> original_ip;
  uint16_t original_port = 0;
};

class TunnelStream {
 public:
  virtual ~TunnelStream() = default;

  [[nodiscard]] virtual const TunnelInfo& info() const = 0;
  // Up to `len` bytes from the guest, blocking until some arrive or `deadline` passes
  // (kDeadlineExceeded); 0 when the guest closed its side; an error when the tunnel was reset
  // or the sandbox went away.
  [[nodiscard]] virtual absl::StatusOr<size_t> Read(char* buf, size_t len, absl::Time deadline) = 0;
  // All of `data` to the guest, blocking while the guest grants no credit; an error once the
  // tunnel is reset or gone.
  [[nodiscard]] virtual absl::Status Write(absl::string_view data) = 0;
  // EOF towards the guest (the upstream closed its side).
  virtual void CloseWrite() = 0;
  // Aborts both directions; the guest's connection is reset. Unblocks Read and Write.
  virtual void Reset(absl::string_view reason) = 0;
};

}  // namespace abox::net
