#include "src/workspace/manifest.h"

#include <cstdint>
#include <limits>
#include <optional>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "src/base/status_macros.h"
#include "src/base/utf8.h"
#include "src/workspace/paths.h"
#include "src/workspace/sha256.h"

namespace abox::workspace {
namespace {

using nlohmann::json;

// One entry's line is at most a few times its path and link target (JSON escapes); anything
// longer is not ours, and bounding it bounds what one json::parse may build.
constexpr size_t kMaxLineBytes = 64 << 10;

constexpr absl::string_view kKnownFields[] = {"p", "p64", "t", "m", "s", "mt", "h", "l", "l64"};

char TypeLetter(EntryType type) {
  switch (type) {
    case EntryType::kFile:
      return 'f';
    case EntryType::kDir:
      return 'd';
    case EntryType::kSymlink:
      return 'l';
  }
  return '?';
}

// Stores `bytes` as text in `key`, or base64 in `key64` when it is not UTF-8.
void PutBytes(json& obj, const char* key, const char* key64, const std::string& bytes) {
  if (base::IsValidUtf8(bytes)) {
    obj[key] = bytes;
  } else {
    obj[key64] = absl::Base64Escape(bytes);
  }
}

// The bytes stored under `key` (text) or `key64` (base64); nullopt when neither is present.
absl::StatusOr<std::optional<std::string>> GetBytes(const json& obj, const char* key,
                                                    const char* key64) {
  auto text = obj.find(key);
  auto b64 = obj.find(key64);
  if (text != obj.end() && b64 != obj.end()) {
    return absl::InvalidArgumentError(absl::StrCat("both \"", key, "\" and \"", key64, "\""));
  }
  if (text != obj.end()) {
    if (!text->is_string()) {
      return absl::InvalidArgumentError(absl::StrCat("\"", key, "\" is not a string"));
    }
    return std::optional<std::string>(text->get<std::string>());
  }
  if (b64 != obj.end()) {
    std::string decoded;
    if (!b64->is_string() || !absl::Base64Unescape(b64->get<std::string>(), &decoded)) {
      return absl::InvalidArgumentError(absl::StrCat("\"", key64, "\" is not base64 text"));
    }
    return std::optional<std::string>(std::move(decoded));
  }
  return std::optional<std::string>();
}

absl::StatusOr<uint64_t> GetUnsigned(const json& obj, const char* key) {
  auto it = obj.find(key);
  if (it == obj.end()) {
    return absl::InvalidArgumentError(absl::StrCat("missing \"", key, "\""));
  }
  if (!it->is_number_unsigned()) {
    return absl::InvalidArgumentError(absl::StrCat("\"", key, "\" is not a non-negative integer"));
  }
  return it->get<uint64_t>();
}

absl::StatusOr<std::pair<std::string, Entry>> ParseLine(absl::string_view line) {
  json obj = json::parse(line.begin(), line.end(), nullptr, /*allow_exceptions=*/false);
  if (obj.is_discarded()) {
    return absl::InvalidArgumentError("not valid JSON");
  }
  if (!obj.is_object()) {
    return absl::InvalidArgumentError("not a JSON object");
  }
  for (const auto& item : obj.items()) {
    bool known = false;
    for (absl::string_view field : kKnownFields) {
      known = known || item.key() == field;
    }
    if (!known) {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown field \"", EscapePath(item.key().substr(0, 40)), "\""));
    }
  }
  ABOX_ASSIGN_OR_RETURN(std::optional<std::string> path, GetBytes(obj, "p", "p64"));
  if (!path) {
    return absl::InvalidArgumentError("missing \"p\"");
  }
  ABOX_RETURN_IF_ERROR(ValidateRelativePath(*path));

  Entry entry;
  auto type = obj.find("t");
  if (type == obj.end() || !type->is_string()) {
    return absl::InvalidArgumentError("missing or non-string \"t\"");
  }
  const std::string& letter = type->get_ref<const std::string&>();
  if (letter == "f") {
    entry.type = EntryType::kFile;
  } else if (letter == "d") {
    entry.type = EntryType::kDir;
  } else if (letter == "l") {
    entry.type = EntryType::kSymlink;
  } else {
    return absl::InvalidArgumentError("\"t\" is not \"f\", \"d\" or \"l\"");
  }

  ABOX_ASSIGN_OR_RETURN(uint64_t mode, GetUnsigned(obj, "m"));
  if (mode > 07777) {
    return absl::InvalidArgumentError(absl::StrCat("mode ", mode, " is above 07777"));
  }
  entry.mode = static_cast<uint32_t>(mode);
  ABOX_ASSIGN_OR_RETURN(entry.size, GetUnsigned(obj, "s"));
  if (entry.type != EntryType::kFile && entry.size != 0) {
    return absl::InvalidArgumentError("a size on a directory or symlink");
  }

