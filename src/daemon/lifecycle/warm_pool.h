// The warm pool: VMs restored (or booted) ahead of any request, idle and without an identity,
// kept per image and machine shape, so that a create takes one instead of waiting for a restore.
// A pooled VM's id is the sandbox id it will have: a create that takes it becomes that id, gives
// the guest its identity, binds its workspace and hands it out. No command ever runs in a pooled
// VM; once taken it is never given back (a create that fails destroys it).
//
// Pooled VMs count in the capacity ledger like sandboxes. The pool fills in the background up to
// its size per shape, only where the budget has room and the host has memory; a create the
// budget has no room for destroys idle VMs first (ReserveGivingWay), and the filler drains the pool
// while the host is short of memory. Each pooled VM has a marker file in $ABOX_HOME/pool/ from
// before its boot until a sandbox record owns it, so that the next aboxd finds what a killed one
// left (CollectLeftovers). See docs/decisions/0013-warm-pool.md.
#pragma once

#include <compare>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "src/base/host_layout.h"
#include "src/daemon/lifecycle/vm_booter.h"
#include "src/daemon/services/ledger.h"
#include "src/image/image_store.h"
#include "src/vmm/vmm.h"

namespace abox::daemon {

// What a pooled VM is: an image and a machine shape. A create takes a pooled VM only when all
// of these match its own.
struct PoolShape {
  std::string image;
  int cpus = 1;
  int memory_mib = 512;
  int64_t disk_mib = 0;
  vmm::Accel accel = vmm::Accel::kAuto;

  auto operator<=>(const PoolShape&) const = default;
};

struct PoolOptions {
  // Idle VMs kept per shape; 0 turns the pool off.
  int size = 0;
  // Shapes kept at once: the default one and those of the latest creates; a shape pushed out
  // is drained.
  int max_shapes = 3;
  // How often the filler looks at the pool and the host's memory when nothing woke it.
  absl::Duration check_interval = absl::Seconds(2);
  // Below this much available host memory (MemAvailable) the pool drains, one VM per check, and
  // does not fill.
  int64_t min_available_mib = 1024;
  // After this many failed fills of a shape in a row, the shape rests for `failure_backoff`.
  int max_failures = 3;
  absl::Duration failure_backoff = absl::Seconds(60);
};

// The default pool size for a host budget: enough that back-to-back creates find a VM, while
// the pool holds no more than an eighth of the memory budget (2 VMs of the default shape on a
// 16 GiB host, 1 on 8 GiB, none below).
[[nodiscard]] int DefaultPoolSize(const Budget& budget, int vm_memory_mib);

// One VM out of the pool, for a create to adopt.
struct PooledVm {
  std::string id;  // the sandbox id it becomes; its run dir is named after it
  PoolShape shape;
  image::ImageFiles files;
  BootedVm booted;
};

struct PoolShapeStatus {
  PoolShape shape;
  int idle = 0;
  bool filling = false;
  std::string last_error;  // why the latest fill failed; empty after a good one
};

struct PoolStatus {
  int size = 0;  // per shape
  std::vector<PoolShapeStatus> shapes;
  int64_t handed_out = 0;  // taken by creates since aboxd started
  int64_t made = 0;        // VMs put in the pool since aboxd started
  int64_t drained = 0;     // destroyed idle (memory pressure, budget needed, shape dropped)
  bool memory_low = false;
};

// The boundaries the pool works through (the real ones in daemon.cc; fakes in the tests).
struct PoolDeps {
  // Starts VM `id` of `shape` from `files` (a restore of the golden template, or a boot).
  std::function<absl::StatusOr<BootedVm>(const std::string& id, const PoolShape& shape,
                                         const image::ImageFiles& files)>
      start;
  // Destroys VM `id`, which the pool started (`vm` is what `start` returned).
  std::function<void(const std::string& id, std::unique_ptr<runtime::Sandbox> vm)> destroy;
  // Opens an image for a boot (checked: it may have been rebuilt or removed).
  std::function<absl::StatusOr<image::ImageFiles>(const std::string& image)> open_image;
  // MiB of memory the host has available now (MemAvailable).
  std::function<int64_t()> available_mib;
  // A fresh sandbox id.
  std::function<std::string()> new_id;
};

// Thread-safe. One filler thread, started by Start() and ended by Stop().
class WarmPool final {
 public:
  WarmPool(PoolOptions options, Ledger& ledger, base::HostLayout layout, PoolDeps deps);
  ~WarmPool();
  WarmPool(const WarmPool&) = delete;
  WarmPool& operator=(const WarmPool&) = delete;

