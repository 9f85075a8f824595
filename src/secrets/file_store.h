// The fallback value store: one JSON file of base64 values, readable by its owner only.
//
// Used when no Secret Service answers (headless hosts, CI). The file is as safe as the user's
// account: anything running as the user can read it, which is why the keyring comes first and
// the caller prints a warning when this store is chosen.
#pragma once

#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "src/secrets/value_store.h"

namespace abox::secrets {

// Keeps values in `<dir>/values.json` ({"version": 1, "values": {"NAME": "<base64>"}}).
//
// The directory is 0700 and the file 0600, both owned by the user; a file or directory that is a
// symlink, belongs to another uid, or is open to group/others is refused with the command that
// fixes it, never read or written. Writes are atomic (a temp file created O_EXCL | O_NOFOLLOW in
// the same directory, fsync, rename, fsync of the directory), so a crash leaves the old file or
// the new one. A file that does not parse is reported as damaged and left untouched: Put and
// Remove fail rather than rewrite it without the entries they could not read.
//
// Thread-safe (a mutex); processes sharing the directory serialise on flock(2) of it.
class FileValueStore final : public SecretValueStore {
 public:
  static constexpr const char* kFileName = "values.json";

  // Creates `dir` (mode 0700, its parents as needed) when missing and checks it.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<FileValueStore>> Open(
      const std::filesystem::path& dir);

  FileValueStore(const FileValueStore&) = delete;
  FileValueStore& operator=(const FileValueStore&) = delete;

  absl::Status Put(const std::string& name, const SecretValue& value) override;
  absl::StatusOr<SecretValue> Get(const std::string& name) override;
  absl::Status Remove(const std::string& name) override;
  absl::StatusOr<std::vector<std::string>> List() override;
  // "file <dir>/values.json"
  [[nodiscard]] std::string Describe() const override;

  [[nodiscard]] std::filesystem::path file() const { return dir_ / kFileName; }

 private:
  explicit FileValueStore(std::filesystem::path dir) : dir_(std::move(dir)) {}

  std::filesystem::path dir_;
  std::mutex mu_;
};

}  // namespace abox::secrets
