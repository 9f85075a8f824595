// Golden snapshots, checkpoints and forks (issue 13, decision 0012). Starts its own aboxd in a
// private $ABOX_HOME (images/ linked to the images of the $ABOX_HOME it runs with; templates/
// private, so the first create makes the template and the run says how long that took) with a
// budget for a dozen sandboxes, and measures in one run, so that the ratios hold on a noisy host:
//   1. create {"cold": true} -> first `true` done through the API exec path;
//   2. create from the golden snapshot -> first `true` done (interleaved with 1 to cancel drift);
//   3. a first and a second checkpoint of an idle clone: save_ms from the answer and wall time;
//   4. restore of a checkpoint -> first `true` done;
//   5. fork 10 -> all 10 answered `true`;
//   6. idle PSS and RSS of 10 clones of one template (smaps_rollup of each clone's QEMU);
//   7. create from the warm pool -> first `true` done, with a second aboxd (--pool 1) on the same
//      home after the first stopped (bench/pool_creates.h);
//   8. `abox run -- true` as a whole CLI process, through aboxd (a clone of the template) and
//      with --direct (a boot), alternated (bench/cli_runs.h).
// Every sandbox it made is removed (DELETE ?force=true), aboxd stopped and the home removed,
// also on failure. Prints a Markdown table for docs/BENCHMARKS.md and, with --json FILE, the raw
// numbers.
//
//   snapshot_bench [--aboxd PATH] [--cold-runs N] [--snapshot-runs N] [--restore-runs N]
//                  [--fork-count N] [--pss-clones N] [--pool-runs N] [--run-runs N] [--json FILE]
//                  [--aboxd-log FILE]
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
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
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bench/cli_runs.h"
#include "bench/daemon_fixture.h"
#include "bench/pool_creates.h"
#include "bench/snapshot_api.h"
#include "nlohmann/json.hpp"
#include "src/base/host_layout.h"

namespace {

using Clock = std::chrono::steady_clock;
using abox::bench::BenchHome;
using abox::bench::EnterBenchHome;
using abox::bench::MeasurePoolCreates;
using abox::bench::Percentile;
using abox::bench::PoolCreates;
using abox::bench::PssRss;
using abox::bench::ReadReady;
using abox::bench::ReadyInfo;
using abox::bench::RunTrue;
using abox::bench::SelfDir;
using abox::bench::SlowCall;
using abox::bench::Summary;
using abox::bench::TemplateLine;
using abox::http::httptest::Response;
namespace fs = std::filesystem;

std::atomic<bool> g_interrupted{false};

void OnSignal(int /*sig*/) { g_interrupted.store(true); }

double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

void Warn(const std::string& what) { std::fprintf(stderr, "snapshot_bench: %s\n", what.c_str()); }

struct Flags {
  std::string aboxd = SelfDir() + "/aboxd";
  int cold_runs = 5;
  int snapshot_runs = 10;
  int restore_runs = 3;
  int fork_count = 10;
  int pss_clones = 10;
  int pool_runs = 10;
  int run_runs = 5;  // `abox run -- true` through aboxd; --direct gets (run_runs + 1) / 2
  std::string json_path;
  std::string aboxd_log;  // a copy of aboxd's log (the home goes away)
};

Flags ParseFlags(int argc, char** argv) {
  Flags f;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    bool has_value = i + 1 < argc;
    auto count = [&] { return std::max(1, std::atoi(argv[++i])); };
    if (a == "--aboxd" && has_value) {
      f.aboxd = argv[++i];
    } else if (a == "--cold-runs" && has_value) {
      f.cold_runs = count();
    } else if (a == "--snapshot-runs" && has_value) {
      f.snapshot_runs = count();
    } else if (a == "--restore-runs" && has_value) {
      f.restore_runs = count();
    } else if (a == "--fork-count" && has_value) {
      f.fork_count = std::min(32, count());
    } else if (a == "--pss-clones" && has_value) {
      f.pss_clones = count();
    } else if (a == "--pool-runs" && has_value) {
      f.pool_runs = count();
    } else if (a == "--run-runs" && has_value) {
      f.run_runs = count();
    } else if (a == "--json" && has_value) {
      f.json_path = argv[++i];
    } else if (a == "--aboxd-log" && has_value) {
      f.aboxd_log = argv[++i];
    } else {
      std::fprintf(
          stderr,
          "usage: snapshot_bench [--aboxd PATH] [--cold-runs N] [--snapshot-runs N] "
          "[--restore-runs N] [--fork-count N] [--pss-clones N] [--pool-runs N] [--run-runs N] "
          "[--json FILE] "
          "[--aboxd-log FILE]\n"
          "Runs with the images of $ABOX_HOME (default ~/.local/share/abox).\n");
      std::exit(2);  // NOLINT(concurrency-mt-unsafe)
    }
  }
  return f;
}

