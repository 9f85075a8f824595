#include "src/workspace/sync.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <nlohmann/json.hpp>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "src/base/io.h"
#include "src/base/status_macros.h"
#include "src/workspace/archive.h"
#include "src/workspace/file_set.h"
#include "src/workspace/paths.h"
#include "src/workspace/sha256.h"

namespace abox::workspace {
namespace {

// A summary line from `ws unpack` is small; anything longer is not one.
constexpr size_t kMaxUnpackOutput = 4096;

// Adds the host's changed entries to the archive, storing every worktree file in the object
// store first and archiving the stored copy: the base then holds exactly the bytes the guest
// got, even when the host file changes while it is being sent. The guest's .git comes from
// its build dir as it is: only abox writes there, and diff and apply never read it.
class ArchiveFeeder {
 public:
  ArchiveFeeder(WorkspaceState& state, int root_fd, int git_fd, const FileSet& fs,
                Manifest& manifest, SyncReport& report, const SyncProgressFn& progress,
                uint64_t total_bytes)
      : state_(state),
        root_fd_(root_fd),
        git_fd_(git_fd),
        fs_(fs),
        manifest_(manifest),
        report_(report),
        progress_(progress),
        total_bytes_(total_bytes) {}

  // Before anything is sent: every worktree file of `paths` is stored (Add then sends the
  // stored bytes) and every entry goes through `check`, the worktree files while they are read
  // for storing.
  absl::Status CheckAll(const std::vector<std::string>& paths, const ContentCheckFn& check) {
    for (const std::string& path : paths) {
      const Entry& e = manifest_.at(path);
      if (e.type == EntryType::kDir) {
        continue;
      }
      ContentScanFn scan = check(EscapePath(path));
      if (e.type == EntryType::kSymlink) {
        if (scan) {
          ABOX_RETURN_IF_ERROR(scan(e.link_target));
        }
        continue;
      }
      if (const std::string* from = GitSource(path)) {
        if (scan) {
          ABOX_ASSIGN_OR_RETURN(base::UniqueFd fd, OpenBeneath(git_fd_, *from));
          ABOX_RETURN_IF_ERROR(ScanFd(fd.get(), scan));
        }
        continue;
      }
      ABOX_RETURN_IF_ERROR(Store(path, scan));
    }
    stored_ = true;
    return absl::OkStatus();
  }

  absl::Status Add(SyncArchiveWriter& writer, const std::string& path) {
    Entry& e = manifest_.at(path);
    switch (e.type) {
      case EntryType::kDir:
      case EntryType::kSymlink:
        return writer.AddData(path, e, "");
      case EntryType::kFile:
        break;
    }
    if (const std::string* from = GitSource(path)) {
      ABOX_ASSIGN_OR_RETURN(base::UniqueFd fd, OpenBeneath(git_fd_, *from));
      struct stat st {};
      if (::fstat(fd.get(), &st) != 0 || static_cast<uint64_t>(st.st_size) != e.size) {
        return absl::AbortedError(
            absl::StrCat("'", EscapePath(path), "' changed while it was synced; sync again"));
      }
      ABOX_RETURN_IF_ERROR(writer.AddFromFd(path, e, fd.get()));
      Sent(e);
      return absl::OkStatus();
    }
    if (!stored_) {
      ABOX_RETURN_IF_ERROR(Store(path, nullptr));
    }
    ABOX_ASSIGN_OR_RETURN(base::UniqueFd object, state_.objects().OpenObject(e.sha256));
    ABOX_RETURN_IF_ERROR(writer.AddFromFd(path, e, object.get()));
    Sent(e);
    return absl::OkStatus();
  }

 private:
  // Where a .git entry comes from in the build dir; null for a worktree file.
  const std::string* GitSource(const std::string& path) const {
    if (!fs_.git) {
      return nullptr;
    }
    auto it = fs_.git->entries.find(path);
    return it == fs_.git->entries.end() ? nullptr : &it->second;
  }

