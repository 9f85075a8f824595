// The one way a sandbox's state changes: the store's compare-and-set and the event together,
// checked against the lifecycle table. A failure is returned; where the caller cannot act on it
// (a teardown that must go on), Note() logs and counts it: no store result is dropped.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"
#include "src/daemon/lifecycle/transitions.h"
#include "src/daemon/services/event_bus.h"
#include "src/store/sandbox_repo.h"

namespace abox::daemon {

// Thread-safe; the repo and the bus must outlive it.
class StateRecorder final {
 public:
  StateRecorder(store::SandboxRepo& sandboxes, EventBus& events)
      : sandboxes_(&sandboxes), events_(&events) {}
  StateRecorder(const StateRecorder&) = delete;
  StateRecorder& operator=(const StateRecorder&) = delete;

  // Stores `record`, which must be in state creating. Nothing is published yet: a create
  // whose later admission step fails deletes it again, unseen.
  [[nodiscard]] absl::StatusOr<store::SandboxRecord> Insert(const store::SandboxRecord& record);
  // Takes back an Insert() that was never announced (its create was refused at admission):
  // deletes the record if it is still creating. Nothing is published: nobody saw it.
  [[nodiscard]] absl::Status Withdraw(absl::string_view id);
  // The stored sandbox is admitted: publishes "created" with `payload`. From here on a failed
  // create leaves it failed (Transition to kFailed), not deleted.
  void Announce(absl::string_view id, nlohmann::json payload);

  // Moves sandbox `id` from `from` to `to` if it is in `from` now, and publishes the rule's
  // event with `payload`. `failure` is the text kept with a failed sandbox. To kRemoved deletes
  // the record (and its history). kInternal for a transition the table does not list,
  // kFailedPrecondition when the sandbox was no longer in `from`, or the store's error.
  [[nodiscard]] absl::Status Transition(absl::string_view id, SandboxState from, SandboxState to,
                                        nlohmann::json payload = nlohmann::json::object(),
                                        absl::string_view failure = "");

  // A store or lifecycle failure the caller carries on after: logged with `what`, counted.
  void Note(const absl::Status& status, absl::string_view what);
  // How many Note()d failures there were since start (GET /v1/health shows them).
  [[nodiscard]] int64_t noted_failures() const { return noted_.load(); }

 private:
  store::SandboxRepo* sandboxes_;
  EventBus* events_;
  std::atomic<int64_t> noted_{0};
};

}  // namespace abox::daemon
