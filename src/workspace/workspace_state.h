// What aboxd keeps for one sandbox's workspace, in $ABOX_HOME/workspaces/<sandbox id>/:
//   binding.json   the host directory, where the guest sees it, exclude changes, last sync
//   base.ndjson    the manifest of what was last synced in (the base of diff and apply)
//   objects/       the content of every base file (and of fetched guest files), by sha256
//   stat-cache     the host scan's stat cache (unchanged files are not re-read)
//   git/           the guest's .git, built from the host's repository (git_snapshot.h)
//   undo-base/     per artifact of an apply or pull into the bound directory: the base entries
//                  it replaced, so that an undo puts the base back
// Not thread-safe: the daemon serializes workspace operations per sandbox.
#pragma once

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "src/workspace/manifest.h"
#include "src/workspace/manifest_scan.h"
#include "src/workspace/object_store.h"

namespace abox::workspace {

inline constexpr char kDefaultGuestPath[] = "/workspace";

struct Binding {
  std::string host_root;  // absolute, canonical
  std::string guest_path = kDefaultGuestPath;
  std::vector<std::string> exclude_add;     // patterns added to the secret excludes
  std::vector<std::string> exclude_remove;  // default patterns taken out
  // The guest's .git holds the host's full history (refused while any excluded path is in
  // it) instead of a one-commit snapshot of HEAD without the excluded paths.
  bool git_history = false;
};

// Checks a binding from a request: the host directory exists (made canonical), the guest path
// is absolute and normal and not a system directory, the patterns are well formed.
[[nodiscard]] absl::StatusOr<Binding> ValidateBinding(Binding binding);

class WorkspaceState final {
 public:
  // A new state dir for a sandbox (fails if one exists).
  static absl::StatusOr<std::unique_ptr<WorkspaceState>> Create(const std::string& dir,
                                                                const Binding& binding);
  // The state dir of an existing workspace.
  static absl::StatusOr<std::unique_ptr<WorkspaceState>> Open(const std::string& dir);

  [[nodiscard]] const Binding& binding() const { return binding_; }
  [[nodiscard]] const std::string& dir() const { return dir_; }
  // Where the guest's .git is built and kept between syncs.
  [[nodiscard]] std::string git_build_dir() const { return dir_ + "/git"; }
  [[nodiscard]] const Manifest& base() const { return base_; }
  [[nodiscard]] absl::Time last_sync() const { return last_sync_; }
  [[nodiscard]] uint64_t sync_count() const { return sync_count_; }
  ObjectStore& objects() { return *objects_; }
  StatCache& host_cache() { return host_cache_; }

  // Records a completed sync: the new base (atomically), the sync time, the stat cache.
  [[nodiscard]] absl::Status CommitSync(Manifest base);
  // Replaces the base after an apply or an undo (the entries of `paths` only).
  [[nodiscard]] absl::Status UpdateBase(const Manifest& entries,
                                        const std::vector<std::string>& removed);

  // Keeps the base entries of `paths` as they are now (`previous`: those of them the base
  // has), for RestoreUndoBase when artifact `artifact_id` is undone.
  [[nodiscard]] absl::Status SaveUndoBase(const std::string& artifact_id,
                                          const std::vector<std::string>& paths,
                                          const Manifest& previous);
  // Puts back the base entries SaveUndoBase kept for `artifact_id` (OK when it kept none).
  [[nodiscard]] absl::Status RestoreUndoBase(const std::string& artifact_id);
  // Every object this state refers to: the base's files and those of every kept undo base.
  // What else is in objects/ is content fetched from the guest, or garbage.
  [[nodiscard]] absl::StatusOr<std::set<std::string>> ReferencedObjects() const;

 private:
  WorkspaceState() = default;
  [[nodiscard]] absl::Status SaveBinding() const;

  std::string dir_;
  Binding binding_;
  Manifest base_;
  absl::Time last_sync_ = absl::InfinitePast();
  uint64_t sync_count_ = 0;
  std::unique_ptr<ObjectStore> objects_;
  StatCache host_cache_;
};

}  // namespace abox::workspace
