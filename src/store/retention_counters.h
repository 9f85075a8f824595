// What each sandbox lost to its caps: names left out of the review queue, and log rows and
// events pruned by per-sandbox retention. A guest can fill its own sandbox's share, never
// another's; these counters say how much it threw away.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "src/store/database.h"

namespace abox::store {

struct RetentionCounters {
  int64_t queue_dropped = 0;       // refused names not queued: the queue was at its cap
  int64_t connections_pruned = 0;  // connection log rows deleted to keep the newest
  int64_t dns_pruned = 0;          // DNS log rows deleted to keep the newest
  int64_t events_pruned = 0;       // events deleted to keep the newest

  friend bool operator==(const RetentionCounters&, const RetentionCounters&) = default;
};

// The counter columns of retention_counters.
enum class RetentionCounter { kQueueDropped, kConnectionsPruned, kDnsPruned, kEventsPruned };

// The tables kept newest-N per sandbox.
enum class RetainedTable { kConnections, kDns, kEvents };

// Call after inserting one row of `table` for `sandbox_id` ('' for daemon-wide events), in the
// same transaction: deletes that scope's oldest rows beyond the newest `keep` and counts them.
// Returns the newest seq deleted, 0 when none was.
[[nodiscard]] absl::StatusOr<int64_t> KeepNewest(Connection& connection, RetainedTable table,
                                                 absl::string_view sandbox_id, int64_t keep);

// Adds `n` (>= 0) to one counter of `sandbox_id` ('' for daemon-wide events), on the caller's
// connection, inside the caller's transaction.
[[nodiscard]] absl::Status AddToRetentionCounter(Connection& connection,
                                                 absl::string_view sandbox_id,
                                                 RetentionCounter counter, int64_t n);
// Raises events_pruned_through of `sandbox_id` to `seq` when it is lower (for a reader's
// `missed`, see EventRepo::Since).
[[nodiscard]] absl::Status NoteEventsPrunedThrough(Connection& connection,
                                                   absl::string_view sandbox_id, int64_t seq);
// The newest event seq any scope pruned (0 when none was).
[[nodiscard]] absl::StatusOr<int64_t> EventsPrunedThrough(Connection& connection);
// A sandbox's counters (all 0 when nothing was ever dropped).
[[nodiscard]] absl::StatusOr<RetentionCounters> ReadRetentionCounters(Connection& connection,
                                                                      absl::string_view sandbox_id);

// Every sandbox still recorded whose queue dropped names, with how many (none: empty).
[[nodiscard]] absl::StatusOr<std::vector<std::pair<std::string, int64_t>>> ReadQueueDropped(
    Connection& connection);

}  // namespace abox::store