  auto mtime = obj.find("mt");
  if (mtime == obj.end() || !mtime->is_number_integer()) {
    return absl::InvalidArgumentError("missing or non-integer \"mt\"");
  }
  if (mtime->is_number_unsigned()) {
    if (mtime->get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return absl::InvalidArgumentError("\"mt\" out of range");
    }
  }
  entry.mtime_ns = mtime->get<int64_t>();

  auto hash = obj.find("h");
  if (entry.type == EntryType::kFile) {
    if (hash == obj.end() || !hash->is_string() ||
        !IsSha256Hex(hash->get_ref<const std::string&>())) {
      return absl::InvalidArgumentError("a file needs \"h\": 64 lowercase hex digits");
    }
    entry.sha256 = hash->get<std::string>();
  } else if (hash != obj.end()) {
    return absl::InvalidArgumentError("\"h\" on a directory or symlink");
  }

  ABOX_ASSIGN_OR_RETURN(std::optional<std::string> target, GetBytes(obj, "l", "l64"));
  if (entry.type == EntryType::kSymlink) {
    if (!target || target->empty()) {
      return absl::InvalidArgumentError("a symlink needs a non-empty \"l\"");
    }
    if (target->size() > kMaxLinkTargetBytes) {
      return absl::InvalidArgumentError(
          absl::StrCat("link target longer than ", kMaxLinkTargetBytes, " bytes"));
    }
    if (target->find('\0') != std::string::npos) {
      return absl::InvalidArgumentError("NUL byte in the link target");
    }
    entry.link_target = *std::move(target);
  } else if (target) {
    return absl::InvalidArgumentError("a link target on a file or directory");
  }
  return std::make_pair(*std::move(path), std::move(entry));
}

}  // namespace

ManifestChanges CompareManifests(const Manifest& base, const Manifest& current) {
  ManifestChanges changes;
  auto b = base.begin();
  auto c = current.begin();
  while (b != base.end() || c != current.end()) {
    if (c == current.end() || (b != base.end() && b->first < c->first)) {
      changes.deleted.push_back(b->first);
      ++b;
    } else if (b == base.end() || c->first < b->first) {
      changes.added.push_back(c->first);
      ++c;
    } else {
      if (!b->second.SameContent(c->second)) {
        changes.modified.push_back(c->first);
      }
      ++b;
      ++c;
    }
  }
  return changes;
}

std::string SerializeManifest(const Manifest& manifest) {
  std::string out;
  for (const auto& [path, entry] : manifest) {
    json obj = json::object();
    PutBytes(obj, "p", "p64", path);
    obj["t"] = std::string(1, TypeLetter(entry.type));
    obj["m"] = entry.mode;
    obj["s"] = entry.type == EntryType::kFile ? entry.size : 0;
    obj["mt"] = entry.mtime_ns;
    if (entry.type == EntryType::kFile) {
      obj["h"] = entry.sha256;
    }
    if (entry.type == EntryType::kSymlink) {
      PutBytes(obj, "l", "l64", entry.link_target);
    }
    // Every string is UTF-8 by now; `replace` only keeps dump() from ever throwing.
    absl::StrAppend(&out, obj.dump(-1, ' ', false, json::error_handler_t::replace), "\n");
  }
  return out;
}

absl::StatusOr<Manifest> ParseManifest(absl::string_view ndjson, const ManifestLimits& limits) {
  if (ndjson.size() > limits.max_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "manifest of ", ndjson.size(), " bytes is over the limit of ", limits.max_bytes));
  }
  Manifest manifest;
  size_t line_no = 0;
  size_t pos = 0;
  while (pos < ndjson.size()) {
    size_t nl = ndjson.find('\n', pos);
    size_t end = nl == absl::string_view::npos ? ndjson.size() : nl;
    absl::string_view line = ndjson.substr(pos, end - pos);
    pos = end + 1;
    ++line_no;
    auto bad = [&](absl::string_view why) {
      return absl::InvalidArgumentError(absl::StrCat("manifest line ", line_no, ": ", why));
    };
    if (line.empty()) {
      return bad("empty line");
    }
    if (line.size() > kMaxLineBytes) {
      return bad(absl::StrCat("longer than ", kMaxLineBytes, " bytes"));
    }
    if (manifest.size() >= limits.max_entries) {
      return absl::ResourceExhaustedError(
          absl::StrCat("manifest line ", line_no, ": more than ", limits.max_entries, " entries"));
    }
    absl::StatusOr<std::pair<std::string, Entry>> parsed = ParseLine(line);
    if (!parsed.ok()) {
      return bad(parsed.status().message());
    }
    auto [it, inserted] = manifest.emplace(std::move(parsed->first), std::move(parsed->second));
    if (!inserted) {
      return bad(absl::StrCat("duplicate path '", EscapePath(it->first), "'"));
    }
  }
  return manifest;
}

}  // namespace abox::workspace
