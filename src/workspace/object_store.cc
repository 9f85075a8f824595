#include "src/workspace/object_store.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <utility>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "src/base/fenced_remove.h"
#include "src/base/io.h"
#include "src/base/status_macros.h"
#include "src/workspace/sha256.h"

namespace abox::workspace {
namespace {

namespace fs = std::filesystem;

absl::Status MakeDir(const std::string& path) {
  if (::mkdir(path.c_str(), 0700) != 0 && errno != EEXIST) {
    return base::ErrnoError(absl::StrCat("mkdir(", path, ")"));
  }
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) {
    return base::ErrnoError(absl::StrCat("lstat(", path, ")"));
  }
  if (!S_ISDIR(st.st_mode)) {
    return absl::FailedPreconditionError(
        absl::StrCat(path, " is not a directory; move it away so abox can keep objects there"));
  }
  return absl::OkStatus();
}

absl::Status FsyncDir(const std::string& path) {
  base::UniqueFd fd(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd) {
    return base::ErrnoError(absl::StrCat("open(", path, ")"));
  }
  if (::fsync(fd.get()) != 0) {
    return base::ErrnoError(absl::StrCat("fsync(", path, ")"));
  }
  return absl::OkStatus();
}

// Names in `dir` other than "." and "..".
absl::StatusOr<std::vector<std::string>> ListDir(const std::string& dir) {
  std::vector<std::string> names;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) {
    if (errno == ENOENT) {
      return names;
    }
    return base::ErrnoError(absl::StrCat("opendir(", dir, ")"));
  }
  errno = 0;
  while (dirent* de = ::readdir(d)) {  // NOLINT(concurrency-mt-unsafe): private stream
    std::string name = de->d_name;
    if (name != "." && name != "..") {
      names.push_back(std::move(name));
    }
  }
  int err = errno;
  ::closedir(d);
  if (err != 0) {
    return base::ErrnoError(absl::StrCat("readdir(", dir, ")"), err);
  }
  return names;
}

ObjectStore::Reader FdReader(int fd) {
  return [fd](char* buf, size_t len) { return base::ReadSome(fd, buf, len); };
}

}  // namespace

absl::StatusOr<ObjectStore> ObjectStore::Open(const std::string& dir) {
  if (dir.empty() || dir.front() != '/') {
    return absl::InvalidArgumentError(
        absl::StrCat("object store directory '", dir, "' must be an absolute path"));
  }
  ABOX_RETURN_IF_ERROR(MakeDir(dir));
  ABOX_RETURN_IF_ERROR(MakeDir(dir + "/objects"));
  ABOX_RETURN_IF_ERROR(MakeDir(dir + "/tmp"));
  return ObjectStore(dir);
}

std::string ObjectStore::PathOf(absl::string_view sha256) const {
  if (!IsSha256Hex(sha256)) {
    // A broken invariant: every caller validates digests from outside first.
    std::abort();
  }
  return absl::StrCat(dir_, "/objects/", sha256.substr(0, 2), "/", sha256);
}

