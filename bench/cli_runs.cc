#include "bench/cli_runs.h"

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "src/base/child_process.h"

namespace abox::bench {
namespace {

using Clock = std::chrono::steady_clock;

absl::StatusOr<double> TimedRun(const std::vector<std::string>& argv) {
  auto t0 = Clock::now();
  absl::StatusOr<base::CommandResult> r = base::RunCommand(argv);
  double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  if (!r.ok()) {
    return r.status();
  }
  if (r->status.ShellCode() != 0) {
    return absl::InternalError(
        absl::StrCat(absl::StrJoin(argv, " "), " exited ", r->status.ShellCode(), ": ", r->err));
  }
  return ms;
}

}  // namespace

absl::StatusOr<CliRuns> MeasureCliRuns(const std::string& aboxd_bin, const std::string& abox_bin,
                                       const BenchHome& home, int runs, int direct_runs,
                                       const std::vector<std::string>& budget) {
  absl::StatusOr<base::ChildProcess> aboxd = StartAboxdWithPool(aboxd_bin, home, 0, budget);
  if (!aboxd.ok()) {
    return aboxd.status();
  }
  absl::Cleanup stop = [&] { StopAboxd(*aboxd); };
  CliRuns out;
  // Alternated, so that a noisy moment on the host costs both kinds alike.
  for (int i = 0; i < std::max(runs, direct_runs); ++i) {
    if (i < runs) {
      absl::StatusOr<double> ms = TimedRun({abox_bin, "run", "--no-stdin", "--", "true"});
      if (!ms.ok()) {
        return ms.status();
      }
      out.daemon_ms.push_back(*ms);
      std::fprintf(stderr, "  abox run -> true through aboxd: %.0f ms\n", *ms);
    }
    if (i < direct_runs) {
      absl::StatusOr<double> ms =
          TimedRun({abox_bin, "run", "--direct", "--no-stdin", "--", "true"});
      if (!ms.ok()) {
        return ms.status();
      }
      out.direct_ms.push_back(*ms);
      std::fprintf(stderr, "  abox run --direct -> true: %.0f ms\n", *ms);
    }
  }
  return out;
}

}  // namespace abox::bench
