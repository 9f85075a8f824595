// Runtime benchmarks (issue: runtime). Boots real microVMs; prints a Markdown table for
// docs/BENCHMARKS.md and, with --json FILE, the raw numbers. Timings are medians of repeated
// runs in one process so that they can be compared as ratios on a noisy machine.
//
//   runtime_bench [--runs N] [--abox PATH] [--json FILE]
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "nlohmann/json.hpp"
#include "src/base/child_process.h"
#include "src/base/io.h"
#include "src/runtime/sandbox.h"

namespace {

using Clock = std::chrono::steady_clock;

double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) {
    return 0;
  }
  std::sort(v.begin(), v.end());
  size_t i =
      std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size() - 1) + 0.5));
  return v[i];
}

struct Output {
  std::string out;
  std::string err;
  int code = -1;
  uint64_t bytes = 0;
  uint64_t guest_duration_us = 0;  // the agent's own fork -> reap time for the command
};

// Runs a command in the sandbox and collects (or, with `count_only`, counts) its output.
Output RunIn(abox::runtime::Sandbox& sb, std::vector<std::string> argv, bool count_only = false) {
  Output o;
  auto exec = sb.agent().StartExec({.argv = std::move(argv)});
  if (!exec.ok()) {
    o.err = std::string(exec.status().message());
    return o;
  }
  while (auto c = (*exec)->ReadOutput()) {
    o.bytes += c->data.size();
    if (!count_only) {
      (c->is_stderr ? o.err : o.out) += c->data;
    }
  }
  auto r = (*exec)->Wait();
  o.code = r.ok() ? r->ShellCode() : -1;
  o.guest_duration_us = r.ok() ? r->duration_us : 0;
  return o;
}

