// Content-addressed file store: workspace content by SHA-256 (the base the daemon synced into a
// sandbox, the guest's changed files fetched for diff / apply, the backups an apply keeps).
//
// Layout: <dir>/objects/ab/abcdef... (the full 64-digit hash, fanned out by its first two
// digits), <dir>/tmp/ for objects being written. An object is written to tmp/, hashed while it
// is copied, fsynced, made read-only (0444) and renamed into place, so a reader sees a whole,
// verified object or none. Objects are never modified in place.
//
// Trust: content streamed from the guest goes through PutVerified, which stores it only when it
// hashes to the digest the guest's manifest promised. Thread-compatible (distinct objects may be
// written concurrently; Retain must not race with writers).
#pragma once

#include <cstdint>
#include <functional>
#include <set>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "src/base/unique_fd.h"

namespace abox::workspace {

class ObjectStore final {
 public:
  // Reads up to `len` bytes into `buf`; 0 at the end of the stream.
  using Reader = std::function<absl::StatusOr<size_t>(char* buf, size_t len)>;

  // Opens (creating if needed, 0700) the store rooted at `dir` (absolute).
  [[nodiscard]] static absl::StatusOr<ObjectStore> Open(const std::string& dir);

  ObjectStore(ObjectStore&&) = default;
  ObjectStore& operator=(ObjectStore&&) = default;
  ObjectStore(const ObjectStore&) = delete;
  ObjectStore& operator=(const ObjectStore&) = delete;

  // Stores `data`; returns its SHA-256 (hex). Storing existing content is a no-op.
  [[nodiscard]] absl::StatusOr<std::string> PutData(absl::string_view data);
  // Stores what `fd` holds from its current offset to EOF; `size` gets the byte count.
  [[nodiscard]] absl::StatusOr<std::string> PutFd(int fd, uint64_t* size = nullptr);
  // Stores the stream `reader` yields; `size` gets the byte count. An error from `reader` stores
  // nothing and is returned.
  [[nodiscard]] absl::StatusOr<std::string> PutStream(const Reader& reader,
                                                      uint64_t* size = nullptr);
  // Stores the regular file at `path` (symlinks are not followed).
  [[nodiscard]] absl::StatusOr<std::string> PutFile(const std::string& path);
  // Stores the stream `reader` yields only if it hashes to `sha256` and stays within
  // `max_bytes`; otherwise kDataLoss (mismatch) / kResourceExhausted and nothing is stored.
  [[nodiscard]] absl::Status PutVerified(absl::string_view sha256, const Reader& reader,
                                         uint64_t max_bytes = uint64_t{1} << 40);

  // True when the object exists (`sha256` must be 64 lowercase hex digits, else false).
  [[nodiscard]] bool Has(absl::string_view sha256) const;
  // The object's content; kNotFound when absent, kResourceExhausted beyond `limit`.
  [[nodiscard]] absl::StatusOr<std::string> Read(absl::string_view sha256, size_t limit) const;
  // The object opened read-only; kNotFound when absent.
  [[nodiscard]] absl::StatusOr<base::UniqueFd> OpenObject(absl::string_view sha256) const;
  // Where the object lives (whether or not it exists). CHECKs that `sha256` is a valid digest.
  [[nodiscard]] std::string PathOf(absl::string_view sha256) const;
  // Deletes every object not in `keep` (and stale temp files).
  [[nodiscard]] absl::Status Retain(const std::set<std::string>& keep);

  [[nodiscard]] const std::string& dir() const { return dir_; }

  // Bulk mode (a workspace sync stores thousands of objects): objects are not fsynced one by
  // one; Flush() makes everything stored so far durable with one syncfs(). Callers must Flush
  // before they record anything that refers to the new objects.
  void set_deferred_sync(bool deferred) { deferred_sync_ = deferred; }
  [[nodiscard]] absl::Status Flush() const;

 private:
  explicit ObjectStore(std::string dir) : dir_(std::move(dir)) {}

  // Copies `reader` into a temp file, then (if `expected` is empty or matches) renames it into
  // place. Returns the digest.
  absl::StatusOr<std::string> Store(const Reader& reader, absl::string_view expected,
                                    uint64_t max_bytes, uint64_t* size);

  std::string dir_;
  bool deferred_sync_ = false;
};

}  // namespace abox::workspace
