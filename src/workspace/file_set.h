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
//   - .git goes in so that git works in the guest when the root is the worktree's top and .git
//     is a directory: without hooks (never run host hooks in the guest, nor guest-written hooks
//     later on the host), without *.lock files (a stale lock would block git), without sockets,
//     and with each config (.git/config, .git/modules/*/config, worktree configs) replaced by
//     SanitizeGitConfig's output.
//
// Symlinks are listed as symlinks and never followed, neither when walking nor on the way to a
// path git lists. Nothing here reads file contents except git configs. Not thread-safe per
// call; separate calls are independent.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace abox::workspace {

struct FileSetOptions {
  std::vector<std::string> exclude_add;     // extra secret patterns (secret_patterns.h syntax)
  std::vector<std::string> exclude_remove;  // default patterns to let in
  bool include_git_dir = true;
};

struct FileSet {
  bool is_git = false;  // root is (inside) a git worktree
  // Sorted (bytewise) relative paths of regular files and symlinks to sync.
  std::vector<std::string> files;
  // rel path -> content to send instead of the disk file (sanitized git configs). Every key
  // is also in `files`.
  std::map<std::string, std::string> replaced_content;
  // (path, pattern) for each secret-looking file left out; a directory left out whole by the
  // walk appears once, with a trailing '/'. Sorted by path.
  std::vector<std::pair<std::string, std::string>> excluded;
  // One printable line each: skipped names, submodules, why git will not work in the guest...
  std::vector<std::string> notes;
};

// The file set of the directory `root` (absolute or relative to the cwd; a symlink to a
// directory is accepted). kNotFound when root does not exist; kInvalidArgument when it is not
// a directory, lies inside a .git directory or a bare repository, or an exclude option is bad;
// other errors when git or the file system fails in a way that would make the set wrong (an
// unreadable directory is a note, not an error).
[[nodiscard]] absl::StatusOr<FileSet> ComputeFileSet(const std::string& root,
                                                     const FileSetOptions& options);

}  // namespace abox::workspace
