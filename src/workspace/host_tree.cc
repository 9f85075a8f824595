#include "src/workspace/host_tree.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <utility>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "src/base/io.h"
#include "src/base/status_macros.h"
#include "src/workspace/host_tree_internal.h"
#include "src/workspace/paths.h"
#include "src/workspace/sha256.h"

namespace abox::workspace {
namespace host_tree_internal {

std::string TypeName(mode_t mode) {
  if (S_ISFIFO(mode)) {
    return "fifo";
  }
  if (S_ISSOCK(mode)) {
    return "socket";
  }
  if (S_ISCHR(mode)) {
    return "character device";
  }
  if (S_ISBLK(mode)) {
    return "block device";
  }
  return "special file";
}

absl::Status Shown(absl::Status status, absl::string_view rel, absl::string_view what) {
  return base::Annotate(status, absl::StrCat(what, " '", EscapePath(rel), "'"));
}

}  // namespace host_tree_internal

using host_tree_internal::Shown;
using host_tree_internal::TypeName;

namespace {

absl::Status SymlinkRefused(absl::string_view rel, absl::string_view link) {
  return absl::FailedPreconditionError(absl::StrCat(
      "refused path '", EscapePath(rel), "': '", EscapePath(link),
      "' is a symbolic link on the host, and abox follows no symlink inside the workspace (a "
      "write through it could land outside the tree); replace the link with a directory or "
      "leave this path out"));
}

}  // namespace

std::string HostState::Describe() const {
  switch (kind) {
    case Kind::kAbsent:
      return "absent";
    case Kind::kFile:
      return absl::StrFormat("file %04o %d bytes", mode, size);
    case Kind::kSymlink:
      return absl::StrCat("symlink -> ", EscapePath(link_target));
    case Kind::kDir:
      return "directory";
    case Kind::kOther:
      return other_type;
  }
  return "?";
}

absl::StatusOr<HostTree> HostTree::Open(const std::string& root, const HostTreeOptions& options) {
  if (root.empty() || root.front() != '/') {
    return absl::InvalidArgumentError(
        absl::StrCat("workspace root '", root, "' must be an absolute path"));
  }
  base::UniqueFd fd(::open(root.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!fd) {
    return base::Annotate(base::ErrnoError(absl::StrCat("open(", root, ")")),
                          "cannot open the workspace root (does the directory exist?)");
  }
  return HostTree(root, std::move(fd), options);
}

absl::Status HostTree::CheckPath(absl::string_view rel) {
  ABOX_RETURN_IF_ERROR(ValidateRelativePath(rel));
  if (HasGitComponent(rel)) {
    return absl::PermissionDeniedError(absl::StrCat(
        "refused path '", EscapePath(rel),
        "': abox never writes a .git directory or file at any depth (git's own state, the "
        "root's or a nested repository's, stays the person's: its config and hooks run "
        "commands)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<HostTree::Parent> HostTree::ResolveParent(
    absl::string_view rel, bool create, std::vector<std::string>* created_dirs) const {
  Parent out;
  size_t slash = rel.rfind('/');
  std::string dir = slash == absl::string_view::npos ? "" : std::string(rel.substr(0, slash));
  out.leaf = std::string(slash == absl::string_view::npos ? rel : rel.substr(slash + 1));
  if (dir.empty()) {
    out.fd.reset(::fcntl(root_fd_.get(), F_DUPFD_CLOEXEC, 0));
    if (!out.fd) {
      return base::ErrnoError("fcntl(F_DUPFD_CLOEXEC)");
    }
    return out;
  }
#ifdef SYS_openat2
  if (options_.use_openat2) {
    open_how how{};
    how.flags = O_PATH | O_DIRECTORY | O_CLOEXEC;
    how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
    for (int attempt = 0; attempt < 8; ++attempt) {
      long fd = ::syscall(SYS_openat2, root_fd_.get(), dir.c_str(), &how, sizeof(how));
      if (fd >= 0) {
        out.fd.reset(static_cast<int>(fd));
        return out;
      }
      if (errno == EINTR || errno == EAGAIN) {
        continue;
      }
      // ENOSYS / EPERM (old kernel, seccomp): walk. ENOENT / ELOOP / ENOTDIR / EXDEV: the walk
      // finds the offending component, names it, and creates missing ones when asked.
      break;
    }
  }
#endif
  base::UniqueFd cur(::fcntl(root_fd_.get(), F_DUPFD_CLOEXEC, 0));
  if (!cur) {
    return base::ErrnoError("fcntl(F_DUPFD_CLOEXEC)");
  }
  std::string walked;
  for (absl::string_view part : absl::StrSplit(dir, '/')) {
    std::string name(part);
    walked = walked.empty() ? name : absl::StrCat(walked, "/", name);
    struct stat st {};
    if (::fstatat(cur.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
      if (errno != ENOENT) {
        return Shown(base::ErrnoError("fstatat"), walked, "cannot inspect");
      }
      if (!create) {
        return out;  // Missing directory: the path is absent.
      }
      if (::mkdirat(cur.get(), name.c_str(), 0755) != 0 && errno != EEXIST) {
        return Shown(base::ErrnoError("mkdirat"), walked, "cannot create directory");
      }
      if (created_dirs != nullptr) {
        created_dirs->push_back(walked);
      }
      if (::fstatat(cur.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
        return Shown(base::ErrnoError("fstatat"), walked, "cannot inspect");
      }
    }
    if (S_ISLNK(st.st_mode)) {
      return SymlinkRefused(rel, walked);
    }
    if (!S_ISDIR(st.st_mode)) {
      if (create) {
        return absl::FailedPreconditionError(
            absl::StrCat("cannot write '", EscapePath(rel), "': '", EscapePath(walked), "' is a ",
                         S_ISREG(st.st_mode) ? "file" : TypeName(st.st_mode),
                         " on the host, not a directory; move it away or leave this path out"));
      }
      out.blocked_by = walked;
      return out;
    }
    base::UniqueFd next(
        ::openat(cur.get(), name.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!next) {
      if (errno == ELOOP || errno == ENOTDIR) {
        return SymlinkRefused(rel, walked);  // Swapped for a link since the fstatat.
      }
      return Shown(base::ErrnoError("openat"), walked, "cannot open directory");
    }
    struct stat check {};
    if (::fstat(next.get(), &check) != 0 || !S_ISDIR(check.st_mode)) {
      return SymlinkRefused(rel, walked);
    }
    cur = std::move(next);
  }
  out.fd = std::move(cur);
  return out;
}

absl::StatusOr<HostState> HostTree::Read(absl::string_view rel) const {
  ABOX_RETURN_IF_ERROR(CheckPath(rel));
  ABOX_ASSIGN_OR_RETURN(Parent parent, ResolveParent(rel, /*create=*/false, nullptr));
  HostState state;
  if (!parent.fd) {
    state.blocked_by = parent.blocked_by;
    return state;
  }
  struct stat st {};
  if (::fstatat(parent.fd.get(), parent.leaf.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    if (errno == ENOENT) {
      return state;
    }
    return Shown(base::ErrnoError("fstatat"), rel, "cannot inspect");
  }
  if (S_ISDIR(st.st_mode)) {
    state.kind = HostState::Kind::kDir;
  } else if (S_ISLNK(st.st_mode)) {
    state.kind = HostState::Kind::kSymlink;
    std::string buf(static_cast<size_t>(st.st_size) + 2, '\0');
    for (;;) {
      ssize_t n = ::readlinkat(parent.fd.get(), parent.leaf.c_str(), buf.data(), buf.size());
      if (n < 0) {
        return Shown(base::ErrnoError("readlinkat"), rel, "cannot read link");
      }
      if (static_cast<size_t>(n) < buf.size()) {
        buf.resize(static_cast<size_t>(n));
        break;
      }
      buf.resize(buf.size() * 2);
    }
    state.link_target = std::move(buf);
  } else if (S_ISREG(st.st_mode)) {
    ABOX_ASSIGN_OR_RETURN(base::UniqueFd fd, OpenFile(rel));
    struct stat fst {};
    if (::fstat(fd.get(), &fst) != 0) {
      return Shown(base::ErrnoError("fstat"), rel, "cannot inspect");
    }
    state.kind = HostState::Kind::kFile;
    state.mode = fst.st_mode & 07777;
    ABOX_ASSIGN_OR_RETURN(state.sha256, Sha256Fd(fd.get(), &state.size));
  } else {
    state.kind = HostState::Kind::kOther;
    state.other_type = TypeName(st.st_mode);
  }
  return state;
}

absl::StatusOr<base::UniqueFd> HostTree::OpenFile(absl::string_view rel) const {
  ABOX_RETURN_IF_ERROR(CheckPath(rel));
  ABOX_ASSIGN_OR_RETURN(Parent parent, ResolveParent(rel, /*create=*/false, nullptr));
  if (!parent.fd) {
    return absl::NotFoundError(absl::StrCat("'", EscapePath(rel), "' does not exist on the host"));
  }
  // O_NONBLOCK: a fifo swapped in after a check must not hang the daemon.
  base::UniqueFd fd(::openat(parent.fd.get(), parent.leaf.c_str(),
                             O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY));
  if (!fd) {
    if (errno == ENOENT) {
      return absl::NotFoundError(
          absl::StrCat("'", EscapePath(rel), "' does not exist on the host"));
    }
    return Shown(base::ErrnoError("openat"), rel, "cannot open");
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) {
    return Shown(base::ErrnoError("fstat"), rel, "cannot inspect");
  }
  if (!S_ISREG(st.st_mode)) {
    return absl::FailedPreconditionError(
        absl::StrCat("'", EscapePath(rel), "' is not a regular file on the host"));
  }
  int flags = ::fcntl(fd.get(), F_GETFL);
  if (flags < 0 || ::fcntl(fd.get(), F_SETFL, flags & ~O_NONBLOCK) != 0) {
    return base::ErrnoError("fcntl(F_SETFL)");
  }
  return fd;
}

absl::StatusOr<std::vector<std::string>> HostTree::List(absl::string_view rel) const {
  base::UniqueFd dir_fd;
  if (rel.empty()) {
    dir_fd.reset(::openat(root_fd_.get(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  } else {
    ABOX_RETURN_IF_ERROR(CheckPath(rel));
    ABOX_ASSIGN_OR_RETURN(Parent parent, ResolveParent(rel, /*create=*/false, nullptr));
    if (!parent.fd) {
      return absl::NotFoundError(absl::StrCat("'", EscapePath(rel), "' is not a directory"));
    }
    dir_fd.reset(::openat(parent.fd.get(), parent.leaf.c_str(),
                          O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  }
  if (!dir_fd) {
    return Shown(base::ErrnoError("openat"), rel, "cannot list directory");
  }
  DIR* d = ::fdopendir(dir_fd.get());
  if (d == nullptr) {
    return Shown(base::ErrnoError("fdopendir"), rel, "cannot list directory");
  }
  (void)dir_fd.release();  // Owned by the DIR stream now.
  absl::Cleanup close_dir = [d] { ::closedir(d); };
  std::vector<std::string> names;
  errno = 0;
  while (dirent* de = ::readdir(d)) {  // NOLINT(concurrency-mt-unsafe): private stream
    std::string name = de->d_name;
    if (name != "." && name != "..") {
      names.push_back(std::move(name));
    }
  }
  if (errno != 0) {
    return Shown(base::ErrnoError("readdir"), rel, "cannot list directory");
  }
  std::sort(names.begin(), names.end());
  return names;
}

namespace {

absl::StatusOr<std::string> ReadLinkAt(int dir_fd, const char* name, size_t size_hint) {
  std::string buf(size_hint + 2, '\0');
  for (;;) {
    ssize_t n = ::readlinkat(dir_fd, name, buf.data(), buf.size());
    if (n < 0) {
      return base::ErrnoError("readlinkat");
    }
    if (static_cast<size_t>(n) < buf.size()) {
      buf.resize(static_cast<size_t>(n));
      return buf;
    }
    buf.resize(buf.size() * 2);
  }
}

// Depth-first through the directory `dir_fd` (relative path `rel`, "" for the root).
absl::Status CollectSymlinks(int dir_fd, const std::string& rel, int depth, HostSymlinks& out) {
  if (depth > HostTree::kMaxSymlinkWalkDepth) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "the host tree is deeper than ", HostTree::kMaxSymlinkWalkDepth, " directories at '",
        EscapePath(rel), "'; abox cannot check where its symlinks lead"));
  }
  base::UniqueFd list_fd(::openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!list_fd) {
    return Shown(base::ErrnoError("openat"), rel, "cannot list directory");
  }
  DIR* d = ::fdopendir(list_fd.get());
  if (d == nullptr) {
    return Shown(base::ErrnoError("fdopendir"), rel, "cannot list directory");
  }
  (void)list_fd.release();
  // Closed before descending: one descriptor per level is held, not two.
  absl::Cleanup close_dir = [&d] {
    if (d != nullptr) {
      ::closedir(d);
    }
  };
  std::vector<std::string> dirs;
  for (;;) {
    errno = 0;
    dirent* de = ::readdir(d);  // NOLINT(concurrency-mt-unsafe): private stream
    if (de == nullptr) {
      break;
    }
    std::string name = de->d_name;
    if (name == "." || name == "..") {
      continue;
    }
    unsigned char type = de->d_type;
    struct stat st {};
    if (type == DT_UNKNOWN) {
      if (::fstatat(dir_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
        if (errno == ENOENT) {
          continue;  // Gone meanwhile.
        }
        return Shown(base::ErrnoError("fstatat"), rel.empty() ? name : rel + "/" + name,
                     "cannot inspect");
      }
      type = S_ISLNK(st.st_mode) ? DT_LNK : S_ISDIR(st.st_mode) ? DT_DIR : DT_REG;
    }
    std::string path = rel.empty() ? name : absl::StrCat(rel, "/", name);
    if (type == DT_LNK) {
      absl::StatusOr<std::string> target = ReadLinkAt(dir_fd, name.c_str(), 256);
      if (!target.ok()) {
        if (absl::IsNotFound(target.status())) {
          continue;  // Gone meanwhile.
        }
        return Shown(target.status(), path, "cannot read link");
      }
      out.emplace(std::move(path), *std::move(target));
    } else if (type == DT_DIR && !absl::EqualsIgnoreCase(name, ".git")) {
      dirs.push_back(std::move(name));
    }
  }
  if (errno != 0) {
    return Shown(base::ErrnoError("readdir"), rel, "cannot list directory");
  }
  ::closedir(d);
  d = nullptr;
  for (const std::string& name : dirs) {
    base::UniqueFd sub(
        ::openat(dir_fd, name.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    std::string path = rel.empty() ? name : absl::StrCat(rel, "/", name);
    if (!sub) {
      if (errno == ENOENT) {
        continue;  // Removed meanwhile.
      }
      if (errno == ELOOP || errno == ENOTDIR) {
        // Swapped for a symlink or a file since readdir: record the link as it is now.
        struct stat st {};
        if (::fstatat(dir_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode)) {
          ABOX_ASSIGN_OR_RETURN(std::string target,
                                ReadLinkAt(dir_fd, name.c_str(), static_cast<size_t>(st.st_size)));
          out.emplace(std::move(path), std::move(target));
        }
        continue;
      }
      return Shown(base::ErrnoError("openat"), path, "cannot open directory");
    }
    ABOX_RETURN_IF_ERROR(CollectSymlinks(sub.get(), path, depth + 1, out));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<HostSymlinks> HostTree::Symlinks() const {
  HostSymlinks out;
  ABOX_RETURN_IF_ERROR(CollectSymlinks(root_fd_.get(), "", 1, out));
  return out;
}

}  // namespace abox::workspace
