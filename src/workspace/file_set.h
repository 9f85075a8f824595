// The file set: which files of the user's tree go into the guest's /workspace.
//
//   - Inside a git worktree: tracked files plus untracked files git does not ignore (git's own
//     `ls-files --cached --others --exclude-standard`, so .gitignore, .git/info/exclude and the
//     user's global excludes all apply). Tracked files deleted from the worktree, submodules
//     (gitlinks) and untracked nested repositories are left out.
//   - Elsewhere: every regular file and symlink under the root, except the metadata of other
//     version control systems (.hg, .svn, .bzr, and a stray .git): their config can hold
//     credentials (hgrc [auth], remote URLs with passwords) that abox cannot sanitize.
//   - In both: secret-looking files (secret_patterns.h) never go in, tracked or not, and every
//     path must pass ValidateRelativePath; anything else is skipped with a note.
//   - The host's .git never goes in. When the root is in a git worktree (its top, with its .git
//     a directory or a file: linked worktrees and submodules too; or a subdirectory of one),
//     the guest gets a repository abox builds for it (git_snapshot.h): by default one commit of
//     HEAD's tree (under the subdirectory) without the excluded paths, on the same branch; the
//     full history only on request, only at a worktree's top, and only when no excluded path
//     appears anywhere in it. Its entries are in FileSet::git, not in `files`.
//
// Symlinks are listed as symlinks and never followed, neither when walking nor on the way to a
// path git lists. Nothing here reads the worktree's file contents. Not thread-safe per build
// dir; otherwise separate calls are independent.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "src/workspace/git_snapshot.h"

namespace abox::workspace {

struct FileSetOptions {
  std::vector<std::string> exclude_add;     // extra secret patterns (secret_patterns.h syntax)
  std::vector<std::string> exclude_remove;  // default patterns to let in
  // false: no .git for the guest at all.
  bool include_git_dir = true;
  GitHistory git_history = GitHistory::kSnapshot;
  // Where the guest's .git is built and kept between syncs (absolute; its parent must exist).
  // Empty: no .git for the guest (noted).
  std::string git_build_dir;
};

struct FileSet {
  bool is_git = false;  // root is (inside) a git worktree
  // Sorted (bytewise) relative paths of regular files and symlinks to sync, read from the root.
  std::vector<std::string> files;
  // The guest's .git, read from git->dir (never from the root): when set, every entry below
  // .git/ comes from there.
  std::optional<GitSnapshot> git;
  // (path, pattern) for each secret-looking file left out, of the worktree or of HEAD's tree
  // (the guest's commit leaves it out too); a directory left out whole by the walk appears
  // once, with a trailing '/'. Sorted by path.
  std::vector<std::pair<std::string, std::string>> excluded;
  // One printable line each: skipped names, submodules, why git will not work in the guest...
  std::vector<std::string> notes;
};

// The file set of the directory `root` (absolute or relative to the cwd; a symlink to a
// directory is accepted). kNotFound when root does not exist; kInvalidArgument when it is not
// a directory, lies inside a .git directory or a bare repository, or an exclude option is bad;
// kFailedPrecondition when full git history was asked for and holds an excluded path (the
// message names them and their commits); other errors when git or the file system fails in a
// way that would make the set wrong (an unreadable directory, or a snapshot git could not build,
// is a note, not an error).
[[nodiscard]] absl::StatusOr<FileSet> ComputeFileSet(const std::string& root,
                                                     const FileSetOptions& options);

}  // namespace abox::workspace
