// snapshot_bench's warm-pool part: creates that take a pooled VM, measured against an aboxd of
// their own (--pool 1), so that the other parts' creates never meet a pool.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "bench/daemon_fixture.h"

namespace abox::bench {

struct PoolCreates {
  std::vector<double> total_ms;   // POST until `true` has exited
  std::vector<double> create_ms;  // POST until its 201
  int not_from_pool = 0;          // creates whose ready event did not say "pool"
};

// Starts aboxd (`aboxd_bin`, --pool 1) in `home`, then `runs` times: waits until the pool has
// its VM ready (GET /v1/health), creates a sandbox of the default image and size, runs `true` in
// it and removes it. Stops that aboxd before it returns (also on failure).
absl::StatusOr<PoolCreates> MeasurePoolCreates(const std::string& aboxd_bin, const BenchHome& home,
                                               int runs, const std::vector<std::string>& budget);

}  // namespace abox::bench
