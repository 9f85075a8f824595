#include "src/daemon/lifecycle/checkpoints.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <random>
#include <set>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "nlohmann/json.hpp"
#include "spdlog/spdlog.h"
#include "src/api/errors.h"
#include "src/base/fenced_remove.h"
#include "src/base/io.h"
#include "src/base/status_macros.h"

namespace abox::daemon {
namespace {

using nlohmann::json;

constexpr char kInfoFile[] = "checkpoint.json";
constexpr char kIncomplete[] = ".incomplete-";
// A full save of a large, busy guest under TCG can take seconds; this bounds a stuck one.
constexpr std::chrono::milliseconds kSaveTimeout(120000);

std::string NewCheckpointId() {
  std::random_device rd;
  std::uniform_int_distribution<int> hex(0, 15);
  std::string id = "ck";
  for (int i = 0; i < 10; ++i) {
    id += "0123456789abcdef"[hex(rd)];
  }
  return id;
}

uint64_t TreeBytes(const std::filesystem::path& dir) {
  uint64_t total = 0;
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(dir, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    struct stat st {};
    if (::lstat(it->path().c_str(), &st) == 0 && S_ISREG(st.st_mode)) {
      total += static_cast<uint64_t>(st.st_blocks) * 512;  // what it takes, holes excluded
    }
  }
  return total;
}

json ToJson(const CheckpointInfo& c) {
  return {{"id", c.id},
          {"name", c.name},
          {"sandbox_id", c.sandbox_id},
          {"image", c.image},
          {"cpus", c.cpus},
          {"memory_mib", c.memory_mib},
          {"disk_mib", c.disk_mib},
          {"disk_layers", c.disk_layers},
          {"workspace", c.workspace},
          {"pause", c.pause},
          {"created_at_ms", absl::ToUnixMillis(c.created_at)},
          {"save_ms", c.save_ms}};
}

// checkpoint.json is written by aboxd into its own 0700 tree; still, a damaged one is an
// error for that checkpoint, never a crash.
absl::StatusOr<CheckpointInfo> FromJson(const std::string& text, const std::filesystem::path& dir) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  auto str = [&](const char* key, std::string* out) {
    auto it = j.find(key);
    if (it == j.end() || !it->is_string()) {
      return false;
    }
    *out = it->get<std::string>();
    return true;
  };
  auto num = [&](const char* key, int64_t* out) {
    auto it = j.find(key);
    if (it == j.end() || !it->is_number_integer()) {
      return false;
    }
    *out = it->get<int64_t>();
    return true;
  };
  CheckpointInfo c;
  int64_t cpus = 0;
  int64_t memory = 0;
  int64_t created = 0;
  bool ok = j.is_object() && str("id", &c.id) && str("name", &c.name) &&
            str("sandbox_id", &c.sandbox_id) && str("image", &c.image) && num("cpus", &cpus) &&
            num("memory_mib", &memory) && num("created_at_ms", &created) &&
            num("save_ms", &c.save_ms);
  auto layers = ok ? j.find("disk_layers") : j.end();
  ok = ok && layers != j.end() && layers->is_array();
  if (ok) {
    for (const json& l : *layers) {
      ok = ok && l.is_string();
      if (ok) {
        c.disk_layers.push_back(l.get<std::string>());
      }
    }
  }
  auto flag = [&](const char* key, bool* out) {
    auto it = j.find(key);
    if (it != j.end() && it->is_boolean()) {
      *out = it->get<bool>();
    }
  };
  if (!ok || cpus < 1 || cpus > 255 || memory < 64 || memory > (1 << 20)) {
    return absl::DataLossError(absl::StrCat((dir / kInfoFile).string(), " is damaged"));
  }
  // Absent in checkpoints from before --disk: their disk was the rootfs's size.
  if (int64_t disk = 0; num("disk_mib", &disk)) {
    if (disk < 0 || disk > vmm::kMaxDiskMib) {
      return absl::DataLossError(absl::StrCat((dir / kInfoFile).string(), " is damaged"));
    }
    c.disk_mib = disk;
  }
  flag("workspace", &c.workspace);
  flag("pause", &c.pause);
  c.cpus = static_cast<int>(cpus);
  c.memory_mib = static_cast<int>(memory);
  c.created_at = absl::FromUnixMillis(created);
  c.dir = dir;
  return c;
}

absl::StatusOr<CheckpointInfo> Load(const std::filesystem::path& dir) {
  ABOX_ASSIGN_OR_RETURN(std::string text, base::ReadFile((dir / kInfoFile).string(), 1 << 20));
  ABOX_ASSIGN_OR_RETURN(CheckpointInfo c, FromJson(text, dir));
  c.bytes = TreeBytes(dir);
  return c;
}

}  // namespace

std::vector<std::string> CheckpointInfo::layers_for_restore() const {
  std::vector<std::string> layers = disk_layers;
  layers.push_back(disk().string());
  return layers;
}

CheckpointStore::CheckpointStore(vmm::Vmm& vmm, base::HostLayout layout, uint64_t budget_bytes)
    : vmm_(vmm), layout_(std::move(layout)), budget_bytes_(budget_bytes) {}

