// Content manifests: what a workspace tree holds, entry by entry. The host computes one for
// the files it syncs in; the guest computes one of /workspace (`abox-guest ws manifest`) so
// the host can see what the agent changed. A manifest from the guest is untrusted input:
// ParseManifest bounds and validates every field.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace abox::workspace {

enum class EntryType : uint8_t { kFile, kDir, kSymlink };

struct Entry {
  EntryType type = EntryType::kFile;
  // Permission bits only (07777 masked to 0777 | the executable bits that matter): files keep
  // their mode, directories and symlinks report 0 unless the scanner records them.
  uint32_t mode = 0644;
  uint64_t size = 0;        // files: bytes; others: 0
  int64_t mtime_ns = 0;     // informational (the stat cache uses it); not compared
  std::string sha256;       // files: 64 lowercase hex digits; others: empty
  std::string link_target;  // symlinks: the target as stored; others: empty

  // Same content as far as a workspace is concerned: type, mode, size, hash, link target
  // (never mtime).
  [[nodiscard]] bool SameContent(const Entry& other) const {
    return type == other.type && mode == other.mode && size == other.size &&
           sha256 == other.sha256 && link_target == other.link_target;
  }
};

// Keys are relative paths with '/' separators, validated by ValidateRelativePath (no leading
// '/', no "." or ".." component, no empty component, no NUL).
using Manifest = std::map<std::string, Entry>;

struct ManifestChanges {
  std::vector<std::string> added;     // in `current`, not in `base`
  std::vector<std::string> modified;  // in both, !SameContent (includes type changes)
  std::vector<std::string> deleted;   // in `base`, not in `current`
  [[nodiscard]] bool empty() const { return added.empty() && modified.empty() && deleted.empty(); }
};

// What changed from `base` to `current` (each list sorted).
ManifestChanges CompareManifests(const Manifest& base, const Manifest& current);

// NDJSON, one entry per line in path order:
//   {"p":path,"t":"f"|"d"|"l","m":mode,"s":size,"mt":mtime_ns,"h":sha256,"l":link_target}
// "h" only for files, "l" only for symlinks. A path or link target that is not valid UTF-8
// (names are bytes; JSON strings are UTF-8) goes base64-encoded in "p64" / "l64" instead, so
// ParseManifest(SerializeManifest(m)) == m byte for byte.
std::string SerializeManifest(const Manifest& manifest);

// Bounds for ParseManifest: a manifest from the guest is as large as the agent makes it.
struct ManifestLimits {
  size_t max_entries = 1'000'000;
  size_t max_bytes = 512 << 20;
};

// Longest symlink target a manifest may carry (PATH_MAX).
inline constexpr size_t kMaxLinkTargetBytes = 4096;

// Parses SerializeManifest's output from an untrusted source. Refuses (kInvalidArgument naming
// the line) unknown, missing or wrongly typed fields, invalid or duplicate paths, modes above
// 07777, a hash that is not 64 lowercase hex digits on a file or any hash on a non-file, a link
// target on a non-symlink or an empty / oversized / NUL-containing one on a symlink, a size on a
// non-file; kResourceExhausted beyond `limits`.
absl::StatusOr<Manifest> ParseManifest(absl::string_view ndjson, const ManifestLimits& limits = {});

}  // namespace abox::workspace
