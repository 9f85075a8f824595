// Egress benchmarks (issue 5). Boots one real microVM whose tunnels go to an in-process
// EgressProxy (the one aboxd runs per sandbox), with a loopback HTTP upstream reached through
// the resolver override, and measures in one run:
//   E1  time to first byte of a tiny HTTP response from the guest: through HTTP_PROXY (:3128)
//       and through the transparent redirect, against the same request made directly on the host
//       (the difference is what the tunnel and the proxy add to a connection)
//   E2  bulk download (--mib MiB) through the proxy in the guest, against the host directly
// Prints a Markdown table for docs/BENCHMARKS.md.
//
//   egress_bench [--runs N] [--mib N]
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "src/base/io.h"
#include "src/net/egress_proxy.h"
#include "src/net/host_resolver.h"
#include "src/runtime/sandbox.h"

namespace {

constexpr char kName[] = "bench.test";

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// A minimal HTTP/1.1 server on 127.0.0.1: /small answers 2 bytes, /big answers `big` bytes.
class Upstream {
 public:
  explicit Upstream(uint64_t big) : big_(big) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    ::setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(a);
    ::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a));
    ::listen(fd_, 64);
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] { Serve(); });
  }
  ~Upstream() {
    stop_ = true;
    ::shutdown(fd_, SHUT_RDWR);
    thread_.join();
    ::close(fd_);
  }
  int port() const { return port_; }

 private:
  void Serve() {
    while (!stop_) {
      int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (c < 0) {
        continue;
      }
      std::thread([this, c] {
        std::string head;
        char buf[4096];
        while (head.find("\r\n\r\n") == std::string::npos) {
          ssize_t n = ::read(c, buf, sizeof(buf));
          if (n <= 0) {
            ::close(c);
            return;
          }
          head.append(buf, static_cast<size_t>(n));
        }
        bool big = head.find("/big") != std::string::npos;
        uint64_t size = big ? big_ : 2;
        std::string reply = absl::StrCat("HTTP/1.1 200 OK\r\nContent-Length: ", size,
                                         "\r\nConnection: close\r\n\r\n");
        (void)abox::base::WriteAll(c, reply);
        std::string chunk(1 << 16, 'x');
        for (uint64_t sent = 0; sent < size;) {
          size_t n = static_cast<size_t>(std::min<uint64_t>(chunk.size(), size - sent));
          if (!abox::base::WriteAll(c, std::string_view(chunk.data(), n)).ok()) {
            break;
          }
          sent += n;
        }
        ::close(c);
      }).detach();
    }
  }

  uint64_t big_;
  int fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

class NullSink : public abox::net::EgressSink {
 public:
  void OnConnection(const abox::net::ConnectionRecord&) override {}
  void OnDns(const abox::net::DnsRecord&) override {}
  void OnDenied(absl::string_view, absl::string_view, uint16_t, absl::string_view) override {}
};

std::string RunIn(abox::runtime::Sandbox& sb, const std::string& script) {
  auto exec = sb.agent().StartExec({.argv = {"sh", "-c", script}});
  if (!exec.ok()) {
    return "";
  }
  std::string out;
  while (auto c = (*exec)->ReadOutput()) {
    if (!c->is_stderr) {
      out += c->data;
    }
  }
  (void)(*exec)->Wait();
  return out;
}

std::string RunOnHost(const std::string& cmd) {
  std::string out;
  FILE* p = ::popen(cmd.c_str(), "r");
  char buf[4096];
  size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0) {
    out.append(buf, n);
  }
  ::pclose(p);
  return out;
}