void CheckpointStore::RemoveIncomplete() {
  std::lock_guard lock(mu_);
  std::error_code ec;
  for (const auto& sandbox : std::filesystem::directory_iterator(Root(), ec)) {
    std::error_code ec2;
    for (const auto& e : std::filesystem::directory_iterator(sandbox.path(), ec2)) {
      if (absl::StartsWith(e.path().filename().string(), kIncomplete)) {
        spdlog::info("removing the checkpoint a crash interrupted: {}", e.path().string());
        (void)base::RemoveUnder(Root(), e.path());
      }
    }
  }
}

absl::StatusOr<CheckpointInfo> CheckpointStore::Save(runtime::Sandbox& vm,
                                                     const std::vector<std::string>& vm_disk_layers,
                                                     const CheckpointRequest& request) {
  std::lock_guard lock(mu_);
  if (uint64_t used = TreeBytes(Root()); used >= budget_bytes_) {
    return api::WithErrorCode(
        absl::ResourceExhaustedError(
            absl::StrCat("checkpoints take ", used >> 20, " MiB of the ", budget_bytes_ >> 20,
                         " MiB they may use: remove some with `abox checkpoint rm`")),
        api::kInsufficientStorage);
  }
  CheckpointInfo c;
  c.id = NewCheckpointId();
  c.name = request.name.empty() ? c.id : request.name;
  c.sandbox_id = request.sandbox_id;
  c.image = request.image;
  c.cpus = request.cpus;
  c.memory_mib = request.memory_mib;
  c.disk_mib = request.disk_mib;
  c.disk_layers = vm_disk_layers;
  c.workspace = request.save_workspace != nullptr;
  c.pause = request.pause;
  c.created_at = absl::Now();
  const std::filesystem::path parent = Root() / request.sandbox_id;
  const std::filesystem::path tmp = parent / absl::StrCat(kIncomplete, c.id);
  std::error_code ec;
  std::filesystem::create_directories(parent, ec);
  ::chmod(Root().c_str(), 0700);
  if (ec || ::mkdir(tmp.c_str(), 0700) != 0) {
    return absl::InternalError(absl::StrCat("cannot create ", tmp.string()));
  }
  absl::Cleanup drop = [&] { (void)base::RemoveUnder(Root(), tmp); };
  c.dir = tmp;

  absl::Time started = absl::Now();
  absl::Status saved = [&]() -> absl::Status {
    ABOX_RETURN_IF_ERROR(vm.vm().Pause());
    base::UniqueFd state(::open(c.state().c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
    if (!state) {
      return base::ErrnoError(absl::StrCat("open(", c.state().string(), ")"));
    }
    ABOX_RETURN_IF_ERROR(
        vm.vm().SaveState(state.get(), /*skip_shared_memory=*/false, kSaveTimeout));
    // The disk as the saved memory knows it, copied while the guest cannot write. (Both reach
    // the disk after the sandbox runs again: it is not paused for the fsyncs.)
    return base::CopyFileSparse(vm.vm().disk_path(), c.disk().string(), 0400);
  }();
  // The sandbox runs on, whether the save worked or not; for a pause, only when it failed (the
  // caller destroys the VM once the checkpoint is complete: nothing runs after the save).
  bool left_paused = saved.ok() && request.pause;
  absl::Status resumed = left_paused ? absl::OkStatus() : vm.vm().Resume();
  absl::Cleanup resume_on_failure = [&] {
    if (left_paused) {
      (void)vm.vm().Resume();
    }
  };
  c.save_ms = absl::ToInt64Milliseconds(absl::Now() - started);
  if (saved.ok()) {
    // The frozen layers under it (a golden template's disk, an earlier checkpoint's) are copied
    // too: a checkpoint stands on nothing but the image, so removing a template or another
    // checkpoint never breaks it. (They are small: what the boot and earlier work wrote.)
    c.disk_layers.clear();
    for (size_t i = 0; i < vm_disk_layers.size() && saved.ok(); ++i) {
      std::filesystem::path copy = tmp / absl::StrCat("layer-", i, ".qcow2");
      saved = base::CopyFileSparse(vm_disk_layers[i], copy.string(), 0400);
      c.disk_layers.push_back((parent / c.id / copy.filename()).string());
    }
  }
  if (!saved.ok()) {
    // A full disk is the likely cause when less is free than the guest's memory: say what to do.
    std::string hint;
    struct statvfs fs {};
    if (::statvfs(Root().c_str(), &fs) == 0 &&
        static_cast<uint64_t>(fs.f_bavail) * fs.f_frsize < (uint64_t{1} << 20) * c.memory_mib) {
      hint = absl::StrCat("; the disk holding ", Root().string(),
                          " is full: free space there or remove checkpoints (abox checkpoint rm)");
    }
    return absl::Status(saved.code(),
                        absl::StrCat("the checkpoint could not be saved: ", saved.message(), hint));
  }
  if (!resumed.ok()) {
    return absl::InternalError(absl::StrCat(
        "the checkpoint was saved but the sandbox did not resume: ", resumed.message()));
  }
  if (request.save_workspace) {
    ABOX_RETURN_IF_ERROR(request.save_workspace(c.workspace_dir()));
  }
  // Durable before it is listed (the rename below).
  ABOX_RETURN_IF_ERROR(base::SyncFile(c.state().string()));
  ABOX_RETURN_IF_ERROR(base::SyncFile(c.disk().string()));
  for (size_t i = 0; i < c.disk_layers.size(); ++i) {
    ABOX_RETURN_IF_ERROR(base::SyncFile((tmp / absl::StrCat("layer-", i, ".qcow2")).string()));
  }
  ABOX_RETURN_IF_ERROR(
      base::WriteFileAtomic((tmp / kInfoFile).string(), ToJson(c).dump(2) + "\n", 0600));
  const std::filesystem::path final_dir = parent / c.id;
  if (::rename(tmp.c_str(), final_dir.c_str()) != 0) {
    return base::ErrnoError(absl::StrCat("rename(", tmp.string(), ")"));
  }
  std::move(drop).Cancel();
  std::move(resume_on_failure).Cancel();
  c.dir = final_dir;
  c.bytes = TreeBytes(final_dir);
  return c;
}

std::vector<CheckpointInfo> CheckpointStore::List(const std::string& sandbox_id) {
  std::vector<CheckpointInfo> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(Root() / sandbox_id, ec)) {
    if (absl::StartsWith(e.path().filename().string(), ".")) {
      continue;
    }
    if (absl::StatusOr<CheckpointInfo> c = Load(e.path()); c.ok()) {
      out.push_back(*std::move(c));
    } else {
      spdlog::warn("{}", c.status().ToString());
    }
  }
  std::sort(out.begin(), out.end(), [](const CheckpointInfo& a, const CheckpointInfo& b) {
    return a.created_at < b.created_at;
  });
  return out;
}

absl::StatusOr<CheckpointInfo> CheckpointStore::Find(const std::string& sandbox_id,
                                                     const std::string& ref) {
  std::vector<CheckpointInfo> all = List(sandbox_id);
  std::vector<const CheckpointInfo*> prefix;
  for (const CheckpointInfo& c : all) {
    if (c.id == ref || c.name == ref) {
      return c;
    }
    if (!ref.empty() && absl::StartsWith(c.id, ref)) {
      prefix.push_back(&c);
    }
  }
  if (prefix.size() == 1) {
    return *prefix[0];
  }
  std::vector<std::string> names;
  for (const CheckpointInfo& c : all) {
    names.push_back(c.name == c.id ? c.id : absl::StrCat(c.name, " (", c.id, ")"));
  }
  if (prefix.size() > 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "checkpoint \"", ref, "\" is ambiguous; use one of: ", absl::StrJoin(names, ", ")));
  }
  return absl::NotFoundError(
      absl::StrCat("sandbox ", sandbox_id, " has no checkpoint \"", ref, "\"",
                   names.empty() ? std::string("; it has none (make one with `abox checkpoint ID`)")
                                 : absl::StrCat("; it has: ", absl::StrJoin(names, ", "))));
}

