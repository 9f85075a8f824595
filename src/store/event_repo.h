// The events table: the lifecycle log behind the server-sent events stream.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "nlohmann/json.hpp"
#include "src/store/database.h"

namespace abox::store {

// Event types aboxd records. The column is free text, so a newer abox may add types without a
// schema change; readers pass unknown ones through.
namespace event_type {
inline constexpr char kCreated[] = "created";
inline constexpr char kReady[] = "ready";
inline constexpr char kExecStarted[] = "exec_started";
inline constexpr char kExecFinished[] = "exec_finished";
inline constexpr char kFailed[] = "failed";
inline constexpr char kStopped[] = "stopped";
inline constexpr char kRemoved[] = "removed";
inline constexpr char kPaused[] = "paused";
inline constexpr char kResumed[] = "resumed";
inline constexpr char kRestored[] = "restored";
}  // namespace event_type

struct Event {
  int64_t seq = 0;  // increases with every event, never reused
  absl::Time time;
  std::string sandbox_id;  // empty for daemon-wide events
  std::string type;
  nlohmann::json payload = nlohmann::json::object();

  friend bool operator==(const Event&, const Event&) = default;
};

struct EventBatch {
  std::vector<Event> events;  // oldest first
  // Events after the requested seq (of any scope) were dropped by retention before they could
  // be read: the reader should resynchronise (e.g. re-list sandboxes).
  bool missed = false;
};

struct EventRepoOptions {
  // Events kept per sandbox, and separately for the daemon-wide ones: a scope's older ones are
  // deleted as its new ones arrive (counted in its events_pruned, see retention_counters.h),
  // so one sandbox's flood never pushes out another's. The events of removed sandboxes keep
  // the newest `retain` together. Values below 1 count as 1.
  int64_t retain = 10000;
};

// Typed access to the events table. Does not own the Database, which must outlive it. Times
// come from the injected clock.
//
// Thread safety: thread-safe; each method holds the database's connection for its duration.
class EventRepo final {
 public:
  explicit EventRepo(Database& db, Clock clock = absl::Now, EventRepoOptions options = {});

  // Records an event at now and returns its seq. `type` must not be empty; `payload` must be
  // an object (kInvalidArgument otherwise).
  [[nodiscard]] absl::StatusOr<int64_t> Append(absl::string_view sandbox_id, absl::string_view type,
                                               const nlohmann::json& payload);

  // Events with seq > `after_seq`, oldest first, at most `limit` (>= 1). For SSE replay:
  // pass the Last-Event-ID (0 for everything kept).
  [[nodiscard]] absl::StatusOr<EventBatch> Since(int64_t after_seq, int limit);

  // The seq of the newest event ever recorded (0 if none): where a live stream starts.
  [[nodiscard]] absl::StatusOr<int64_t> LastSeq();

  [[nodiscard]] const EventRepoOptions& options() const { return options_; }
  // Events kept for a sandbox ('' for the daemon-wide ones).
  [[nodiscard]] absl::StatusOr<int64_t> Count(absl::string_view sandbox_id);

 private:
  Database* db_;
  Clock clock_;
  EventRepoOptions options_;
};

}  // namespace abox::store
