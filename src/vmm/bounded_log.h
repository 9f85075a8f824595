// A log file that never grows past a byte limit, for output the guest (or QEMU) controls.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "src/base/unique_fd.h"

namespace abox::vmm {

// Appends to `path`, keeping at most `limit_bytes` on disk across two files: when `path` has
// reached half the limit it is renamed to `path.1` (replacing the older one) and a new `path`
// is started. The newest output is always kept. Owns the open file; not thread-safe.
class BoundedLog final {
 public:
  // Creates (truncates) `path`, mode 0640. `limit_bytes` must be at least 2.
  [[nodiscard]] static absl::StatusOr<BoundedLog> Create(std::string path, uint64_t limit_bytes);

  BoundedLog(BoundedLog&&) = default;
  BoundedLog& operator=(BoundedLog&&) = default;
  BoundedLog(const BoundedLog&) = delete;
  BoundedLog& operator=(const BoundedLog&) = delete;
  ~BoundedLog() = default;

  absl::Status Append(std::string_view data);
  // Bytes ever appended, including those rotated away.
  [[nodiscard]] uint64_t total_bytes() const { return total_; }
  [[nodiscard]] const std::string& path() const { return path_; }

 private:
  BoundedLog(std::string path, uint64_t half) : path_(std::move(path)), half_(half) {}
  absl::Status Open();
  absl::Status Rotate();

  std::string path_;
  uint64_t half_;
  base::UniqueFd fd_;
  uint64_t size_ = 0;
  uint64_t total_ = 0;
};

// The last `max_bytes` of a log written by BoundedLog (`path.1` then `path`); empty if neither
// exists.
[[nodiscard]] std::string ReadLogTail(const std::string& path, size_t max_bytes);

}  // namespace abox::vmm
