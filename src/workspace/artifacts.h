// Artifacts: the backup and journal of every change abox made to a host tree (apply, pull), so
// each can be undone, and so an apply cut short by a crash is rolled back when aboxd restarts.
//
// Layout: <dir>/<yyyymmdd-hhmmss>-<6 hex>/ (UTC) holding journal.json (journal.h) and objects/
// (an ObjectStore with the before-content of every file the change replaced or removed, and
// any content abox made, e.g. merge results). The write order that makes recovery sound:
// backups written and fsynced, journal "applying" written atomically, then the host writes
// (each atomic), then "applied". A journal still "applying" at start means the writes may have
// stopped anywhere: RecoverInterrupted puts every path back to `before`.
//
// Every host write and removal goes through HostTree (the same guards as apply). Not
// thread-safe: the daemon serializes applies and undos per host root.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "src/workspace/host_tree.h"
#include "src/workspace/journal.h"
#include "src/workspace/object_store.h"

namespace abox::workspace {

struct ArtifactMeta {
  std::string sandbox;    // sandbox id the change came from
  std::string host_root;  // absolute host root the change was made in
  std::string kind = "apply";
};

struct ArtifactSummary {
  std::string id;
  std::string created;
  std::string sandbox;
  std::string host_root;
  std::string kind;
  std::string state;  // JournalStateName, or "damaged: <why>"
  size_t files = 0;
};

// One artifact being written (or loaded for undo).
struct Artifact {
  std::string dir;
  Journal journal;
  ObjectStore objects;
};

enum class ConvergeTo { kBefore, kAfter };

struct ConvergeReport {
  size_t operations = 0;  // host writes / removals / mkdirs made
  // Paths whose host state was neither the expected start, the target nor absent (someone
  // edited them): left as they are (unless forced), with the reason.
  std::vector<std::string> left_alone;
  // Directories that were to be removed but held other files, so stayed.
  std::vector<std::string> kept_dirs;
};

// Brings every entry's path in `tree` to its `before` or `after` state: removals deepest first,
// then empty directories (and, toward `before`, each entry's created_dirs and stale
// `.abox-tmp-*` files), then directories, then files and symlinks, each atomic. A path is only
// touched when it holds the other side's state, nothing or already the target (or `force`).
// File content comes from the first of `sources` that has it. Idempotent. `after_each_op`
// (tests: crash injection) runs after each host operation with the count so far.
[[nodiscard]] absl::StatusOr<ConvergeReport> Converge(
    HostTree& tree, const std::vector<JournalEntry>& entries, ConvergeTo to, bool force,
    const std::vector<const ObjectStore*>& sources,
    const std::function<void(size_t)>& after_each_op = nullptr);

// The state of `path` for converging `entries`: like HostTree::Read, but a path beneath an
// entry that is (or was) a symlink or file reads as absent instead of failing.
[[nodiscard]] absl::StatusOr<PathState> ReadEntryState(const HostTree& tree,
                                                       const std::string& path,
                                                       const std::vector<JournalEntry>& entries);

struct UndoResult {
  std::string id;
  size_t restored = 0;
  std::vector<std::string> notes;
};

class ArtifactStore final {
 public:
  // Opens (creating, 0700) the store at `dir` (absolute), e.g. $ABOX_HOME/artifacts.
  [[nodiscard]] static absl::StatusOr<ArtifactStore> Open(const std::string& dir);

  ArtifactStore(ArtifactStore&&) = default;
  ArtifactStore& operator=(ArtifactStore&&) = default;

  // A new, empty artifact (its journal not yet written).
  [[nodiscard]] absl::StatusOr<Artifact> Create(const ArtifactMeta& meta, absl::Time now);
  // Writes the artifact's journal atomically (fsynced).
  [[nodiscard]] absl::Status Save(const Artifact& artifact) const;
  // Loads artifact `id` (kNotFound when there is none).
  [[nodiscard]] absl::StatusOr<Artifact> Load(absl::string_view id) const;
  // Every artifact, newest first.
  [[nodiscard]] absl::StatusOr<std::vector<ArtifactSummary>> List() const;

  // Puts the host back as it was before artifact `id`. Every path must still be as the change
  // left it (or already restored); otherwise kFailedPrecondition lists what changed since,
  // unless `force` (the current content of a file then overwritten is saved in the artifact
  // first, and named in the notes). An undone / rolled-back artifact is kFailedPrecondition.
  [[nodiscard]] absl::StatusOr<UndoResult> Undo(absl::string_view id, bool force,
                                                const HostTreeOptions& tree_options = {});

  // Rolls back every artifact still "applying" (an apply cut short); returns their ids. Safe to
  // run again after a crash during recovery.
  [[nodiscard]] absl::StatusOr<std::vector<std::string>> RecoverInterrupted(
      const HostTreeOptions& tree_options = {});

  [[nodiscard]] const std::string& dir() const { return dir_; }

 private:
  explicit ArtifactStore(std::string dir) : dir_(std::move(dir)) {}
  absl::StatusOr<std::vector<std::string>> Ids() const;

  std::string dir_;
};

}  // namespace abox::workspace
