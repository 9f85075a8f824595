// libFuzzer target for the host's parser of guest bytes: frames, handshake, JSON messages,
// credit accounting, guest-opened tunnels. Everything the guest sends goes through
// HostSession::OnBytes.
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>

#include "src/proto/host_session.h"

namespace {

struct NullSink : abox::proto::ExecSink {
  size_t bytes = 0;
  void OnStdout(absl::string_view d) override { bytes += d.size(); }
  void OnStderr(absl::string_view d) override { bytes += d.size(); }
  void OnExit(const abox::proto::ExitInfo&) override {}
  void OnReset(absl::string_view) override {}
};

struct NullTunnel : abox::proto::TunnelSink {
  size_t bytes = 0;
  void OnData(absl::string_view d) override { bytes += d.size(); }
  void OnEof() override {}
  void OnReset(absl::string_view) override {}
};

// Accepts tunnels on ids divisible by 4 and refuses the others, so both paths are reached.
struct Acceptor : abox::proto::TunnelAcceptor {
  std::map<uint32_t, std::unique_ptr<NullTunnel>> tunnels;
  absl::StatusOr<abox::proto::TunnelSink*> OnTunnelOpen(
      uint32_t stream, const abox::proto::TunnelRequest&) override {
    if (stream % 4 != 0) {
      return absl::PermissionDeniedError("refused");
    }
    auto& t = tunnels[stream];
    t = std::make_unique<NullTunnel>();
    return t.get();
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace abox::proto;
  absl::Time now = absl::FromUnixSeconds(1);
  NullSink sinks[3];
  Acceptor acceptor;  // declared first: outlives the session that holds its sinks
  HostSession s{HostSession::Options{}};
  s.set_tunnel_acceptor(&acceptor);
  s.Start(now);
  absl::string_view input(reinterpret_cast<const char*>(data), size);
  // Half the inputs start from an established session with three open execs, so the fuzzer
  // reaches stream handling without having to invent a valid hello first.
  if (size > 0 && (data[0] & 1)) {
    Hello h{.version = kProtocolVersion,
            .min_version = kProtocolVersion,
            .max_payload = kMaxPayload,
            .window = kDefaultWindow};
    if (!s.OnBytes(EncodeFrame(FrameType::kHello, 0, 0, EncodeHello(h)), now).ok()) {
      __builtin_trap();
    }
    for (auto& sink : sinks) {
      ExecRequest r;
      r.argv = {"x"};
      r.stdin_open = true;
      (void)s.OpenExec(r, &sink);
    }
    input.remove_prefix(1);
  }
  // Feed in a few pieces to exercise partial frames.
  while (!input.empty()) {
    size_t n = std::min<size_t>(input.size(), 1 + (input.size() % 977));
    if (!s.OnBytes(input.substr(0, n), now).ok()) {
      s.Fail("violation");
      break;
    }
    input.remove_prefix(n);
    s.ConsumedOutput(1, 4096);
    (void)s.SendStdin(3, "abc");
    s.ConsumedTunnel(4, 4096);
    (void)s.SendTunnel(4, "xyz");
    if (input.size() % 7 == 0) {
      s.CloseTunnel(8);
      s.ResetTunnel(12, "host reset");
    }
    now += absl::Seconds(1);
    (void)s.Tick(now);
  }
  (void)s.TakeOutput();
  return 0;
}