  // Starts filling for `shapes` (and for those Want adds later).
  void Start(const std::vector<PoolShape>& shapes);
  // Stops filling (waits for a fill in progress) and destroys every idle VM. Idempotent.
  void Stop();

  // Keeps VMs of `shape` from now on (the most recently wanted shapes, up to max_shapes).
  void Want(const PoolShape& shape);
  // An idle VM of `shape` started from exactly `files` (the image as it is now), or none. The
  // VM's ledger reservation (under its id) passes to the caller, who must either call Adopted
  // once a sandbox record names the id, or Discard.
  [[nodiscard]] std::optional<PooledVm> Take(const PoolShape& shape,
                                             const image::ImageFiles& files);
  // The sandbox record of a taken VM exists: its marker file goes.
  void Adopted(const std::string& id);
  // A taken VM that no sandbox will use: destroyed, its marker removed (its reservation is the
  // caller's to release).
  void Discard(PooledVm vm);
  // Reserves `cpus` and `memory_mib` for sandbox `id` in the ledger, giving up idle VMs to make
  // room (their reservations go at once, in one step with this one, so the filler cannot take
  // the room back; the VMs are destroyed before this returns). The ledger's kResourceExhausted
  // when even the whole pool would not make room (then nothing is given up).
  [[nodiscard]] absl::Status ReserveGivingWay(const std::string& id, int cpus, int memory_mib);

  [[nodiscard]] PoolStatus Status() const;

  // Before the pool starts: kills the VMs a previous aboxd left in the pool (marker files with
  // no sandbox record; `owned(id)` says whether a record names the id) and removes their run
  // dirs and markers. Returns how many it removed.
  static int CollectLeftovers(const base::HostLayout& layout, vmm::Vmm& vmm,
                              const std::function<bool(const std::string&)>& owned);

 private:
  struct Entry {
    PooledVm vm;
    std::shared_ptr<bool> dead;  // set by the VM's failure hook while it idles
  };
  struct ShapeState {
    std::deque<Entry> idle;
    bool filling = false;
    int failures = 0;
    absl::Time resting_until = absl::InfinitePast();
    std::string last_error;
    uint64_t last_wanted = 0;
  };

  void Run();
  // Fills one VM of the first shape below its size; false when none needed (or could get) one.
  bool FillOne(std::unique_lock<std::mutex>& lock);
  // Destroys `entries` (their ledger reservations released, markers removed); unlocked.
  void DestroyIdle(std::vector<Entry> entries);
  // Takes idle entries out for DestroyIdle: the dead ones, those of shapes no longer wanted,
  // and one more when the host is short of memory.
  std::vector<Entry> TakeUnwantedLocked(bool memory_low);
  std::filesystem::path MarkerPath(const std::string& id) const;

  const PoolOptions options_;
  Ledger& ledger_;
  const base::HostLayout layout_;
  const PoolDeps deps_;

  mutable std::mutex mu_;
  std::condition_variable wake_;
  std::map<PoolShape, ShapeState> shapes_;  // guarded by mu_
  uint64_t want_counter_ = 0;               // guarded by mu_
  bool stopping_ = false;                   // guarded by mu_
  bool memory_low_ = false;                 // guarded by mu_
  int64_t handed_out_ = 0;                  // guarded by mu_
  int64_t made_ = 0;                        // guarded by mu_
  int64_t drained_ = 0;                     // guarded by mu_
  std::thread filler_;
};

}  // namespace abox::daemon
