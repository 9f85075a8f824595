// Daemon benchmarks (issue 3). Starts its own aboxd in a private $ABOX_HOME (images/ linked to
// the images of the $ABOX_HOME it runs with), creates three sandboxes through the API and
// measures, in one run so that the numbers compare as ratios on a noisy machine:
//   1. GET /v1/sandboxes over the unix socket: one keep-alive connection, then 4 at once;
//   2. an exec of `true` through the daemon against the same exec through the runtime library
//      in this process, interleaved (daemon, direct, daemon, direct ...) to cancel drift;
//   3. `abox exec ID -- true` (the real CLI binary) against the guest's own fork -> reap time;
//   4. an `exec` of `true` as an MCP tool call on one abox-mcp session, interleaved with
//      `abox exec` runs, and the size of abox-mcp's tool list.
// Everything it created is removed at the end (DELETE ?force=true, aboxd stopped, home removed).
// Prints a Markdown table for docs/BENCHMARKS.md and, with --json FILE, the raw numbers.
//
//   daemon_bench [--aboxd PATH] [--abox PATH] [--abox-mcp PATH] [--list-requests N]
//                [--list-seconds S] [--exec-pairs N] [--cli-runs N] [--mcp-runs N] [--json FILE]
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "bench/daemon_fixture.h"
#include "bench/mcp_bench.h"
#include "nlohmann/json.hpp"
#include "src/base/child_process.h"
#include "src/base/host_layout.h"
#include "src/base/io.h"
#include "src/runtime/sandbox.h"

namespace {

using Clock = std::chrono::steady_clock;
using abox::bench::BenchHome;
using abox::bench::Call;
using abox::bench::Connect;
using abox::bench::CpuMicros;
using abox::bench::EnterBenchHome;
using abox::bench::McpBenchResult;
using abox::bench::MeasureMcpAgainstCli;
using abox::bench::Percentile;
using abox::bench::SelfDir;
using abox::bench::Summary;
using abox::bench::TimeCli;
using abox::http::httptest::HttpTestClient;
using abox::http::httptest::Response;
namespace fs = std::filesystem;

constexpr int kSandboxes = 3;
constexpr int kConcurrentConnections = 4;

std::atomic<bool> g_interrupted{false};

void OnSignal(int /*sig*/) { g_interrupted.store(true); }

double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }
double Us(Clock::duration d) { return std::chrono::duration<double, std::micro>(d).count(); }

// A distribution-free 95 % confidence interval for the median (order statistics, normal
// approximation of the binomial; fine from n ≈ 30).
std::pair<double, double> MedianCi95(std::vector<double> v) {
  if (v.empty()) {
    return {0, 0};
  }
  std::sort(v.begin(), v.end());
  auto n = static_cast<double>(v.size());
  double half = 0.98 * std::sqrt(n);
  auto lo = static_cast<size_t>(std::max(0.0, std::floor(n / 2 - half) - 1));
  size_t hi = std::min(v.size() - 1, static_cast<size_t>(std::ceil(n / 2 + half)));
  return {v[lo], v[hi]};
}

// Requests per second and latency of GET /v1/sandboxes on `connections` keep-alive connections
// at once, each sending its next request when the previous answer arrived.
struct ListResult {
  std::vector<double> latencies_us;
  double seconds = 0;
  double aboxd_cpu_us = 0;
  int errors = 0;
  [[nodiscard]] double RequestsPerSecond() const {
    return static_cast<double>(latencies_us.size()) / seconds;
  }
};

