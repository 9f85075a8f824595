#include "src/base/fenced_remove.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "src/base/status_macros.h"
#include "src/base/unique_fd.h"

namespace abox::base {
namespace {

namespace fs = std::filesystem;

enum class Kind { kTree, kFile, kEmptyDir };

// What one call removes, for messages.
struct Job {
  fs::path root;
  fs::path target;
  FenceOptions options;
};

// "/a/b/" -> "/a/b" (but "/" stays "/").
fs::path WithoutTrailingSlash(fs::path p) {
  if (!p.has_filename() && p.has_relative_path()) {
    return p.parent_path();
  }
  return p;
}

absl::Status Refuse(const fs::path& target, absl::string_view why, const fs::path& root) {
  return absl::InvalidArgumentError(absl::StrCat("refusing to delete ", target.string(), ": ", why,
                                                 "; abox deletes only below ", root.string(),
                                                 ", so this is a bug in abox: please report it"));
}

// The fence check (lexical, no I/O): `target` relative to `root`, strictly inside it.
absl::StatusOr<fs::path> RelativeInside(const fs::path& root, const fs::path& target) {
  if (!root.is_absolute() || !target.is_absolute()) {
    return Refuse(target, absl::StrCat("the path or its root ", root.string(), " is not absolute"),
                  root);
  }
  // As strings: path's operator== treats "a//b" and "a/b" as equal.
  if (target.lexically_normal().native() != target.native()) {
    return Refuse(target, "the path is not normal (it has \".\", \"..\" or \"//\")", root);
  }
  fs::path rel = target.lexically_relative(root);
  if (rel.empty() || rel == "." || *rel.begin() == "..") {
    return Refuse(target, absl::StrCat("it is not inside ", root.string()), root);
  }
  return rel;
}

absl::Status ErrnoFor(const Job& job, absl::string_view call, const fs::path& path, int err,
                      absl::string_view advice) {
  return Annotate(ErrnoError(absl::StrCat(call, "(", path.string(), ")"), err),
                  absl::StrCat("cannot delete ", job.target.string(), " (", advice, ")"));
}

// Why opening `component` (under `dir_fd`) as a directory failed with ELOOP / ENOTDIR.
absl::Status NotADirectoryOnTheWay(const Job& job, int dir_fd, const std::string& component,
                                   const fs::path& shown) {
  struct stat st {};
  if (::fstatat(dir_fd, component.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode)) {
    return absl::FailedPreconditionError(
        absl::StrCat("refusing to delete ", job.target.string(), ": ", shown.string(),
                     " is a symbolic link, and abox follows none below ", job.root.string(),
                     "; put back the directory it replaced (or remove the link) and retry"));
  }
  return absl::FailedPreconditionError(
      absl::StrCat("cannot delete ", job.target.string(), ": ", shown.string(),
                   " is not a directory; move it out of the way and retry"));
}

// The openat(O_NOFOLLOW) walk from `root_fd` through `rel_parent`, one component at a time.
// An invalid fd: a component is missing.
absl::StatusOr<UniqueFd> WalkBeneath(const Job& job, int root_fd, const fs::path& rel_parent) {
  UniqueFd cur(::fcntl(root_fd, F_DUPFD_CLOEXEC, 0));
  if (!cur) {
    return ErrnoError("fcntl(F_DUPFD_CLOEXEC)");
  }
  fs::path shown = job.root;
  for (const fs::path& part : rel_parent) {
    shown /= part;
    UniqueFd next(::openat(cur.get(), part.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!next) {
      int err = errno;
      if (err == ENOENT) {
        return UniqueFd();
      }
      if (err == ELOOP || err == ENOTDIR) {
        return NotADirectoryOnTheWay(job, cur.get(), part.string(), shown);
      }
      return ErrnoFor(job, "openat", shown, err, "check the directory's permissions");
    }
    // O_PATH | O_NOFOLLOW may hand back the link itself instead of failing: refuse that too.
    struct stat st {};
    if (::fstat(next.get(), &st) != 0) {
      return ErrnoFor(job, "fstat", shown, errno, "check the directory's permissions");
    }
    if (!S_ISDIR(st.st_mode)) {
      return NotADirectoryOnTheWay(job, cur.get(), part.string(), shown);
    }
    cur = std::move(next);
  }
  return cur;
}

// The directory `rel_parent` below `root_fd`, without following any symlink and without
// leaving root: openat2 where the kernel has it, else WalkBeneath. Invalid fd: missing.
absl::StatusOr<UniqueFd> OpenBeneath(const Job& job, int root_fd, const fs::path& rel_parent) {
#ifdef SYS_openat2
  if (job.options.use_openat2) {
    open_how how{};
    how.flags = O_PATH | O_DIRECTORY | O_CLOEXEC;
    how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
    // EAGAIN: a concurrent rename made the kernel unsure the walk stayed beneath; retry.
    for (int attempt = 0; attempt < 8; ++attempt) {
      long fd = ::syscall(SYS_openat2, root_fd, rel_parent.c_str(), &how, sizeof(how));
      if (fd >= 0) {
        return UniqueFd(static_cast<int>(fd));
      }
      int err = errno;
      if (err == EINTR || err == EAGAIN) {
        continue;
      }
      if (err == ENOENT) {
        return UniqueFd();
      }
      if (err == ENOSYS || err == EPERM) {
        break;  // Older kernel, or a seccomp filter that hides openat2: walk instead.
      }
      if (err == ELOOP || err == ENOTDIR || err == EXDEV) {
        // WalkBeneath finds the offending component and names it.
        return WalkBeneath(job, root_fd, rel_parent);
      }
      return ErrnoFor(job, "openat2", job.root / rel_parent, err,
                      "check the directory's permissions");
    }
  }
#endif
  return WalkBeneath(job, root_fd, rel_parent);
}

// kFailedPrecondition when the directory `fd` is another file system's root (its device is not
// `dev`, or statx says it is a mount root: bind mounts share the device).
absl::Status CheckSameFileSystem(const Job& job, int fd, dev_t dev, const fs::path& shown) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    return ErrnoFor(job, "fstat", shown, errno, "check the directory's permissions");
  }
  bool mount_root = st.st_dev != dev;
#ifdef STATX_ATTR_MOUNT_ROOT
  struct statx stx {};
  if (::statx(fd, "", AT_EMPTY_PATH | AT_NO_AUTOMOUNT, STATX_TYPE, &stx) == 0 &&
      (stx.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT) != 0 &&
      (stx.stx_attributes & STATX_ATTR_MOUNT_ROOT) != 0) {
    mount_root = true;
  }
#endif
  if (mount_root) {
    return absl::FailedPreconditionError(
        absl::StrCat("refusing to delete ", job.target.string(), ": ", shown.string(),
                     " is a mount point (left by a killed build or sandbox?); unmount it "
                     "(`umount -R ",
                     shown.string(), "`) and retry"));
  }
  return absl::OkStatus();
}

// The names in directory `dir_fd` (without "." and ".."), read before anything is removed so
// that removal does not disturb the directory stream.
absl::StatusOr<std::vector<std::string>> ListNames(const Job& job, int dir_fd,
                                                   const fs::path& shown) {
  int dup_fd = ::fcntl(dir_fd, F_DUPFD_CLOEXEC, 0);
  if (dup_fd < 0) {
    return ErrnoError("fcntl(F_DUPFD_CLOEXEC)");
  }
  DIR* dir = ::fdopendir(dup_fd);
  if (dir == nullptr) {
    int err = errno;
    ::close(dup_fd);
    return ErrnoFor(job, "fdopendir", shown, err, "check the directory's permissions");
  }
  std::vector<std::string> names;
  errno = 0;
  while (dirent* de = ::readdir(dir)) {  // NOLINT(concurrency-mt-unsafe): private DIR stream
    std::string name = de->d_name;
    if (name != "." && name != "..") {
      names.push_back(std::move(name));
    }
    errno = 0;
  }
  int err = errno;
  ::closedir(dir);
  if (err != 0) {
    return ErrnoFor(job, "readdir", shown, err, "check the directory's permissions");
  }
  return names;
}

absl::Status RemoveDirEntry(const Job& job, int parent_fd, const std::string& name,
                            const fs::path& shown) {
  if (::unlinkat(parent_fd, name.c_str(), AT_REMOVEDIR) == 0 || errno == ENOENT) {
    return absl::OkStatus();
  }
  int err = errno;
  if (err == ENOTEMPTY || err == EEXIST) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot delete ", job.target.string(), ": ", shown.string(),
                     " is not empty (something is still writing into it?); stop that and retry"));
  }
  if (err == ENOTDIR) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot delete ", shown.string(),
                     " as a directory: it is not one; remove what is there by hand if it "
                     "should go"));
  }
  return ErrnoFor(job, "rmdir", shown, err, "check the permissions of its parent directory");
}

