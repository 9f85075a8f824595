// The apply journal: what an apply / pull / undo changed in the host tree, path by path, with
// enough to put every path back (`before`) or check nothing moved since (`after`). Stored as
// journal.json in the artifact directory (artifacts.h), rewritten atomically at each state
// change; the content it names lives in the artifact's own ObjectStore.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "src/workspace/host_tree.h"
#include "src/workspace/manifest.h"

namespace abox::workspace {

// A path's state by content, the unit apply compares: type, file permission bits (& 0777; the
// setuid / setgid / sticky bits are never carried over) and hash, or symlink target. Directory
// modes and mtimes are not compared.
struct PathState {
  enum class Kind { kAbsent, kFile, kSymlink, kDir, kOther };
  Kind kind = Kind::kAbsent;
  uint32_t mode = 0;
  std::string sha256;
  std::string link_target;

  bool operator==(const PathState& other) const = default;

  static PathState Absent() { return {}; }
  static PathState File(uint32_t mode, std::string sha256) {
    return {Kind::kFile, mode & 0777, std::move(sha256), ""};
  }
  static PathState Symlink(std::string target) {
    return {Kind::kSymlink, 0, "", std::move(target)};
  }
  static PathState Dir() { return {Kind::kDir, 0, "", ""}; }
  // nullptr (not in the manifest) is absent.
  static PathState FromEntry(const Entry* entry);
  static PathState FromHost(const HostState& state);

  // "absent", "file 0644 <sha12>", "symlink -> t", "directory", "special file".
  [[nodiscard]] std::string Describe() const;
};

// For test failure messages.
inline void PrintTo(const PathState& state, std::ostream* os) { *os << state.Describe(); }

enum class JournalState { kApplying, kApplied, kRolledBack, kUndone };
[[nodiscard]] absl::string_view JournalStateName(JournalState state);

struct JournalEntry {
  std::string path;
  PathState before;
  PathState after;
  // Directories (relative paths, shallowest first) that did not exist and the change creates;
  // removed again (when empty) by rollback and undo.
  std::vector<std::string> created_dirs;
};

struct Journal {
  std::string id;
  std::string sandbox;
  std::string host_root;
  std::string created;  // RFC 3339, UTC
  std::string kind;     // "apply" | "pull"
  JournalState state = JournalState::kApplying;
  std::vector<JournalEntry> entries;
  // Things a person should know (paths recovery left alone, directories kept non-empty).
  std::vector<std::string> notes;
};

[[nodiscard]] std::string SerializeJournal(const Journal& journal);
// Parses journal.json (kDataLoss when it is damaged: the person must look at it).
[[nodiscard]] absl::StatusOr<Journal> ParseJournal(absl::string_view json);

}  // namespace abox::workspace
