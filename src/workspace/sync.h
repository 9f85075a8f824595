// Sync in: brings the guest's copy of a bound host directory up to date with the host, sending
// only what changed since the last sync (a content manifest against the stored base, with a
// stat cache so unchanged files are not re-read), deletions included, as one tar + zstd stream
// into `abox-guest ws unpack`. One way: nothing in the guest can change the host through it.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "src/workspace/guest_tools.h"
#include "src/workspace/workspace_state.h"

namespace abox::workspace {

struct SyncReport {
  bool changed = false;  // false: nothing to send (the guest was not contacted)
  size_t files = 0;      // files, symlinks and directories written in the guest
  size_t deleted = 0;
  size_t total_files = 0;             // entries in the synced set
  uint64_t bytes = 0;                 // content bytes sent
  uint64_t archive_bytes = 0;         // compressed bytes on the channel
  uint64_t hashed = 0;                // files read and hashed (the rest came from the stat cache)
  std::vector<std::string> excluded;  // secret-looking paths left out ("path (pattern)")
  std::vector<std::string> notes;     // skipped names, .git handling
  absl::Duration duration;
};

// (phase, done, total): "scan" counts files, "send" counts bytes.
using SyncProgressFn = std::function<void(absl::string_view phase, uint64_t done, uint64_t total)>;

// Looks at the bytes of one file a sync is about to send, fed in order in chunks; an error
// refuses the whole sync with that error.
using ContentScanFn = std::function<absl::Status(absl::string_view data)>;
// The scanner for the file at `path` (relative, printable: EscapePath); null: nothing to check.
// For a symlink it is fed the target.
using ContentCheckFn = std::function<ContentScanFn(const std::string& path)>;

// With a `check`, every file, symlink and .git file the sync would send (new or changed: the
// unchanged ones are not read) goes through it before anything reaches the guest, so that a
// refusal leaves the guest untouched (e.g. a file holding a stored secret's real value, issue
// 15). Each worktree file is read once: checked while it is stored as the new base's object.
[[nodiscard]] absl::StatusOr<SyncReport> SyncIn(WorkspaceState& state, GuestTools& tools,
                                                const SyncProgressFn& progress = nullptr,
                                                const ContentCheckFn& check = nullptr);

// The uid:gid that owns synced files in the guest (the `agent` user of every abox image).
inline constexpr char kGuestOwner[] = "1000:1000";

}  // namespace abox::workspace
