#include "bench/pool_creates.h"

#include <signal.h>

#include <chrono>
#include <thread>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "bench/snapshot_api.h"
#include "nlohmann/json.hpp"

namespace abox::bench {
namespace {

using Clock = std::chrono::steady_clock;

double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

// Idle VMs of the default image and size in the pool now; -1 when health does not say.
int IdleDefault(const BenchHome& home) {
  nlohmann::json health = SlowCall(home, "GET", "/v1/health").Json();
  if (!health.is_object() || !health.contains("pool")) {
    return -1;
  }
  for (const nlohmann::json& s : health["pool"]["shapes"]) {
    if (s.value("image", "") == "default" && s.value("memory_mib", 0) == 512 &&
        s.value("cpus", 0) == 1) {
      return s.value("idle", 0);
    }
  }
  return 0;
}

}  // namespace

absl::StatusOr<PoolCreates> MeasurePoolCreates(const std::string& aboxd_bin, const BenchHome& home,
                                               int runs, const std::vector<std::string>& budget) {
  absl::StatusOr<base::ChildProcess> aboxd = StartAboxdWithPool(aboxd_bin, home, 1, budget);
  if (!aboxd.ok()) {
    return aboxd.status();
  }
  absl::Cleanup stop = [&] { StopAboxd(*aboxd); };
  PoolCreates out;
  for (int i = 0; i < runs; ++i) {
    // The pool refills between creates: each create meets a ready VM (the wait is not timed).
    auto deadline = Clock::now() + std::chrono::minutes(3);
    while (IdleDefault(home) < 1) {
      if (Clock::now() > deadline) {
        return absl::DeadlineExceededError(
            "the warm pool never had a VM ready (aboxd's log says why)");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the refill's restore settles
    auto t0 = Clock::now();
    http::httptest::Response r = SlowCall(home, "POST", "/v1/sandboxes", R"({"name":"pooled"})");
    auto t1 = Clock::now();
    std::string id = r.Json().is_object() ? r.Json().value("id", "") : "";
    if (r.status != 201) {
      return absl::InternalError(
          absl::StrCat("POST /v1/sandboxes answered ", r.status, ": ", r.body));
    }
    bool ran = RunTrue(home, id);
    auto t2 = Clock::now();
    ReadyInfo ready = ReadReady(home, id);
    (void)SlowCall(home, "DELETE", absl::StrCat("/v1/sandboxes/", id, "?force=true"));
    if (!ran) {
      return absl::InternalError("`true` failed in a sandbox from the pool");
    }
    out.create_ms.push_back(Ms(t1 - t0));
    out.total_ms.push_back(Ms(t2 - t0));
    out.not_from_pool += ready.started_from == "pool" ? 0 : 1;
    std::fprintf(stderr, "  pool create -> true: %.0f ms (create %.0f, started from %s)\n",
                 out.total_ms.back(), out.create_ms.back(), ready.started_from.c_str());
  }
  return out;
}

}  // namespace abox::bench