std::vector<std::string> CheckpointStore::UsersOf(const std::filesystem::path& dir) {
  std::vector<std::string> users;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(layout_.SandboxesDir(), ec)) {
    for (const std::string& layer : vmm_.DiskLayers(e.path().string())) {
      if (std::filesystem::path(layer).parent_path() == dir) {
        users.push_back(e.path().filename().string());
        break;
      }
    }
  }
  return users;
}

absl::Status CheckpointStore::Remove(const CheckpointInfo& checkpoint) {
  std::lock_guard lock(mu_);
  if (std::vector<std::string> users = UsersOf(checkpoint.dir); !users.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("checkpoint ", checkpoint.name, " is in use: the disks of sandboxes ",
                     absl::StrJoin(users, ", "), " stand on it; remove them first"));
  }
  return base::RemoveUnder(Root(), checkpoint.dir);
}

int CheckpointStore::RemoveUnusedOf(const std::string& sandbox_id) {
  int removed = 0;
  for (const CheckpointInfo& c : List(sandbox_id)) {
    if (Remove(c).ok()) {
      ++removed;
    }
  }
  std::error_code ec;
  std::filesystem::remove(Root() / sandbox_id, ec);  // only when empty
  return removed;
}

int CheckpointStore::RemoveOrphans(const std::vector<std::string>& live_ids) {
  std::set<std::string> live(live_ids.begin(), live_ids.end());
  std::vector<std::string> gone;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(Root(), ec)) {
    if (live.count(e.path().filename().string()) == 0) {
      gone.push_back(e.path().filename().string());
    }
  }
  int removed = 0;
  for (const std::string& id : gone) {
    removed += RemoveUnusedOf(id);
  }
  return removed;
}

uint64_t CheckpointStore::TotalBytes() { return TreeBytes(Root()); }

}  // namespace abox::daemon
