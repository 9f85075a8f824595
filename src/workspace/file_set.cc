#include "src/workspace/file_set.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "src/base/child_process.h"
#include "src/base/io.h"
#include "src/base/status_macros.h"
#include "src/base/unique_fd.h"
#include "src/workspace/git_command.h"
#include "src/workspace/git_snapshot.h"
#include "src/workspace/paths.h"
#include "src/workspace/secret_patterns.h"

namespace abox::workspace {
namespace {

// `ls-files -z` of a monorepo with a few million files still fits.
constexpr size_t kGitOutputLimit = size_t{1} << 30;
// One descriptor per level while walking.
constexpr int kMaxWalkDepth = 256;

// Left out of a non-git walk: other tools' VCS metadata, whose config (hgrc [auth], URLs with
// passwords) can hold credentials this module cannot sanitize; a .git there is a repository
// git did not open for us (nested, or refused by git), so its config was not sanitized either.
constexpr std::array<absl::string_view, 4> kVcsMetadataNames = {".git", ".hg", ".svn", ".bzr"};

std::string FirstLine(absl::string_view text) {
  return EscapePath(text.substr(0, text.find('\n')));
}

std::string Quoted(absl::string_view path) { return absl::StrCat("'", EscapePath(path), "'"); }

// Gathers one FileSet; paths are resolved relative to the root's descriptor, so a long root
// path or a root renamed meanwhile does not matter.
class Collector {
 public:
  Collector(int root_fd, const ExcludeRules& rules, FileSet& set)
      : root_fd_(root_fd), rules_(rules), set_(set) {}

  // A path git listed: kept if it is still a regular file or symlink reached without
  // following a symlink, and not secret-looking.
  void AddListed(const std::string& path) {
    if (absl::Status s = ValidateRelativePath(path); !s.ok()) {
      Note(absl::StrCat("skipped: ", s.message()));
      return;
    }
    if (!ParentsAreDirectories(path)) {
      return;
    }
    struct stat st {};
    if (::fstatat(root_fd_, path.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
      int err = errno;
      if (err != ENOENT && err != ENOTDIR) {
        Note(
            absl::StrCat("skipped ", Quoted(path), ": ", base::ErrnoError("lstat", err).message()));
      }
      return;  // tracked but deleted from the worktree
    }
    if (!S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode)) {
      Note(absl::StrCat("skipped ", Quoted(path), ": not a regular file or symlink"));
      return;
    }
    if (std::optional<std::string> pattern = rules_.Match(path, false)) {
      set_.excluded.emplace_back(path, *pattern);
      return;
    }
    if (std::optional<std::string> reason = SecretContent(root_fd_, path, path, st)) {
      ExcludeForContent(path, *reason);
      return;
    }
    set_.files.push_back(path);
  }

  // Files left out for their content (path -> reason), for the rules git's copy is built with.
  const std::map<std::string, std::string>& content_excluded() const { return content_excluded_; }