ListResult MeasureList(const BenchHome& home, pid_t aboxd, int connections, int max_requests,
                       double max_seconds) {
  std::vector<std::vector<double>> per(connections);
  std::vector<int> errors(connections, 0);
  std::atomic<int> issued{0};
  std::atomic<int> connected{0};
  std::atomic<bool> go{false};
  auto worker = [&](int k) {
    auto c = Connect(home);
    connected.fetch_add(1);
    while (!go.load()) {
      std::this_thread::yield();
    }
    if (c == nullptr) {
      ++errors[k];
      return;
    }
    per[k].reserve(static_cast<size_t>(max_requests));
    auto end = Clock::now() + std::chrono::duration<double>(max_seconds);
    while (issued.fetch_add(1) < max_requests && !g_interrupted.load()) {
      auto t0 = Clock::now();
      auto r = c->Request("GET", "/v1/sandboxes");
      auto t1 = Clock::now();
      if (!r.ok() || r->status != 200) {
        ++errors[k];
        return;
      }
      per[k].push_back(Us(t1 - t0));
      if (t1 >= end) {
        break;
      }
    }
  };
  std::vector<std::thread> threads;
  threads.reserve(static_cast<size_t>(connections));
  for (int k = 0; k < connections; ++k) {
    threads.emplace_back(worker, k);
  }
  while (connected.load() < connections) {
    std::this_thread::yield();
  }
  ListResult out;
  double cpu0 = CpuMicros(aboxd);
  auto t0 = Clock::now();
  go.store(true);
  for (auto& t : threads) {
    t.join();
  }
  out.seconds = Ms(Clock::now() - t0) / 1000.0;
  out.aboxd_cpu_us = CpuMicros(aboxd) - cpu0;
  for (int k = 0; k < connections; ++k) {
    out.latencies_us.insert(out.latencies_us.end(), per[k].begin(), per[k].end());
    out.errors += errors[k];
  }
  return out;
}

struct DaemonTiming {
  double round_trip_ms = 0;
  double post_ms = 0;  // POST .../execs until its 201
};

// `true` through the daemon: POST .../execs on `ctl`, then GET .../output on `stream` to the
// exit line, both kept alive. Returns the round trip, or nullopt (with a message on
// stderr) when anything is off. A connection the daemon closes is reopened after the clock
// stopped, and counted in `reconnects`.
std::optional<DaemonTiming> DaemonExec(const BenchHome& home, std::unique_ptr<HttpTestClient>& ctl,
                                       std::unique_ptr<HttpTestClient>& stream,
                                       const std::string& sandbox, int& reconnects) {
  const std::string base = absl::StrCat("/v1/sandboxes/", sandbox, "/execs");
  auto t0 = Clock::now();
  auto started = ctl->Request("POST", base, R"({"argv":["true"]})");
  if (!started.ok() || started->status != 201) {
    std::fprintf(
        stderr, "daemon_bench: POST %s: %s\n", base.c_str(),
        started.ok() ? started->body.c_str() : std::string(started.status().message()).c_str());
    return std::nullopt;
  }
  auto t_started = Clock::now();
  std::string exec = started->Json().value("id", "");
  auto output = stream->Request("GET", absl::StrCat(base, "/", exec, "/output"));
  auto t1 = Clock::now();
  if (!output.ok() || output->status != 200) {
    std::fprintf(
        stderr, "daemon_bench: output of exec %s: %s\n", exec.c_str(),
        output.ok() ? output->body.c_str() : std::string(output.status().message()).c_str());
    return std::nullopt;
  }
  std::vector<std::string> lines = absl::StrSplit(output->body, '\n', absl::SkipEmpty());
  nlohmann::json exit =
      lines.empty() ? nlohmann::json() : nlohmann::json::parse(lines.back(), nullptr, false);
  if (!exit.is_object() || exit.value("type", "") != "exit" || !exit["exec"].is_object() ||
      !exit["exec"]["exit_code"].is_number_integer() || exit["exec"]["exit_code"] != 0) {
    std::fprintf(stderr, "daemon_bench: exec %s did not end with exit code 0: %s\n", exec.c_str(),
                 output->body.c_str());
    return std::nullopt;
  }
  for (auto [conn, keep_alive] :
       {std::pair{&ctl, started->keep_alive}, std::pair{&stream, output->keep_alive}}) {
    if (!keep_alive) {
      ++reconnects;
      *conn = Connect(home);
      if (*conn == nullptr) {
        return std::nullopt;
      }
    }
  }
  return DaemonTiming{.round_trip_ms = Ms(t1 - t0), .post_ms = Ms(t_started - t0)};
}

