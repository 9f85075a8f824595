#include "src/image/rootfs_entry.h"

#include <cstdio>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "spdlog/spdlog.h"
#include "src/base/fenced_remove.h"
#include "src/base/io.h"
#include "src/base/status_macros.h"
#include "src/image/fs_util.h"
#include "src/image/sha256.h"

namespace abox::image {
namespace {

using nlohmann::json;

constexpr char kEntryFile[] = "entry.json";

absl::StatusOr<RootfsEntry> ReadEntryJson(const std::filesystem::path& dir) {
  ABOX_ASSIGN_OR_RETURN(std::string text, base::ReadFile((dir / kEntryFile).string(), 16 << 20));
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  auto str = [&](const json& o, const char* k) -> const json* {
    auto it = o.find(k);
    return it != o.end() && it->is_string() ? &*it : nullptr;
  };
  auto artifact = [&](const char* k, ArtifactInfo* a) {
    auto it = j.find(k);
    if (it == j.end() || !it->is_object() || str(*it, "sha256") == nullptr ||
        !it->contains("size") || !(*it)["size"].is_number_unsigned()) {
      return false;
    }
    a->sha256 = (*it)["sha256"].get<std::string>();
    a->size = (*it)["size"].get<uint64_t>();
    return IsSha256Hex(a->sha256);
  };
  auto strings = [&](const char* k, std::vector<std::string>* out) {
    auto it = j.find(k);
    if (it == j.end() || !it->is_array()) {
      return false;
    }
    for (const json& s : *it) {
      if (!s.is_string()) {
        return false;
      }
      out->push_back(s.get<std::string>());
    }
    return true;
  };
  RootfsEntry e;
  e.dir = dir;
  if (!j.is_object() || str(j, "key") == nullptr || str(j, "kernel_version") == nullptr ||
      str(j, "kernel_package") == nullptr || !strings("packages", &e.packages) ||
      !strings("modules", &e.modules) || !artifact("rootfs", &e.rootfs) ||
      !artifact("vmlinux", &e.vmlinux)) {
    return absl::DataLossError(absl::StrCat("malformed ", (dir / kEntryFile).string()));
  }
  e.key = j["key"].get<std::string>();
  e.kernel_version = j["kernel_version"].get<std::string>();
  e.kernel_package = j["kernel_package"].get<std::string>();
  return e;
}

}  // namespace

std::filesystem::path RootfsEntryDir(const base::HostLayout& paths, const std::string& key) {
  return paths.cache_dir / "rootfs" / key;
}

std::filesystem::path RootfsEntry::ModulePath(size_t i) const {
  char nn[8];
  snprintf(nn, sizeof(nn), "%02zu", i + 1);
  return dir / "modules" / absl::StrCat(nn, "-", modules[i], ".ko");
}

absl::Status WriteRootfsEntryJson(const RootfsEntry& e, const std::string& suite,
                                  const std::string& mirror, const std::string& arch) {
  json j = {{"key", e.key},
            {"kernel_version", e.kernel_version},
            {"kernel_package", e.kernel_package},
            {"packages", e.packages},
            {"modules", e.modules},
            {"rootfs", {{"sha256", e.rootfs.sha256}, {"size", e.rootfs.size}}},
            {"vmlinux", {{"sha256", e.vmlinux.sha256}, {"size", e.vmlinux.size}}},
            {"suite", suite},
            {"mirror", mirror},
            {"arch", arch}};
  return base::WriteFileAtomic((e.dir / kEntryFile).string(),
                               j.dump(2, ' ', false, json::error_handler_t::replace), 0444);
}

absl::StatusOr<RootfsEntry> LoadRootfsEntry(const base::HostLayout& paths, const std::string& key) {
  std::filesystem::path dir = RootfsEntryDir(paths, key);
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) {
    return absl::NotFoundError(absl::StrCat("no cached rootfs ", key));
  }
  auto e = ReadEntryJson(dir);
  bool complete = e.ok() && e->key == key;
  for (size_t i = 0; complete && i < e->modules.size(); ++i) {
    complete = std::filesystem::is_regular_file(e->ModulePath(i), ec);
  }
  if (complete) {
    auto rootfs = StatFile(dir / kRootfsFile);
    auto vmlinux = StatFile(dir / kVmlinuxFile);
    complete = rootfs.ok() && vmlinux.ok() && rootfs->size == e->rootfs.size &&
               vmlinux->size == e->vmlinux.size;
  }
  if (!complete) {
    spdlog::warn("image cache entry {} is damaged; removing it", dir.string());
    if (absl::Status s = base::RemoveUnder(paths.cache_dir, dir); !s.ok()) {
      spdlog::warn("{}", s.ToString());
    }
    return absl::NotFoundError(absl::StrCat("no usable cached rootfs ", key));
  }
  return e;
}

}  // namespace abox::image