bool ObjectStore::Has(absl::string_view sha256) const {
  if (!IsSha256Hex(sha256)) {
    return false;
  }
  struct stat st {};
  return ::lstat(PathOf(sha256).c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

absl::StatusOr<std::string> ObjectStore::Store(const Reader& reader, absl::string_view expected,
                                               uint64_t max_bytes, uint64_t* size) {
  std::string tmp = dir_ + "/tmp/obj.XXXXXX";
  base::UniqueFd fd(::mkostemp(tmp.data(), O_CLOEXEC));
  if (!fd) {
    return base::ErrnoError(absl::StrCat("mkostemp(", tmp, ")"));
  }
  bool keep_tmp = false;
  absl::Cleanup remove_tmp = [&] {
    if (!keep_tmp) {
      ::unlink(tmp.c_str());
    }
  };

  Sha256 hasher;
  uint64_t total = 0;
  std::vector<char> buf(1 << 16);
  for (;;) {
    ABOX_ASSIGN_OR_RETURN(size_t n, reader(buf.data(), buf.size()));
    if (n == 0) {
      break;
    }
    total += n;
    if (total > max_bytes) {
      return absl::ResourceExhaustedError(
          absl::StrCat("object larger than the ", max_bytes, "-byte limit"));
    }
    absl::string_view chunk(buf.data(), n);
    hasher.Update(chunk);
    ABOX_RETURN_IF_ERROR(base::WriteAll(fd.get(), {chunk.data(), chunk.size()}));
  }
  std::string sha = hasher.Finish();
  if (!expected.empty() && sha != expected) {
    return absl::DataLossError(absl::StrCat("content hashes to ", sha, ", not the expected ",
                                            expected, "; nothing was stored"));
  }
  if (size != nullptr) {
    *size = total;
  }
  if (Has(sha)) {
    return sha;  // Same content already stored (objects are immutable).
  }
  if (::fchmod(fd.get(), 0444) != 0) {
    return base::ErrnoError("fchmod(object)");
  }
  if (!deferred_sync_ && ::fsync(fd.get()) != 0) {
    return base::ErrnoError("fsync(object)");
  }
  std::string fan = absl::StrCat(dir_, "/objects/", sha.substr(0, 2));
  ABOX_RETURN_IF_ERROR(MakeDir(fan));
  std::string final_path = PathOf(sha);
  if (::rename(tmp.c_str(), final_path.c_str()) != 0) {
    return base::ErrnoError(absl::StrCat("rename(", final_path, ")"));
  }
  keep_tmp = true;
  if (!deferred_sync_) {
    ABOX_RETURN_IF_ERROR(FsyncDir(fan));
  }
  return sha;
}

absl::Status ObjectStore::Flush() const {
  base::UniqueFd fd(::open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd) {
    return base::ErrnoError(absl::StrCat("open(", dir_, ")"));
  }
  if (::syncfs(fd.get()) != 0) {
    return base::ErrnoError(absl::StrCat("syncfs(", dir_, ")"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ObjectStore::PutData(absl::string_view data) {
  size_t offset = 0;
  Reader reader = [&](char* buf, size_t len) -> absl::StatusOr<size_t> {
    size_t n = std::min(len, data.size() - offset);
    std::copy_n(data.data() + offset, n, buf);
    offset += n;
    return n;
  };
  return Store(reader, "", UINT64_MAX, nullptr);
}

absl::StatusOr<std::string> ObjectStore::PutFd(int fd, uint64_t* size) {
  return Store(FdReader(fd), "", UINT64_MAX, size);
}

absl::StatusOr<std::string> ObjectStore::PutStream(const Reader& reader, uint64_t* size) {
  return Store(reader, "", UINT64_MAX, size);
}

absl::StatusOr<std::string> ObjectStore::PutFile(const std::string& path) {
  base::UniqueFd fd(::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd) {
    return base::ErrnoError(absl::StrCat("open(", path, ")"));
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) {
    return base::ErrnoError(absl::StrCat("fstat(", path, ")"));
  }
  if (!S_ISREG(st.st_mode)) {
    return absl::InvalidArgumentError(absl::StrCat(path, " is not a regular file"));
  }
  return PutFd(fd.get());
}

absl::Status ObjectStore::PutVerified(absl::string_view sha256, const Reader& reader,
                                      uint64_t max_bytes) {
  if (!IsSha256Hex(sha256)) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", sha256.substr(0, 80), "' is not a SHA-256 digest (64 lowercase hex)"));
  }
  return Store(reader, sha256, max_bytes, nullptr).status();
}

absl::StatusOr<base::UniqueFd> ObjectStore::OpenObject(absl::string_view sha256) const {
  if (!IsSha256Hex(sha256)) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", sha256.substr(0, 80), "' is not a SHA-256 digest"));
  }
  std::string path = PathOf(sha256);
  base::UniqueFd fd(::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd) {
    if (errno == ENOENT) {
      return absl::NotFoundError(absl::StrCat("object ", sha256, " is not in ", dir_));
    }
    return base::ErrnoError(absl::StrCat("open(", path, ")"));
  }
  return fd;
}

absl::StatusOr<std::string> ObjectStore::Read(absl::string_view sha256, size_t limit) const {
  ABOX_ASSIGN_OR_RETURN(base::UniqueFd fd, OpenObject(sha256));
  return base::ReadAllFd(fd.get(), limit);
}

absl::Status ObjectStore::Retain(const std::set<std::string>& keep) {
  fs::path root(dir_);
  ABOX_ASSIGN_OR_RETURN(std::vector<std::string> fans, ListDir(dir_ + "/objects"));
  for (const std::string& fan : fans) {
    std::string fan_dir = dir_ + "/objects/" + fan;
    ABOX_ASSIGN_OR_RETURN(std::vector<std::string> names, ListDir(fan_dir));
    size_t kept = 0;
    for (const std::string& name : names) {
      if (keep.count(name) != 0) {
        ++kept;
        continue;
      }
      ABOX_RETURN_IF_ERROR(base::RemoveFileUnder(root, fs::path(fan_dir) / name));
    }
    if (kept == 0) {
      ABOX_RETURN_IF_ERROR(base::RemoveEmptyDirUnder(root, fs::path(fan_dir)));
    }
  }
  // Temp files are from writers that died (Retain must not race with live ones).
  ABOX_ASSIGN_OR_RETURN(std::vector<std::string> tmps, ListDir(dir_ + "/tmp"));
  for (const std::string& name : tmps) {
    ABOX_RETURN_IF_ERROR(base::RemoveFileUnder(root, root / "tmp" / name));
  }
  return absl::OkStatus();
}

}  // namespace abox::workspace
