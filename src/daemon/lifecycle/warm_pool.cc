#include "src/daemon/lifecycle/warm_pool.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "spdlog/spdlog.h"
#include "src/base/fenced_remove.h"
#include "src/base/status_macros.h"
#include "src/base/unique_fd.h"

namespace abox::daemon {
namespace {

constexpr char kPoolDir[] = "pool";

std::string ShapeName(const PoolShape& s) {
  return absl::StrCat(s.image, " (", s.cpus, " vCPU, ", s.memory_mib, " MiB)");
}

// The same image as it is now: a rebuilt image has another manifest (build time, hashes).
bool SameImage(const image::ImageFiles& a, const image::ImageFiles& b) {
  return a.rootfs == b.rootfs && a.vmlinux == b.vmlinux && a.initramfs == b.initramfs &&
         a.manifest == b.manifest;
}

}  // namespace

int DefaultPoolSize(const Budget& budget, int vm_memory_mib) {
  if (vm_memory_mib <= 0) {
    return 0;
  }
  // A quarter of the budget at most: one idle 2 GiB VM from a 12 GiB budget (a 16 GiB laptop),
  // two from 16 GiB up. Idle pooled VMs touch little of their memory (they share the golden
  // template's pages) but are counted in full, like every VM.
  return std::clamp(budget.memory_mib / 4 / vm_memory_mib, 0, 2);
}

WarmPool::WarmPool(PoolOptions options, Ledger& ledger, base::HostLayout layout, PoolDeps deps)
    : options_(options), ledger_(ledger), layout_(std::move(layout)), deps_(std::move(deps)) {}

WarmPool::~WarmPool() { Stop(); }

std::filesystem::path WarmPool::MarkerPath(const std::string& id) const {
  return layout_.home / kPoolDir / id;
}

void WarmPool::Start(const std::vector<PoolShape>& shapes) {
  if (options_.size <= 0) {
    return;
  }
  std::error_code ec;
  std::filesystem::create_directories(layout_.home / kPoolDir, ec);
  {
    std::lock_guard lock(mu_);
    for (const PoolShape& s : shapes) {
      shapes_[s].last_wanted = ++want_counter_;
    }
  }
  filler_ = std::thread([this] { Run(); });
}

void WarmPool::Stop() {
  std::vector<Entry> all;
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (filler_.joinable()) {
    filler_.join();
  }
  {
    std::lock_guard lock(mu_);
    for (auto& [shape, state] : shapes_) {
      for (Entry& e : state.idle) {
        all.push_back(std::move(e));
      }
      state.idle.clear();
    }
  }
  DestroyIdle(std::move(all));
}

void WarmPool::Want(const PoolShape& shape) {
  if (options_.size <= 0) {
    return;
  }
  {
    std::lock_guard lock(mu_);
    if (stopping_) {
      return;
    }
    shapes_[shape].last_wanted = ++want_counter_;
  }
  wake_.notify_all();
}

std::optional<PooledVm> WarmPool::Take(const PoolShape& shape, const image::ImageFiles& files) {
  std::optional<PooledVm> taken;
  {
    std::lock_guard lock(mu_);
    auto it = shapes_.find(shape);
    if (it == shapes_.end() || stopping_) {
      return std::nullopt;
    }
    std::deque<Entry>& idle = it->second.idle;
    // Oldest first. A VM of an image since rebuilt is never handed out: it is marked for the
    // filler to destroy (and replace), like a dead one.
    for (auto e = idle.begin(); e != idle.end(); ++e) {
      if (!*e->dead && !SameImage(e->vm.files, files)) {
        spdlog::info("warm pool: VM {} was started from an earlier build of image {}; replacing it",
                     e->vm.id, shape.image);
        *e->dead = true;
      }
      if (*e->dead) {
        continue;
      }
      taken = std::move(e->vm);
      idle.erase(e);
      ++handed_out_;
      break;
    }
  }
  wake_.notify_all();  // refill
  return taken;
}

void WarmPool::Adopted(const std::string& id) {
  std::error_code ec;
  std::filesystem::remove(MarkerPath(id), ec);
}

void WarmPool::Discard(PooledVm vm) {
  deps_.destroy(vm.id, std::move(vm.booted.vm));
  Adopted(vm.id);
}

absl::Status WarmPool::ReserveGivingWay(const std::string& id, int cpus, int memory_mib) {
  std::vector<Entry> victims;
  absl::Status reserved;
  {
    std::lock_guard lock(mu_);  // the filler reserves under it too
    reserved = ledger_.Reserve(id, cpus, memory_mib);
    if (!absl::IsResourceExhausted(reserved)) {
      return reserved;
    }
    // What the ledger would hold without the idle VMs: give them up only if that makes room.
    LedgerUsage u = ledger_.Usage();
    int idle_cpus = 0;
    int idle_mib = 0;
    for (const auto& [shape, state] : shapes_) {
      idle_cpus += shape.cpus * static_cast<int>(state.idle.size());
      idle_mib += shape.memory_mib * static_cast<int>(state.idle.size());
    }
    if (u.cpus - idle_cpus + cpus > u.budget.cpus ||
        u.memory_mib - idle_mib + memory_mib > u.budget.memory_mib) {
      return reserved;
    }
    // Least recently wanted shapes first, newest VMs of each first.
    std::vector<ShapeState*> order;
    for (auto& [shape, state] : shapes_) {
      order.push_back(&state);
    }
    std::sort(order.begin(), order.end(), [](const ShapeState* a, const ShapeState* b) {
      return a->last_wanted < b->last_wanted;
    });
    for (ShapeState* state : order) {
      while (absl::IsResourceExhausted(reserved) && !state->idle.empty()) {
        Entry e = std::move(state->idle.back());
        state->idle.pop_back();
        ledger_.Release(e.vm.id);
        victims.push_back(std::move(e));
        reserved = ledger_.Reserve(id, cpus, memory_mib);
      }
    }
    drained_ += static_cast<int64_t>(victims.size());
  }
  spdlog::info("warm pool: destroyed {} idle VM(s) to make room for sandbox {}", victims.size(),
               id);
  DestroyIdle(std::move(victims));
  return reserved;
}

PoolStatus WarmPool::Status() const {
  std::lock_guard lock(mu_);
  PoolStatus s;
  s.size = options_.size;
  s.handed_out = handed_out_;
  s.made = made_;
  s.drained = drained_;
  s.memory_low = memory_low_;
  for (const auto& [shape, state] : shapes_) {
    s.shapes.push_back({.shape = shape,
                        .idle = static_cast<int>(state.idle.size()),
                        .filling = state.filling,
                        .last_error = state.last_error});
  }
  return s;
}

void WarmPool::DestroyIdle(std::vector<Entry> entries) {
  {
    std::lock_guard lock(mu_);
    for (Entry& e : entries) {
      *e.dead = true;  // its failure hook stays quiet while it goes
    }
  }
  for (Entry& e : entries) {
    const std::string id = e.vm.id;
    deps_.destroy(id, std::move(e.vm.booted.vm));
    ledger_.Release(id);
    Adopted(id);  // the marker goes with the VM
  }
}

std::vector<WarmPool::Entry> WarmPool::TakeUnwantedLocked(bool memory_low) {
  std::vector<Entry> out;
  // Shapes beyond the newest max_shapes are no longer kept.
  std::vector<uint64_t> stamps;
  for (const auto& [shape, state] : shapes_) {
    stamps.push_back(state.last_wanted);
  }
  std::sort(stamps.rbegin(), stamps.rend());
  uint64_t cutoff = stamps.size() > static_cast<size_t>(options_.max_shapes)
                        ? stamps[static_cast<size_t>(options_.max_shapes) - 1]
                        : 0;
  for (auto it = shapes_.begin(); it != shapes_.end();) {
    ShapeState& state = it->second;
    bool dropped = state.last_wanted < cutoff;
    for (auto e = state.idle.begin(); e != state.idle.end();) {
      if (dropped || *e->dead) {
        out.push_back(std::move(*e));
        e = state.idle.erase(e);
      } else {
        ++e;
      }
    }
    if (dropped && !state.filling) {
      it = shapes_.erase(it);
    } else {
      ++it;
    }
  }
  if (memory_low) {
    // The newest VM of the least recently wanted shape.
    ShapeState* pick = nullptr;
    for (auto& [shape, state] : shapes_) {
      if (!state.idle.empty() && (pick == nullptr || state.last_wanted < pick->last_wanted)) {
        pick = &state;
      }
    }
    if (pick != nullptr) {
      out.push_back(std::move(pick->idle.back()));
      pick->idle.pop_back();
    }
  }
  drained_ += static_cast<int64_t>(out.size());
  return out;
}

void WarmPool::Run() {
  std::unique_lock lock(mu_);
  while (!stopping_) {
    int64_t available = deps_.available_mib();
    bool low = available < options_.min_available_mib;
    if (low != memory_low_) {
      spdlog::info("warm pool: {} MiB of host memory available ({} MiB wanted): {}", available,
                   options_.min_available_mib, low ? "draining" : "filling again");
    }
    memory_low_ = low;
    std::vector<Entry> unwanted = TakeUnwantedLocked(low);
    if (!unwanted.empty()) {
      lock.unlock();
      DestroyIdle(std::move(unwanted));
      lock.lock();
      continue;
    }
    if (!low && FillOne(lock)) {
      continue;
    }
    wake_.wait_for(lock, absl::ToChronoMilliseconds(options_.check_interval));
  }
}

bool WarmPool::FillOne(std::unique_lock<std::mutex>& lock) {
  absl::Time now = absl::Now();
  // The most recently wanted shape that is short of VMs and not resting.
  std::optional<PoolShape> pick;
  uint64_t best = 0;
  for (const auto& [shape, state] : shapes_) {
    if (static_cast<int>(state.idle.size()) < options_.size && state.resting_until <= now &&
        state.last_wanted >= best) {
      pick = shape;
      best = state.last_wanted;
    }
  }
  if (!pick) {
    return false;
  }
  const PoolShape shape = *pick;
  const std::string id = deps_.new_id();
  if (!ledger_.Reserve(id, shape.cpus, shape.memory_mib).ok()) {
    return false;  // the budget is for sandboxes first; try again at the next check
  }
  shapes_[shape].filling = true;
  lock.unlock();

  absl::StatusOr<PooledVm> made = [&]() -> absl::StatusOr<PooledVm> {
    absl::StatusOr<image::ImageFiles> files = deps_.open_image(shape.image);
    if (!files.ok()) {
      return files.status();
    }
    // The marker exists before the VM: a killed aboxd's successor finds every VM it left.
    base::UniqueFd marker(
        ::open(MarkerPath(id).c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
    if (!marker) {
      return base::ErrnoError(absl::StrCat("open(", MarkerPath(id).string(), ")"));
    }
    absl::StatusOr<BootedVm> booted = deps_.start(id, shape, *files);
    if (!booted.ok()) {
      Adopted(id);
      return booted.status();
    }
    return PooledVm{
        .id = id, .shape = shape, .files = *std::move(files), .booted = *std::move(booted)};
  }();

  auto dead = std::make_shared<bool>(false);
  if (made.ok()) {
    // While it idles, a VM that dies is marked for the filler to replace (it is never handed
    // out); a guest connection it opens is reset.
    std::weak_ptr<bool> weak = dead;
    made->booted.hooks->Route(
        [this, weak, id](const absl::Status& why) {
          {
            std::lock_guard l(mu_);
            std::shared_ptr<bool> d = weak.lock();
            if (d == nullptr || *d) {
              return;  // taken (the taker routes its failures), or already being destroyed
            }
            *d = true;
          }
          spdlog::warn("warm pool: idle VM {} failed ({}); replacing it", id, why.ToString());
          wake_.notify_all();
        },
        nullptr);
  }

  lock.lock();
  ShapeState& state = shapes_[shape];
  state.filling = false;
  if (!made.ok()) {
    ledger_.Release(id);
    state.last_error = std::string(made.status().message());
    if (++state.failures >= options_.max_failures) {
      state.resting_until = absl::Now() + options_.failure_backoff;
      state.failures = 0;
      spdlog::warn("warm pool: {} failed {} times; resting for {}: {}", ShapeName(shape),
                   options_.max_failures, absl::FormatDuration(options_.failure_backoff),
                   state.last_error);
    } else {
      spdlog::warn("warm pool: could not start a VM of {}: {}", ShapeName(shape), state.last_error);
    }
    return false;
  }
  state.failures = 0;
  state.last_error.clear();
  ++made_;
  spdlog::debug("warm pool: VM {} of {} ready ({} idle)", id, ShapeName(shape),
                state.idle.size() + 1);
  state.idle.push_back(Entry{.vm = *std::move(made), .dead = std::move(dead)});
  if (stopping_) {
    return false;  // Stop() destroys it with the rest
  }
  return true;
}

int WarmPool::CollectLeftovers(const base::HostLayout& layout, vmm::Vmm& vmm,
                               const std::function<bool(const std::string&)>& owned) {
  std::error_code ec;
  const std::filesystem::path dir = layout.home / kPoolDir;
  int removed = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    const std::string id = e.path().filename().string();
    if (!owned(id)) {
      std::filesystem::path run_dir = layout.SandboxRunDir(id);
      if (std::filesystem::exists(run_dir)) {
        if (absl::StatusOr<std::unique_ptr<vmm::Vm>> vm = vmm.Attach(run_dir.string()); vm.ok()) {
          (void)(*vm)->Kill();
        }
        if (absl::Status s = base::RemoveUnder(layout.home, run_dir); !s.ok()) {
          spdlog::warn("warm pool: removing {}: {}", run_dir.string(), s.ToString());
        }
      }
      ++removed;
    }
    std::error_code ec2;
    std::filesystem::remove(e.path(), ec2);
  }
  return removed;
}

}  // namespace abox::daemon
