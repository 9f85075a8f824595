// Internal to git_snapshot.cc, git_history_scan.cc and git_build_repo.cc: the Builder that makes
// a guest's .git (git_snapshot.h) and what its parts share. Not for other code.
//
//   git_build_repo.cc    the build directory (layout, state, fingerprint), git in the user's
//                        repository and in the one being built, the host's probe
//   git_snapshot.cc      BuildGitSnapshot, the snapshot mode, packing, the index, the listing
//   git_history_scan.cc  full history: refs, reflogs, the scan of every commit they reach
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "src/base/io.h"
#include "src/workspace/git_command.h"
#include "src/workspace/git_snapshot.h"
#include "src/workspace/secret_patterns.h"

namespace abox::workspace::git_internal {

// Bumped when what a build produces changes: every existing build dir then starts over.
inline constexpr int kBuildVersion = 1;
inline constexpr size_t kGitOutputLimit = size_t{1} << 30;
// The host files read as data: a reflog, info/exclude, shallow, config.
inline constexpr size_t kHostFileLimit = size_t{64} << 20;
inline constexpr size_t kReflogTotalLimit = size_t{512} << 20;
inline constexpr size_t kMaxReported = 20;

inline constexpr char kStateFile[] = "state.json";
inline constexpr char kGitDir[] = ".git";
inline constexpr char kGuestConfig[] =
    ".git/abox-guest-config";  // full history: the guest's config
inline constexpr char kBuildIndex[] = ".git/abox-build-index";
inline constexpr char kFreshIndex[] = ".git/abox-index";

// What the previous build left (state.json in the build dir; never sent).
struct BuildState {
  std::string fingerprint;
  std::string host_head;
  std::string head_ref;
  std::string commit;             // snapshot: the built commit
  std::vector<std::string> tips;  // every id the packs were built from (their objects are in)
};

// The user's repository, as rev-parse and friends describe it.
struct Host {
  std::string format = "sha1";
  std::string common_dir;  // absolute
  std::string objects;     // absolute
  std::string info_exclude;
  std::string logs_head;
  std::string shallow;
  std::string head;      // HEAD's commit; empty when unborn
  std::string head_ref;  // what HEAD points at ("refs/heads/main"); empty when detached
  // The workspace's path in the worktree ("pkg/api/", as `rev-parse --show-prefix` says);
  // empty at the top. The snapshot is then HEAD's tree under it.
  std::string prefix;
};

// The first line of git's message, trimmed and escaped.
[[nodiscard]] std::string FirstLine(absl::string_view text);
// An object id shortened for a message.
[[nodiscard]] std::string Short(absl::string_view id);
[[nodiscard]] bool IsObjectId(absl::string_view s);
[[nodiscard]] bool IsZeroId(absl::string_view s);
// A ref name abox writes as a file of the built repository: git's own rules (no component
// starting with '.', none ending in ".lock") plus ValidateRelativePath's.
[[nodiscard]] bool IsWritableRefName(absl::string_view name);
// A host file read as data: nullopt when it does not exist or is not a regular file (a symlink
// is not followed).
[[nodiscard]] absl::StatusOr<std::optional<std::string>> ReadHostFile(const std::string& path);
// Writes `content` unless the file already holds exactly that (an unchanged file keeps its
// inode, so the sync's stat cache still knows it).
[[nodiscard]] absl::Status WriteIfChanged(const std::string& path, absl::string_view content);
[[nodiscard]] absl::Status RemoveIfExists(const std::string& root, const std::string& path);
// Regular files below `dir` (relative to it, sorted); none when it does not exist.
[[nodiscard]] std::vector<std::string> FilesBelow(const std::string& dir);
[[nodiscard]] BuildState LoadState(const std::string& path);
[[nodiscard]] absl::Status SaveState(const std::string& path, const BuildState& s);

// Builds one guest .git (see git_snapshot.h); one use per Builder.
class Builder {
 public:
  Builder(std::string worktree, std::string dir, const ExcludeRules& rules, GitHistory history)
      : worktree_(std::move(worktree)),
        dir_(std::move(dir)),
        git_(dir_ + "/" + kGitDir),
        rules_(rules),
        history_(history) {}

  absl::StatusOr<GitSnapshot> Build();

 private:
  std::string Alternates() const { return git_ + "/objects/info/alternates"; }

  // git in the user's repository: only commands that read refs and paths.
  absl::StatusOr<GitResult> HostGit(const std::vector<std::string>& args);

  absl::StatusOr<std::string> HostGitOk(const std::vector<std::string>& args);

  // git in the repository being built: its own minimal config, nothing of the user's.
  absl::StatusOr<GitResult> BuiltGit(const std::vector<std::string>& args, GitOptions options);

  absl::StatusOr<std::string> BuiltGitOk(const std::vector<std::string>& args,
                                         GitOptions options = {});

  static absl::Status MissingOrInternal(absl::string_view command, absl::string_view err);

  absl::Status ProbeHost();

  std::string Fingerprint() const;

  // The repository that both the build and (in a snapshot) the guest read: no remotes, no
  // host settings.
  std::string BuildConfig() const;

  // The build dir as the previous build left it, or new; started over when the rules, the
  // mode, the object format or the build version changed.
  absl::Status Prepare();

  absl::Status Reset();

  absl::Status MakeLayout();

  // Before building on the previous build: everything its tips reach must be in our own packs
  // (checked with the host's objects not borrowed), or the build starts over.
  absl::Status CheckOldPacks();

  absl::Status Borrow() { return base::WriteFileAtomic(Alternates(), host_.objects + "\n", 0644); }

  // ---- Snapshot ----

  absl::Status BuildSnapshot();

  // HEAD's tree (under the prefix) without the excluded paths, committed alone; deterministic
  // for a given HEAD (abox's identity, HEAD's committer date), so rebuilding it yields the same
  // id. An empty tree when HEAD has no directory at the prefix (a new, untracked one).
  absl::StatusOr<std::string> MakeSnapshotCommit();

  // The excluded tree paths are kept beside the state so that an unchanged HEAD reports them
  // without reading its tree again.
  absl::Status SaveExcluded();

  std::vector<std::pair<std::string, std::string>> ExcludedOf(const BuildState&) const;

  // ---- Full history ----

  absl::Status BuildFullHistory();

  // Every commit the built repository's refs and reflogs reach that `old_tips` did not (those
  // were checked by an earlier build), against each of its parents, deletions left out: any
  // path in any of their trees is added or changed in one of these diffs (a root commit's
  // lists its whole tree; a path the same as in every parent is in a parent's), so none is
  // missed.
  absl::Status ScanHistory(const std::vector<std::string>& old_tips);

  absl::Status WriteGuestConfig();

  // ---- Shared ----

  // One pack with the objects `tips` (or, when empty, every ref and reflog of the built
  // repository) reach and `old_tips` do not; the host's objects are borrowed to make it.
  absl::Status Pack(const std::vector<std::string>& tips, const std::vector<std::string>& old);

  // write-tree and commit-tree leave loose objects; the packs hold them now.
  absl::Status RemoveLooseObjects();

  // The guest's index: the tree of `commit` with no stat data (none is true in the guest).
  absl::Status WriteIndex(const std::string& commit);

  absl::Status CopyInfoExclude();

  absl::Status List();

  const std::string worktree_;
  const std::string dir_;
  const std::string git_;  // dir_/.git
  const ExcludeRules& rules_;
  GitHistory history_;  // kFull falls back to kSnapshot for a subdirectory (Build)
  Host host_;
  BuildState state_;
  GitSnapshot out_;
};

}  // namespace abox::workspace::git_internal