// `true` through the runtime library: StartExec, ReadOutput until nullopt, Wait. Returns the
// round trip in ms and the agent's own fork -> reap time in ms.
std::optional<std::pair<double, double>> DirectExec(abox::runtime::Sandbox& sb) {
  auto t0 = Clock::now();
  auto exec = sb.agent().StartExec({.argv = {"true"}});
  if (!exec.ok()) {
    std::fprintf(stderr, "daemon_bench: direct exec: %s\n",
                 std::string(exec.status().message()).c_str());
    return std::nullopt;
  }
  while ((*exec)->ReadOutput()) {
  }
  auto r = (*exec)->Wait();
  auto t1 = Clock::now();
  if (!r.ok() || r->ShellCode() != 0) {
    std::fprintf(stderr, "daemon_bench: direct exec of true failed: %s\n",
                 r.ok() ? r->error.c_str() : std::string(r.status().message()).c_str());
    return std::nullopt;
  }
  return std::make_pair(Ms(t1 - t0), static_cast<double>(r->duration_us) / 1000.0);
}

// Runs `argv` in a sandbox of the daemon and returns its stdout (nullopt on any failure).
std::optional<std::string> DaemonStdout(const BenchHome& home, const std::string& sandbox,
                                        const std::vector<std::string>& argv) {
  const std::string base = absl::StrCat("/v1/sandboxes/", sandbox, "/execs");
  Response started = Call(home, "POST", base, nlohmann::json({{"argv", argv}}).dump());
  if (started.status != 201) {
    return std::nullopt;
  }
  Response output =
      Call(home, "GET", absl::StrCat(base, "/", started.Json().value("id", ""), "/output"));
  std::string out;
  for (absl::string_view line : absl::StrSplit(output.body, '\n', absl::SkipEmpty())) {
    nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_object() && j.value("type", "") == "output" && j.value("stream", "") == "stdout") {
      out += j.value("data", "");
    }
  }
  return out;
}

std::optional<std::string> DirectStdout(abox::runtime::Sandbox& sb,
                                        const std::vector<std::string>& argv) {
  auto exec = sb.agent().StartExec({.argv = argv});
  if (!exec.ok()) {
    return std::nullopt;
  }
  std::string out;
  while (auto c = (*exec)->ReadOutput()) {
    if (!c->is_stderr) {
      out += c->data;
    }
  }
  auto r = (*exec)->Wait();
  return r.ok() && r->ShellCode() == 0 ? std::optional(out) : std::nullopt;
}

// The two measurements of 2 run in different VMs. To see whether the VMs themselves differ,
// each times fork+exec+wait of /bin/true in a shell loop (the same loop as runtime_bench),
// alternately, `rounds` times. Returns per-iteration ms for (daemon's VM, direct VM).
std::optional<std::pair<std::vector<double>, std::vector<double>>> CompareVms(
    const BenchHome& home, const std::string& sandbox, abox::runtime::Sandbox& direct, int rounds) {
  constexpr int kIterations = 20;
  const std::vector<std::string> loop = {
      "sh", "-c",
      absl::StrCat("i=0; s=$(date +%s%N); while [ $i -lt ", kIterations,
                   " ]; do /bin/true; i=$((i+1)); done; e=$(date +%s%N); echo $(( (e - s) / ",
                   kIterations, " ))")};
  std::pair<std::vector<double>, std::vector<double>> out;
  for (int i = 0; i < rounds && !g_interrupted.load(); ++i) {
    std::optional<std::string> d = DaemonStdout(home, sandbox, loop);
    std::optional<std::string> r = DirectStdout(direct, loop);
    int64_t d_ns = 0;
    int64_t r_ns = 0;
    if (!d || !r || !absl::SimpleAtoi(absl::StripAsciiWhitespace(*d), &d_ns) ||
        !absl::SimpleAtoi(absl::StripAsciiWhitespace(*r), &r_ns)) {
      std::fprintf(stderr, "daemon_bench: the guest timing loop failed\n");
      return std::nullopt;
    }
    out.first.push_back(static_cast<double>(d_ns) / 1e6);
    out.second.push_back(static_cast<double>(r_ns) / 1e6);
  }
  return out;
}

