#include "src/image/fs_util.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "spdlog/spdlog.h"
#include "src/base/fenced_remove.h"
#include "src/base/status_macros.h"

namespace abox::image {
namespace {

using base::ErrnoError;
using base::UniqueFd;

absl::Status CopySparse(const std::filesystem::path& src, const std::filesystem::path& dst) {
  UniqueFd in(::open(src.c_str(), O_RDONLY | O_CLOEXEC));
  if (!in) {
    return ErrnoError(absl::StrCat("open(", src.string(), ")"));
  }
  struct stat st {};
  if (::fstat(in.get(), &st) != 0) {
    return ErrnoError(absl::StrCat("fstat(", src.string(), ")"));
  }
  UniqueFd out(::open(dst.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, st.st_mode & 0777));
  if (!out) {
    return ErrnoError(absl::StrCat("open(", dst.string(), ")"));
  }
  off_t pos = 0;
  while (pos < st.st_size) {
    off_t data = ::lseek(in.get(), pos, SEEK_DATA);
    if (data < 0) {
      if (errno == ENXIO) {
        break;  // Only a hole remains.
      }
      return ErrnoError(absl::StrCat("lseek(", src.string(), ", SEEK_DATA)"));
    }
    off_t hole = ::lseek(in.get(), data, SEEK_HOLE);
    if (hole < 0) {
      return ErrnoError(absl::StrCat("lseek(", src.string(), ", SEEK_HOLE)"));
    }
    off_t in_off = data, out_off = data;
    while (in_off < hole) {
      ssize_t n = ::copy_file_range(in.get(), &in_off, out.get(), &out_off,
                                    static_cast<size_t>(hole - in_off), 0);
      if (n < 0 && errno == EINTR) {
        continue;
      }
      if (n <= 0) {
        return n == 0 ? absl::DataLossError(absl::StrCat(src.string(), " shrank while copying"))
                      : ErrnoError(absl::StrCat("copy_file_range(", dst.string(), ")"));
      }
    }
    pos = hole;
  }
  if (::ftruncate(out.get(), st.st_size) != 0) {
    return ErrnoError(absl::StrCat("ftruncate(", dst.string(), ")"));
  }
  if (::fsync(out.get()) != 0) {
    return ErrnoError(absl::StrCat("fsync(", dst.string(), ")"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::filesystem::path> MakeTempDir(const std::filesystem::path& parent,
                                                  const std::string& prefix, mode_t mode) {
  std::error_code ec;
  std::filesystem::create_directories(parent, ec);
  if (ec) {
    return absl::PermissionDeniedError(
        absl::StrCat("cannot create ", parent.string(), ": ", ec.message()));
  }
  std::string templ = (parent / (prefix + "XXXXXX")).string();
  if (::mkdtemp(templ.data()) == nullptr) {
    return ErrnoError(absl::StrCat("mkdtemp(", templ, ")"));
  }
  if (::chmod(templ.c_str(), mode) != 0) {
    return ErrnoError(absl::StrCat("chmod(", templ, ")"));
  }
  return std::filesystem::path(templ);
}

absl::Status LinkOrCopy(const std::filesystem::path& src, const std::filesystem::path& dst,
                        bool* linked) {
  *linked = false;
  if (::link(src.c_str(), dst.c_str()) == 0) {
    *linked = true;
    return absl::OkStatus();
  }
  if (errno != EXDEV && errno != EPERM && errno != EMLINK) {
    return ErrnoError(absl::StrCat("link(", src.string(), ", ", dst.string(), ")"));
  }
  absl::Status s = CopySparse(src, dst);
  if (!s.ok()) {
    ::unlink(dst.c_str());
  }
  return s;
}

absl::Status FsyncPath(const std::filesystem::path& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) {
    return ErrnoError(absl::StrCat("open(", path.string(), ")"));
  }
  if (::fsync(fd.get()) != 0) {
    return ErrnoError(absl::StrCat("fsync(", path.string(), ")"));
  }
  return absl::OkStatus();
}

absl::Status ReplaceDir(const std::filesystem::path& root, const std::filesystem::path& from,
                        const std::filesystem::path& to) {
  if (::renameat2(AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(), RENAME_NOREPLACE) == 0) {
    return FsyncPath(to.parent_path());
  }
  if (errno != EEXIST) {
    return ErrnoError(absl::StrCat("rename(", from.string(), ", ", to.string(), ")"));
  }
  if (::renameat2(AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(), RENAME_EXCHANGE) != 0) {
    return ErrnoError(
        absl::StrCat("renameat2(", from.string(), ", ", to.string(), ", RENAME_EXCHANGE)"));
  }
  ABOX_RETURN_IF_ERROR(FsyncPath(to.parent_path()));
  // The swap is done; failing to delete the old copy must not fail the caller.
  if (absl::Status s = base::RemoveUnder(root, from); !s.ok()) {
    spdlog::warn("could not remove replaced {}: {}", from.string(), s.ToString());
  }
  return absl::OkStatus();
}

absl::StatusOr<FileLock> FileLock::TryAcquire(const std::filesystem::path& path,
                                              const std::string& what) {
  UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644));
  if (!fd) {
    return ErrnoError(absl::StrCat("open(", path.string(), ")"));
  }
  while (::flock(fd.get(), LOCK_EX | LOCK_NB) != 0) {
    if (errno == EINTR) {
      continue;
    }
    if (errno == EWOULDBLOCK) {
      return absl::UnavailableError(
          absl::StrCat(what, " (lock ", path.string(), " is held): wait for it to finish"));
    }
    return ErrnoError(absl::StrCat("flock(", path.string(), ")"));
  }
  return FileLock(std::move(fd));
}

absl::StatusOr<FileStamp> StatFile(const std::filesystem::path& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    return ErrnoError(absl::StrCat("stat(", path.string(), ")"));
  }
  if (!S_ISREG(st.st_mode)) {
    return absl::FailedPreconditionError(absl::StrCat(path.string(), " is not a regular file"));
  }
  return FileStamp{static_cast<uint64_t>(st.st_size),
                   static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec};
}

}  // namespace abox::image
