// HostTree's writes and removals: atomic (a temp file in the same directory, fsync, rename over,
// fsync the directory), never replacing a directory, device, fifo or socket (host_tree.h).
#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "src/base/io.h"
#include "src/base/status_macros.h"
#include "src/workspace/host_tree.h"
#include "src/workspace/host_tree_internal.h"
#include "src/workspace/object_store.h"
#include "src/workspace/paths.h"
#include "src/workspace/sha256.h"

namespace abox::workspace {

using host_tree_internal::Shown;
using host_tree_internal::TypeName;

namespace {

constexpr absl::string_view kTempPrefix = ".abox-tmp-";

std::string RandomHex(size_t bytes) {
  unsigned char buf[16] = {};
  bytes = std::min(bytes, sizeof(buf));
  size_t got = 0;
  while (got < bytes) {
    ssize_t n = ::getrandom(buf + got, bytes - got, 0);
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n < 0) {
      std::abort();  // getrandom(2) cannot fail for small requests once the pool is ready
    }
    got += static_cast<size_t>(n);
  }
  std::string out;
  for (size_t i = 0; i < bytes; ++i) {
    absl::StrAppend(&out, absl::Hex(buf[i], absl::kZeroPad2));
  }
  return out;
}

absl::Status FsyncDirFd(int dir_fd) {
  base::UniqueFd fd(::openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd) {
    return base::ErrnoError("open(directory for fsync)");
  }
  if (::fsync(fd.get()) != 0) {
    return base::ErrnoError("fsync(directory)");
  }
  return absl::OkStatus();
}

// Creates temp file `tmp` in `dir_fd` (O_EXCL, 0600), lets `fill` write it, sets `mode` and
// fsyncs it.
absl::Status MakeTempFile(int dir_fd, const char* tmp, uint32_t mode,
                          const std::function<absl::Status(int fd)>& fill) {
  base::UniqueFd fd(
      ::openat(dir_fd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!fd) {
    return base::ErrnoError("openat(temp file)");
  }
  ABOX_RETURN_IF_ERROR(fill(fd.get()));
  if (::fchmod(fd.get(), mode & 0777) != 0) {
    return base::ErrnoError("fchmod");
  }
  if (::fsync(fd.get()) != 0) {
    return base::ErrnoError("fsync");
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status HostTree::WriteWith(
    absl::string_view rel, const std::function<absl::Status(int dir_fd, const char* tmp)>& make,
    std::vector<std::string>* created_dirs) {
  ABOX_RETURN_IF_ERROR(CheckPath(rel));
  ABOX_ASSIGN_OR_RETURN(Parent parent, ResolveParent(rel, /*create=*/true, created_dirs));
  struct stat st {};
  if (::fstatat(parent.fd.get(), parent.leaf.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 &&
      !S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "refusing to replace '", EscapePath(rel), "': it is a ",
        S_ISDIR(st.st_mode) ? "directory" : TypeName(st.st_mode),
        " on the host, and abox only replaces files and symlinks; move it away first"));
  }
  std::string tmp = absl::StrCat(kTempPrefix, RandomHex(8));
  bool renamed = false;
  absl::Cleanup remove_tmp = [&] {
    if (!renamed) {
      ::unlinkat(parent.fd.get(), tmp.c_str(), 0);
    }
  };
  ABOX_RETURN_IF_ERROR(Shown(make(parent.fd.get(), tmp.c_str()), rel, "cannot write"));
  if (::renameat(parent.fd.get(), tmp.c_str(), parent.fd.get(), parent.leaf.c_str()) != 0) {
    return Shown(base::ErrnoError("renameat"), rel, "cannot write");
  }
  renamed = true;
  return Shown(FsyncDirFd(parent.fd.get()), rel, "cannot sync the directory of");
}

absl::Status HostTree::WriteFile(absl::string_view rel, absl::string_view content, uint32_t mode,
                                 std::vector<std::string>* created_dirs) {
  return WriteWith(
      rel,
      [&](int dir_fd, const char* tmp) {
        return MakeTempFile(dir_fd, tmp, mode, [&](int fd) {
          return base::WriteAll(fd, {content.data(), content.size()});
        });
      },
      created_dirs);
}

absl::Status HostTree::WriteObject(absl::string_view rel, const ObjectStore& objects,
                                   absl::string_view sha256, uint32_t mode,
                                   std::vector<std::string>* created_dirs) {
  ABOX_ASSIGN_OR_RETURN(base::UniqueFd src, objects.OpenObject(sha256));
  return WriteWith(
      rel,
      [&](int dir_fd, const char* tmp) {
        return MakeTempFile(dir_fd, tmp, mode, [&](int fd) -> absl::Status {
          Sha256 hasher;
          std::vector<char> buf(1 << 16);
          for (;;) {
            ABOX_ASSIGN_OR_RETURN(size_t n, base::ReadSome(src.get(), buf.data(), buf.size()));
            if (n == 0) {
              break;
            }
            hasher.Update(absl::string_view(buf.data(), n));
            ABOX_RETURN_IF_ERROR(base::WriteAll(fd, {buf.data(), n}));
          }
          std::string got = hasher.Finish();
          if (got != sha256) {
            return absl::DataLossError(absl::StrCat("object ", sha256, " in ", objects.dir(),
                                                    " is corrupt (it hashes to ", got, ")"));
          }
          return absl::OkStatus();
        });
      },
      created_dirs);
}

absl::Status HostTree::WriteSymlink(absl::string_view rel, absl::string_view target,
                                    std::vector<std::string>* created_dirs) {
  if (target.empty() || target.size() > 4096 || target.find('\0') != absl::string_view::npos) {
    return absl::InvalidArgumentError(absl::StrCat(
        "refusing symlink '", EscapePath(rel), "': its target is empty, too long or has a NUL"));
  }
  std::string target_str(target);
  return WriteWith(
      rel,
      [&](int dir_fd, const char* tmp) -> absl::Status {
        if (::symlinkat(target_str.c_str(), dir_fd, tmp) != 0) {
          return base::ErrnoError("symlinkat");
        }
        return absl::OkStatus();
      },
      created_dirs);
}

absl::Status HostTree::MakeDir(absl::string_view rel, std::vector<std::string>* created_dirs) {
  ABOX_RETURN_IF_ERROR(CheckPath(rel));
  ABOX_ASSIGN_OR_RETURN(Parent parent, ResolveParent(rel, /*create=*/true, created_dirs));
  if (::mkdirat(parent.fd.get(), parent.leaf.c_str(), 0755) == 0) {
    if (created_dirs != nullptr) {
      created_dirs->emplace_back(rel);
    }
    return Shown(FsyncDirFd(parent.fd.get()), rel, "cannot sync the directory of");
  }
  if (errno != EEXIST) {
    return Shown(base::ErrnoError("mkdirat"), rel, "cannot create directory");
  }
  struct stat st {};
  if (::fstatat(parent.fd.get(), parent.leaf.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    return Shown(base::ErrnoError("fstatat"), rel, "cannot inspect");
  }
  if (!S_ISDIR(st.st_mode)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "cannot create directory '", EscapePath(rel), "': a ",
        S_ISLNK(st.st_mode) ? "symlink" : (S_ISREG(st.st_mode) ? "file" : TypeName(st.st_mode)),
        " is in the way on the host"));
  }
  return absl::OkStatus();
}

absl::Status HostTree::Remove(absl::string_view rel) {
  ABOX_RETURN_IF_ERROR(CheckPath(rel));
  ABOX_ASSIGN_OR_RETURN(Parent parent, ResolveParent(rel, /*create=*/false, nullptr));
  if (!parent.fd) {
    return absl::OkStatus();  // Already absent.
  }
  struct stat st {};
  if (::fstatat(parent.fd.get(), parent.leaf.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    if (errno == ENOENT) {
      return absl::OkStatus();
    }
    return Shown(base::ErrnoError("fstatat"), rel, "cannot inspect");
  }
  if (!S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode)) {
    return absl::FailedPreconditionError(
        absl::StrCat("refusing to remove '", EscapePath(rel), "': it is a ",
                     S_ISDIR(st.st_mode) ? "directory" : TypeName(st.st_mode),
                     " on the host; abox removes only files and symlinks"));
  }
  if (::unlinkat(parent.fd.get(), parent.leaf.c_str(), 0) != 0 && errno != ENOENT) {
    return Shown(base::ErrnoError("unlinkat"), rel, "cannot remove");
  }
  return Shown(FsyncDirFd(parent.fd.get()), rel, "cannot sync the directory of");
}

absl::Status HostTree::RemoveEmptyDir(absl::string_view rel) {
  ABOX_RETURN_IF_ERROR(CheckPath(rel));
  ABOX_ASSIGN_OR_RETURN(Parent parent, ResolveParent(rel, /*create=*/false, nullptr));
  if (!parent.fd) {
    return absl::OkStatus();
  }
  struct stat st {};
  if (::fstatat(parent.fd.get(), parent.leaf.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    if (errno == ENOENT) {
      return absl::OkStatus();
    }
    return Shown(base::ErrnoError("fstatat"), rel, "cannot inspect");
  }
  if (!S_ISDIR(st.st_mode)) {
    return absl::FailedPreconditionError(
        absl::StrCat("refusing to remove '", EscapePath(rel), "' as a directory: it is not one"));
  }
  if (::unlinkat(parent.fd.get(), parent.leaf.c_str(), AT_REMOVEDIR) != 0) {
    if (errno == ENOTEMPTY || errno == EEXIST) {
      return absl::FailedPreconditionError(
          absl::StrCat("directory '", EscapePath(rel), "' is not empty on the host"));
    }
    if (errno != ENOENT) {
      return Shown(base::ErrnoError("unlinkat"), rel, "cannot remove directory");
    }
  }
  return Shown(FsyncDirFd(parent.fd.get()), rel, "cannot sync the directory of");
}

absl::Status HostTree::RemoveStaleTemps(absl::string_view rel) {
  auto names = List(rel);
  if (absl::IsNotFound(names.status())) {
    return absl::OkStatus();
  }
  ABOX_RETURN_IF_ERROR(names.status());
  for (const std::string& name : *names) {
    if (absl::StartsWith(name, kTempPrefix)) {
      ABOX_RETURN_IF_ERROR(Remove(rel.empty() ? name : absl::StrCat(rel, "/", name)));
    }
  }
  return absl::OkStatus();
}

}  // namespace abox::workspace