  // Copies the worktree file into the object store, through `scan` when there is one, and
  // records what was read: a file changed since the scan is sent (and recorded) as it is now.
  absl::Status Store(const std::string& path, const ContentScanFn& scan) {
    ABOX_ASSIGN_OR_RETURN(base::UniqueFd fd, OpenBeneath(root_fd_, path));
    ObjectStore::Reader reader = [&](char* buf, size_t len) -> absl::StatusOr<size_t> {
      ABOX_ASSIGN_OR_RETURN(size_t n, base::ReadSome(fd.get(), buf, len));
      if (n > 0 && scan) {
        ABOX_RETURN_IF_ERROR(scan(absl::string_view(buf, n)));
      }
      return n;
    };
    uint64_t size = 0;
    ABOX_ASSIGN_OR_RETURN(std::string sha, state_.objects().PutStream(reader, &size));
    Entry& e = manifest_.at(path);
    e.sha256 = std::move(sha);
    e.size = size;
    return absl::OkStatus();
  }

  static absl::Status ScanFd(int fd, const ContentScanFn& scan) {
    std::vector<char> buf(size_t{1} << 16);
    for (;;) {
      ABOX_ASSIGN_OR_RETURN(size_t n, base::ReadSome(fd, buf.data(), buf.size()));
      if (n == 0) {
        return absl::OkStatus();
      }
      ABOX_RETURN_IF_ERROR(scan(absl::string_view(buf.data(), n)));
    }
  }

  void Sent(const Entry& e) {
    report_.bytes += e.size;
    if (progress_) {
      progress_("send", report_.bytes, total_bytes_);
    }
  }

  // Never through a symlink.
  static absl::StatusOr<base::UniqueFd> OpenBeneath(int root_fd, const std::string& path) {
    auto [parent, name] = SplitParent(path);
    ABOX_ASSIGN_OR_RETURN(base::UniqueFd dir, OpenDirBeneath(root_fd, parent));
    base::UniqueFd fd(::openat(dir.get(), std::string(name).c_str(),
                               O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY));
    if (!fd) {
      return base::ErrnoError(absl::StrCat("open(", EscapePath(path), ")"), errno);
    }
    struct stat st {};
    if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) {
      return absl::AbortedError(
          absl::StrCat("'", EscapePath(path), "' is no longer a regular file; sync again"));
    }
    return fd;
  }

  WorkspaceState& state_;
  int root_fd_;
  int git_fd_;  // the guest .git's build dir; -1 without one
  const FileSet& fs_;
  Manifest& manifest_;
  SyncReport& report_;
  const SyncProgressFn& progress_;
  uint64_t total_bytes_;
  bool stored_ = false;  // CheckAll stored every worktree file already
};

}  // namespace

