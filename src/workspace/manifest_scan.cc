#include "src/workspace/manifest_scan.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <optional>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "src/base/io.h"
#include "src/base/status_macros.h"
#include "src/workspace/paths.h"
#include "src/workspace/sha256.h"

namespace abox::workspace {
namespace {

constexpr char kCacheHeader[] = "abox-stat-cache 1";

// A file whose ctime is this close to the moment it was hashed may be written again within the
// same timestamp tick (at most 10 ms on Linux) without its ctime changing: such a file is hashed
// but not cached, so the next scan reads it again (git's "racy clean" problem).
constexpr int64_t kRacyWindowNs = 100'000'000;

int64_t Ns(const timespec& ts) {
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

int64_t NowNs() {
  timespec ts{};
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return Ns(ts);
}

StatCacheEntry CacheKey(const struct stat& st) {
  return {.size = static_cast<uint64_t>(st.st_size),
          .mtime_ns = Ns(st.st_mtim),
          .ctime_ns = Ns(st.st_ctim),
          .ino = static_cast<uint64_t>(st.st_ino),
          .mode = static_cast<uint32_t>(st.st_mode)};
}

absl::Status DirError(absl::string_view rel, int err) {
  if (err == ENOENT) {
    return absl::NotFoundError(absl::StrCat("'", EscapePath(rel), "' does not exist"));
  }
  if (err == ELOOP || err == ENOTDIR || err == EXDEV) {
    return absl::FailedPreconditionError(absl::StrCat(
        "'", EscapePath(rel), "' is not a directory (or a symlink is on the way to it)"));
  }
  return base::ErrnoError(absl::StrCat("open(", EscapePath(rel), ")"), err);
}

// Walks (or, for ScanPaths, visits) entries, adding them to `manifest`.
class Scanner {
 public:
  explicit Scanner(const ScanOptions& options) : options_(options), start_ns_(NowNs()) {}

  Manifest& manifest() { return manifest_; }

  // `why` names the path itself when `named` (ValidateRelativePath's messages do).
  void Skip(const std::string& rel, uint64_t ScanStats::*counter, absl::string_view why,
            bool named = false) {
    if (options_.stats == nullptr) {
      return;
    }
    ++(options_.stats->*counter);
    if (options_.stats->skipped.size() < ScanStats::kMaxReported) {
      options_.stats->skipped.push_back(named ? std::string(why)
                                              : absl::StrCat(EscapePath(rel), ": ", why));
    }
  }

  // Records `name` (in `dir_fd`, known as `rel`, already validated) from its lstat `st`.
  // Returns the opened directory fd for a directory the caller may descend, else an invalid fd.
  absl::StatusOr<base::UniqueFd> Add(int dir_fd, const char* name, const std::string& rel,
                                     const struct stat& st, bool open_dir) {
    Entry entry;
    entry.mtime_ns = Ns(st.st_mtim);
    if (S_ISDIR(st.st_mode)) {
      if (options_.exclude && options_.exclude(rel, true)) {
        return base::UniqueFd();
      }
      entry.type = EntryType::kDir;
      entry.mode = st.st_mode & 0777;
      base::UniqueFd fd;
      if (open_dir) {
        fd.reset(::openat(dir_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
        if (!fd) {
          if (errno == ENOENT || errno == ELOOP || errno == ENOTDIR) {
            return base::UniqueFd();  // Replaced while we looked: take the next scan's word.
          }
          return base::ErrnoError(absl::StrCat("open(", EscapePath(rel), ")"));
        }
      }
      manifest_[rel] = entry;
      return fd;
    }
    if (options_.exclude && options_.exclude(rel, false)) {
      return base::UniqueFd();
    }
    if (S_ISLNK(st.st_mode)) {
      char target[kMaxLinkTargetBytes + 1];
      ssize_t n = ::readlinkat(dir_fd, name, target, sizeof(target));
      if (n < 0 && (errno == ENOENT || errno == EINVAL)) {
        return base::UniqueFd();  // Gone or no longer a link.
      }
      if (n < 0) {
        return base::ErrnoError(absl::StrCat("readlink(", EscapePath(rel), ")"));
      }
      if (n == 0 || static_cast<size_t>(n) > kMaxLinkTargetBytes) {
        Skip(rel, &ScanStats::invalid, "symlink target empty or too long");
        return base::UniqueFd();
      }
      entry.type = EntryType::kSymlink;
      entry.mode = 0;
      entry.link_target.assign(target, static_cast<size_t>(n));
      manifest_[rel] = entry;
      return base::UniqueFd();
    }
    if (!S_ISREG(st.st_mode)) {
      Skip(rel, &ScanStats::special, "not a regular file, directory or symlink");
      return base::UniqueFd();
    }
    entry.type = EntryType::kFile;
    entry.mode = st.st_mode & 07777;
    entry.size = static_cast<uint64_t>(st.st_size);
    if (options_.hash_files) {
      ABOX_ASSIGN_OR_RETURN(bool present, Hash(dir_fd, name, rel, st, entry));
      if (!present) {
        return base::UniqueFd();
      }
    }
    manifest_[rel] = entry;
    return base::UniqueFd();
  }

  // Scans the directory `dir_fd` (known as `prefix`) and everything below it.
  absl::Status ScanDir(base::UniqueFd dir_fd, const std::string& prefix) {
    std::vector<std::string> names;
    {
      int dup_fd = ::fcntl(dir_fd.get(), F_DUPFD_CLOEXEC, 0);
      if (dup_fd < 0) {
        return base::ErrnoError("fcntl(F_DUPFD_CLOEXEC)");
      }
      DIR* dir = ::fdopendir(dup_fd);
      if (dir == nullptr) {
        int err = errno;
        ::close(dup_fd);
        return base::ErrnoError(absl::StrCat("fdopendir(", EscapePath(prefix), ")"), err);
      }
      for (;;) {
        errno = 0;
        dirent* d = ::readdir(dir);
        if (d == nullptr) {
          int err = errno;
          ::closedir(dir);
          if (err != 0) {
            return base::ErrnoError(absl::StrCat("readdir(", EscapePath(prefix), ")"), err);
          }
          break;
        }
        absl::string_view name = d->d_name;
        if (name != "." && name != "..") {
          names.emplace_back(name);
        }
      }
    }
    for (const std::string& name : names) {
      std::string rel = prefix.empty() ? name : absl::StrCat(prefix, "/", name);
      if (absl::Status valid = ValidateRelativePath(rel); !valid.ok()) {
        Skip(rel, &ScanStats::invalid, valid.message(), /*named=*/true);
        continue;
      }
      struct stat st {};
      if (::fstatat(dir_fd.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
        if (errno == ENOENT) {
          continue;
        }
        return base::ErrnoError(absl::StrCat("stat(", EscapePath(rel), ")"));
      }
      ABOX_ASSIGN_OR_RETURN(base::UniqueFd child, Add(dir_fd.get(), name.c_str(), rel, st, true));
      if (child) {
        ABOX_RETURN_IF_ERROR(ScanDir(std::move(child), rel));
      }
    }
    return absl::OkStatus();
  }

 private:
  // Fills entry.sha256 (and the size actually read); false when the file vanished.
  absl::StatusOr<bool> Hash(int dir_fd, const char* name, const std::string& rel,
                            const struct stat& st, Entry& entry) {
    StatCacheEntry key = CacheKey(st);
    if (options_.cache != nullptr) {
      if (const StatCacheEntry* hit = options_.cache->Match(rel, key)) {
        entry.sha256 = hit->sha256;
        options_.cache->CountReused();
        return true;
      }
    }
    base::UniqueFd fd(
        ::openat(dir_fd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC));
    if (!fd) {
      if (errno == ENOENT || errno == ELOOP) {
        return false;
      }
      return base::ErrnoError(absl::StrCat("open(", EscapePath(rel), ")"));
    }
    struct stat now {};
    if (::fstat(fd.get(), &now) != 0) {
      return base::ErrnoError(absl::StrCat("fstat(", EscapePath(rel), ")"));
    }
    if (!S_ISREG(now.st_mode)) {
      return false;  // Replaced by something else since the lstat: the next scan sees it.
    }
    uint64_t size = 0;
    absl::StatusOr<std::string> hash = Sha256Fd(fd.get(), &size);
    if (!hash.ok()) {
      return base::Annotate(hash.status(), absl::StrCat("hashing ", EscapePath(rel)));
    }
    entry.sha256 = *std::move(hash);
    entry.size = size;
    entry.mode = now.st_mode & 07777;
    if (options_.cache != nullptr) {
      options_.cache->CountHashed();
      key = CacheKey(now);
      if (size == key.size && key.ctime_ns < start_ns_ - kRacyWindowNs) {
        key.sha256 = entry.sha256;
        options_.cache->Put(rel, std::move(key));
      } else {
        options_.cache->Erase(rel);
      }
    }
    return true;
  }

  const ScanOptions& options_;
  const int64_t start_ns_;
  Manifest manifest_;
};

}  // namespace

void StatCache::Load(const std::string& path) {
  entries_.clear();
  absl::StatusOr<std::string> text = base::ReadFile(path, size_t{1} << 30);
  if (!text.ok()) {
    return;
  }
  std::vector<absl::string_view> lines = absl::StrSplit(*text, '\n');
  if (lines.empty() || lines.front() != kCacheHeader || !lines.back().empty()) {
    return;
  }
  std::map<std::string, StatCacheEntry> loaded;
  for (size_t i = 1; i + 1 < lines.size(); ++i) {
    // size mtime ctime ino mode sha256 path (the path last: it may hold spaces, never '\n').
    std::vector<absl::string_view> f = absl::StrSplit(lines[i], absl::MaxSplits(' ', 6));
    StatCacheEntry e;
    if (f.size() != 7 || !absl::SimpleAtoi(f[0], &e.size) || !absl::SimpleAtoi(f[1], &e.mtime_ns) ||
        !absl::SimpleAtoi(f[2], &e.ctime_ns) || !absl::SimpleAtoi(f[3], &e.ino) ||
        !absl::SimpleAtoi(f[4], &e.mode) || !IsSha256Hex(f[5]) ||
        !ValidateRelativePath(f[6]).ok()) {
      return;  // Corrupt: start over rather than trust any of it.
    }
    e.sha256 = std::string(f[5]);
    loaded[std::string(f[6])] = std::move(e);
  }
  entries_ = std::move(loaded);
}

absl::Status StatCache::Save(const std::string& path) const {
  std::string text = absl::StrCat(kCacheHeader, "\n");
  for (const auto& [rel, e] : entries_) {
    absl::StrAppend(&text, e.size, " ", e.mtime_ns, " ", e.ctime_ns, " ", e.ino, " ", e.mode, " ",
                    e.sha256, " ", rel, "\n");
  }
  return base::WriteFileAtomic(path, text, 0600);
}

const StatCacheEntry* StatCache::Match(const std::string& rel,
                                       const StatCacheEntry& current) const {
  auto it = entries_.find(rel);
  if (it == entries_.end()) {
    return nullptr;
  }
  const StatCacheEntry& e = it->second;
  bool same = e.size == current.size && e.mtime_ns == current.mtime_ns &&
              e.ctime_ns == current.ctime_ns && e.ino == current.ino && e.mode == current.mode;
  return same ? &e : nullptr;
}

void StatCache::Put(const std::string& rel, StatCacheEntry entry) {
  entries_[rel] = std::move(entry);
}

void StatCache::Retain(const Manifest& keep) {
  for (auto it = entries_.begin(); it != entries_.end();) {
    auto found = keep.find(it->first);
    if (found == keep.end() || found->second.type != EntryType::kFile) {
      it = entries_.erase(it);
    } else {
      ++it;
    }
  }
}

std::pair<absl::string_view, absl::string_view> SplitParent(absl::string_view rel) {
  size_t slash = rel.rfind('/');
  if (slash == absl::string_view::npos) {
    return {absl::string_view(), rel};
  }
  return {rel.substr(0, slash), rel.substr(slash + 1)};
}

absl::StatusOr<base::UniqueFd> OpenRoot(const std::string& root) {
  base::UniqueFd fd(::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd) {
    return base::ErrnoError(absl::StrCat("open(", root, ")"));
  }
  return fd;
}

absl::StatusOr<base::UniqueFd> OpenDirBeneath(int root_fd, absl::string_view rel,
                                              bool use_openat2) {
  if (rel.empty()) {
    base::UniqueFd fd(::fcntl(root_fd, F_DUPFD_CLOEXEC, 0));
    if (!fd) {
      return base::ErrnoError("fcntl(F_DUPFD_CLOEXEC)");
    }
    return fd;
  }
  // The per-component fallback below would follow "..": only valid paths get this far.
  ABOX_RETURN_IF_ERROR(ValidateRelativePath(rel));
  std::string path(rel);
  if (use_openat2) {
    open_how how{};
    how.flags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;
    how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
    for (int attempt = 0;; ++attempt) {
      long fd = ::syscall(SYS_openat2, root_fd, path.c_str(), &how, sizeof(how));
      if (fd >= 0) {
        return base::UniqueFd(static_cast<int>(fd));
      }
      // EAGAIN: a concurrent rename made the kernel unsure; retrying is what it asks for.
      if (errno == EINTR || (errno == EAGAIN && attempt < 8)) {
        continue;
      }
      if (errno != ENOSYS) {
        return DirError(rel, errno);
      }
      break;  // Kernel before 5.6: walk one component at a time.
    }
  }
  base::UniqueFd dir(::fcntl(root_fd, F_DUPFD_CLOEXEC, 0));
  if (!dir) {
    return base::ErrnoError("fcntl(F_DUPFD_CLOEXEC)");
  }
  for (absl::string_view part : absl::StrSplit(rel, '/')) {
    std::string component(part);
    base::UniqueFd next(
        ::openat(dir.get(), component.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!next) {
      return DirError(rel, errno);
    }
    dir = std::move(next);
  }
  return dir;
}

absl::StatusOr<Manifest> ScanTree(const std::string& root, const ScanOptions& options) {
  ABOX_ASSIGN_OR_RETURN(base::UniqueFd root_fd, OpenRoot(root));
  Scanner scanner(options);
  ABOX_RETURN_IF_ERROR(scanner.ScanDir(std::move(root_fd), ""));
  if (options.cache != nullptr) {
    options.cache->Retain(scanner.manifest());
  }
  return std::move(scanner.manifest());
}

absl::StatusOr<Manifest> ScanPaths(const std::string& root, const std::vector<std::string>& paths,
                                   const ScanOptions& options) {
  ABOX_ASSIGN_OR_RETURN(base::UniqueFd root_fd, OpenRoot(root));
  Scanner scanner(options);
  Manifest& manifest = scanner.manifest();
  // Paths usually come grouped by directory: keep the last parent open.
  std::optional<std::string> parent_rel;
  base::UniqueFd parent_fd;
  for (const std::string& path : paths) {
    if (absl::Status valid = ValidateRelativePath(path); !valid.ok()) {
      scanner.Skip(path, &ScanStats::invalid, valid.message(), /*named=*/true);
      continue;
    }
    auto [parent, name] = SplitParent(path);
    if (!parent_rel || *parent_rel != parent) {
      parent_rel.reset();
      absl::StatusOr<base::UniqueFd> fd = OpenDirBeneath(root_fd.get(), parent);
      if (absl::IsNotFound(fd.status()) || absl::IsFailedPrecondition(fd.status())) {
        scanner.Skip(path, &ScanStats::missing, fd.status().message());
        continue;
      }
      ABOX_RETURN_IF_ERROR(fd.status());
      parent_fd = *std::move(fd);
      parent_rel = std::string(parent);
    }
    std::string leaf(name);
    struct stat st {};
    if (::fstatat(parent_fd.get(), leaf.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
      if (errno == ENOENT) {
        scanner.Skip(path, &ScanStats::missing, "does not exist");
        continue;
      }
      return base::ErrnoError(absl::StrCat("stat(", EscapePath(path), ")"));
    }
    ABOX_RETURN_IF_ERROR(scanner.Add(parent_fd.get(), leaf.c_str(), path, st, false).status());
    if (!options.add_parents || manifest.find(path) == manifest.end()) {
      continue;
    }
    // Parents from the nearest up, stopping at one already recorded (its own are, too).
    for (absl::string_view dir = parent; !dir.empty() && !manifest.contains(std::string(dir));
         dir = SplitParent(dir).first) {
      ABOX_ASSIGN_OR_RETURN(base::UniqueFd fd, OpenDirBeneath(root_fd.get(), dir));
      struct stat dst {};
      if (::fstat(fd.get(), &dst) != 0) {
        return base::ErrnoError(absl::StrCat("fstat(", EscapePath(dir), ")"));
      }
      Entry entry;
      entry.type = EntryType::kDir;
      entry.mode = dst.st_mode & 0777;
      entry.mtime_ns = Ns(dst.st_mtim);
      manifest[std::string(dir)] = entry;
    }
  }
  return std::move(manifest);
}

}  // namespace abox::workspace
