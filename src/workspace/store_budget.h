// What one sandbox's workspace may make aboxd write to the host's disk from the guest's side.
//
// The guest decides what its files are: a hostile guest can claim, and send, as much as it
// likes. Its content reaches the host only as objects fetched for diff / apply / pull
// (guest_changes.cc), each stored only up to the size the guest's manifest claimed and only when
// it hashes to the claimed digest (ObjectStore::PutVerified). So before a fetch, the claimed
// sizes bound what it can write, and the budget is checked then, with nothing written when it
// does not fit:
//   - the guest's content held for the sandbox (objects that neither the base nor a kept undo
//     base refers to) plus what the fetch needs stays within `guest_bytes`;
//   - the file system under the workspace keeps `min_free_bytes` free after the fetch.
// Objects nothing refers to any more (neither the base, a kept undo base, nor a file the guest
// has now) are collected first, so content the agent since changed or deleted stops counting.
#pragma once

#include <cstdint>
#include <functional>
#include <set>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "src/workspace/manifest.h"
#include "src/workspace/workspace_state.h"

namespace abox::workspace {

struct StoreBudget {
  uint64_t guest_bytes = uint64_t{4} << 30;     // per sandbox
  uint64_t min_free_bytes = uint64_t{1} << 30;  // on the file system holding the workspace
  // Free bytes for an unprivileged writer under `dir`; null: statvfs(2).
  std::function<absl::StatusOr<uint64_t>(const std::string& dir)> free_bytes;
};

// Deletes every object of `state` that neither it refers to (WorkspaceState::ReferencedObjects)
// nor `also_keep` names. Callers hold the workspace's lock (no writer runs meanwhile).
[[nodiscard]] absl::Status CollectObjects(WorkspaceState& state,
                                          const std::set<std::string>& also_keep);

// Before fetching `wanted` (guest files whose content the store lacks, with their claimed
// sizes): collects what neither the state nor `guest_now` (the digests of the guest's files
// now) refers to, then checks `budget`. kResourceExhausted with the numbers and what to do when
// it does not fit (IsStorageRefusal tells it apart).
[[nodiscard]] absl::Status MakeRoomForGuestContent(WorkspaceState& state,
                                                   const std::set<std::string>& guest_now,
                                                   const Manifest& wanted,
                                                   const StoreBudget& budget);

// True for MakeRoomForGuestContent's refusal (the daemon answers it with 507).
[[nodiscard]] bool IsStorageRefusal(const absl::Status& status);

}  // namespace abox::workspace
