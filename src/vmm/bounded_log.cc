#include "src/vmm/bounded_log.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>

#include "absl/strings/str_cat.h"
#include "src/base/io.h"
#include "src/base/status_macros.h"

namespace abox::vmm {
namespace {

// The last `max_bytes` of a file (empty when it cannot be read).
std::string FileTail(const std::string& path, size_t max_bytes) {
  base::UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) {
    return "";
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) {
    return "";
  }
  off_t size = st.st_size;
  off_t start = size > static_cast<off_t>(max_bytes) ? size - static_cast<off_t>(max_bytes) : 0;
  std::string out(static_cast<size_t>(size - start), '\0');
  size_t done = 0;
  while (done < out.size()) {
    ssize_t n =
        ::pread(fd.get(), out.data() + done, out.size() - done, start + static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n <= 0) {
      break;
    }
    done += static_cast<size_t>(n);
  }
  out.resize(done);
  return out;
}

}  // namespace

absl::StatusOr<BoundedLog> BoundedLog::Create(std::string path, uint64_t limit_bytes) {
  if (limit_bytes < 2) {
    return absl::InvalidArgumentError("log limit must be at least 2 bytes");
  }
  BoundedLog log(std::move(path), limit_bytes / 2);
  ABOX_RETURN_IF_ERROR(log.Open());
  return log;
}

absl::Status BoundedLog::Open() {
  fd_.reset(::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0640));
  if (!fd_) {
    return base::ErrnoError(absl::StrCat("open(", path_, ")"));
  }
  size_ = 0;
  return absl::OkStatus();
}

absl::Status BoundedLog::Rotate() {
  std::string older = absl::StrCat(path_, ".1");
  if (::rename(path_.c_str(), older.c_str()) != 0) {
    return base::ErrnoError(absl::StrCat("rename(", path_, ")"));
  }
  return Open();
}

absl::Status BoundedLog::Append(std::string_view data) {
  total_ += data.size();
  while (!data.empty()) {
    if (size_ >= half_) {
      ABOX_RETURN_IF_ERROR(Rotate());
    }
    size_t chunk = static_cast<size_t>(std::min<uint64_t>(half_ - size_, data.size()));
    ABOX_RETURN_IF_ERROR(base::WriteAll(fd_.get(), data.substr(0, chunk)));
    size_ += chunk;
    data.remove_prefix(chunk);
  }
  return absl::OkStatus();
}

std::string ReadLogTail(const std::string& path, size_t max_bytes) {
  std::string newest = FileTail(path, max_bytes);
  if (newest.size() >= max_bytes) {
    return newest;
  }
  return FileTail(absl::StrCat(path, ".1"), max_bytes - newest.size()) + newest;
}

}  // namespace abox::vmm
