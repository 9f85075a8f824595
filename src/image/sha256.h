// SHA-256 helpers (OpenSSL libcrypto) for image artifacts and cache keys.
#pragma once

#include <filesystem>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace abox::image {

// Incremental SHA-256. Not thread-safe; one hasher per stream.
class Sha256 final {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;

  void Update(const void* data, size_t len);
  void Update(absl::string_view data) { Update(data.data(), data.size()); }
  // Lower-case hex digest; the hasher must not be used afterwards.
  [[nodiscard]] std::string FinalHex();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Lower-case hex SHA-256 of `data`.
[[nodiscard]] std::string Sha256Hex(absl::string_view data);

// Lower-case hex SHA-256 of a file's contents (streams it; holes read as zeros).
[[nodiscard]] absl::StatusOr<std::string> Sha256File(const std::filesystem::path& path);

// True for a 64-character lower-case hex string.
[[nodiscard]] bool IsSha256Hex(absl::string_view s);

}  // namespace abox::image