std::string Goal(bool met) { return met ? "met" : "**not met**"; }

// The run: the daemon's home, the sandboxes it holds (removed at the end), the report.
class Bench {
 public:
  explicit Bench(const BenchHome& home) : home_(home) {}

  // A create with `body`, then `true` in it. The sandbox stays (in ids()).
  struct Created {
    std::string id;
    double create_ms = 0;  // POST until its 201 (the sandbox is ready)
    double total_ms = 0;   // POST until `true` has exited
    ReadyInfo ready;
  };
  std::optional<Created> CreateThenTrue(const nlohmann::json& body) {
    auto t0 = Clock::now();
    Response r = SlowCall(home_, "POST", "/v1/sandboxes", body.dump());
    auto t1 = Clock::now();
    std::string id = r.Json().is_object() ? r.Json().value("id", "") : "";
    if (!id.empty()) {
      ids_.push_back(id);
    }
    if (r.status != 201) {
      Warn(absl::StrCat("POST /v1/sandboxes ", body.dump(), " answered ", r.status, ": ", r.body));
      return std::nullopt;
    }
    if (!RunTrue(home_, id)) {
      return std::nullopt;
    }
    auto t2 = Clock::now();
    return Created{
        .id = id, .create_ms = Ms(t1 - t0), .total_ms = Ms(t2 - t0), .ready = ReadReady(home_, id)};
  }

  bool Remove(const std::string& id) {
    Response r = SlowCall(home_, "DELETE", absl::StrCat("/v1/sandboxes/", id, "?force=true"));
    if (r.status != 204) {
      Warn(absl::StrCat("DELETE sandbox ", id, " answered ", r.status, ": ", r.body));
      return false;
    }
    ids_.erase(std::remove(ids_.begin(), ids_.end(), id), ids_.end());
    return true;
  }

  // Removes every sandbox of this private aboxd: those it answered with, and those it did not
  // name (the forks that came up when a fork as a whole failed).
  void RemoveAll() {
    std::vector<std::string> all = ids_;
    nlohmann::json list = SlowCall(home_, "GET", "/v1/sandboxes").Json();
    if (list.is_object() && list["sandboxes"].is_array()) {
      for (const auto& s : list["sandboxes"]) {
        std::string id = s.is_object() ? s.value("id", "") : "";
        if (!id.empty() && std::find(all.begin(), all.end(), id) == all.end()) {
          all.push_back(id);
        }
      }
    }
    for (const std::string& id : all) {
      (void)Remove(id);
    }
  }

  void Row(std::string what, std::string result, std::string goal = "") {
    rows_.push_back({std::move(what), std::move(result), std::move(goal)});
  }

  bool RunCreates(const Flags& flags);
  std::optional<std::string> RunPss(const Flags& flags);
  std::optional<std::string> RunCheckpoints(const std::string& sandbox);
  bool RunRestores(const std::string& sandbox, const std::string& checkpoint, const Flags& flags);
  bool RunFork(const std::string& sandbox, int count, const Flags& flags);

