#include "src/guest/workspace_tool.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <memory>
#include <string_view>
#include <utility>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "src/base/io.h"
#include "src/base/status_macros.h"
#include "src/base/unique_fd.h"
#include "src/workspace/manifest.h"
#include "src/workspace/manifest_scan.h"
#include "src/workspace/paths.h"

namespace abox::guest {
namespace {

using workspace::Entry;
using workspace::EntryType;
using workspace::EscapePath;

constexpr char kWsUsage[] =
    "usage: abox-guest ws manifest ROOT [--cache FILE]\n"
    "       abox-guest ws unpack ROOT [--owner UID:GID]   (sync archive on stdin)\n"
    "       abox-guest ws pack ROOT                       (NUL-separated paths on stdin)\n";

constexpr size_t kCopyChunk = 256 << 10;

absl::Status Errno(absl::string_view call, absl::string_view rel, int err = errno) {
  return base::ErrnoError(absl::StrCat(call, "(", EscapePath(rel), ")"), err);
}

// A name for a temp entry beside its target: hidden, unique, and never a synced name's twin.
std::string TempName() {
  uint64_t r = 0;
  if (::getrandom(&r, sizeof(r), 0) != sizeof(r)) {
    r = static_cast<uint64_t>(::getpid()) << 32 ^ static_cast<uint64_t>(::time(nullptr));
  }
  return absl::StrFormat(".abox-unpack-%016x", r);
}

// Removes `name` in `dir_fd`: a file or symlink, or a directory with everything below it.
// Nothing is followed: subdirectories are opened with O_NOFOLLOW.
absl::Status RemoveAt(int dir_fd, const std::string& name, const std::string& shown) {
  struct stat st {};
  if (::fstatat(dir_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    return errno == ENOENT ? absl::OkStatus() : Errno("stat", shown);
  }
  if (!S_ISDIR(st.st_mode)) {
    if (::unlinkat(dir_fd, name.c_str(), 0) != 0 && errno != ENOENT) {
      return Errno("unlink", shown);
    }
    return absl::OkStatus();
  }
  base::UniqueFd sub(
      ::openat(dir_fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!sub) {
    return Errno("open", shown);
  }
  std::vector<std::string> names;
  {
    int dup_fd = ::fcntl(sub.get(), F_DUPFD_CLOEXEC, 0);
    DIR* dir = dup_fd >= 0 ? ::fdopendir(dup_fd) : nullptr;
    if (dir == nullptr) {
      int err = errno;
      if (dup_fd >= 0) {
        ::close(dup_fd);
      }
      return Errno("opendir", shown, err);
    }
    while (dirent* d = ::readdir(dir)) {
      std::string_view n = d->d_name;
      if (n != "." && n != "..") {
        names.emplace_back(n);
      }
    }
    ::closedir(dir);
  }
  for (const std::string& child : names) {
    ABOX_RETURN_IF_ERROR(RemoveAt(sub.get(), child, absl::StrCat(shown, "/", child)));
  }
  if (::unlinkat(dir_fd, name.c_str(), AT_REMOVEDIR) != 0 && errno != ENOENT) {
    return Errno("rmdir", shown);
  }
  return absl::OkStatus();
}

class Unpacker final : public workspace::SyncArchiveHandler {
 public:
  Unpacker(int root_fd, const UnpackOptions& options) : root_fd_(root_fd), options_(options) {}

  const UnpackStats& stats() const { return stats_; }

  absl::Status OnDeletions(std::vector<std::string> paths) override {
    for (const std::string& rel : paths) {
      auto [parent, name] = workspace::SplitParent(rel);
      absl::StatusOr<base::UniqueFd> dir =
          workspace::OpenDirBeneath(root_fd_, parent, options_.use_openat2);
      // Missing, or only reachable through a symlink: not in the tree, so already deleted.
      if (absl::IsNotFound(dir.status()) || absl::IsFailedPrecondition(dir.status())) {
        continue;
      }
      ABOX_RETURN_IF_ERROR(dir.status());
      std::string leaf(name);
      struct stat st {};
      if (::fstatat(dir->get(), leaf.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
        if (errno == ENOENT) {
          continue;
        }
        return Errno("stat", rel);
      }
      ABOX_RETURN_IF_ERROR(RemoveAt(dir->get(), leaf, rel));
      ForgetParent();
      ++stats_.deleted;
    }
    return absl::OkStatus();
  }

  absl::Status OnEntry(const std::string& rel, const Entry& e,
                       workspace::EntryReader& data) override {
    auto [parent, name] = workspace::SplitParent(rel);
    ABOX_ASSIGN_OR_RETURN(int dir_fd, Parent(parent));
    std::string leaf(name);
    switch (e.type) {
      case EntryType::kDir:
        return MakeDir(dir_fd, leaf, rel, e.mode);
      case EntryType::kSymlink:
        return MakeSymlink(dir_fd, leaf, rel, e.link_target);
      case EntryType::kFile:
        return WriteFile(dir_fd, leaf, rel, e, data);
    }
    return absl::InternalError("unknown entry type");
  }

 private:
  void ForgetParent() {
    parent_rel_.reset();
    parent_fd_.reset();
  }

  absl::Status Own(int fd, const std::string& rel) {
    if ((options_.uid || options_.gid) &&
        ::fchown(fd, options_.uid.value_or(static_cast<uid_t>(-1)),
                 options_.gid.value_or(static_cast<gid_t>(-1))) != 0) {
      return Errno("fchown", rel);
    }
    return absl::OkStatus();
  }

  // The directory `parent` beneath the root, created where missing; a file or symlink in the
  // way is replaced by a directory (the host's tree is the truth for synced paths).
  absl::StatusOr<int> Parent(absl::string_view parent) {
    if (parent_rel_ && *parent_rel_ == parent) {
      return parent_fd_.get();
    }
    ForgetParent();
    absl::StatusOr<base::UniqueFd> fast =
        workspace::OpenDirBeneath(root_fd_, parent, options_.use_openat2);
    if (fast.ok()) {
      parent_fd_ = *std::move(fast);
    } else if (absl::IsNotFound(fast.status()) || absl::IsFailedPrecondition(fast.status())) {
      ABOX_ASSIGN_OR_RETURN(parent_fd_, MakeParents(parent));
    } else {
      return fast.status();
    }
    parent_rel_ = std::string(parent);
    return parent_fd_.get();
  }

  absl::StatusOr<base::UniqueFd> MakeParents(absl::string_view parent) {
    base::UniqueFd dir(::fcntl(root_fd_, F_DUPFD_CLOEXEC, 0));
    if (!dir) {
      return base::ErrnoError("fcntl(F_DUPFD_CLOEXEC)");
    }
    std::string shown;
    for (absl::string_view part : absl::StrSplit(parent, '/')) {
      std::string name(part);
      shown = shown.empty() ? name : absl::StrCat(shown, "/", name);
      for (int attempt = 0;; ++attempt) {
        base::UniqueFd next(
            ::openat(dir.get(), name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
        if (next) {
          dir = std::move(next);
          break;
        }
        if (attempt >= 3) {
          return Errno("open", shown);  // Something keeps replacing it: give up.
        }
        if (errno == ELOOP || errno == ENOTDIR) {
          // A symlink or file where the host has a directory: replace it, never follow it.
          if (::unlinkat(dir.get(), name.c_str(), 0) != 0 && errno != ENOENT) {
            return Errno("unlink", shown);
          }
        } else if (errno != ENOENT) {
          return Errno("open", shown);
        }
        if (::mkdirat(dir.get(), name.c_str(), 0755) != 0 && errno != EEXIST) {
          return Errno("mkdir", shown);
        }
        base::UniqueFd made(
            ::openat(dir.get(), name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
        if (made) {
          ABOX_RETURN_IF_ERROR(Own(made.get(), shown));
        }
      }
    }
    return dir;
  }

  absl::Status MakeDir(int dir_fd, const std::string& name, const std::string& rel, uint32_t mode) {
    struct stat st {};
    if (::fstatat(dir_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && !S_ISDIR(st.st_mode)) {
      if (::unlinkat(dir_fd, name.c_str(), 0) != 0 && errno != ENOENT) {
        return Errno("unlink", rel);
      }
    }
    if (::mkdirat(dir_fd, name.c_str(), 0700) != 0 && errno != EEXIST) {
      return Errno("mkdir", rel);
    }
    base::UniqueFd fd(
        ::openat(dir_fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!fd) {
      return Errno("open", rel);
    }
    ABOX_RETURN_IF_ERROR(Own(fd.get(), rel));
    if (::fchmod(fd.get(), mode & 0777) != 0) {
      return Errno("fchmod", rel);
    }
    ++stats_.dirs;
    return absl::OkStatus();
  }

  // Renames the finished temp entry over `name`, first removing a directory in the way.
  absl::Status Replace(int dir_fd, const std::string& tmp, const std::string& name,
                       const std::string& rel) {
    struct stat st {};
    bool removed_dir = false;
    if (::fstatat(dir_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode)) {
      ABOX_RETURN_IF_ERROR(RemoveAt(dir_fd, name, rel));
      removed_dir = true;
    }
    if (::renameat(dir_fd, tmp.c_str(), dir_fd, name.c_str()) != 0) {
      return Errno("rename", rel);
    }
    if (removed_dir) {
      ForgetParent();  // The cached parent may have been inside it (`dir_fd` is no longer used).
    }
    return absl::OkStatus();
  }

  absl::Status MakeSymlink(int dir_fd, const std::string& name, const std::string& rel,
                           const std::string& target) {
    std::string tmp = TempName();
    if (::symlinkat(target.c_str(), dir_fd, tmp.c_str()) != 0) {
      return Errno("symlink", rel);
    }
    absl::Cleanup drop = [&] { ::unlinkat(dir_fd, tmp.c_str(), 0); };
    if ((options_.uid || options_.gid) &&
        ::fchownat(dir_fd, tmp.c_str(), options_.uid.value_or(static_cast<uid_t>(-1)),
                   options_.gid.value_or(static_cast<gid_t>(-1)), AT_SYMLINK_NOFOLLOW) != 0) {
      return Errno("lchown", rel);
    }
    ABOX_RETURN_IF_ERROR(Replace(dir_fd, tmp, name, rel));
    std::move(drop).Cancel();
    ++stats_.symlinks;
    return absl::OkStatus();
  }

  absl::Status WriteFile(int dir_fd, const std::string& name, const std::string& rel,
                         const Entry& e, workspace::EntryReader& data) {
    std::string tmp = TempName();
    base::UniqueFd fd(
        ::openat(dir_fd, tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
    if (!fd) {
      return Errno("create", rel);
    }
    absl::Cleanup drop = [&] { ::unlinkat(dir_fd, tmp.c_str(), 0); };
    if (!buf_) {
      buf_.reset(new char[kCopyChunk]);
    }
    uint64_t written = 0;
    for (;;) {
      ABOX_ASSIGN_OR_RETURN(size_t n, data.Read(buf_.get(), kCopyChunk));
      if (n == 0) {
        break;
      }
      absl::Status w = base::WriteAll(fd.get(), std::string_view(buf_.get(), n));
      if (!w.ok()) {
        return base::Annotate(w, absl::StrCat("writing ", EscapePath(rel)));
      }
      written += n;
    }
    // chown before chmod: chown clears the set-id bits, and we drop those anyway (see header).
    ABOX_RETURN_IF_ERROR(Own(fd.get(), rel));
    if (::fchmod(fd.get(), e.mode & 0777) != 0) {
      return Errno("fchmod", rel);
    }
    fd.reset();
    ABOX_RETURN_IF_ERROR(Replace(dir_fd, tmp, name, rel));
    std::move(drop).Cancel();
    ++stats_.files;
    stats_.bytes += written;
    return absl::OkStatus();
  }

  const int root_fd_;
  const UnpackOptions& options_;
  UnpackStats stats_;
  std::optional<std::string> parent_rel_;
  base::UniqueFd parent_fd_;
  std::unique_ptr<char[]> buf_;
};

}  // namespace

absl::StatusOr<UnpackStats> UnpackArchive(const std::string& root,
                                          const workspace::ArchiveSource& source,
                                          const UnpackOptions& options) {
  ABOX_ASSIGN_OR_RETURN(base::UniqueFd root_fd, workspace::OpenRoot(root));
  Unpacker unpacker(root_fd.get(), options);
  ABOX_RETURN_IF_ERROR(workspace::ReadSyncArchive(source, options.limits, unpacker));
  return unpacker.stats();
}

std::string UnpackStatsJson(const UnpackStats& s) {
  return absl::StrCat("{\"files\":", s.files, ",\"dirs\":", s.dirs, ",\"symlinks\":", s.symlinks,
                      ",\"deleted\":", s.deleted, ",\"bytes\":", s.bytes, "}");
}

absl::StatusOr<std::vector<std::string>> ParsePathList(absl::string_view list) {
  if (list.size() > kMaxPackListBytes) {
    return absl::ResourceExhaustedError(
        absl::StrCat("the path list is over ", kMaxPackListBytes, " bytes"));
  }
  std::vector<std::string> paths;
  if (!list.empty() && list.back() == '\0') {
    list.remove_suffix(1);
  }
  if (list.empty()) {
    return paths;
  }
  for (absl::string_view path : absl::StrSplit(list, '\0')) {
    if (paths.size() >= kMaxPackPaths) {
      return absl::ResourceExhaustedError(
          absl::StrCat("the path list has more than ", kMaxPackPaths, " paths"));
    }
    ABOX_RETURN_IF_ERROR(workspace::ValidateRelativePath(path));
    paths.emplace_back(path);
  }
  return paths;
}

absl::Status PackPaths(const std::string& root, const std::vector<std::string>& paths,
                       const workspace::ArchiveSink& sink) {
  ABOX_ASSIGN_OR_RETURN(base::UniqueFd root_fd, workspace::OpenRoot(root));
  workspace::ScanOptions scan;
  scan.hash_files = false;  // The host hashes what it receives.
  scan.add_parents = false;
  ABOX_ASSIGN_OR_RETURN(workspace::Manifest found, workspace::ScanPaths(root, paths, scan));
  ABOX_ASSIGN_OR_RETURN(std::unique_ptr<workspace::SyncArchiveWriter> writer,
                        workspace::SyncArchiveWriter::Create(sink));
  for (const auto& [rel, entry] : found) {
    ABOX_RETURN_IF_ERROR(writer->AddFromDisk(root_fd.get(), rel, entry));
  }
  return writer->Finish();
}

absl::StatusOr<std::string> ManifestOf(const std::string& root, const std::string& cache_path) {
  workspace::StatCache cache;
  workspace::ScanOptions scan;
  if (!cache_path.empty()) {
    cache.Load(cache_path);
    scan.cache = &cache;
  }
  ABOX_ASSIGN_OR_RETURN(workspace::Manifest manifest, workspace::ScanTree(root, scan));
  if (!cache_path.empty()) {
    (void)cache.Save(cache_path);  // Only a speed-up: a full disk must not fail the sync.
  }
  return workspace::SerializeManifest(manifest);
}

int RunWorkspaceTool(int argc, char** argv, int in_fd, int out_fd, int err_fd) {
  auto fail = [&](int code, absl::string_view message) {
    std::string line = absl::StrCat("abox-guest ws: ", message, "\n");
    if (code == 2) {
      line += kWsUsage;
    }
    (void)base::WriteAll(err_fd, line);
    return code;
  };
  if (argc < 3) {
    return fail(2, "give a subcommand and ROOT");
  }
  std::string command = argv[1];
  std::string root = argv[2];
  std::string cache;
  std::optional<uid_t> uid;
  std::optional<gid_t> gid;
  for (int i = 3; i < argc; ++i) {
    std::string arg = argv[i];
    if (i + 1 >= argc || (arg != "--cache" && arg != "--owner")) {
      return fail(2, absl::StrCat("unexpected argument: ", arg));
    }
    std::string value = argv[++i];
    if (arg == "--cache" && command == "manifest") {
      cache = value;
    } else if (arg == "--owner" && command == "unpack") {
      std::vector<std::string> parts = absl::StrSplit(value, ':');
      uint32_t u = 0;
      uint32_t g = 0;
      if (parts.size() != 2 || !absl::SimpleAtoi(parts[0], &u) || !absl::SimpleAtoi(parts[1], &g)) {
        return fail(2, absl::StrCat("--owner wants UID:GID, not ", value));
      }
      uid = u;
      gid = g;
    } else {
      return fail(2, absl::StrCat(arg, " does not apply to ws ", command));
    }
  }
  absl::Status status;
  if (command == "manifest") {
    absl::StatusOr<std::string> text = ManifestOf(root, cache);
    status = text.ok() ? base::WriteAll(out_fd, *text) : text.status();
  } else if (command == "unpack") {
    UnpackOptions options{.uid = uid, .gid = gid};
    absl::StatusOr<UnpackStats> stats = UnpackArchive(
        root, [in_fd](char* buf, size_t len) { return base::ReadSome(in_fd, buf, len); }, options);
    status = stats.ok() ? base::WriteAll(out_fd, UnpackStatsJson(*stats) + "\n") : stats.status();
  } else if (command == "pack") {
    absl::StatusOr<std::string> list = base::ReadAllFd(in_fd, kMaxPackListBytes);
    absl::StatusOr<std::vector<std::string>> paths =
        list.ok() ? ParsePathList(*list) : absl::StatusOr<std::vector<std::string>>(list.status());
    status = paths.ok() ? PackPaths(root, *paths,
                                    [out_fd](absl::string_view data) {
                                      return base::WriteAll(
                                          out_fd, std::string_view(data.data(), data.size()));
                                    })
                        : paths.status();
  } else {
    return fail(2, absl::StrCat("unknown subcommand: ", command));
  }
  if (!status.ok()) {
    return fail(1, absl::StrCat(command, " ", root, ": ", status.message()));
  }
  return 0;
}

}  // namespace abox::guest
