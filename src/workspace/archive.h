// Sync archives: the stream of file content between host and guest, both ways. A sync archive
// is a pax (restricted) tar compressed with zstd, holding regular files, directories and
// symlinks under relative paths, optionally preceded by one control entry listing paths to
// delete. Host -> guest it carries a sync (changed files + deletions, `abox-guest ws unpack`);
// guest -> host it carries the agent's changed files (`abox-guest ws pack`).
//
// Trust: an archive from the guest is hostile. ReadSyncArchive checks every header (format,
// filter, entry type, path, mode, sizes, counts) before the handler sees the entry, and never
// allocates in proportion to what the stream claims.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "src/workspace/manifest.h"

struct archive;

namespace abox::workspace {

// The control entry's name: absolute, so no workspace path can ever be it.
inline constexpr char kDeletionsEntryName[] = "/.abox-deletions";

// Receives the compressed bytes as they are produced.
using ArchiveSink = std::function<absl::Status(absl::string_view)>;

// Writes one sync archive to a sink. Not thread-safe. Call AddDeletions (optional) first, then
// the Add* methods, then Finish; an error leaves the writer unusable.
class SyncArchiveWriter final {
 public:
  static absl::StatusOr<std::unique_ptr<SyncArchiveWriter>> Create(ArchiveSink sink,
                                                                   int zstd_level = 3);
  ~SyncArchiveWriter();
  SyncArchiveWriter(const SyncArchiveWriter&) = delete;
  SyncArchiveWriter& operator=(const SyncArchiveWriter&) = delete;

  // The control entry: `paths` (each valid) to delete before anything is unpacked. Only as the
  // first call, at most once.
  [[nodiscard]] absl::Status AddDeletions(const std::vector<std::string>& paths);

  // Adds `rel` as found beneath `root_fd` (never following a symlink on the way or at the end),
  // expecting what `e` describes: kAborted "changed while syncing" when the type differs or a
  // file's size is not e.size, so the caller rescans and retries.
  [[nodiscard]] absl::Status AddFromDisk(int root_fd, const std::string& rel, const Entry& e);
  [[nodiscard]] absl::Status AddFromDisk(const std::string& root, const std::string& rel,
                                         const Entry& e);

  // Adds the file `rel` (e.type kFile) with the content read from `fd` (from its offset to EOF),
  // which must be exactly e.size bytes: kAborted "changed while syncing" otherwise.
  [[nodiscard]] absl::Status AddFromFd(const std::string& rel, const Entry& e, int fd);

  // Adds an entry with the given content (files; empty for directories and symlinks), for
  // content that is not on disk as it is (e.g. a sanitized .git/config).
  [[nodiscard]] absl::Status AddData(const std::string& rel, const Entry& e,
                                     absl::string_view content);

  // Writes the end of the archive and flushes the compressor into the sink.
  [[nodiscard]] absl::Status Finish();

  // Uncompressed content bytes added, and compressed bytes given to the sink.
  [[nodiscard]] uint64_t bytes_in() const { return bytes_in_; }
  [[nodiscard]] uint64_t bytes_out() const { return bytes_out_; }

 private:
  explicit SyncArchiveWriter(ArchiveSink sink) : sink_(std::move(sink)) {}
  absl::Status WriteHeader(const std::string& rel, const Entry& e, uint64_t size);
  absl::Status WriteData(absl::string_view data);
  absl::Status Failed(absl::string_view what);
  static long OnWrite(struct archive* a, void* self, const void* buf, size_t len);

  ArchiveSink sink_;
  struct archive* archive_ = nullptr;
  absl::Status sink_error_;
  uint64_t entries_ = 0;
  uint64_t bytes_in_ = 0;
  uint64_t bytes_out_ = 0;
  bool finished_ = false;
  bool broken_ = false;
};

struct ArchiveLimits {
  uint64_t max_entries = 1'000'000;
  uint64_t max_file_bytes = 4ull << 30;
  uint64_t max_total_bytes = 64ull << 30;
  // The deletion list's size (its path count is bounded by max_entries).
  uint64_t max_deletion_bytes = 64ull << 20;
};

// Fills `buf` with up to `len` bytes of the compressed stream; 0 at its end.
using ArchiveSource = std::function<absl::StatusOr<size_t>(char* buf, size_t len)>;

// An entry's content, read in chunks while the handler runs.
class EntryReader {
 public:
  virtual ~EntryReader() = default;
  // Up to `len` bytes; 0 at the end of the entry. A truncated or corrupt stream is an error.
  [[nodiscard]] virtual absl::StatusOr<size_t> Read(char* buf, size_t len) = 0;
};

// What ReadSyncArchive calls for a validated archive, in stream order.
class SyncArchiveHandler {
 public:
  virtual ~SyncArchiveHandler() = default;
  // The control entry's paths (each valid). Called at most once, before any OnEntry.
  [[nodiscard]] virtual absl::Status OnDeletions(std::vector<std::string> paths) = 0;
  // One entry: `e` has type, mode (& 07777), size (files) and link_target (symlinks); sha256
  // and mtime_ns are not carried. `data` holds a file's content (what is not read is skipped).
  [[nodiscard]] virtual absl::Status OnEntry(const std::string& rel, const Entry& e,
                                             EntryReader& data) = 0;
};

// Reads a sync archive from `source`, validating it against `limits`, and feeds `handler`.
// kInvalidArgument for a malformed or disallowed archive, kResourceExhausted beyond the limits;
// the handler's own errors pass through.
[[nodiscard]] absl::Status ReadSyncArchive(const ArchiveSource& source, const ArchiveLimits& limits,
                                           SyncArchiveHandler& handler);

}  // namespace abox::workspace