  nlohmann::json& json() { return json_; }
  [[nodiscard]] const std::vector<std::array<std::string, 3>>& rows() const { return rows_; }

 private:
  const BenchHome& home_;
  std::vector<std::string> ids_;
  nlohmann::json json_;
  std::vector<std::array<std::string, 3>> rows_;  // measurement, result, goal
};

// 1 and 2. One create from the snapshot first (it makes the template), then cold and snapshot
// creates interleaved (one cold after every snapshot_runs / cold_runs snapshot creates), each
// removed before the next so that every create meets the same host.
bool Bench::RunCreates(const Flags& flags) {
  auto first = CreateThenTrue({{"name", "snap-first"}});
  if (!first || !Remove(first->id)) {
    return false;
  }
  json_["first_snapshot_create"] = {{"create_ms", first->create_ms},
                                    {"total_ms", first->total_ms},
                                    {"started_from", first->ready.started_from},
                                    {"boot_ms", first->ready.boot_ms}};
  std::vector<double> cold;
  std::vector<double> snap;
  std::vector<double> cold_create;
  std::vector<double> snap_create;
  std::vector<double> snap_boot;
  int not_restored = 0;
  int every = std::max(1, flags.snapshot_runs / flags.cold_runs);
  for (int s = 0, c = 0; (s < flags.snapshot_runs || c < flags.cold_runs) && !g_interrupted;) {
    bool cold_turn = c < flags.cold_runs && (s >= flags.snapshot_runs || s >= (c + 1) * every);
    auto r =
        CreateThenTrue({{"name", absl::StrCat(cold_turn ? "cold-" : "snap-", cold_turn ? c : s)},
                        {"cold", cold_turn}});
    if (!r || !Remove(r->id)) {
      return false;
    }
    std::fprintf(stderr, "  %s create -> true: %.0f ms (create %.0f, started from %s)\n",
                 cold_turn ? "cold" : "snapshot", r->total_ms, r->create_ms,
                 r->ready.started_from.c_str());
    if (cold_turn) {
      cold.push_back(r->total_ms);
      cold_create.push_back(r->create_ms);
      ++c;
    } else {
      snap.push_back(r->total_ms);
      snap_create.push_back(r->create_ms);
      snap_boot.push_back(static_cast<double>(r->ready.boot_ms));
      not_restored += r->ready.started_from == "snapshot" ? 0 : 1;
      if (!r->ready.note.empty()) {
        Warn(absl::StrCat("snapshot create booted: ", r->ready.note));
      }
      ++s;
    }
  }
  if (g_interrupted) {
    return false;
  }
  double cold_med = Percentile(cold, 0.5);
  double snap_med = Percentile(snap, 0.5);
  double ratio = snap_med > 0 ? cold_med / snap_med : 0;
  json_["cold_create_to_true_ms"] = Summary(cold);
  json_["cold_create_ms"] = Summary(cold_create);
  json_["snapshot_create_to_true_ms"] = Summary(snap);
  json_["snapshot_create_ms"] = Summary(snap_create);
  json_["snapshot_ready_boot_ms"] = Summary(snap_boot);
  json_["snapshot_creates_that_booted"] = not_restored;
  json_["cold_over_snapshot"] = ratio;
  json_["raw_cold_ms"] = cold;
  json_["raw_snapshot_ms"] = snap;
  Row("first create after aboxd's start (makes the template) -> first `true` done",
      absl::StrFormat("%.0f ms (started from %s)", first->total_ms, first->ready.started_from));
  Row(absl::StrFormat("create `{\"cold\": true}` -> first `true` done, median (max) of %zu",
                      cold.size()),
      absl::StrFormat("%.0f ms (%.0f); the create alone %.0f ms", cold_med, Percentile(cold, 1),
                      Percentile(cold_create, 0.5)));
  Row(absl::StrFormat("create from the golden snapshot -> first `true` done, median (p90) of %zu",
                      snap.size()),
      absl::StrFormat("%.0f ms (%.0f); the create alone %.0f ms, `boot_ms` %.0f ms%s", snap_med,
                      Percentile(snap, 0.9), Percentile(snap_create, 0.5),
                      Percentile(snap_boot, 0.5),
                      not_restored == 0 ? "" : absl::StrCat("; ", not_restored, " BOOTED")),
      absl::StrCat("≤ 300 ms: ", Goal(snap_med <= 300 && not_restored == 0)));
  Row("cold / snapshot, medians (same run)", absl::StrFormat("%.1f×", ratio),
      absl::StrCat("≥ 6×: ", Goal(ratio >= 6)));
  return true;
}

