#include "src/daemon/lifecycle/golden_templates.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <random>
#include <thread>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "spdlog/spdlog.h"
#include "src/base/fenced_remove.h"
#include "src/base/io.h"
#include "src/base/status_macros.h"
#include "src/runtime/sandbox.h"

namespace abox::daemon {
namespace {

constexpr char kStateFile[] = "state";
constexpr char kDiskFile[] = "disk.qcow2";
constexpr char kMemoryFile[] = "memory";
constexpr char kInfoFile[] = "template.json";  // written last: a template with it is complete
constexpr char kLockFile[] = ".lock";
// How long the template's save may take (device state only: tens of milliseconds).
constexpr std::chrono::milliseconds kSaveTimeout(30000);
// After the host hangs up, how long the guest agent gets to notice and wait for the next host
// (it polls its port; a restored clone then finds it waiting).
constexpr absl::Duration kSettle = absl::Milliseconds(150);

std::string RandomHex(int n) {
  std::random_device rd;
  std::uniform_int_distribution<int> hex(0, 15);
  std::string out;
  for (int i = 0; i < n; ++i) {
    out += "0123456789abcdef"[hex(rd)];
  }
  return out;
}

std::string ShapeKey(const TemplateRequest& r) {
  return absl::StrCat(r.files.dir.string(), "|", r.cpus, "|", r.memory_mib, "|", r.disk_mib, "|",
                      vmm::AccelName(r.accel));
}

vmm::VmSpec SpecFor(const TemplateRequest& r, const std::string& id, const std::string& run_dir) {
  vmm::VmSpec spec;
  spec.id = id;
  spec.run_dir = run_dir;
  spec.kernel = r.files.vmlinux.string();
  spec.initrd = r.files.initramfs.string();
  spec.rootfs = r.files.rootfs.string();
  spec.cpus = r.cpus;
  spec.memory_mib = r.memory_mib;
  spec.disk_mib = r.disk_mib;
  spec.accel = r.accel;
  return spec;
}

absl::StatusOr<base::UniqueFd> NewMemoryFile(int memory_mib) {
  base::UniqueFd fd(::memfd_create("abox-golden-memory", MFD_CLOEXEC | MFD_ALLOW_SEALING));
  if (!fd) {
    return base::ErrnoError("memfd_create");
  }
  if (::ftruncate(fd.get(), static_cast<off_t>(memory_mib) << 20) != 0) {
    return base::ErrnoError("ftruncate(template memory)");
  }
  return fd;
}

}  // namespace

absl::Status SealTemplateMemory(int fd, int memory_mib) {
  struct stat st {};
  if (::fstat(fd, &st) != 0 || st.st_size != static_cast<off_t>(memory_mib) << 20) {
    return absl::DataLossError("the template memory does not have the VM's memory size");
  }
  if (::fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL) != 0) {
    return base::ErrnoError("sealing the template memory");
  }
  return absl::OkStatus();
}

GoldenTemplates::GoldenTemplates(vmm::Vmm& vmm, base::HostLayout layout)
    : vmm_(vmm), layout_(std::move(layout)) {}

GoldenTemplates::~GoldenTemplates() = default;

int GoldenTemplates::made() const {
  std::lock_guard lock(mu_);
  return made_;
}