  // Walks the directory `dir` (relative path `rel`, "" for the root), `depth` levels down.
  // A tree outside git: everything but VCS metadata; special files noted.
  absl::Status Walk(base::UniqueFd dir, const std::string& rel, int depth) {
    ABOX_ASSIGN_OR_RETURN(std::vector<std::string> names, ReadNames(dir.get(), rel));
    for (const std::string& name : names) {
      std::string path = rel.empty() ? name : absl::StrCat(rel, "/", name);
      struct stat st {};
      if (::fstatat(dir.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
        int err = errno;
        if (err != ENOENT) {
          Note(absl::StrCat("skipped ", Quoted(path), ": ",
                            base::ErrnoError("lstat", err).message()));
        }
        continue;
      }
      if (absl::Status s = ValidateRelativePath(path); !s.ok()) {
        Note(absl::StrCat("skipped: ", s.message()));
        continue;
      }
      const bool is_dir = S_ISDIR(st.st_mode);
      const bool is_file = S_ISREG(st.st_mode) || S_ISLNK(st.st_mode);
      if (std::find(kVcsMetadataNames.begin(), kVcsMetadataNames.end(), name) !=
          kVcsMetadataNames.end()) {
        Note(absl::StrCat("skipped ", Quoted(path),
                          ": version control metadata outside a git worktree abox reads"));
        continue;
      }
      if (std::optional<std::string> pattern = rules_.Match(path, is_dir)) {
        set_.excluded.emplace_back(is_dir ? path + "/" : path, *pattern);
        continue;
      }
      if (is_file) {
        if (std::optional<std::string> reason = SecretContent(dir.get(), name, path, st)) {
          ExcludeForContent(path, *reason);
          continue;
        }
        set_.files.push_back(path);
      } else if (is_dir) {
        ABOX_RETURN_IF_ERROR(Descend(dir.get(), name, path, depth + 1));
      } else {
        Note(absl::StrCat("skipped ", Quoted(path), ": a socket, FIFO or device file"));
      }
    }
    return absl::OkStatus();
  }

  void Note(std::string note) { set_.notes.push_back(std::move(note)); }

 private:
  // Why the regular file `name` (below `dir_fd`; `path` from the root) is a secret by its
  // content, or nullopt. Only files a content rule can match are read, and only their first
  // kSecretContentProbeBytes; one that cannot be read is judged by its name alone.
  static std::optional<std::string> SecretContent(int dir_fd, const std::string& name,
                                                  const std::string& path, const struct stat& st) {
    if (!S_ISREG(st.st_mode) || !ShouldProbeSecretContent(path, st.st_size)) {
      return std::nullopt;
    }
    base::UniqueFd fd(
        ::openat(dir_fd, name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
    if (!fd) {
      return std::nullopt;
    }
    std::string head(kSecretContentProbeBytes, '\0');
    size_t got = 0;
    while (got < head.size()) {
      ssize_t n = ::read(fd.get(), head.data() + got, head.size() - got);
      if (n < 0 && errno == EINTR) {
        continue;
      }
      if (n <= 0) {
        break;
      }
      got += static_cast<size_t>(n);
    }
    head.resize(got);
    return SecretContentReason(head);
  }

  void ExcludeForContent(const std::string& path, const std::string& reason) {
    set_.excluded.emplace_back(path, reason);
    content_excluded_.emplace(path, reason);
  }

  absl::Status Descend(int parent, const std::string& name, const std::string& path, int depth) {
    if (depth > kMaxWalkDepth) {
      Note(absl::StrCat("skipped ", Quoted(path), ": deeper than ", kMaxWalkDepth, " levels"));
      return absl::OkStatus();
    }
    base::UniqueFd fd(
        ::openat(parent, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!fd) {
      int err = errno;
      if (err == EACCES || err == EPERM) {
        Note(absl::StrCat("skipped ", Quoted(path), ": permission denied"));
        return absl::OkStatus();
      }
      if (err == ENOENT || err == ENOTDIR || err == ELOOP) {
        return absl::OkStatus();  // changed under us: gone, or no longer a directory
      }
      return base::ErrnoError(absl::StrCat("open(", EscapePath(path), ")"), err);
    }
    return Walk(std::move(fd), path, depth);
  }

  absl::StatusOr<std::vector<std::string>> ReadNames(int dir_fd, const std::string& rel) {
    // fdopendir takes ownership of its descriptor: give it a duplicate.
    int dup = ::fcntl(dir_fd, F_DUPFD_CLOEXEC, 0);
    if (dup < 0) {
      return base::ErrnoError("fcntl(F_DUPFD_CLOEXEC)");
    }
    std::unique_ptr<DIR, int (*)(DIR*)> dir(::fdopendir(dup), &::closedir);
    if (dir == nullptr) {
      int err = errno;
      ::close(dup);
      return base::ErrnoError("fdopendir", err);
    }
    std::vector<std::string> names;
    for (;;) {
      errno = 0;
      const dirent* ent = ::readdir(dir.get());  // NOLINT(concurrency-mt-unsafe): own DIR*
      if (ent == nullptr) {
        if (int err = errno; err != 0) {
          return base::ErrnoError(absl::StrCat("readdir(", EscapePath(rel), ")"), err);
        }
        break;
      }
      absl::string_view name = ent->d_name;
      if (name != "." && name != "..") {
        names.emplace_back(name);
      }
    }
    std::sort(names.begin(), names.end());
    return names;
  }

  // True when every directory on the way to `path` is a real directory; a symlinked directory
  // is not followed (the file behind it would come from outside the tree).
  bool ParentsAreDirectories(const std::string& path) {
    for (size_t slash = path.find('/'); slash != std::string::npos;
         slash = path.find('/', slash + 1)) {
      std::string parent = path.substr(0, slash);
      auto [it, inserted] = parent_ok_.try_emplace(parent, false);
      if (inserted) {
        struct stat st {};
        if (::fstatat(root_fd_, parent.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) {
          it->second = S_ISDIR(st.st_mode);
          if (S_ISLNK(st.st_mode)) {
            Note(absl::StrCat("skipped files git lists under ", Quoted(parent),
                              ": it is now a symlink (not followed)"));
          }
        }
      }
      if (!it->second) {
        return false;
      }
    }
    return true;
  }

  int root_fd_;
  const ExcludeRules& rules_;
  FileSet& set_;
  std::map<std::string, bool> parent_ok_;
  std::map<std::string, std::string> content_excluded_;
};

struct GitProbe {
  bool is_git = false;
  std::string prefix;  // root relative to the worktree top, "" or "dir/"
};

absl::StatusOr<GitProbe> ProbeGit(const std::string& root, Collector& c) {
  GitProbe probe;
  std::optional<std::string> git = base::FindExecutable("git");
  if (!git) {
    struct stat st {};
    if (::stat(absl::StrCat(root, "/.git").c_str(), &st) != 0) {
      return probe;  // nothing suggests a repository
    }
    c.Note(
        "git is not installed: the tree is synced as a plain directory (ignored files "
        "included, .git left out)");
    return probe;
  }
  ABOX_ASSIGN_OR_RETURN(GitResult r,
                        RunGit(root, {"rev-parse", "--is-inside-work-tree", "--show-prefix"}));
  if (r.exit_code != 0) {
    if (!absl::StrContains(r.err, "not a git repository")) {
      c.Note(absl::StrCat("git could not read this tree (", FirstLine(r.err),
                          "): synced as a plain directory"));
    }
    return probe;
  }
  // "true\n<prefix>\n"; "false" inside a .git directory or a bare repository, whose plain
  // walk would send an unsanitized config: refused.
  if (!absl::StartsWith(r.out, "true\n")) {
    return absl::InvalidArgumentError(
        absl::StrCat(EscapePath(root),
                     " is inside a git directory or a bare repository, not a worktree: use the "
                     "directory that holds the checked-out files"));
  }
  probe.is_git = true;
  probe.prefix = r.out.substr(5);
  if (absl::EndsWith(probe.prefix, "\n")) {
    probe.prefix.pop_back();
  }
  return probe;
}

std::vector<absl::string_view> SplitNul(absl::string_view out) {
  std::vector<absl::string_view> records = absl::StrSplit(out, '\0');
  if (!records.empty() && records.back().empty()) {
    records.pop_back();
  }
  return records;
}

absl::Status AddGitFiles(const std::string& root, Collector& c) {
  auto run = [&](const std::vector<std::string>& args) -> absl::StatusOr<std::string> {
    ABOX_ASSIGN_OR_RETURN(GitResult r, RunGit(root, args, "", kGitOutputLimit));
    if (r.exit_code != 0) {
      return absl::InternalError(absl::StrCat("git ", absl::StrJoin(args, " "), " failed in ", root,
                                              " (exit code ", r.exit_code,
                                              "): ", FirstLine(r.err)));
    }
    return std::move(r.out);
  };
  // --stage shows each tracked path's mode, so gitlinks (submodules, 160000) stand out.
  ABOX_ASSIGN_OR_RETURN(std::string cached, run({"ls-files", "-z", "--stage"}));
  absl::string_view previous;
  for (absl::string_view record : SplitNul(cached)) {
    size_t tab = record.find('\t');
    if (tab == absl::string_view::npos) {
      return absl::InternalError("unexpected git ls-files --stage output (no tab)");
    }
    absl::string_view mode = record.substr(0, record.find(' '));
    absl::string_view path = record.substr(tab + 1);
    if (path == previous) {
      continue;  // a conflicted path is listed once per stage
    }
    previous = path;
    if (mode == "160000") {
      c.Note(absl::StrCat("skipped submodule ", Quoted(path),
                          ": its files belong to another repository"));
    } else {
      c.AddListed(std::string(path));
    }
  }
  ABOX_ASSIGN_OR_RETURN(std::string others,
                        run({"ls-files", "-z", "--others", "--exclude-standard"}));
  for (absl::string_view path : SplitNul(others)) {
    if (absl::EndsWith(path, "/")) {
      c.Note(absl::StrCat("skipped ", Quoted(path),
                          ": an untracked nested git repository (not part of this one)"));
    } else {
      c.AddListed(std::string(path));
    }
  }
  return absl::OkStatus();
}

// The guest's .git, built for it from the repository whose worktree top is `root`.
absl::Status AddGitRepository(const std::string& root, const ExcludeRules& rules,
                              const FileSetOptions& options, FileSet& set) {
  if (std::optional<std::string> pattern = rules.Match(".git", true)) {
    set.excluded.emplace_back(".git/", *pattern);
    return absl::OkStatus();
  }
  if (options.git_build_dir.empty()) {
    set.notes.emplace_back(
        "no place to build the sandbox's git repository: git will not work "
        "in the guest for this tree");
    return absl::OkStatus();
  }
  absl::StatusOr<GitSnapshot> git =
      BuildGitSnapshot(root, options.git_build_dir, rules, options.git_history);
  if (!git.ok()) {
    // Full history that cannot be checked, or holds what must stay out, is refused; a
    // snapshot that cannot be built only costs git in the guest.
    if (options.git_history == GitHistory::kFull) {
      return git.status();
    }
    set.notes.push_back(absl::StrCat("git will not work in the guest: ", git.status().message()));
    return absl::OkStatus();
  }
  set.excluded.insert(set.excluded.end(), git->excluded.begin(), git->excluded.end());
  set.notes.insert(set.notes.end(), git->notes.begin(), git->notes.end());
  set.git = *std::move(git);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<FileSet> ComputeFileSet(const std::string& root, const FileSetOptions& options) {
  if (root.empty()) {
    return absl::InvalidArgumentError("the workspace root is empty: name a directory");
  }
  struct stat st {};
  if (::stat(root.c_str(), &st) != 0) {
    int err = errno;
    if (err == ENOENT || err == ENOTDIR) {
      return absl::NotFoundError(absl::StrCat(EscapePath(root), " does not exist"));
    }
    return base::ErrnoError(absl::StrCat("stat(", EscapePath(root), ")"), err);
  }
  if (!S_ISDIR(st.st_mode)) {
    return absl::InvalidArgumentError(
        absl::StrCat(EscapePath(root), " is not a directory: the workspace must be one"));
  }
  ABOX_ASSIGN_OR_RETURN(ExcludeRules rules,
                        ExcludeRules::Create(options.exclude_add, options.exclude_remove));
  base::UniqueFd root_fd(::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!root_fd) {
    int err = errno;
    return base::ErrnoError(absl::StrCat("open(", EscapePath(root), ")"), err);
  }
  FileSet set;
  Collector c(root_fd.get(), rules, set);
  ABOX_ASSIGN_OR_RETURN(GitProbe probe, ProbeGit(root, c));
  if (probe.is_git) {
    set.is_git = true;
    ABOX_RETURN_IF_ERROR(AddGitFiles(root, c));
    if (options.include_git_dir) {
      // What the worktree left out for its content stays out of git's copy of HEAD too. A
      // subdirectory of the worktree gets HEAD's tree under it (git_snapshot.h).
      ABOX_RETURN_IF_ERROR(
          AddGitRepository(root, rules.WithExactPaths(c.content_excluded()), options, set));
    }
  } else {
    base::UniqueFd dup(::fcntl(root_fd.get(), F_DUPFD_CLOEXEC, 0));
    if (!dup) {
      return base::ErrnoError("fcntl(F_DUPFD_CLOEXEC)");
    }
    ABOX_RETURN_IF_ERROR(c.Walk(std::move(dup), "", 0));
  }
  std::sort(set.files.begin(), set.files.end());
  set.files.erase(std::unique(set.files.begin(), set.files.end()), set.files.end());
  std::sort(set.excluded.begin(), set.excluded.end());
  // A path both in the worktree and in HEAD's tree is reported once.
  set.excluded.erase(std::unique(set.excluded.begin(), set.excluded.end()), set.excluded.end());
  return set;
}

}  // namespace abox::workspace