// curl -w values, one per line, as numbers.
std::vector<double> Numbers(const std::string& text) {
  std::vector<double> v;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    double d = 0;
    if (absl::SimpleAtod(line, &d)) {
      v.push_back(d);
    }
  }
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  int runs = 15;
  int mib = 256;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string flag = argv[i];
    if (flag == "--runs") {
      (void)absl::SimpleAtoi(argv[i + 1], &runs);
    } else if (flag == "--mib") {
      (void)absl::SimpleAtoi(argv[i + 1], &mib);
    }
  }
  Upstream upstream(static_cast<uint64_t>(mib) << 20);
  std::string port = std::to_string(upstream.port());
  abox::net::EgressPolicy policy;
  policy.mode = abox::net::EgressPolicy::Mode::kAllowlist;
  policy.allow.push_back(*abox::net::ParseRule(absl::StrCat(kName, ":", port)));
  auto resolver = abox::net::HostResolver::Create(
      {.override_map = {{kName, {*abox::net::IpAddress::Parse("127.0.0.1")}}}});
  if (!resolver.ok()) {
    return 1;
  }
  auto proxy = abox::net::EgressProxy::Create(
      {.sandbox_id = "bench",
       .policy = {.current = [policy] { return policy; }},
       .resolver = std::shared_ptr<const abox::net::HostResolver>(std::move(*resolver)),
       .sink = std::make_shared<NullSink>()});
  if (!proxy.ok()) {
    std::fprintf(stderr, "%s\n", std::string(proxy.status().message()).c_str());
    return 1;
  }
  auto vmm = abox::runtime::CreateDefaultVmm();
  if (!vmm.ok()) {
    return 1;
  }
  abox::runtime::SandboxConfig config;
  config.memory_mib = 1024;
  config.on_tunnel = [&](std::unique_ptr<abox::net::TunnelStream> t) {
    (*proxy)->Handle(std::move(t));
  };
  auto sb = abox::runtime::Sandbox::Boot(**vmm, config, [](const std::string&) {});
  if (!sb.ok()) {
    std::fprintf(stderr, "%s\n", std::string(sb.status().message()).c_str());
    return 1;
  }
  std::string small = absl::StrCat("http://", kName, ":", port, "/small");
  std::string big = absl::StrCat("http://", kName, ":", port, "/big");
  std::string fmt = "-w '%{time_starttransfer}\\n'";
  std::string loop = absl::StrCat("for i in $(seq ", runs, "); do curl -s -o /dev/null ", fmt);
  std::vector<double> via_proxy = Numbers(RunIn(**sb, absl::StrCat(loop, " ", small, "; done")));
  std::vector<double> via_redirect =
      Numbers(RunIn(**sb, absl::StrCat(loop, " --noproxy '*' --resolve ", kName, ":", port,
                                       ":192.0.2.10 ", small, "; done")));
  std::vector<double> direct = Numbers(RunOnHost(absl::StrCat(
      loop, " --noproxy '*' --resolve ", kName, ":", port, ":127.0.0.1 ", small, "; done")));
  std::vector<double> guest_bulk =
      Numbers(RunIn(**sb, absl::StrCat("curl -s -o /dev/null -w '%{speed_download}\\n' ", big)));
  std::vector<double> host_bulk = Numbers(RunOnHost(
      absl::StrCat("curl -s -o /dev/null -w '%{speed_download}\\n' --noproxy '*' --resolve ", kName,
                   ":", port, ":127.0.0.1 ", big)));
  (*proxy)->Shutdown();
  (void)(*sb)->Destroy();

  double ms_proxy = Median(via_proxy) * 1000;
  double ms_redirect = Median(via_redirect) * 1000;
  double ms_direct = Median(direct) * 1000;
  std::printf("| what | guest through abox | host directly | added |\n|---|---|---|---|\n");
  std::printf(
      "| E1 time to first byte, HTTP_PROXY (median of %d) | %.2f ms | %.2f ms | %.2f ms |\n", runs,
      ms_proxy, ms_direct, ms_proxy - ms_direct);
  std::printf(
      "| E1b time to first byte, transparent redirect (median of %d) | %.2f ms | %.2f ms | "
      "%.2f ms |\n",
      runs, ms_redirect, ms_direct, ms_redirect - ms_direct);
  std::printf("| E2 download %d MiB | %.0f MB/s | %.0f MB/s | |\n", mib,
              guest_bulk.empty() ? 0 : guest_bulk[0] / 1e6,
              host_bulk.empty() ? 0 : host_bulk[0] / 1e6);
  return 0;
}
