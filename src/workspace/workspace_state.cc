#include "src/workspace/workspace_state.h"

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "src/base/io.h"
#include "src/base/status_macros.h"
#include "src/workspace/paths.h"

namespace abox::workspace {
namespace {

using nlohmann::json;

constexpr char kBindingFile[] = "binding.json";
constexpr char kBaseFile[] = "base.ndjson";
constexpr char kStatCacheFile[] = "stat-cache";
constexpr char kObjectsDir[] = "objects";
constexpr char kUndoBaseDir[] = "undo-base";

// Artifact ids are ours (artifacts.cc: <utc time>-<hex>); an undo names one from a request.
absl::Status ValidateArtifactId(const std::string& id) {
  bool ok = !id.empty() && id.size() <= 64 && id[0] != '-' &&
            std::all_of(id.begin(), id.end(), [](char c) {
              return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || c == '-';
            });
  return ok ? absl::OkStatus()
            : absl::InvalidArgumentError(
                  absl::StrCat("'", EscapePath(id), "' is not an artifact id"));
}

struct UndoBase {
  std::vector<std::string> paths;
  Manifest previous;
};

absl::StatusOr<UndoBase> ReadUndoBase(const std::string& file) {
  ABOX_ASSIGN_OR_RETURN(std::string text, base::ReadFile(file, size_t{1} << 30));
  json saved = json::parse(text, nullptr, false);
  if (saved.is_discarded() || !saved.is_object() || !saved["paths"].is_array() ||
      !saved["entries"].is_string()) {
    return absl::DataLossError(absl::StrCat(file, " is damaged"));
  }
  UndoBase out;
  ABOX_ASSIGN_OR_RETURN(out.previous, ParseManifest(saved["entries"].get<std::string>()));
  for (const json& p : saved["paths"]) {
    if (p.is_string()) {
      out.paths.push_back(p.get<std::string>());
    }
  }
  return out;
}

// Guest paths that would hide or break the system if a workspace were unpacked over them.
constexpr const char* kSystemDirs[] = {"/",     "/bin", "/boot", "/dev", "/etc", "/lib", "/lib64",
                                       "/proc", "/run", "/sbin", "/sys", "/usr", "/var"};

absl::Status ValidateGuestPath(const std::string& path) {
  if (path.empty() || path[0] != '/' || path.size() == 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("workspace guest path '", EscapePath(path),
                     "' must be an absolute directory such as /workspace"));
  }
  ABOX_RETURN_IF_ERROR(ValidateRelativePath(path.substr(1)));
  for (const char* dir : kSystemDirs) {
    if (path == dir ||
        (std::string(dir) != "/" && absl::StartsWith(path, absl::StrCat(dir, "/")))) {
      return absl::InvalidArgumentError(absl::StrCat(
          "workspace guest path '", path, "' is a system directory; use one such as /workspace"));
    }
  }
  return absl::OkStatus();
}

absl::Status ValidatePatterns(const std::vector<std::string>& patterns) {
  for (const std::string& p : patterns) {
    if (p.empty() || p.size() > 1024 || p.find('\0') != std::string::npos ||
        p.find('\n') != std::string::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("invalid exclude pattern '", EscapePath(p), "'"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Binding> ValidateBinding(Binding binding) {
  if (binding.host_root.empty()) {
    return absl::InvalidArgumentError("workspace: give the host directory to bind");
  }
  std::error_code ec;
  std::filesystem::path canonical = std::filesystem::canonical(binding.host_root, ec);
  if (ec) {
    return absl::InvalidArgumentError(
        absl::StrCat("workspace directory '", binding.host_root, "': ", ec.message()));
  }
  if (!std::filesystem::is_directory(canonical, ec)) {
    return absl::InvalidArgumentError(
        absl::StrCat("workspace '", binding.host_root, "' is not a directory"));
  }
  if (canonical == "/") {
    return absl::InvalidArgumentError(
        "refusing to bind / as a workspace: bind a project directory");
  }
  binding.host_root = canonical.string();
  ABOX_RETURN_IF_ERROR(ValidateGuestPath(binding.guest_path));
  ABOX_RETURN_IF_ERROR(ValidatePatterns(binding.exclude_add));
  ABOX_RETURN_IF_ERROR(ValidatePatterns(binding.exclude_remove));
  return binding;
}

absl::StatusOr<std::unique_ptr<WorkspaceState>> WorkspaceState::Create(const std::string& dir,
                                                                       const Binding& binding) {
  if (::mkdir(dir.c_str(), 0700) != 0) {
    return base::ErrnoError(absl::StrCat("mkdir(", dir, ")"), errno);
  }
  std::unique_ptr<WorkspaceState> state(new WorkspaceState());
  state->dir_ = dir;
  state->binding_ = binding;
  ABOX_RETURN_IF_ERROR(state->SaveBinding());
  ABOX_ASSIGN_OR_RETURN(ObjectStore objects,
                        ObjectStore::Open(absl::StrCat(dir, "/", kObjectsDir)));
  state->objects_ = std::make_unique<ObjectStore>(std::move(objects));
  return state;
}

absl::StatusOr<std::unique_ptr<WorkspaceState>> WorkspaceState::Open(const std::string& dir) {
  std::unique_ptr<WorkspaceState> state(new WorkspaceState());
  state->dir_ = dir;
  ABOX_ASSIGN_OR_RETURN(std::string text,
                        base::ReadFile(absl::StrCat(dir, "/", kBindingFile), 1 << 20));
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("host_root") ||
      !j["host_root"].is_string()) {
    return absl::DataLossError(absl::StrCat(dir, "/", kBindingFile, " is corrupt"));
  }
  Binding& b = state->binding_;
  b.host_root = j["host_root"].get<std::string>();
  b.guest_path = j.value("guest_path", std::string(kDefaultGuestPath));
  b.exclude_add = j.value("exclude_add", std::vector<std::string>{});
  b.exclude_remove = j.value("exclude_remove", std::vector<std::string>{});
  b.git_history = j.value("git_history", false);
  state->sync_count_ = j.value("sync_count", uint64_t{0});
  if (j.contains("last_sync_unix_ns") && j["last_sync_unix_ns"].is_number_integer()) {
    state->last_sync_ = absl::FromUnixNanos(j["last_sync_unix_ns"].get<int64_t>());
  }
  absl::StatusOr<std::string> base_text =
      base::ReadFile(absl::StrCat(dir, "/", kBaseFile), size_t{1} << 30);
  if (base_text.ok()) {
    // Our own file, but parsed with the same bounds as a guest's.
    ABOX_ASSIGN_OR_RETURN(state->base_, ParseManifest(*base_text));
  } else if (!absl::IsNotFound(base_text.status())) {
    return base_text.status();
  }
  ABOX_ASSIGN_OR_RETURN(ObjectStore objects,
                        ObjectStore::Open(absl::StrCat(dir, "/", kObjectsDir)));
  state->objects_ = std::make_unique<ObjectStore>(std::move(objects));
  state->host_cache_.Load(absl::StrCat(dir, "/", kStatCacheFile));
  return state;
}

absl::Status WorkspaceState::SaveBinding() const {
  json j = {{"host_root", binding_.host_root},     {"guest_path", binding_.guest_path},
            {"exclude_add", binding_.exclude_add}, {"exclude_remove", binding_.exclude_remove},
            {"git_history", binding_.git_history}, {"sync_count", sync_count_}};
  if (last_sync_ != absl::InfinitePast()) {
    j["last_sync_unix_ns"] = absl::ToUnixNanos(last_sync_);
  }
  return base::WriteFileAtomic(absl::StrCat(dir_, "/", kBindingFile),
                               j.dump(2, ' ', false, json::error_handler_t::replace), 0600);
}

absl::Status WorkspaceState::CommitSync(Manifest base) {
  ABOX_RETURN_IF_ERROR(
      base::WriteFileAtomic(absl::StrCat(dir_, "/", kBaseFile), SerializeManifest(base), 0600));
  base_ = std::move(base);
  last_sync_ = absl::Now();
  ++sync_count_;
  ABOX_RETURN_IF_ERROR(SaveBinding());
  // A lost stat cache only costs re-reading files next time.
  (void)host_cache_.Save(absl::StrCat(dir_, "/", kStatCacheFile));
  return absl::OkStatus();
}

absl::Status WorkspaceState::UpdateBase(const Manifest& entries,
                                        const std::vector<std::string>& removed) {
  Manifest next = base_;
  for (const auto& [path, entry] : entries) {
    next[path] = entry;
  }
  for (const std::string& path : removed) {
    next.erase(path);
  }
  ABOX_RETURN_IF_ERROR(
      base::WriteFileAtomic(absl::StrCat(dir_, "/", kBaseFile), SerializeManifest(next), 0600));
  base_ = std::move(next);
  return absl::OkStatus();
}

}  // namespace abox::workspace

namespace abox::workspace {

absl::Status WorkspaceState::SaveUndoBase(const std::string& artifact_id,
                                          const std::vector<std::string>& paths,
                                          const Manifest& previous) {
  ABOX_RETURN_IF_ERROR(ValidateArtifactId(artifact_id));
  std::string dir = absl::StrCat(dir_, "/", kUndoBaseDir);
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    return base::ErrnoError(absl::StrCat("mkdir(", dir, ")"), errno);
  }
  json saved = {{"paths", paths}, {"entries", SerializeManifest(previous)}};
  return base::WriteFileAtomic(absl::StrCat(dir, "/", artifact_id, ".json"),
                               saved.dump(-1, ' ', false, json::error_handler_t::replace), 0600);
}

absl::Status WorkspaceState::RestoreUndoBase(const std::string& artifact_id) {
  ABOX_RETURN_IF_ERROR(ValidateArtifactId(artifact_id));
  std::string file = absl::StrCat(dir_, "/", kUndoBaseDir, "/", artifact_id, ".json");
  absl::StatusOr<UndoBase> saved = ReadUndoBase(file);
  if (absl::IsNotFound(saved.status())) {
    return absl::OkStatus();
  }
  ABOX_RETURN_IF_ERROR(saved.status());
  std::vector<std::string> removed;
  for (const std::string& p : saved->paths) {
    if (!saved->previous.contains(p)) {
      removed.push_back(p);
    }
  }
  ABOX_RETURN_IF_ERROR(UpdateBase(saved->previous, removed));
  (void)::unlink(file.c_str());  // a stale one only keeps its objects a while longer
  return absl::OkStatus();
}

absl::StatusOr<std::set<std::string>> WorkspaceState::ReferencedObjects() const {
  std::set<std::string> out;
  auto add = [&](const Manifest& m) {
    for (const auto& [path, e] : m) {
      if (e.type == EntryType::kFile) {
        out.insert(e.sha256);
      }
    }
  };
  add(base_);
  std::error_code ec;
  std::filesystem::directory_iterator it(absl::StrCat(dir_, "/", kUndoBaseDir), ec);
  if (ec == std::errc::no_such_file_or_directory) {
    return out;  // nothing applied from this workspace yet
  }
  for (; !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    if (it->path().extension() != ".json") {
      continue;
    }
    ABOX_ASSIGN_OR_RETURN(UndoBase saved, ReadUndoBase(it->path().string()));
    add(saved.previous);
  }
  if (ec) {
    return absl::InternalError(
        absl::StrCat("listing ", dir_, "/", kUndoBaseDir, ": ", ec.message()));
  }
  return out;
}

}  // namespace abox::workspace
