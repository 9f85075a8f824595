// Apply and pull: bring the sandbox's changes into the person's host tree, the only way they
// come back. A plan is computed first (PlanApply / PlanPull / PlanPullInto: reads only), shown
// or checked, then executed by Apply, which backs up every host file it touches and journals
// the change (artifacts.h) so `abox undo` restores it and a crash mid-apply is rolled back.
//
// Per path changed between the base (what abox last synced into the sandbox) and the guest:
//   host == base   -> take the sandbox's version (write / delete / mode / symlink / mkdir / rmdir)
//   host == guest  -> kAlreadyDone
//   both changed   -> regular text files are merged with `git merge-file` (kMerge when clean,
//                     else kConflict, written with markers under ConflictMode::kMarkers);
//                     anything else (binary, type change, delete vs modify) is kConflict.
// The sync's manifests list files and symlinks only: a path with entries beneath it is a
// directory there. A directory the sandbox replaced with a file is the sandbox's change when
// the host left it as synced (its files and subdirectories are removed, backed up); anything
// the host changed beneath it since the sync is a conflict, which pull --force overrides.
// Trust: the guest manifest and its content are untrusted. Every path passes HostTree's guards
// while planning; one refused path fails the whole plan, naming it. Files that make code run
// elsewhere (exec_files.h) are refused unless allowed, and so are symlinks that lead outside the
// workspace in the tree the plan leaves, the host's links and the plan's together
// (apply_symlinks.h). A file mode the sandbox chose lands as 0644 or 0755
// (HostModeForSandboxFile); a mode the host already had stays. Apply is all-or-nothing: any
// blocking conflict or refused exec file means nothing is written.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "src/workspace/artifacts.h"
#include "src/workspace/host_tree.h"
#include "src/workspace/journal.h"
#include "src/workspace/manifest.h"
#include "src/workspace/object_store.h"

namespace abox::workspace {

enum class ConflictMode {
  kRefuse,   // any conflict: write nothing
  kMarkers,  // text conflicts are written with conflict markers; the host keeps its version of
             // the ones that cannot hold markers (binary, type change, delete vs modify), and
             // the result lists them as unresolved
};

struct ApplyOptions {
  // Limit to these files or directory prefixes; empty = all changes. A path that matches no
  // change is an error naming it.
  std::vector<std::string> paths;
  bool dry_run = false;
  ConflictMode conflicts = ConflictMode::kRefuse;
  // Exec-sensitive files are refused (listed apart) unless set.
  bool allow_exec_files = false;
  // Pull only: overwrite host changes (they are backed up in the artifact like any write).
  bool force = false;
  // Test seam (crash injection): runs after each host write with the count so far.
  std::function<void(size_t)> after_each_write;
};

struct PlannedChange {
  enum class Action {
    kWrite,         // the sandbox's file content (and mode)
    kMerge,         // a clean three-way merge of host and sandbox edits
    kDelete,        // remove a file or symlink
    kMode,          // permission bits only
    kSymlink,       // create / retarget a symlink
    kMkdir,         // create a directory
    kRmdir,         // remove a directory (kept if the host has other files in it)
    kConflict,      // both sides changed; see `markers`
    kSkipExecFile,  // exec-sensitive and not allowed
    kAlreadyDone,   // the host already holds the sandbox's version
  };
  std::string path;
  Action action = Action::kAlreadyDone;
  std::string reason;
  bool exec_sensitive = false;
  PathState base;
  PathState host;
  PathState guest;
  // What the host holds after the apply (for kConflict without markers and kAlreadyDone: the
  // host's state; for kSkipExecFile: what it would have held).
  PathState result;
  // Content made by abox (kMerge, kConflict with markers); its hash is result.sha256.
  std::string content;
  bool markers = false;  // kConflict written with conflict markers
  // kConflict: a pull --force would take the sandbox's version (false for what abox never
  // replaces: a special file, a nested .git, a host file in the way of a directory).
  bool forceable = false;

  // True when applying this change writes to the host.
  [[nodiscard]] bool Writes() const;
};

[[nodiscard]] absl::string_view ActionName(PlannedChange::Action action);

struct ApplyPlan {
  std::string kind = "apply";  // "apply" | "pull"
  ApplyOptions options;
  std::vector<PlannedChange> changes;  // sorted by path

  // Changes that make Apply refuse (conflicts in kRefuse mode, refused exec files).
  [[nodiscard]] std::vector<const PlannedChange*> Blocking() const;
  [[nodiscard]] bool has_conflicts() const;
  [[nodiscard]] size_t writes() const;
};

struct ApplyResult {
  std::string artifact_id;  // empty when nothing was written (dry run, nothing to do)
  bool dry_run = false;
  size_t written = 0;                   // changes written
  std::vector<std::string> unresolved;  // kMarkers: conflicts the host kept its version of
  std::vector<std::string> notes;
};

// Plans an apply of the sandbox's changes (base -> guest) onto `tree`.
[[nodiscard]] absl::StatusOr<ApplyPlan> PlanApply(const HostTree& tree, const Manifest& base,
                                                  const Manifest& guest, const ObjectStore& objects,
                                                  const ApplyOptions& options);

// Plans a pull: the sandbox's version of each changed path (in options.paths), no merging.
// A host file changed since base is a conflict unless options.force.
[[nodiscard]] absl::StatusOr<ApplyPlan> PlanPull(const HostTree& tree, const Manifest& base,
                                                 const Manifest& guest, const ObjectStore& objects,
                                                 const ApplyOptions& options);

// Plans a pull of the sandbox's files (all, or those in options.paths) into another directory
// `tree`: there is no base there, so an existing different file is a conflict unless
// options.force; nothing is deleted.
[[nodiscard]] absl::StatusOr<ApplyPlan> PlanPullInto(const HostTree& tree, const Manifest& guest,
                                                     const ObjectStore& objects,
                                                     const ApplyOptions& options);

// Executes `plan`: refuses (kFailedPrecondition listing them and the flag to use) when it has
// blocking changes; re-checks that every host path is still as planned (kAborted otherwise);
// backs up, journals, writes (each write atomic) and marks the artifact applied. A failure
// part-way rolls back what was written. Nothing is written for a dry run.
[[nodiscard]] absl::StatusOr<ApplyResult> Apply(HostTree& tree, const ApplyPlan& plan,
                                                const ObjectStore& objects,
                                                ArtifactStore& artifacts, const ArtifactMeta& meta);

}  // namespace abox::workspace