// 6. N clones of the template, all alive and idle, then each one's QEMU PSS and RSS. Removes
// all but the last, which it returns (an idle clone for 3-5).
std::optional<std::string> Bench::RunPss(const Flags& flags) {
  std::vector<std::string> clones;
  for (int i = 0; i < flags.pss_clones && !g_interrupted; ++i) {
    auto r = CreateThenTrue({{"name", absl::StrCat("clone-", i)}});
    if (!r) {
      return std::nullopt;
    }
    clones.push_back(r->id);
  }
  constexpr int kSettleSeconds = 5;
  std::this_thread::sleep_for(std::chrono::seconds(kSettleSeconds));
  std::vector<double> pss_mib;
  std::vector<double> rss_mib;
  for (const std::string& id : clones) {
    Response r = SlowCall(home_, "GET", absl::StrCat("/v1/sandboxes/", id));
    int64_t pid = r.Json().is_object() ? r.Json().value("vmm_pid", int64_t{0}) : 0;
    auto m = pid > 0 ? PssRss(pid) : std::nullopt;
    if (!m) {
      Warn(absl::StrCat("no smaps_rollup for the QEMU of ", id, " (vmm_pid ", pid, ")"));
      return std::nullopt;
    }
    pss_mib.push_back(m->first / 1024);
    rss_mib.push_back(m->second / 1024);
  }
  json_["idle_clones"] = {{"clones", clones.size()},     {"settle_s", kSettleSeconds},
                          {"pss_mib", Summary(pss_mib)}, {"rss_mib", Summary(rss_mib)},
                          {"raw_pss_mib", pss_mib},      {"raw_rss_mib", rss_mib}};
  double pss_max = Percentile(pss_mib, 1);
  Row(absl::StrFormat("idle PSS of the QEMU of each of %zu clones of one 512 MiB template "
                      "(smaps_rollup), median (max)",
                      clones.size()),
      absl::StrFormat("%.1f MiB (%.1f)", Percentile(pss_mib, 0.5), pss_max),
      absl::StrCat("≤ 80 MiB each: ", Goal(pss_max <= 80)));
  Row("their RSS for comparison, median (max)",
      absl::StrFormat("%.1f MiB (%.1f)", Percentile(rss_mib, 0.5), Percentile(rss_mib, 1)));
  for (size_t i = 0; i + 1 < clones.size(); ++i) {
    if (!Remove(clones[i])) {
      return std::nullopt;
    }
  }
  return clones.back();
}

// 3. Two checkpoints of an idle clone, one after the other. Returns the second's id.
std::optional<std::string> Bench::RunCheckpoints(const std::string& sandbox) {
  std::string second;
  for (int i = 1; i <= 2; ++i) {
    auto t0 = Clock::now();
    Response r = SlowCall(home_, "POST", absl::StrCat("/v1/sandboxes/", sandbox, "/checkpoints"),
                          nlohmann::json({{"name", absl::StrCat("bench-", i)}}).dump());
    double wall = Ms(Clock::now() - t0);
    nlohmann::json j = r.Json();
    if (r.status != 201 || !j.is_object()) {
      Warn(absl::StrCat("checkpoint ", i, " answered ", r.status, ": ", r.body));
      return std::nullopt;
    }
    auto save_ms = j.value("save_ms", int64_t{-1});
    auto bytes = j.value("bytes", int64_t{-1});
    second = j.value("id", "");
    json_[absl::StrCat("checkpoint_", i)] = {
        {"wall_ms", wall}, {"save_ms", save_ms}, {"bytes", bytes}};
    Row(absl::StrFormat("checkpoint of an idle 512 MiB clone, %s: `save_ms` (wall of the POST); "
                        "size",
                        i == 1 ? "first" : "second"),
        absl::StrFormat("%d ms (%.0f ms); %.0f MiB", save_ms, wall,
                        static_cast<double>(bytes) / (1 << 20)),
        absl::StrCat("≤ 400 ms: ", Goal(static_cast<double>(save_ms) <= 400 && wall <= 400)));
  }
  return second;
}

