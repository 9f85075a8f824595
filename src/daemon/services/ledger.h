// The scheduler's ledger: vCPUs and memory reserved by running sandboxes against the host budget.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

namespace abox::daemon {

struct Budget {
  int cpus = 0;
  int memory_mib = 0;
};

// A sane default for this host: 2 vCPUs per online core (vCPUs are threads that mostly idle,
// and a sandbox rarely uses all of its), and 3/4 of RAM minus 1 GiB for the host itself
// (at least 512 MiB).
[[nodiscard]] Budget DefaultBudget();

// MiB of memory the host can still give without swapping (MemAvailable of /proc/meminfo);
// a large number when it cannot be read (the pool then never drains for memory).
[[nodiscard]] int64_t AvailableMemoryMib();

struct LedgerUsage {
  int cpus = 0;
  int memory_mib = 0;
  Budget budget;
};

// Thread-safe.
class Ledger final {
 public:
  explicit Ledger(Budget budget) : budget_(budget) {}

  // Reserves for sandbox `id`, or kResourceExhausted (429 no_capacity) with the numbers and what
  // to do. `force` records the reservation even beyond the budget (a sandbox found running
  // after a restart is there whether it fits or not).
  [[nodiscard]] absl::Status Reserve(absl::string_view id, int cpus, int memory_mib,
                                     bool force = false);
  // Gives back what `id` reserved (no-op if nothing).
  void Release(absl::string_view id);
  [[nodiscard]] LedgerUsage Usage() const;

 private:
  struct Entry {
    int cpus;
    int memory_mib;
  };
  const Budget budget_;
  mutable std::mutex mu_;
  std::map<std::string, Entry, std::less<>> entries_;
  int cpus_ = 0;
  int memory_mib_ = 0;
};

}  // namespace abox::daemon
