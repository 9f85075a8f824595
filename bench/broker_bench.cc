// The model broker (in process, no VM): what ServeModelBroker adds to the time to the first
// streamed byte of a model answer. A loopback plain-HTTP fake provider answers each request with
// an SSE head and a first event at once, then a last event; per round, a client asks it
//   direct:  over its own TCP connection (connect, request, first event), and
//   broker:  through ServeModelBroker on a socketpair tunnel (as the guest's loopback listener
//            reaches aboxd), which checks the token and route, connects, rewrites the head
//            with the key and streams the answer back,
// interleaved in one run, so both see the same machine state. Goal: broker - direct <= 5 ms.
// Prints a Markdown table and, with --json FILE, the raw numbers.
//
//   broker_bench [--rounds N] [--json FILE]
#include <sys/socket.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "src/base/io.h"
#include "src/net/model_broker.h"
#include "src/net/testing/socket_tunnel.h"

namespace {

namespace net = abox::net;
namespace nt = abox::net::testing;
using Clock = std::chrono::steady_clock;

constexpr char kToken[] = "bench-broker-token-0123456789abcdef-0123";
constexpr char kKey[] = "sk-ant-bench-key-0123456789abcdef";
constexpr char kFirstEvent[] =
    "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":"
    "{\"input_tokens\":10,\"output_tokens\":1}}}\n\n";
constexpr char kLastEvent[] = "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n";

double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) {
    return 0;
  }
  std::sort(v.begin(), v.end());
  size_t i = std::min(v.size() - 1,
                      static_cast<size_t>(std::lround(p * static_cast<double>(v.size() - 1))));
  return v[i];
}

nlohmann::json Summary(const std::vector<double>& v) {
  return {{"n", v.size()},
          {"median", Percentile(v, 0.5)},
          {"p90", Percentile(v, 0.9)},
          {"min", Percentile(v, 0)},
          {"max", Percentile(v, 1)}};
}

std::string Request(absl::string_view credential) {
  constexpr absl::string_view kBody = R"({"model":"m","stream":true,"messages":[]})";
  return absl::StrCat("POST /anthropic/v1/messages?beta=true HTTP/1.1\r\nHost: 127.0.0.1\r\n",
                      credential, "\r\nanthropic-version: 2023-06-01\r\n",
                      "content-type: application/json\r\nContent-Length: ", kBody.size(),
                      "\r\n\r\n", kBody);
}

// The fake provider: per connection, one request (head and Content-Length body), then the SSE
// head with the first event in one write, the last event, and close.
void ServeSse(int fd) {
  std::string head = nt::ReadUntil(fd, "\r\n\r\n");
  size_t at = head.find("Content-Length: ");
  size_t length = 0;
  if (at != std::string::npos) {
    (void)absl::SimpleAtoi(head.substr(at + 16, head.find("\r\n", at) - at - 16), &length);
  }
  std::string body(length, '\0');
  if (length > 0 && ::recv(fd, body.data(), length, MSG_WAITALL) != static_cast<ssize_t>(length)) {
    return;
  }
  nt::SendAllTo(fd, absl::StrCat("HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                                 "cache-control: no-cache\r\nConnection: close\r\n\r\n",
                                 kFirstEvent));
  nt::SendAllTo(fd, kLastEvent);
}

// Time from the request's first byte (connect included) to the first event, on `fd` already
// set up by `start`; then reads to the end.
double FirstEventMs(int fd, Clock::time_point start, const std::string& request) {
  if (!nt::SendAllTo(fd, request)) {
    std::fprintf(stderr, "send failed\n");
    std::exit(1);
  }
  std::string got = nt::ReadUntil(fd, "\"output_tokens\":1}}}\n\n");
  double ms = Ms(Clock::now() - start);
  if (got.find("message_start") == std::string::npos) {
    std::fprintf(stderr, "no first event: %s\n", got.c_str());
    std::exit(1);
  }
  (void)nt::ReadToEof(fd);
  return ms;
}

