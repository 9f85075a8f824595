// A bounded in-memory byte pipe between two threads: one pushes what it is given (a guest
// tool's output arrives through a callback), the other pulls (libarchive reads through a
// callback). The writer blocks while `capacity` bytes wait unread, so a stream passes through in
// bounded memory without being staged on disk. Either side may close: the reader's Read() then
// returns 0 once the buffer is drained; the writer's Write() fails with kAborted once the reader
// closed (what it was given is dropped). Thread-safe for one writer and one reader.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <mutex>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace abox::base {

class ByteChannel final {
 public:
  explicit ByteChannel(size_t capacity = size_t{1} << 20) : capacity_(capacity) {}
  ByteChannel(const ByteChannel&) = delete;
  ByteChannel& operator=(const ByteChannel&) = delete;

  // Appends `data`, waiting for room; kAborted once the reader closed.
  [[nodiscard]] absl::Status Write(absl::string_view data);
  // No more writes: the reader sees the end of the stream after what is buffered.
  void CloseWrite();
  // Up to `len` bytes, waiting for some; 0 at the end of the stream.
  [[nodiscard]] absl::StatusOr<size_t> Read(char* buf, size_t len);
  // No more reads: buffered and later writes are dropped and the writer fails.
  void CloseRead();

 private:
  const size_t capacity_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::string buffer_;  // unread bytes start at head_
  size_t head_ = 0;
  bool write_closed_ = false;
  bool read_closed_ = false;
};

}  // namespace abox::base