absl::StatusOr<std::shared_ptr<const GoldenTemplate>> GoldenTemplates::Get(
    const TemplateRequest& request) {
  if (!vmm_.CanSaveState()) {
    return absl::UnimplementedError(absl::StrCat("the ", vmm_.name(), " VMM cannot save VMs"));
  }
  const std::string key = ShapeKey(request);
  ABOX_ASSIGN_OR_RETURN(
      std::string fingerprint,
      vmm_.StateFingerprint(SpecFor(request, "fingerprint", layout_.home.string())));
  auto current = [&]() -> std::shared_ptr<const GoldenTemplate> {
    std::lock_guard lock(mu_);
    auto it = by_shape_.find(key);
    return it != by_shape_.end() && it->second->fingerprint == fingerprint ? it->second : nullptr;
  };
  if (auto tpl = current()) {
    return tpl;
  }
  std::lock_guard make_lock(make_mu_);
  if (auto tpl = current()) {
    return tpl;  // made by the caller we waited for
  }
  // Other aboxds may share the templates folder (the tests' homes do): one makes at a time, and
  // the rest find its template on disk.
  ABOX_ASSIGN_OR_RETURN(base::UniqueFd folder_lock, LockFolder());
  std::shared_ptr<GoldenTemplate> found = LoadFromDisk(request, fingerprint);
  bool made_now = found == nullptr;
  if (made_now) {
    bool stale = false;
    {
      std::lock_guard lock(mu_);
      stale = by_shape_.count(key) > 0;
    }
    if (stale) {
      spdlog::info("golden template for {} is stale (image, QEMU or machine changed): re-making it",
                   request.files.dir.string());
    }
    ABOX_ASSIGN_OR_RETURN(found, Make(request, fingerprint));
  }
  {
    std::lock_guard lock(mu_);
    by_shape_[key] = found;
    made_ += made_now ? 1 : 0;
  }
  (void)RemoveUnusedLocked();  // a stale one, once nothing uses it
  return found;
}

absl::StatusOr<base::UniqueFd> GoldenTemplates::LockFolder() {
  const std::filesystem::path root = layout_.home / "templates";
  std::error_code ec;
  std::filesystem::create_directories(root, ec);
  ::chmod(root.c_str(), 0700);
  const std::string path = (root / kLockFile).string();
  base::UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
  if (!fd) {
    return base::ErrnoError(absl::StrCat("open(", path, ")"));
  }
  while (::flock(fd.get(), LOCK_EX) != 0) {
    if (errno != EINTR) {
      return base::ErrnoError(absl::StrCat("flock(", path, ")"));
    }
  }
  return fd;  // closing it unlocks
}

std::shared_ptr<GoldenTemplate> GoldenTemplates::LoadFromDisk(const TemplateRequest& request,
                                                              const std::string& fingerprint) {
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(layout_.home / "templates", ec)) {
    absl::StatusOr<std::string> text = base::ReadFile((e.path() / kInfoFile).string(), 1 << 20);
    if (!text.ok()) {
      continue;
    }
    nlohmann::json info = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
    auto fp = info.is_object() ? info.find("fingerprint") : info.end();
    if (fp == info.end() || !fp->is_string() || fp->get<std::string>() != fingerprint) {
      continue;
    }
    auto tpl = std::make_shared<GoldenTemplate>();
    tpl->name = e.path().filename().string();
    tpl->fingerprint = fingerprint;
    tpl->dir = e.path();
    tpl->state = e.path() / kStateFile;
    tpl->disk = e.path() / kDiskFile;
    tpl->cpus = request.cpus;
    tpl->memory_mib = request.memory_mib;
    tpl->disk_mib = request.disk_mib;
    absl::Time started = absl::Now();
    absl::Status loaded = [&]() -> absl::Status {
      ABOX_ASSIGN_OR_RETURN(tpl->memory, NewMemoryFile(request.memory_mib));
      const std::string memory = (e.path() / kMemoryFile).string();
      base::UniqueFd in(::open(memory.c_str(), O_RDONLY | O_CLOEXEC));
      if (!in) {
        return base::ErrnoError(absl::StrCat("open(", memory, ")"));
      }
      ABOX_RETURN_IF_ERROR(base::CopyDataSparse(in.get(), tpl->memory.get(), memory));
      return SealTemplateMemory(tpl->memory.get(), request.memory_mib);
    }();
    if (!loaded.ok()) {
      spdlog::warn("golden template {} could not be loaded ({}); making a new one", tpl->name,
                   loaded.ToString());
      continue;
    }
    tpl->make_time = absl::Now() - started;
    spdlog::info("golden template {} loaded in {} ms", tpl->name,
                 absl::ToInt64Milliseconds(tpl->make_time));
    return tpl;
  }
  return nullptr;
}

void GoldenTemplates::Invalidate(const std::shared_ptr<const GoldenTemplate>& tpl) {
  std::lock_guard lock(mu_);
  for (auto it = by_shape_.begin(); it != by_shape_.end(); ++it) {
    if (it->second == tpl) {
      by_shape_.erase(it);
      return;
    }
  }
}