struct Flags {
  std::string aboxd = SelfDir() + "/aboxd";
  std::string abox = SelfDir() + "/abox";
  std::string abox_mcp = SelfDir() + "/abox-mcp";
  int mcp_runs = 30;
  int list_requests = 20000;
  double list_seconds = 5;
  int exec_pairs = 300;
  int cli_runs = 30;
  std::string json_path;
};

Flags ParseFlags(int argc, char** argv) {
  Flags f;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    bool has_value = i + 1 < argc;
    if (a == "--aboxd" && has_value) {
      f.aboxd = argv[++i];
    } else if (a == "--abox" && has_value) {
      f.abox = argv[++i];
    } else if (a == "--abox-mcp" && has_value) {
      f.abox_mcp = argv[++i];
    } else if (a == "--mcp-runs" && has_value) {
      f.mcp_runs = std::max(1, std::atoi(argv[++i]));
    } else if (a == "--list-requests" && has_value) {
      f.list_requests = std::max(1, std::atoi(argv[++i]));
    } else if (a == "--list-seconds" && has_value) {
      f.list_seconds = std::max(0.1, std::atof(argv[++i]));
    } else if (a == "--exec-pairs" && has_value) {
      f.exec_pairs = std::max(1, std::atoi(argv[++i]));
    } else if (a == "--cli-runs" && has_value) {
      f.cli_runs = std::max(1, std::atoi(argv[++i]));
    } else if (a == "--json" && has_value) {
      f.json_path = argv[++i];
    } else {
      std::fprintf(stderr,
                   "usage: daemon_bench [--aboxd PATH] [--abox PATH] [--abox-mcp PATH] "
                   "[--list-requests N] [--list-seconds S] [--exec-pairs N] [--cli-runs N] "
                   "[--mcp-runs N] [--json FILE]\n"
                   "Runs with the images of $ABOX_HOME (default ~/.local/share/abox).\n");
      std::exit(2);  // NOLINT(concurrency-mt-unsafe)
    }
  }
  return f;
}

std::string Goal(bool met) { return met ? "met" : "**not met**"; }

// What the run found: the Markdown rows and the JSON for --json.
struct Report {
  nlohmann::json json;
  std::vector<std::array<std::string, 3>> rows;  // measurement, result, goal

  void Row(std::string what, std::string result, std::string goal = "") {
    rows.push_back({std::move(what), std::move(result), std::move(goal)});
  }
};

