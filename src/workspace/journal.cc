#include "src/workspace/journal.h"

#include <optional>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "nlohmann/json.hpp"
#include "src/base/status_macros.h"
#include "src/base/utf8.h"
#include "src/workspace/paths.h"
#include "src/workspace/sha256.h"

namespace abox::workspace {
namespace {

using nlohmann::json;

constexpr std::pair<JournalState, const char*> kStateNames[] = {
    {JournalState::kApplying, "applying"},
    {JournalState::kApplied, "applied"},
    {JournalState::kRolledBack, "rolled_back"},
    {JournalState::kUndone, "undone"},
};

// Bytes as JSON text, or base64 under `key`64 when they are not UTF-8 (names are bytes).
void PutBytes(json& obj, const char* key, absl::string_view bytes) {
  if (base::IsValidUtf8(bytes)) {
    obj[key] = std::string(bytes);
  } else {
    obj[absl::StrCat(key, "64")] = absl::Base64Escape(bytes);
  }
}

absl::Status Damaged(absl::string_view why) {
  return absl::DataLossError(absl::StrCat("journal.json is damaged: ", why));
}

absl::StatusOr<std::string> GetString(const json& obj, const char* key) {
  auto it = obj.find(key);
  if (it == obj.end() || !it->is_string()) {
    return Damaged(absl::StrCat("\"", key, "\" is missing or not a string"));
  }
  return it->get<std::string>();
}

absl::StatusOr<std::string> GetBytes(const json& obj, const char* key) {
  if (obj.contains(key)) {
    return GetString(obj, key);
  }
  std::string key64 = absl::StrCat(key, "64");
  ABOX_ASSIGN_OR_RETURN(std::string encoded, GetString(obj, key64.c_str()));
  std::string decoded;
  if (!absl::Base64Unescape(encoded, &decoded)) {
    return Damaged(absl::StrCat("\"", key64, "\" is not base64"));
  }
  return decoded;
}

json StateToJson(const PathState& s) {
  json obj = json::object();
  switch (s.kind) {
    case PathState::Kind::kAbsent:
      obj["type"] = "absent";
      break;
    case PathState::Kind::kFile:
      obj["type"] = "file";
      obj["mode"] = s.mode;
      obj["sha256"] = s.sha256;
      break;
    case PathState::Kind::kSymlink:
      obj["type"] = "symlink";
      PutBytes(obj, "target", s.link_target);
      break;
    case PathState::Kind::kDir:
      obj["type"] = "dir";
      break;
    case PathState::Kind::kOther:
      obj["type"] = "other";
      break;
  }
  return obj;
}

absl::StatusOr<PathState> StateFromJson(const json& obj) {
  if (!obj.is_object()) {
    return Damaged("a path state is not an object");
  }
  ABOX_ASSIGN_OR_RETURN(std::string type, GetString(obj, "type"));
  if (type == "absent") {
    return PathState::Absent();
  }
  if (type == "dir") {
    return PathState::Dir();
  }
  if (type == "other") {
    return PathState{PathState::Kind::kOther, 0, "", ""};
  }
  if (type == "symlink") {
    ABOX_ASSIGN_OR_RETURN(std::string target, GetBytes(obj, "target"));
    return PathState::Symlink(std::move(target));
  }
  if (type == "file") {
    ABOX_ASSIGN_OR_RETURN(std::string sha, GetString(obj, "sha256"));
    auto mode = obj.find("mode");
    if (!IsSha256Hex(sha) || mode == obj.end() || !mode->is_number_unsigned() ||
        mode->get<uint64_t>() > 0777) {
      return Damaged("a file state has a bad mode or sha256");
    }
    return PathState::File(static_cast<uint32_t>(mode->get<uint64_t>()), sha);
  }
  return Damaged(absl::StrCat("unknown path type \"", type, "\""));
}

}  // namespace

PathState PathState::FromEntry(const Entry* entry) {
  if (entry == nullptr) {
    return Absent();
  }
  switch (entry->type) {
    case EntryType::kFile:
      return File(entry->mode, entry->sha256);
    case EntryType::kSymlink:
      return Symlink(entry->link_target);
    case EntryType::kDir:
      return Dir();
  }
  return Absent();
}

PathState PathState::FromHost(const HostState& state) {
  switch (state.kind) {
    case HostState::Kind::kAbsent:
      return Absent();
    case HostState::Kind::kFile:
      return File(state.mode, state.sha256);
    case HostState::Kind::kSymlink:
      return Symlink(state.link_target);
    case HostState::Kind::kDir:
      return Dir();
    case HostState::Kind::kOther:
      return PathState{Kind::kOther, 0, "", ""};
  }
  return Absent();
}

std::string PathState::Describe() const {
  switch (kind) {
    case Kind::kAbsent:
      return "absent";
    case Kind::kFile:
      return absl::StrFormat("file %04o %s", mode, sha256.substr(0, 12));
    case Kind::kSymlink:
      return absl::StrCat("symlink -> ", EscapePath(link_target));
    case Kind::kDir:
      return "directory";
    case Kind::kOther:
      return "special file";
  }
  return "?";
}

absl::string_view JournalStateName(JournalState state) {
  for (const auto& [s, name] : kStateNames) {
    if (s == state) {
      return name;
    }
  }
  return "?";
}

std::string SerializeJournal(const Journal& journal) {
  json obj = json::object();
  obj["id"] = journal.id;
  obj["sandbox"] = journal.sandbox;
  PutBytes(obj, "host_root", journal.host_root);
  obj["created"] = journal.created;
  obj["kind"] = journal.kind;
  obj["state"] = std::string(JournalStateName(journal.state));
  json entries = json::array();
  for (const JournalEntry& e : journal.entries) {
    json entry = json::object();
    PutBytes(entry, "path", e.path);
    entry["before"] = StateToJson(e.before);
    entry["after"] = StateToJson(e.after);
    json dirs = json::array();
    for (const std::string& d : e.created_dirs) {
      json dir = json::object();
      PutBytes(dir, "path", d);
      dirs.push_back(std::move(dir));
    }
    entry["created_dirs"] = std::move(dirs);
    entries.push_back(std::move(entry));
  }
  obj["entries"] = std::move(entries);
  json notes = json::array();
  for (const std::string& n : journal.notes) {
    notes.push_back(base::IsValidUtf8(n) ? n : EscapePath(n));
  }
  obj["notes"] = std::move(notes);
  return obj.dump(1) + "\n";
}

absl::StatusOr<Journal> ParseJournal(absl::string_view text) {
  json obj = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (obj.is_discarded() || !obj.is_object()) {
    return Damaged("not a JSON object");
  }
  Journal j;
  ABOX_ASSIGN_OR_RETURN(j.id, GetString(obj, "id"));
  ABOX_ASSIGN_OR_RETURN(j.sandbox, GetString(obj, "sandbox"));
  ABOX_ASSIGN_OR_RETURN(j.host_root, GetBytes(obj, "host_root"));
  ABOX_ASSIGN_OR_RETURN(j.created, GetString(obj, "created"));
  ABOX_ASSIGN_OR_RETURN(j.kind, GetString(obj, "kind"));
  ABOX_ASSIGN_OR_RETURN(std::string state, GetString(obj, "state"));
  bool known = false;
  for (const auto& [s, name] : kStateNames) {
    if (state == name) {
      j.state = s;
      known = true;
    }
  }
  if (!known) {
    return Damaged(absl::StrCat("unknown state \"", state, "\""));
  }
  auto entries = obj.find("entries");
  if (entries == obj.end() || !entries->is_array()) {
    return Damaged("\"entries\" is missing or not an array");
  }
  for (const json& entry : *entries) {
    if (!entry.is_object()) {
      return Damaged("an entry is not an object");
    }
    JournalEntry e;
    ABOX_ASSIGN_OR_RETURN(e.path, GetBytes(entry, "path"));
    ABOX_RETURN_IF_ERROR(HostTree::CheckPath(e.path));
    if (!entry.contains("before") || !entry.contains("after")) {
      return Damaged("an entry lacks \"before\" or \"after\"");
    }
    ABOX_ASSIGN_OR_RETURN(e.before, StateFromJson(entry["before"]));
    ABOX_ASSIGN_OR_RETURN(e.after, StateFromJson(entry["after"]));
    auto dirs = entry.find("created_dirs");
    if (dirs != entry.end()) {
      if (!dirs->is_array()) {
        return Damaged("\"created_dirs\" is not an array");
      }
      for (const json& d : *dirs) {
        if (!d.is_object()) {
          return Damaged("a created dir is not an object");
        }
        ABOX_ASSIGN_OR_RETURN(std::string dir, GetBytes(d, "path"));
        ABOX_RETURN_IF_ERROR(HostTree::CheckPath(dir));
        e.created_dirs.push_back(std::move(dir));
      }
    }
    j.entries.push_back(std::move(e));
  }
  auto notes = obj.find("notes");
  if (notes != obj.end() && notes->is_array()) {
    for (const json& n : *notes) {
      if (n.is_string()) {
        j.notes.push_back(n.get<std::string>());
      }
    }
  }
  return j;
}

}  // namespace abox::workspace