// 4. Restores of `checkpoint` into `sandbox`, each followed by `true`.
bool Bench::RunRestores(const std::string& sandbox, const std::string& checkpoint,
                        const Flags& flags) {
  std::vector<double> to_true;
  std::vector<double> restore;
  for (int i = 0; i < flags.restore_runs && !g_interrupted; ++i) {
    auto t0 = Clock::now();
    Response r = SlowCall(home_, "POST", absl::StrCat("/v1/sandboxes/", sandbox, "/restore"),
                          nlohmann::json({{"checkpoint", checkpoint}}).dump());
    auto t1 = Clock::now();
    if (r.status != 200) {
      Warn(absl::StrCat("restore answered ", r.status, ": ", r.body));
      return false;
    }
    if (!RunTrue(home_, sandbox)) {
      return false;
    }
    restore.push_back(Ms(t1 - t0));
    to_true.push_back(Ms(Clock::now() - t0));
  }
  if (to_true.empty()) {
    return false;
  }
  json_["restore_to_true_ms"] = Summary(to_true);
  json_["restore_post_ms"] = Summary(restore);
  json_["raw_restore_to_true_ms"] = to_true;
  double med = Percentile(to_true, 0.5);
  Row(absl::StrFormat("restore a checkpoint -> first `true` done, median (max) of %zu",
                      to_true.size()),
      absl::StrFormat("%.0f ms (%.0f); the POST alone %.0f ms", med, Percentile(to_true, 1),
                      Percentile(restore, 0.5)),
      absl::StrCat("≤ 300 ms: ", Goal(med <= 300)));
  return true;
}