// Creates the sandboxes, booted side by side (wait=false), and waits until they are ready.
// Appends each id to `ids` as soon as it exists (so that teardown removes it).
bool CreateSandboxes(const BenchHome& home, std::vector<std::string>& ids, Report& report) {
  for (int i = 0; i < kSandboxes; ++i) {
    Response r = Call(home, "POST", "/v1/sandboxes?wait=false",
                      absl::StrCat(R"({"name":"bench-)", i + 1, R"("})"));
    if (r.status != 202 && r.status != 201) {
      std::fprintf(stderr, "daemon_bench: POST /v1/sandboxes answered %d: %s\n", r.status,
                   r.body.c_str());
      return false;
    }
    ids.push_back(r.Json().value("id", ""));
  }
  auto boot0 = Clock::now();
  for (const std::string& id : ids) {
    for (;;) {
      Response r = Call(home, "GET", absl::StrCat("/v1/sandboxes/", id));
      nlohmann::json j = r.Json();
      std::string state = j.is_object() ? j.value("state", "") : "";
      if (state == "ready") {
        report.json["accel_daemon"] = j.value("accel", "");
        break;
      }
      if (state != "creating" || g_interrupted.load() ||
          Clock::now() - boot0 > std::chrono::minutes(3)) {
        std::fprintf(stderr, "daemon_bench: sandbox %s did not become ready: %s\n", id.c_str(),
                     r.body.c_str());
        return false;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
  report.json["daemon_boot_3_ms"] = Ms(Clock::now() - boot0);
  return true;
}

// 1. GET /v1/sandboxes: warm up, then one connection, then four at once.
bool RunListBench(const BenchHome& home, pid_t aboxd, const Flags& flags, Report& report) {
  (void)MeasureList(home, aboxd, 1, 200, 5);
  for (int connections : {1, kConcurrentConnections}) {
    ListResult l = MeasureList(home, aboxd, connections, flags.list_requests, flags.list_seconds);
    if (l.errors != 0 || l.latencies_us.empty() || g_interrupted.load()) {
      std::fprintf(stderr, "daemon_bench: GET /v1/sandboxes failed (%d error(s))\n", l.errors);
      return false;
    }
    double rps = l.RequestsPerSecond();
    double cpu_per_request = l.aboxd_cpu_us / static_cast<double>(l.latencies_us.size());
    report.json[connections == 1 ? "list_sequential" : "list_concurrent"] = {
        {"connections", connections},
        {"requests", l.latencies_us.size()},
        {"seconds", l.seconds},
        {"requests_per_second", rps},
        {"latency_us", Summary(l.latencies_us)},
        {"aboxd_cpu_us_per_request", cpu_per_request}};
    std::string plural = connections == 1 ? "" : "s";
    report.Row(absl::StrFormat("`GET /v1/sandboxes` (%d sandboxes), %d keep-alive connection%s%s: "
                               "req/s (latency median / p99)",
                               kSandboxes, connections, plural, connections == 1 ? "" : " at once"),
               absl::StrFormat("%.0f req/s (%.0f µs / %.0f µs), %zu requests in %.1f s", rps,
                               Percentile(l.latencies_us, 0.5), Percentile(l.latencies_us, 0.99),
                               l.latencies_us.size(), l.seconds),
               absl::StrCat("≥ 5,000 req/s: ", Goal(rps >= 5000)));
    report.Row(absl::StrFormat("aboxd CPU time per request (%d connection%s)", connections, plural),
               absl::StrFormat("%.0f µs", cpu_per_request));
  }
  return true;
}

// 2. Exec of `true` through the daemon and through the library, interleaved, after a few
// unmeasured pairs. Returns the median of the guest's own fork -> reap time (ms).
std::optional<double> RunExecBench(const BenchHome& home, const std::string& sandbox,
                                   abox::runtime::Sandbox& direct, const Flags& flags,
                                   Report& report) {
  auto ctl = Connect(home);
  auto stream = Connect(home);
  if (ctl == nullptr || stream == nullptr) {
    return std::nullopt;
  }
  std::vector<double> via_daemon;
  std::vector<double> daemon_post;
  std::vector<double> via_direct;
  std::vector<double> guest_fork_reap;
  std::vector<double> paired;
  int reconnects = 0;
  constexpr int kWarmup = 5;
  for (int i = 0; i < kWarmup + flags.exec_pairs; ++i) {
    auto d = DaemonExec(home, ctl, stream, sandbox, reconnects);
    auto r = DirectExec(direct);
    if (!d || !r || g_interrupted.load()) {
      return std::nullopt;
    }
    if (i >= kWarmup) {
      via_daemon.push_back(d->round_trip_ms);
      daemon_post.push_back(d->post_ms);
      via_direct.push_back(r->first);
      guest_fork_reap.push_back(r->second);
      paired.push_back(d->round_trip_ms - r->first);
    }
  }
  double daemon_med = Percentile(via_daemon, 0.5);
  double direct_med = Percentile(via_direct, 0.5);
  double guest_med = Percentile(guest_fork_reap, 0.5);
  double diff = daemon_med - direct_med;
  auto [ci_lo, ci_hi] = MedianCi95(paired);
  nlohmann::json& exec = report.json["exec"];
  exec["pairs"] = via_daemon.size();
  exec["daemon_ms"] = Summary(via_daemon);
  exec["daemon_post_ms"] = Summary(daemon_post);
  exec["direct_ms"] = Summary(via_direct);
  exec["guest_fork_reap_ms"] = Summary(guest_fork_reap);
  exec["difference_of_medians_ms"] = diff;
  exec["paired_difference_ms"] = Summary(paired);
  exec["paired_difference_median_ci95_ms"] = {ci_lo, ci_hi};
  exec["reconnects"] = reconnects;
  exec["raw_daemon_ms"] = via_daemon;
  exec["raw_daemon_post_ms"] = daemon_post;
  exec["raw_direct_ms"] = via_direct;
  exec["raw_guest_fork_reap_ms"] = guest_fork_reap;
  report.Row(absl::StrFormat("exec `true` through aboxd (POST execs + GET output to the exit "
                             "line), median (p90) of %zu",
                             via_daemon.size()),
             absl::StrFormat("%.2f ms (%.2f)", daemon_med, Percentile(via_daemon, 0.9)));
  report.Row("of which POST .../execs until its 201, median",
             absl::StrFormat("%.2f ms", Percentile(daemon_post, 0.5)));
  report.Row("exec `true` through the runtime library in-process, interleaved, median (p90)",
             absl::StrFormat("%.2f ms (%.2f)", direct_med, Percentile(via_direct, 0.9)));
  report.Row("daemon − direct: difference of the medians", absl::StrFormat("%.2f ms", diff),
             absl::StrCat("≤ 1 ms: ", Goal(diff <= 1.0)));
  report.Row("daemon − direct: median of the paired differences [95 % CI] (p10..p90)",
             absl::StrFormat("%.2f ms [%.2f, %.2f] (%.2f..%.2f)", Percentile(paired, 0.5), ci_lo,
                             ci_hi, Percentile(paired, 0.1), Percentile(paired, 0.9)));
  report.Row("guest's own fork→reap of `true` (agent's duration_us, direct runs), median",
             absl::StrFormat("%.2f ms", guest_med));
  if (reconnects != 0) {
    report.Row("connections the daemon closed during 2 (reopened outside the clock)",
               std::to_string(reconnects));
  }

  // The two measurements ran in different VMs: compare the VMs on the same shell loop.
  constexpr int kRounds = 6;
  auto vms = CompareVms(home, sandbox, direct, kRounds);
  if (!vms) {
    return std::nullopt;
  }
  report.json["vm_check"] = {{"daemon_vm_fork_exec_ms", vms->first},
                             {"direct_vm_fork_exec_ms", vms->second}};
  report.Row(absl::StrFormat("check: fork+exec+wait of /bin/true in a guest shell loop, daemon's "
                             "VM vs the direct VM (median of %d rounds × 20)",
                             kRounds),
             absl::StrFormat("%.2f ms vs %.2f ms", Percentile(vms->first, 0.5),
                             Percentile(vms->second, 0.5)));
  return guest_med;
}

// Runs the CLI once with a deadline; returns its wall time in ms, or an error with its stderr.
// 3. `abox exec ID -- true` through the real CLI, if this build has the command.
void RunCliBench(const BenchHome& home, const std::string& sandbox, double guest_med,
                 const Flags& flags, Report& report) {
  std::string skip;
  if (::access(flags.abox.c_str(), X_OK) != 0) {
    skip = absl::StrCat("no abox binary at ", flags.abox);
  } else if (auto help = abox::base::RunCommand({flags.abox, "exec", "--help"});
             !help.ok() || help->status.ShellCode() != 0) {
    skip =
        absl::StrCat("`abox exec` is not available in ", flags.abox, " (",
                     help.ok() ? help->err.substr(0, help->err.find('\n')) : "spawn failed", ")");
  }
  std::vector<double> cli;
  for (int i = 0; skip.empty() && i < 1 + flags.cli_runs && !g_interrupted.load(); ++i) {
    absl::StatusOr<double> ms = TimeCli(home, {flags.abox, "exec", sandbox, "--", "true"});
    if (!ms.ok()) {
      skip = absl::StrCat("`abox exec ", sandbox, " -- true` failed (", ms.status().message(), ")");
    } else if (i > 0) {  // the first run warms the page cache for the binary
      cli.push_back(*ms);
    }
  }
  if (skip.empty() && cli.empty()) {
    skip = "interrupted";
  }
  if (!skip.empty()) {
    std::fprintf(stderr, "daemon_bench: SKIPPED the `abox exec` measurement: %s\n", skip.c_str());
    report.json["cli_exec"] = {{"skipped", skip}};
    report.Row("`abox exec ID -- true`", "skipped (see stderr)");
    return;
  }
  report.json["cli_exec"] = {{"runs", cli.size()},
                             {"wall_ms", Summary(cli)},
                             {"guest_fork_reap_ms", guest_med},
                             {"raw_wall_ms", cli}};
  report.Row(
      absl::StrFormat("`abox exec ID -- true`, whole CLI process, median (p90) of %zu", cli.size()),
      absl::StrFormat("%.1f ms (%.1f)", Percentile(cli, 0.5), Percentile(cli, 0.9)));
  report.Row("against the guest's own fork→reap of `true` (from 2), median",
             absl::StrFormat("%.2f ms", guest_med));
}

// 4. An exec of `true` as an MCP tool call (one abox-mcp session) against `abox exec`,
// interleaved; and what the tool list costs a client's context.
void RunMcpBench(const BenchHome& home, const std::string& sandbox, const Flags& flags,
                 Report& report) {
  McpBenchResult m = MeasureMcpAgainstCli(flags.abox_mcp, flags.abox, home, sandbox, flags.mcp_runs,
                                          g_interrupted);
  if (!m.skip.empty()) {
    std::fprintf(stderr, "daemon_bench: SKIPPED the MCP measurement: %s\n", m.skip.c_str());
    report.json["mcp_exec"] = {{"skipped", m.skip}};
    report.Row("MCP `exec` of `true`", "skipped (see stderr)");
    return;
  }
  double mcp = Percentile(m.mcp_ms, 0.5);
  double cli = Percentile(m.cli_ms, 0.5);
  report.json["mcp_exec"] = {{"pairs", m.mcp_ms.size()},
                             {"mcp_wall_ms", Summary(m.mcp_ms)},
                             {"cli_wall_ms", Summary(m.cli_ms)},
                             {"tools", m.tools},
                             {"tools_list_bytes", m.tools_bytes},
                             {"raw_mcp_ms", m.mcp_ms},
                             {"raw_cli_ms", m.cli_ms}};
  report.Row(absl::StrFormat("MCP `exec` of `true` (tools/call on one abox-mcp session, request "
                             "written to result read), median (p90) of %zu",
                             m.mcp_ms.size()),
             absl::StrFormat("%.1f ms (%.1f)", mcp, Percentile(m.mcp_ms, 0.9)));
  report.Row("`abox exec ID -- true` interleaved with it, median (p90)",
             absl::StrFormat("%.1f ms (%.1f)", cli, Percentile(m.cli_ms, 0.9)));
  report.Row("MCP minus CLI, medians", absl::StrFormat("%+.1f ms", mcp - cli),
             absl::StrCat("within 5 ms: ", Goal(mcp - cli <= 5.0)));
  report.Row(absl::StrFormat("tools/list: %zu tools, compact JSON of `tools`", m.tools),
             absl::StrFormat("%zu bytes (~%zu tokens at ~4 bytes per token)", m.tools_bytes,
                             m.tools_bytes / 4));
}

}  // namespace

int main(int argc, char** argv) {
  Flags flags = ParseFlags(argc, argv);
  // From here on everything lives in the private home; abox, aboxd and the in-process sandbox
  // all find it through the environment (set before any thread starts).
  std::unique_ptr<BenchHome> entered = EnterBenchHome("daemon_bench", flags.aboxd, OnSignal);
  const BenchHome& home = *entered;

  auto aboxd = StartAboxd(flags.aboxd, home);
  if (!aboxd.ok()) {
    std::fprintf(stderr, "daemon_bench: %s\n", std::string(aboxd.status().message()).c_str());
    home.PrintLogTail();
    return 1;
  }
  auto vmm = abox::runtime::CreateDefaultVmm();  // outlives `direct`
  if (!vmm.ok()) {
    std::fprintf(stderr, "daemon_bench: %s\n", std::string(vmm.status().message()).c_str());
    return 1;
  }
  Report report;
  report.json["host_cores"] = std::thread::hardware_concurrency();
  std::vector<std::string> sandboxes;
  std::unique_ptr<abox::runtime::Sandbox> direct;
  bool finished = false;
  // Teardown in order: the in-process VM, the daemon's sandboxes through the API, aboxd itself;
  // then BenchHome kills whatever is left and removes the home.
  absl::Cleanup teardown = [&] {
    if (!finished) {
      home.PrintLogTail();
    }
    if (direct != nullptr) {
      (void)direct->Destroy();
      direct.reset();
    }
    for (const std::string& id : sandboxes) {
      Response r = Call(home, "DELETE", absl::StrCat("/v1/sandboxes/", id, "?force=true"));
      if (r.status != 204) {
        std::fprintf(stderr, "daemon_bench: DELETE sandbox %s answered %d: %s\n", id.c_str(),
                     r.status, r.body.c_str());
      }
    }
    (void)aboxd->Kill(SIGTERM);
    auto ended = aboxd->Wait(std::chrono::seconds(60));
    if (!ended.ok() || ended->ShellCode() != 0) {
      std::fprintf(stderr, "daemon_bench: aboxd did not stop cleanly (%s)\n",
                   ended.ok() ? ended->ToString().c_str() : "timeout");
      home.PrintLogTail();
      aboxd->KillAndReap();
    }
  };

  if (!CreateSandboxes(home, sandboxes, report)) {
    return 1;
  }
  // The in-process sandbox for the direct runtime measurements.
  auto booted = abox::runtime::Sandbox::Boot(
      **vmm, {}, [](const std::string& s) { std::fprintf(stderr, "note: %s\n", s.c_str()); });
  if (!booted.ok()) {
    std::fprintf(stderr, "daemon_bench: direct boot: %s\n",
                 std::string(booted.status().message()).c_str());
    return 1;
  }
  direct = *std::move(booted);
  report.json["accel_direct"] = abox::vmm::AccelName(direct->vm().accel());
  std::this_thread::sleep_for(std::chrono::seconds(2));  // let the guests settle after boot

  if (!RunListBench(home, aboxd->pid(), flags, report)) {
    return 1;
  }
  std::optional<double> guest_med = RunExecBench(home, sandboxes[0], *direct, flags, report);
  if (!guest_med) {
    return 1;
  }
  RunCliBench(home, sandboxes[0], *guest_med, flags, report);
  RunMcpBench(home, sandboxes[0], flags, report);
  finished = true;
  std::move(teardown).Invoke();

  std::printf("| measurement | result | goal |\n|---|---|---|\n");
  for (const auto& [what, result, goal] : report.rows) {
    std::printf("| %s | %s | %s |\n", what.c_str(), result.c_str(), goal.c_str());
  }
  std::printf("\naccel: daemon %s, direct %s; %d sandboxes booted through aboxd in %.0f ms\n",
              report.json.value("accel_daemon", "?").c_str(),
              report.json.value("accel_direct", "?").c_str(), kSandboxes,
              report.json.value("daemon_boot_3_ms", 0.0));
  if (!flags.json_path.empty()) {
    std::ofstream(flags.json_path) << report.json.dump(2) << "\n";
  }
  return 0;
}