absl::StatusOr<SyncReport> SyncIn(WorkspaceState& state, GuestTools& tools,
                                  const SyncProgressFn& progress, const ContentCheckFn& check) {
  absl::Time start = absl::Now();
  SyncReport report;
  const Binding& binding = state.binding();

  FileSetOptions fs_options;
  fs_options.exclude_add = binding.exclude_add;
  fs_options.exclude_remove = binding.exclude_remove;
  fs_options.git_history = binding.git_history ? GitHistory::kFull : GitHistory::kSnapshot;
  fs_options.git_build_dir = state.git_build_dir();
  ABOX_ASSIGN_OR_RETURN(FileSet fs, ComputeFileSet(binding.host_root, fs_options));
  for (const auto& [path, pattern] : fs.excluded) {
    report.excluded.push_back(absl::StrCat(EscapePath(path), " (", pattern, ")"));
  }
  report.notes = fs.notes;

  ScanStats stats;
  uint64_t hashed_before = state.host_cache().hashed();
  ScanOptions scan;
  scan.cache = &state.host_cache();
  scan.stats = &stats;
  ABOX_ASSIGN_OR_RETURN(Manifest manifest, ScanPaths(binding.host_root, fs.files, scan));
  if (fs.git) {
    // The build dir holds the guest's .git under .git/ too, so paths (and the stat cache's
    // keys) are the guest's; only a renamed entry (the full history's config) moves.
    std::vector<std::string> local;
    for (const auto& [guest, from] : fs.git->entries) {
      local.push_back(from);
    }
    std::sort(local.begin(), local.end());
    ABOX_ASSIGN_OR_RETURN(Manifest git, ScanPaths(fs.git->dir, local, scan));
    for (const auto& [guest, from] : fs.git->entries) {
      auto it = git.find(from);
      if (it == git.end()) {
        return absl::AbortedError(
            absl::StrCat("'", EscapePath(guest), "' went away while it was synced; sync again"));
      }
      manifest[guest] = it->second;
    }
    for (auto& [path, entry] : git) {
      if (!manifest.contains(path) && entry.type == EntryType::kDir) {
        manifest.emplace(path, entry);  // parents, such as .git/objects/pack
      }
    }
  }
  state.host_cache().Retain(manifest);
  report.hashed = state.host_cache().hashed() - hashed_before;
  report.total_files = manifest.size();
  if (progress) {
    progress("scan", manifest.size(), manifest.size());
  }

  ManifestChanges changes = CompareManifests(state.base(), manifest);
  // Directories are implied by their files in the guest; an emptied one stays (harmless) so a
  // file the agent created in it is never deleted by a sync.
  std::vector<std::string> deletions;
  for (const std::string& path : changes.deleted) {
    if (state.base().at(path).type != EntryType::kDir) {
      deletions.push_back(path);
    }
  }
  std::vector<std::string> sends = changes.added;
  sends.insert(sends.end(), changes.modified.begin(), changes.modified.end());
  std::sort(sends.begin(), sends.end());  // parents before children
  if (sends.empty() && deletions.empty()) {
    if (!changes.empty()) {  // only directories went away
      ABOX_RETURN_IF_ERROR(state.CommitSync(std::move(manifest)));
    }
    report.duration = absl::Now() - start;
    return report;
  }

  // Thousands of objects: one syncfs before the new base refers to them, not two fsyncs each.
  state.objects().set_deferred_sync(true);
  absl::Cleanup durable_again = [&] { state.objects().set_deferred_sync(false); };
  uint64_t total_bytes = 0;
  for (const std::string& path : sends) {
    total_bytes += manifest.at(path).size;
  }
  ABOX_ASSIGN_OR_RETURN(base::UniqueFd root_fd, OpenRoot(binding.host_root));
  base::UniqueFd git_fd;
  if (fs.git) {
    ABOX_ASSIGN_OR_RETURN(git_fd, OpenRoot(fs.git->dir));
  }
  ArchiveFeeder feeder(state, root_fd.get(), git_fd ? git_fd.get() : -1, fs, manifest, report,
                       progress, total_bytes);
  if (check) {
    // Before the guest is contacted: a refusal leaves it as it was.
    ABOX_RETURN_IF_ERROR(feeder.CheckAll(sends, check));
  }
  std::string summary;
  absl::Status status = tools.Run(
      {"unpack", binding.guest_path, "--owner", kGuestOwner},
      [&](const GuestTools::WriteFn& write) -> absl::Status {
        ABOX_ASSIGN_OR_RETURN(std::unique_ptr<SyncArchiveWriter> writer,
                              SyncArchiveWriter::Create([&](absl::string_view data) {
                                report.archive_bytes += data.size();
                                return write(data);
                              }));
        if (!deletions.empty()) {
          ABOX_RETURN_IF_ERROR(writer->AddDeletions(deletions));
        }
        for (const std::string& path : sends) {
          ABOX_RETURN_IF_ERROR(feeder.Add(*writer, path));
        }
        return writer->Finish();
      },
      [&](absl::string_view out) {
        if (summary.size() + out.size() > kMaxUnpackOutput) {
          return absl::OutOfRangeError("abox-guest ws unpack printed more than a summary");
        }
        summary.append(out.data(), out.size());
        return absl::OkStatus();
      });
  if (!status.ok()) {
    return absl::Status(status.code(), absl::StrCat("syncing ", binding.host_root,
                                                    " into the sandbox: ", status.message()));
  }
  report.changed = true;
  report.files = sends.size();
  report.deleted = deletions.size();
  ABOX_RETURN_IF_ERROR(state.objects().Flush());
  ABOX_RETURN_IF_ERROR(state.CommitSync(std::move(manifest)));
  report.duration = absl::Now() - start;
  return report;
}

}  // namespace abox::workspace