// Empties the directory `dir_fd` (on device `dev`), `depth` levels below the target.
absl::Status RemoveContents(const Job& job, int dir_fd, dev_t dev, const fs::path& shown,
                            int depth) {
  ABOX_ASSIGN_OR_RETURN(std::vector<std::string> names, ListNames(job, dir_fd, shown));
  for (const std::string& name : names) {
    fs::path child = shown / name;
    // Not a directory (a file, socket, or symlink: the link goes, its target stays): done.
    if (::unlinkat(dir_fd, name.c_str(), 0) == 0 || errno == ENOENT) {
      continue;
    }
    if (errno != EISDIR) {
      return ErrnoFor(job, "unlink", child, errno,
                      "check the permissions of the directory holding it");
    }
    if (depth >= job.options.max_depth) {
      return absl::FailedPreconditionError(
          absl::StrCat("refusing to delete ", job.target.string(), ": it nests more than ",
                       job.options.max_depth, " directories (at ", child.string(),
                       "); if it should go, remove it by hand with `rm -rf --one-file-system ",
                       job.target.string(), "`"));
    }
    UniqueFd sub(::openat(dir_fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!sub) {
      if (errno == ENOENT) {
        continue;
      }
      if (errno == ELOOP || errno == ENOTDIR) {
        return absl::FailedPreconditionError(
            absl::StrCat("cannot delete ", job.target.string(), ": ", child.string(),
                         " changed while it was being deleted; stop whatever writes there and "
                         "retry"));
      }
      return ErrnoFor(job, "open", child, errno, "check the directory's permissions");
    }
    ABOX_RETURN_IF_ERROR(CheckSameFileSystem(job, sub.get(), dev, child));
    ABOX_RETURN_IF_ERROR(RemoveContents(job, sub.get(), dev, child, depth + 1));
    sub.reset();
    ABOX_RETURN_IF_ERROR(RemoveDirEntry(job, dir_fd, name, child));
  }
  return absl::OkStatus();
}

absl::Status Remove(const fs::path& root_in, const fs::path& target_in, const FenceOptions& options,
                    Kind kind) {
  Job job{WithoutTrailingSlash(root_in.lexically_normal()), WithoutTrailingSlash(target_in),
          options};
  ABOX_ASSIGN_OR_RETURN(fs::path rel, RelativeInside(job.root, job.target));

  UniqueFd root_fd(::open(job.root.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!root_fd) {
    if (errno == ENOENT) {
      return absl::OkStatus();  // No root, so nothing beneath it.
    }
    return ErrnoFor(job, "open", job.root, errno, "check that the directory is accessible");
  }
  const fs::path rel_parent = rel.parent_path();
  const std::string name = rel.filename().string();
  UniqueFd parent_holder;
  int parent_fd = root_fd.get();
  if (!rel_parent.empty()) {
    ABOX_ASSIGN_OR_RETURN(parent_holder, OpenBeneath(job, root_fd.get(), rel_parent));
    if (!parent_holder) {
      return absl::OkStatus();  // A directory on the way is missing: so is the target.
    }
    parent_fd = parent_holder.get();
  }

  if (kind == Kind::kEmptyDir) {
    return RemoveDirEntry(job, parent_fd, name, job.target);
  }
  // A file, socket or symlink goes at once (the link itself, never what it points to).
  if (::unlinkat(parent_fd, name.c_str(), 0) == 0 || errno == ENOENT) {
    return absl::OkStatus();
  }
  if (errno != EISDIR) {
    return ErrnoFor(job, "unlink", job.target, errno,
                    "check the permissions of the directory holding it");
  }
  if (kind == Kind::kFile) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot delete ", job.target.string(),
                     " as a file: it is a directory; remove it by hand if it should go"));
  }
  UniqueFd dir(::openat(parent_fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!dir) {
    if (errno == ENOENT) {
      return absl::OkStatus();
    }
    return ErrnoFor(job, "open", job.target, errno, "check the directory's permissions");
  }
  struct stat parent_st {};
  if (::fstat(parent_fd, &parent_st) != 0) {
    int err = errno;
    return ErrnoFor(job, "fstat", job.target.parent_path(), err,
                    "check the directory's permissions");
  }
  ABOX_RETURN_IF_ERROR(CheckSameFileSystem(job, dir.get(), parent_st.st_dev, job.target));
  ABOX_RETURN_IF_ERROR(RemoveContents(job, dir.get(), parent_st.st_dev, job.target, 1));
  dir.reset();
  return RemoveDirEntry(job, parent_fd, name, job.target);
}

}  // namespace

absl::Status RemoveUnder(const fs::path& root, const fs::path& target,
                         const FenceOptions& options) {
  return Remove(root, target, options, Kind::kTree);
}

absl::Status RemoveFileUnder(const fs::path& root, const fs::path& target,
                             const FenceOptions& options) {
  return Remove(root, target, options, Kind::kFile);
}

absl::Status RemoveEmptyDirUnder(const fs::path& root, const fs::path& target,
                                 const FenceOptions& options) {
  return Remove(root, target, options, Kind::kEmptyDir);
}

}  // namespace abox::base
