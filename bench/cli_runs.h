// snapshot_bench's `abox run` part: the whole CLI process, `abox run --no-stdin -- true`, through
// aboxd (a clone of the golden template) and with --direct (a boot, no aboxd), in the same run.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "bench/daemon_fixture.h"

namespace abox::bench {

struct CliRuns {
  std::vector<double> daemon_ms;  // `abox run -- true` through aboxd, wall time of the process
  std::vector<double> direct_ms;  // `abox run --direct -- true`
};

// Starts aboxd (`aboxd_bin`, --pool 0) in `home`, runs `abox_bin run --no-stdin -- true`
// `runs` times and `abox_bin run --direct --no-stdin -- true` `direct_runs` times (this process's
// environment points abox at the home), and stops that aboxd before it returns.
absl::StatusOr<CliRuns> MeasureCliRuns(const std::string& aboxd_bin, const std::string& abox_bin,
                                       const BenchHome& home, int runs, int direct_runs,
                                       const std::vector<std::string>& budget);

}  // namespace abox::bench
