#include "src/workspace/sync.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <nlohmann/json.hpp>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "src/base/status_macros.h"
#include "src/workspace/archive.h"
#include "src/workspace/file_set.h"
#include "src/workspace/paths.h"
#include "src/workspace/sha256.h"

namespace abox::workspace {
namespace {

// A summary line from `ws unpack` is small; anything longer is not one.
constexpr size_t kMaxUnpackOutput = 4096;

// Adds the host's changed entries to the archive, storing every file in the object store first
// and archiving the stored copy: the base then holds exactly the bytes the guest got, even when
// the host file changes while it is being sent.
class ArchiveFeeder {
 public:
  ArchiveFeeder(WorkspaceState& state, int root_fd, const FileSet& fs, Manifest& manifest,
                SyncReport& report, const SyncProgressFn& progress, uint64_t total_bytes)
      : state_(state),
        root_fd_(root_fd),
        fs_(fs),
        manifest_(manifest),
        report_(report),
        progress_(progress),
        total_bytes_(total_bytes) {}

  absl::Status Add(SyncArchiveWriter& writer, const std::string& path) {
    Entry& e = manifest_.at(path);
    switch (e.type) {
      case EntryType::kDir:
      case EntryType::kSymlink:
        return writer.AddData(path, e, "");
      case EntryType::kFile:
        break;
    }
    if (auto it = fs_.replaced_content.find(path); it != fs_.replaced_content.end()) {
      ABOX_ASSIGN_OR_RETURN(e.sha256, state_.objects().PutData(it->second));
      e.size = it->second.size();
    } else {
      ABOX_ASSIGN_OR_RETURN(base::UniqueFd fd, OpenBeneath(path));
      uint64_t size = 0;
      ABOX_ASSIGN_OR_RETURN(std::string sha, state_.objects().PutFd(fd.get(), &size));
      // Changed since the scan: send (and record) what was actually read.
      e.sha256 = sha;
      e.size = size;
    }
    ABOX_ASSIGN_OR_RETURN(base::UniqueFd object, state_.objects().OpenObject(e.sha256));
    ABOX_RETURN_IF_ERROR(writer.AddFromFd(path, e, object.get()));
    report_.bytes += e.size;
    if (progress_) {
      progress_("send", report_.bytes, total_bytes_);
    }
    return absl::OkStatus();
  }

 private:
  // Reading (unlike writing, which is HostTree's) may enter .git/; never through a symlink.
  absl::StatusOr<base::UniqueFd> OpenBeneath(const std::string& path) {
    auto [parent, name] = SplitParent(path);
    ABOX_ASSIGN_OR_RETURN(base::UniqueFd dir, OpenDirBeneath(root_fd_, parent));
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
  const FileSet& fs_;
  Manifest& manifest_;
  SyncReport& report_;
  const SyncProgressFn& progress_;
  uint64_t total_bytes_;
};

}  // namespace

absl::StatusOr<SyncReport> SyncIn(WorkspaceState& state, GuestTools& tools,
                                  const SyncProgressFn& progress) {
  absl::Time start = absl::Now();
  SyncReport report;
  const Binding& binding = state.binding();

  FileSetOptions fs_options;
  fs_options.exclude_add = binding.exclude_add;
  fs_options.exclude_remove = binding.exclude_remove;
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
  report.hashed = state.host_cache().hashed() - hashed_before;
  for (const auto& [path, content] : fs.replaced_content) {
    auto it = manifest.find(path);
    if (it != manifest.end() && it->second.type == EntryType::kFile) {
      it->second.sha256 = Sha256Hex(content);
      it->second.size = content.size();
    }
  }
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
  ArchiveFeeder feeder(state, root_fd.get(), fs, manifest, report, progress, total_bytes);
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