double Direct(uint16_t port) {
  Clock::time_point start = Clock::now();
  absl::StatusOr<net::UpstreamConnection> c = net::ConnectToAny(
      {*net::IpAddress::Parse("127.0.0.1")}, port, absl::Now() + absl::Seconds(5));
  if (!c.ok() || !abox::base::SetNonBlocking(c->fd.get(), false).ok()) {
    std::fprintf(stderr, "connect failed\n");
    std::exit(1);
  }
  timeval tv{10, 0};
  ::setsockopt(c->fd.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  return FirstEventMs(c->fd.get(), start, Request("x-api-key: " + std::string(kKey)));
}

double ThroughBroker(const net::ModelBrokerConfig& config) {
  auto [tunnel, guest] = nt::SocketTunnel::Make(net::TunnelInfo{});
  Clock::time_point start = Clock::now();
  std::thread serve([&, t = tunnel.get()] { (void)net::ServeModelBroker(*t, config, -1); });
  double ms = FirstEventMs(guest.get(), start, Request(absl::StrCat("x-api-key: ", kToken)));
  guest.reset();
  serve.join();
  return ms;
}

}  // namespace

int main(int argc, char** argv) {
  int rounds = 300;
  std::string json_path;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string flag = argv[i];
    if (flag == "--rounds") {
      (void)absl::SimpleAtoi(argv[i + 1], &rounds);
    } else if (flag == "--json") {
      json_path = argv[i + 1];
    }
  }
  nt::LoopbackServer provider([](abox::base::UniqueFd fd) { ServeSse(fd.get()); });
  net::ModelBrokerConfig config;
  config.token = kToken;
  std::string base = absl::StrCat("http://127.0.0.1:", provider.port());
  config.upstream = [base](net::ModelApi api) { return net::ParseModelBaseUrl(api, base); };
  config.key = [](net::ModelApi) -> absl::StatusOr<std::string> { return std::string(kKey); };
  config.connect = [](const std::string&, uint16_t port, absl::Time deadline, int cancel) {
    return net::ConnectToAny({*net::IpAddress::Parse("127.0.0.1")}, port, deadline, cancel);
  };
  uint64_t recorded_input = 0;
  std::mutex mu;
  config.on_request = [&](const net::ModelRequestRecord& r) {
    std::lock_guard<std::mutex> lock(mu);
    recorded_input += r.input_tokens;
  };

  std::vector<double> direct;
  std::vector<double> broker;
  for (int i = 0; i < 5; ++i) {  // warm-up
    (void)Direct(provider.port());
    (void)ThroughBroker(config);
  }
  for (int i = 0; i < rounds; ++i) {
    if (i % 2 == 0) {
      direct.push_back(Direct(provider.port()));
      broker.push_back(ThroughBroker(config));
    } else {
      broker.push_back(ThroughBroker(config));
      direct.push_back(Direct(provider.port()));
    }
  }
  std::vector<double> added;
  for (size_t i = 0; i < direct.size(); ++i) {
    added.push_back(broker[i] - direct[i]);
  }
  std::printf("## Model broker: time to the first SSE event (%d rounds, loopback provider)\n\n",
              rounds);
  std::printf("| path | median ms | p90 ms |\n|---|---|---|\n");
  std::printf("| direct (TCP connect + request) | %.3f | %.3f |\n", Percentile(direct, 0.5),
              Percentile(direct, 0.9));
  std::printf("| through ServeModelBroker (tunnel, checks, connect, rewrite) | %.3f | %.3f |\n",
              Percentile(broker, 0.5), Percentile(broker, 0.9));
  std::printf("| added by the broker (per round) | %.3f | %.3f |\n\n", Percentile(added, 0.5),
              Percentile(added, 0.9));
  std::printf("Goal: added <= 5 ms at the median: %s. Usage recorded: %llu input tokens.\n",
              Percentile(added, 0.5) <= 5.0 ? "met" : "NOT met",
              static_cast<unsigned long long>(recorded_input));
  if (!json_path.empty()) {
    nlohmann::json j = {{"rounds", rounds},
                        {"direct_ms", Summary(direct)},
                        {"broker_ms", Summary(broker)},
                        {"added_ms", Summary(added)}};
    std::ofstream(json_path) << j.dump(2) << "\n";
  }
  return 0;
}