uint64_t RssKib(pid_t pid) {
  auto status = abox::base::ReadFile(absl::StrCat("/proc/", pid, "/status"));
  if (!status.ok()) {
    return 0;
  }
  size_t pos = status->find("VmRSS:");
  uint64_t v = 0;
  if (pos != std::string::npos) {
    std::string rest = status->substr(pos + 6, 32);
    rest.erase(0, rest.find_first_not_of(" \t"));
    (void)absl::SimpleAtoi(rest.substr(0, rest.find(' ')), &v);
  }
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  int runs = 10;
  std::string abox_bin;
  std::string json_path;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--runs" && i + 1 < argc) {
      runs = std::max(1, std::atoi(argv[++i]));
    } else if (a == "--abox" && i + 1 < argc) {
      abox_bin = argv[++i];
    } else if (a == "--json" && i + 1 < argc) {
      json_path = argv[++i];
    } else {
      std::fprintf(stderr, "usage: runtime_bench [--runs N] [--abox PATH] [--json FILE]\n");
      return 2;
    }
  }
  nlohmann::json results;
  std::vector<std::pair<std::string, std::string>> table;

  // 1. Cold `abox run --direct -- true`, end to end through the CLI (no aboxd).
  if (!abox_bin.empty()) {
    std::vector<double> walls;
    for (int i = 0; i < runs; ++i) {
      auto t0 = Clock::now();
      auto r = abox::base::RunCommand({abox_bin, "run", "--direct", "--no-stdin", "--", "true"});
      if (!r.ok() || r->status.ShellCode() != 0) {
        std::fprintf(stderr, "abox run failed: %s\n", r.ok() ? r->err.c_str() : "spawn");
        return 1;
      }
      walls.push_back(Ms(Clock::now() - t0));
    }
    results["cold_run_true_ms"] = {{"median", Percentile(walls, 0.5)},
                                   {"p90", Percentile(walls, 0.9)},
                                   {"min", Percentile(walls, 0)},
                                   {"runs", runs}};
    table.push_back(
        {"cold `abox run -- true` (wall, median / p90)",
         absl::StrFormat("%.0f ms / %.0f ms", Percentile(walls, 0.5), Percentile(walls, 0.9))});
  }

  // 2. One sandbox through the library for the in-VM measurements.
  auto vmm = abox::runtime::CreateDefaultVmm();
  if (!vmm.ok()) {
    std::fprintf(stderr, "%s\n", std::string(vmm.status().message()).c_str());
    return 1;
  }
  auto t0 = Clock::now();
  auto sb = abox::runtime::Sandbox::Boot(
      **vmm, {}, [](const std::string& s) { std::fprintf(stderr, "note: %s\n", s.c_str()); });
  if (!sb.ok()) {
    std::fprintf(stderr, "boot failed: %s\n", std::string(sb.status().message()).c_str());
    return 1;
  }
  double boot_ms = Ms(Clock::now() - t0);
  results["boot_to_agent_ready_ms"] = boot_ms;
  results["accel"] = abox::vmm::AccelName((*sb)->vm().accel());
  table.push_back(
      {"VMM start → agent hello (library, one boot)", absl::StrFormat("%.0f ms", boot_ms)});

  // Idle RSS of the VMM right after boot (2 s to settle).
  ::sleep(2);
  uint64_t boot_rss = RssKib((*sb)->vm().pid());
  results["idle_vmm_rss_after_boot_mib"] = static_cast<double>(boot_rss) / 1024.0;
  table.push_back({"idle QEMU RSS right after boot (-m 512)",
                   absl::StrFormat("%.0f MiB", static_cast<double>(boot_rss) / 1024.0)});

  // Channel round trip: ping/pong through the agent.
  std::vector<double> rtts;
  for (int i = 0; i < 1000; ++i) {
    auto rtt = (*sb)->agent().Ping(absl::Seconds(5));
    if (rtt.ok()) {
      rtts.push_back(absl::ToDoubleMicroseconds(*rtt));
    }
  }
  results["channel_rtt_us"] = {{"median", Percentile(rtts, 0.5)}, {"p99", Percentile(rtts, 0.99)}};
  table.push_back(
      {"channel round trip, 1000 pings (median / p99)",
       absl::StrFormat("%.0f µs / %.0f µs", Percentile(rtts, 0.5), Percentile(rtts, 0.99))});

  // Exec overhead: abox's round trip for `true` minus the guest's own fork+exec+wait of it.
  // TCG timings drift by several ms over seconds, so the two are measured interleaved: each
  // round runs 9 execs through abox and one 40-iteration loop in the guest, and the overhead
  // is the median over rounds of (median round trip - guest mean).
  std::vector<double> exec_rtts;
  std::vector<double> guest_means;
  std::vector<double> round_overheads;
  std::vector<double> outside_spawn;  // round trip minus the agent's fork -> reap time
  const int rounds = std::max(8, runs);
  for (int round = 0; round < rounds; ++round) {
    std::vector<double> round_rtts;
    for (int i = 0; i < 9; ++i) {
      auto e0 = Clock::now();
      auto o = RunIn(**sb, {"/bin/true"});
      if (o.code != 0) {
        std::fprintf(stderr, "exec failed: %s\n", o.err.c_str());
        return 1;
      }
      round_rtts.push_back(Ms(Clock::now() - e0));
      outside_spawn.push_back(round_rtts.back() - static_cast<double>(o.guest_duration_us) / 1000);
    }
    auto guest = RunIn(**sb, {"sh", "-c",
                              "i=0; s=$(date +%s%N); while [ $i -lt 40 ]; do /bin/true; "
                              "i=$((i+1)); done; e=$(date +%s%N); echo $(( (e - s) / 40 ))"});
    int64_t ns = 0;
    if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(guest.out), &ns)) {
      std::fprintf(stderr, "guest timing loop failed: %s\n", guest.err.c_str());
      return 1;
    }
    double guest_ms = static_cast<double>(ns) / 1e6;
    guest_means.push_back(guest_ms);
    round_overheads.push_back(Percentile(round_rtts, 0.5) - guest_ms);
    exec_rtts.insert(exec_rtts.end(), round_rtts.begin(), round_rtts.end());
  }
  double exec_median = Percentile(exec_rtts, 0.5);
  double guest_fork_exec_ms = Percentile(guest_means, 0.5);
  double overhead = Percentile(round_overheads, 0.5);
  results["exec_true_ms"] = {{"median", exec_median}, {"p90", Percentile(exec_rtts, 0.9)}};
  results["guest_fork_exec_true_ms"] = guest_fork_exec_ms;
  results["exec_overhead_ms"] = {{"median", overhead},
                                 {"min", Percentile(round_overheads, 0)},
                                 {"max", Percentile(round_overheads, 1)}};
  table.push_back({"exec `true` round trip (median)", absl::StrFormat("%.2f ms", exec_median)});
  table.push_back({"guest's own fork+exec+wait of `true` (sh loop, median of rounds)",
                   absl::StrFormat("%.2f ms", guest_fork_exec_ms)});
  table.push_back(
      {absl::StrFormat("exec overhead, interleaved (median of %d rounds; min..max)", rounds),
       absl::StrFormat("%.2f ms (%.2f..%.2f)", overhead, Percentile(round_overheads, 0),
                       Percentile(round_overheads, 1))});
  results["exec_outside_spawn_ms"] = Percentile(outside_spawn, 0.5);
  table.push_back({"of which outside the agent's fork→reap (protocol, host, agent loop)",
                   absl::StrFormat("%.2f ms", Percentile(outside_spawn, 0.5))});

  // Stdout throughput: 512 MiB of zeros through the channel.
  const uint64_t kBytes = 512ULL << 20;
  auto s0 = Clock::now();
  auto bulk = RunIn(**sb, {"head", "-c", std::to_string(kBytes), "/dev/zero"}, true);
  double secs = Ms(Clock::now() - s0) / 1000.0;
  double mbps = static_cast<double>(bulk.bytes) / 1e6 / secs;
  results["stdout_mb_per_s"] = mbps;
  table.push_back({"stdout throughput, 512 MiB (MB/s)", absl::StrFormat("%.0f MB/s", mbps)});

  // Idle RSS of the VMM process.
  ::sleep(2);
  uint64_t rss = RssKib((*sb)->vm().pid());
  results["idle_vmm_rss_mib"] = static_cast<double>(rss) / 1024.0;
  table.push_back({"idle QEMU RSS after the runs above (guest page cache filled)",
                   absl::StrFormat("%.0f MiB", static_cast<double>(rss) / 1024.0)});
  (void)(*sb)->Destroy();

  std::printf("| measurement | result |\n|---|---|\n");
  for (const auto& [k, v] : table) {
    std::printf("| %s | %s |\n", k.c_str(), v.c_str());
  }
  if (!json_path.empty()) {
    std::ofstream(json_path) << results.dump(2) << "\n";
  }
  return 0;
}