// 5. Fork `count`, then `true` in every fork at once; from the POST to the last `true`. The
// forks are removed afterwards.
bool Bench::RunFork(const std::string& sandbox, int count, const Flags& flags) {
  auto t0 = Clock::now();
  Response r = SlowCall(
      home_, "POST", absl::StrCat("/v1/sandboxes/", sandbox, "/fork"),
      nlohmann::json({{"count", count}, {"name_prefix", absl::StrCat("fork", count)}}).dump());
  auto t1 = Clock::now();
  nlohmann::json j = r.Json();
  std::vector<std::string> forks;
  if (j.is_object() && j["sandboxes"].is_array()) {
    for (const auto& s : j["sandboxes"]) {
      if (s.is_object() && s.contains("id")) {
        forks.push_back(s.value("id", ""));
        ids_.push_back(forks.back());
      }
    }
  }
  if (r.status != 201 || static_cast<int>(forks.size()) != count) {
    Warn(absl::StrCat("fork answered ", r.status, " with ", forks.size(), " sandboxes: ", r.body));
    json_[absl::StrCat("fork_", count)] = {
        {"post_ms", Ms(t1 - t0)}, {"status", r.status}, {"answer", r.body}};
    Row(absl::StrFormat("fork %d -> all %d answered `true`", count, count),
        absl::StrFormat("FAILED after %.0f ms: %d, %s", Ms(t1 - t0), r.status,
                        r.Json().is_object() && r.Json()["error"].is_object()
                            ? r.Json()["error"].value("message", "")
                            : r.body),
        count == flags.fork_count ? "≤ 2 s: **not met**" : "");
    return false;
  }
  std::vector<double> done(forks.size(), 0);
  std::atomic<int> failed{0};
  std::vector<std::thread> threads;
  threads.reserve(forks.size());
  for (size_t i = 0; i < forks.size(); ++i) {
    threads.emplace_back([&, i] {
      if (RunTrue(home_, forks[i])) {
        done[i] = Ms(Clock::now() - t0);
      } else {
        failed.fetch_add(1);
      }
    });
  }
  for (auto& t : threads) {
    t.join();
  }
  if (failed.load() != 0) {
    return false;
  }
  double last = Percentile(done, 1);
  json_[absl::StrCat("fork_", count)] = {{"count", forks.size()},
                                         {"post_ms", Ms(t1 - t0)},
                                         {"last_true_ms", last},
                                         {"raw_true_done_ms", done}};
  Row(absl::StrFormat("fork %zu -> all %zu answered `true` (POST fork to the last exit)",
                      forks.size(), forks.size()),
      absl::StrFormat("%.0f ms; the POST alone %.0f ms", last, Ms(t1 - t0)),
      count == flags.fork_count ? absl::StrCat("≤ 2 s: ", Goal(last <= 2000)) : "");
  for (const std::string& id : forks) {
    (void)Remove(id);
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  Flags flags = ParseFlags(argc, argv);
  // templates/ is not linked: the run makes its own template and says how long that took.
  std::unique_ptr<BenchHome> entered = EnterBenchHome("snapshot_bench", flags.aboxd, OnSignal);
  const BenchHome& home = *entered;

  // Room for the fork's parent and its forks, or for the idle clones, at 1 vCPU and 512 MiB.
  const int most = std::max(flags.fork_count + 1, flags.pss_clones) + 1;
  const std::vector<std::string> budget = {"--max-cpus", std::to_string(std::max(16, most)),
                                           "--max-memory",
                                           std::to_string(std::max(12000, most * 512 + 512))};
  std::vector<std::string> no_pool = {"--pool", "0"};
  no_pool.insert(no_pool.end(), budget.begin(), budget.end());
  auto aboxd = StartAboxd(flags.aboxd, home, no_pool);
  if (!aboxd.ok()) {
    Warn(std::string(aboxd.status().message()));
    home.PrintLogTail();
    return 1;
  }
  Bench bench(home);
  bench.json()["host_cores"] = std::thread::hardware_concurrency();
  bool finished = false;
  std::string template_line;
  // Teardown in order: the sandboxes through the API, aboxd itself; then BenchHome kills
  // whatever is left and removes the home.
  absl::Cleanup teardown = [&] {
    template_line = TemplateLine(home);
    if (!finished) {
      home.PrintLogTail();
    }
    bench.RemoveAll();
    (void)aboxd->Kill(SIGTERM);
    auto ended = aboxd->Wait(std::chrono::seconds(60));
    if (!ended.ok() || ended->ShellCode() != 0) {
      Warn(absl::StrCat("aboxd did not stop cleanly (", ended.ok() ? ended->ToString() : "timeout",
                        ")"));
      home.PrintLogTail();
      aboxd->KillAndReap();
    }
    if (!flags.aboxd_log.empty()) {
      std::error_code ec;
      fs::copy_file(home.log(), flags.aboxd_log, fs::copy_options::overwrite_existing, ec);
    }
  };

  // A step that fails is reported and the next ones run where they can.
  bool ok = bench.RunCreates(flags);
  std::optional<std::string> clone = bench.RunPss(flags);
  std::optional<std::string> checkpoint;
  if (clone) {
    checkpoint = bench.RunCheckpoints(*clone);
  }
  if (clone && checkpoint) {
    ok = bench.RunRestores(*clone, *checkpoint, flags) && ok;
  }
  if (clone && !bench.RunFork(*clone, flags.fork_count, flags)) {
    ok = false;
    // What a smaller fork does on this host, for the reading of the failure.
    bench.RemoveAll();
    auto parent = bench.CreateThenTrue({{"name", "fork-parent"}});
    if (parent) {
      (void)bench.RunFork(parent->id, std::max(1, flags.fork_count / 2), flags);
    }
  }
  ok = ok && clone.has_value() && checkpoint.has_value();
  finished = ok;
  std::move(teardown).Invoke();

  // 7. The warm pool, with an aboxd of its own (the template is on disk now: it loads it).
  if (!g_interrupted) {
    absl::StatusOr<PoolCreates> pool =
        MeasurePoolCreates(flags.aboxd, home, flags.pool_runs, budget);
    if (pool.ok()) {
      double med = Percentile(pool->total_ms, 0.5);
      double snap_med = bench.json()
                            .value("snapshot_create_to_true_ms", nlohmann::json::object())
                            .value("median", 0.0);
      bench.json()["pool_create_to_true_ms"] = Summary(pool->total_ms);
      bench.json()["pool_create_ms"] = Summary(pool->create_ms);
      bench.json()["pool_creates_not_from_pool"] = pool->not_from_pool;
      bench.Row(absl::StrFormat("create from the warm pool -> first `true` done, median (p90) "
                                "of %zu",
                                pool->total_ms.size()),
                absl::StrFormat("%.0f ms (%.0f); the create alone %.0f ms%s", med,
                                Percentile(pool->total_ms, 0.9), Percentile(pool->create_ms, 0.5),
                                pool->not_from_pool == 0 ? ""
                                                         : absl::StrCat("; ", pool->not_from_pool,
                                                                        " NOT FROM THE POOL")),
                absl::StrCat("≤ 60 ms: ", Goal(med <= 60 && pool->not_from_pool == 0)));
      if (snap_med > 0 && med > 0) {
        bench.Row("snapshot / pool, medians (same run)", absl::StrFormat("%.1f×", snap_med / med));
      }
    } else {
      Warn(absl::StrCat("warm pool: ", pool.status().message()));
      home.PrintLogTail();
      ok = false;
    }
  }

  // 8. `abox run -- true`, the whole CLI process: through aboxd (a clone of the template, which
  // is on disk now) and --direct (a boot without aboxd), alternated in the same run.
  if (!g_interrupted) {
    absl::StatusOr<abox::bench::CliRuns> runs = abox::bench::MeasureCliRuns(
        flags.aboxd, SelfDir() + "/abox", home, flags.run_runs, (flags.run_runs + 1) / 2, budget);
    if (runs.ok()) {
      double through = Percentile(runs->daemon_ms, 0.5);
      double direct = Percentile(runs->direct_ms, 0.5);
      bench.json()["cli_run_true_ms"] = Summary(runs->daemon_ms);
      bench.json()["cli_run_direct_true_ms"] = Summary(runs->direct_ms);
      bench.Row(absl::StrFormat("`abox run -- true` through aboxd (snapshot), whole CLI process, "
                                "median of %zu",
                                runs->daemon_ms.size()),
                absl::StrFormat("%.0f ms; `abox run --direct` (boot) %.0f ms: %.1f×", through,
                                direct, through > 0 ? direct / through : 0.0),
                "");
    } else {
      Warn(absl::StrCat("abox run: ", runs.status().message()));
      home.PrintLogTail();
      ok = false;
    }
  }

  bench.json()["template"] = template_line;
  std::printf("| measurement | result | goal |\n|---|---|---|\n");
  for (const auto& [what, result, goal] : bench.rows()) {
    std::printf("| %s | %s | %s |\n", what.c_str(), result.c_str(), goal.c_str());
  }
  std::printf("\ngolden template: %s\n",
              template_line.empty() ? "not in aboxd's log" : template_line.c_str());
  if (!flags.json_path.empty()) {
    std::ofstream(flags.json_path) << bench.json().dump(2) << "\n";
  }
  return ok ? 0 : 1;
}