absl::StatusOr<std::shared_ptr<GoldenTemplate>> GoldenTemplates::Make(
    const TemplateRequest& request, const std::string& fingerprint) {
  absl::Time started = absl::Now();
  auto tpl = std::make_shared<GoldenTemplate>();
  tpl->name = absl::StrCat(request.memory_mib, "m", request.cpus, "c-", RandomHex(10));
  tpl->fingerprint = fingerprint;
  tpl->dir = layout_.home / "templates" / tpl->name;
  tpl->state = tpl->dir / kStateFile;
  tpl->disk = tpl->dir / kDiskFile;
  tpl->cpus = request.cpus;
  tpl->memory_mib = request.memory_mib;
  tpl->disk_mib = request.disk_mib;
  std::error_code ec;
  std::filesystem::create_directories(tpl->dir.parent_path(), ec);
  if (ec || ::mkdir(tpl->dir.c_str(), 0700) != 0) {
    return absl::InternalError(absl::StrCat("cannot create ", tpl->dir.string(), ": ",
                                            ec ? ec.message() : std::strerror(errno)));
  }
  ::chmod(tpl->dir.parent_path().c_str(), 0700);
  absl::Cleanup drop_dir = [&] { (void)base::RemoveUnder(layout_.home / "templates", tpl->dir); };

  ABOX_ASSIGN_OR_RETURN(tpl->memory, NewMemoryFile(request.memory_mib));
  runtime::SandboxConfig config;
  config.id = absl::StrCat("golden-", RandomHex(8));
  config.cpus = request.cpus;
  config.memory_mib = request.memory_mib;
  config.disk_mib = request.disk_mib;
  config.accel = request.accel;
  config.tie_to_caller = true;  // a make cut short by aboxd's death leaves no VM
  config.boot_timeout = request.boot_timeout;
  config.files = request.files;
  config.layout = layout_;
  config.memory_file = vmm::MemoryFile{.fd = tpl->memory.get(), .shared = true};
  ABOX_ASSIGN_OR_RETURN(std::unique_ptr<runtime::Sandbox> vm,
                        runtime::Sandbox::Boot(vmm_, config, [](const std::string& note) {
                          spdlog::warn("golden template: {}", note);
                        }));
  // The template is saved with no host connected: a clone's agent then waits for its own.
  vm->DisconnectAgent();
  absl::SleepFor(kSettle);
  absl::Status saved = [&]() -> absl::Status {
    ABOX_RETURN_IF_ERROR(vm->vm().Pause());
    base::UniqueFd state(::open(tpl->state.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
    if (!state) {
      return base::ErrnoError(absl::StrCat("open(", tpl->state.string(), ")"));
    }
    ABOX_RETURN_IF_ERROR(
        vm->vm().SaveState(state.get(), /*skip_shared_memory=*/true, kSaveTimeout));
    if (::fsync(state.get()) != 0) {
      return base::ErrnoError("fsync(template state)");
    }
    // The disk as the saved memory knows it (QEMU flushed it when the save completed).
    ABOX_RETURN_IF_ERROR(base::CopyFileSparse(vm->vm().disk_path(), tpl->disk.string(), 0400));
    return base::SyncFile(tpl->disk.string());
  }();
  // The template VM goes either way; its memory must be unmapped before the seal.
  absl::Status destroyed = vm->Destroy();
  vm.reset();
  ABOX_RETURN_IF_ERROR(saved);
  ABOX_RETURN_IF_ERROR(destroyed);
  ABOX_RETURN_IF_ERROR(SealTemplateMemory(tpl->memory.get(), request.memory_mib));
  {
    // On disk too, for the next aboxd (and the others sharing this folder).
    const std::string memory = (tpl->dir / kMemoryFile).string();
    base::UniqueFd out(::open(memory.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
    if (!out) {
      return base::ErrnoError(absl::StrCat("open(", memory, ")"));
    }
    ABOX_RETURN_IF_ERROR(base::CopyDataSparse(tpl->memory.get(), out.get(), "template memory"));
    if (::fsync(out.get()) != 0) {
      return base::ErrnoError(absl::StrCat("fsync(", memory, ")"));
    }
  }
  tpl->make_time = absl::Now() - started;
  nlohmann::json info = {
      {"fingerprint", fingerprint},
      {"cpus", request.cpus},
      {"memory_mib", request.memory_mib},
      {"disk_mib", request.disk_mib},
      {"accel", vmm::AccelName(request.accel)},
      {"kernel", request.files.vmlinux.string()},
      {"initrd", request.files.initramfs.string()},
      {"rootfs", request.files.rootfs.string()},
      {"image", request.files.dir.string()},
      {"made_at", absl::FormatTime(absl::RFC3339_sec, started, absl::UTCTimeZone())},
      {"make_ms", absl::ToInt64Milliseconds(tpl->make_time)}};
  ABOX_RETURN_IF_ERROR(
      base::WriteFileAtomic((tpl->dir / kInfoFile).string(), info.dump(2) + "\n", 0600));
  std::move(drop_dir).Cancel();
  spdlog::info("golden template {} made in {} ms", tpl->name,
               absl::ToInt64Milliseconds(tpl->make_time));
  return tpl;
}

int GoldenTemplates::RemoveUnused() {
  std::lock_guard make_lock(make_mu_);
  absl::StatusOr<base::UniqueFd> folder_lock = LockFolder();
  if (!folder_lock.ok()) {
    spdlog::warn("not removing unused templates: {}", folder_lock.status().ToString());
    return 0;
  }
  return RemoveUnusedLocked();
}

bool GoldenTemplates::IsCurrent(const std::filesystem::path& dir) {
  absl::StatusOr<std::string> text = base::ReadFile((dir / kInfoFile).string(), 1 << 20);
  if (!text.ok()) {
    return false;  // incomplete: a make cut short (ours hold the folder lock while they run)
  }
  nlohmann::json info = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (!info.is_object()) {
    return false;
  }
  auto str = [&](const char* key) {
    auto it = info.find(key);
    return it != info.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  auto num = [&](const char* key) {
    auto it = info.find(key);
    return it != info.end() && it->is_number_integer() ? it->get<int64_t>() : int64_t{0};
  };
  absl::StatusOr<vmm::Accel> accel = vmm::ParseAccel(str("accel"));
  if (!accel.ok()) {
    return false;
  }
  TemplateRequest r;
  r.files.vmlinux = str("kernel");
  r.files.initramfs = str("initrd");
  r.files.rootfs = str("rootfs");
  r.cpus = static_cast<int>(num("cpus"));
  r.memory_mib = static_cast<int>(num("memory_mib"));
  r.disk_mib = num("disk_mib");
  r.accel = *accel;
  absl::StatusOr<std::string> now =
      vmm_.StateFingerprint(SpecFor(r, "fingerprint", layout_.home.string()));
  return now.ok() && *now == str("fingerprint");
}

int GoldenTemplates::RemoveUnusedLocked() {
  std::set<std::filesystem::path> keep;
  {
    std::lock_guard lock(mu_);
    for (const auto& [key, tpl] : by_shape_) {
      keep.insert(tpl->dir);
    }
  }
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(layout_.SandboxesDir(), ec)) {
    for (const std::string& layer : vmm_.DiskLayers(e.path().string())) {
      keep.insert(std::filesystem::path(layer).parent_path());
    }
  }
  const std::filesystem::path root = layout_.home / "templates";
  int removed = 0;
  for (const auto& e : std::filesystem::directory_iterator(root, ec)) {
    if (keep.count(e.path()) > 0 || !e.is_directory() || IsCurrent(e.path())) {
      continue;
    }
    // A template being made has no template.json yet, but its maker holds the folder lock.
    if (absl::Status s = base::RemoveUnder(root, e.path()); s.ok()) {
      ++removed;
    } else {
      spdlog::warn("removing unused template {}: {}", e.path().string(), s.ToString());
    }
  }
  return removed;
}

}  // namespace abox::daemon
