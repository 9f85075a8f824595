// The guest's .git: a repository abox builds on the host for each workspace, never a copy of
// the user's. A copy would carry every blob the object store holds: a committed-then-removed
// .env, a tracked key, stashes, other branches, dangling objects, rr-cache, rebase state.
//
//   - Snapshot (the default): one commit whose tree is HEAD's tree (for a workspace that is a
//     subdirectory of the worktree: HEAD's tree at that path, empty when HEAD has none) without
//     the paths the exclude rules leave out (secret_patterns.h), on a branch of the same name as
//     the host's
//     (or detached, as the host's HEAD is), with the host's HEAD id in its message
//     ("Abox-Host-Head: <id>"). The guest's index is that tree (stat data zeroed: git
//     re-reads the files once), so `git status` / `git diff` in the guest show the worktree's
//     changes against HEAD; untracked files stay untracked. No other ref, no reflog.
//   - Full history (on request): the host's refs, HEAD, reflogs and shallow list, with every
//     object they reach, after a scan of every commit they reach (all branches, tags, remotes,
//     notes, stashes, reflog entries: `git log --all --reflog -m`) finds no path the rules
//     leave out; otherwise kFailedPrecondition naming the paths and commits. The config is the
//     host's through SanitizeGitConfig. Only at the worktree's top: a subdirectory gets the
//     snapshot instead, with a note (the history's trees are the whole worktree's).
//
// Both are built in `dir` (kept between calls): objects go into packs that the scan, the
// index and the guest all read from the same files, so what was checked is what is sent. The
// build borrows the host's objects through objects/info/alternates while it runs (removed
// before it returns); the guest never sees the host's object store. Each build after the first
// adds one pack with the objects its refs reach and the previous build's did not: a moved HEAD
// costs only what changed. A change of the exclude rules or of the mode starts over.
//
// git runs with hooks, fsmonitor, replace refs, lazy fetches, the system and (for the built
// repository) the global config off; in the user's repository only `rev-parse`,
// `symbolic-ref` and `for-each-ref` run, and its files (config, reflogs, info/exclude,
// shallow) are read as data, never followed through a symlink. Not thread-safe per `dir`.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "src/workspace/secret_patterns.h"

namespace abox::workspace {

enum class GitHistory {
  kSnapshot,  // one commit: HEAD's tree without excluded paths
  kFull,      // every ref and reflog, refused when any excluded path appears in them
};

struct GitSnapshot {
  std::string dir;  // the build directory: entries are read from here
  // Guest path (".git/...") -> path relative to `dir`: regular files, and the directories
  // git needs even when empty (.git/objects, .git/refs).
  std::map<std::string, std::string> entries;
  std::string host_head;  // the host's HEAD commit; empty on an unborn branch
  std::string branch;     // the host's branch ("main"); empty when HEAD is detached
  std::string commit;     // snapshot: the guest's HEAD commit; empty on an unborn branch
  // Snapshot: (path, pattern) of each path of HEAD's tree left out.
  std::vector<std::pair<std::string, std::string>> excluded;
  bool rebuilt = false;            // false: the previous build was still current
  std::vector<std::string> notes;  // one printable line each
};

// Builds or updates the guest's .git for `worktree`, the top directory of a git worktree or a
// subdirectory of one, in `dir` (created if missing; its parent must exist). kFailedPrecondition
// when full history holds an excluded path, a ref names a tree or blob, or objects are missing (a
// partial clone); kInvalidArgument for a repository layout it cannot express.
[[nodiscard]] absl::StatusOr<GitSnapshot> BuildGitSnapshot(const std::string& worktree,
                                                           const std::string& dir,
                                                           const ExcludeRules& rules,
                                                           GitHistory history);

}  // namespace abox::workspace
