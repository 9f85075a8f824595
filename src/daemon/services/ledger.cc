#include "src/daemon/services/ledger.h"

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"

namespace abox::daemon {
namespace {

// A /proc/meminfo field in MiB, or `otherwise`.
int64_t MemInfoMib(const std::string& field, int64_t otherwise) {
  std::ifstream in("/proc/meminfo");
  std::string key;
  int64_t kib = 0;
  std::string unit;
  while (in >> key >> kib >> unit) {
    if (key == field) {
      return kib / 1024;
    }
  }
  return otherwise;
}

int64_t MemTotalMib() { return MemInfoMib("MemTotal:", 4096); }

}  // namespace

int64_t AvailableMemoryMib() { return MemInfoMib("MemAvailable:", int64_t{1} << 40); }

Budget DefaultBudget() {
  long cores = ::sysconf(_SC_NPROCESSORS_ONLN);
  Budget b;
  b.cpus = static_cast<int>(std::max<long>(cores, 1) * 2);
  b.memory_mib = static_cast<int>(std::max<int64_t>(MemTotalMib() * 3 / 4 - 1024, 512));
  return b;
}

absl::Status Ledger::Reserve(absl::string_view id, int cpus, int memory_mib, bool force) {
  std::lock_guard lock(mu_);
  if (entries_.count(id) > 0) {
    return absl::AlreadyExistsError(absl::StrCat("sandbox ", id, " already holds a reservation"));
  }
  bool cpus_ok = cpus_ + cpus <= budget_.cpus;
  bool mem_ok = memory_mib_ + memory_mib <= budget_.memory_mib;
  if (!force && (!cpus_ok || !mem_ok)) {
    std::string what;
    if (!cpus_ok) {
      what = absl::StrCat(cpus, " vCPUs requested, ", cpus_, " of ", budget_.cpus, " in use");
    }
    if (!mem_ok) {
      absl::StrAppend(&what, what.empty() ? "" : "; ", memory_mib, " MiB requested, ", memory_mib_,
                      " of ", budget_.memory_mib, " MiB in use");
    }
    return absl::ResourceExhaustedError(absl::StrCat(
        "the host budget is full (", what,
        "): remove or stop sandboxes (abox ls, abox rm), ask for less (--cpus, --memory), or "
        "raise the budget (aboxd --max-cpus / --max-memory)"));
  }
  entries_.emplace(std::string(id), Entry{cpus, memory_mib});
  cpus_ += cpus;
  memory_mib_ += memory_mib;
  return absl::OkStatus();
}

void Ledger::Release(absl::string_view id) {
  std::lock_guard lock(mu_);
  auto it = entries_.find(id);
  if (it == entries_.end()) {
    return;
  }
  cpus_ -= it->second.cpus;
  memory_mib_ -= it->second.memory_mib;
  entries_.erase(it);
}

LedgerUsage Ledger::Usage() const {
  std::lock_guard lock(mu_);
  return {cpus_, memory_mib_, budget_};
}

}  // namespace abox::daemon
