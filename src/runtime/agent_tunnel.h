// One tunnel the guest opened (an outgoing connection or DNS query of a guest program), as the
// host's egress code sees it: net::TunnelStream over the agent session.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "src/net/tunnel.h"
#include "src/proto/host_session.h"
#include "src/runtime/agent_client.h"

namespace abox::runtime {

// Created by AgentClient when the session accepts a tunnel; owned by whoever on_tunnel hands it
// to. Flow control both ways: the guest gets credit back only as Read() hands bytes out (at most
// one window is buffered here), and Write() blocks while the guest grants none. It shares the
// connection's core, so it may outlive the AgentClient; a failed connection fails every call.
// Destroying a tunnel that is still open resets it. Thread-safe: Read, Write and Reset may run
// on different threads (Reset unblocks the others). What the guest sends is untrusted.
class AgentTunnel final : public net::TunnelStream, private proto::TunnelSink {
 public:
  AgentTunnel(std::shared_ptr<internal::AgentCore> core, uint32_t stream, net::TunnelInfo info);
  AgentTunnel(const AgentTunnel&) = delete;
  AgentTunnel& operator=(const AgentTunnel&) = delete;
  ~AgentTunnel() override;

  [[nodiscard]] const net::TunnelInfo& info() const override { return info_; }
  [[nodiscard]] absl::StatusOr<size_t> Read(char* buf, size_t len, absl::Time deadline) override;
  [[nodiscard]] absl::Status Write(absl::string_view data) override;
  void CloseWrite() override;
  void Reset(absl::string_view reason) override;

  // The protocol stream id (even).
  [[nodiscard]] uint32_t stream() const { return stream_; }
  // What the session calls with the guest's bytes (see AgentClient::OnTunnelOpen).
  proto::TunnelSink* sink() { return this; }

 private:
  // proto::TunnelSink, called under core_->mu.
  void OnData(absl::string_view data) override;
  void OnEof() override;
  void OnReset(absl::string_view error) override;

  const std::shared_ptr<internal::AgentCore> core_;
  const uint32_t stream_;
  const net::TunnelInfo info_;
  // Guarded by core_->mu.
  std::string inbox_;  // bytes from the guest; [inbox_off_, size) not read yet (<= one window)
  size_t inbox_off_ = 0;
  bool guest_eof_ = false;             // the guest closed its write half
  bool write_closed_ = false;          // CloseWrite() was called
  std::optional<absl::Status> ended_;  // reset by either side, or the connection failed
};

}  // namespace abox::runtime
