// Time as a component sees it, injected: aboxd's reaper, timeouts and records read this clock,
// so tests run TTLs and idle timeouts on a fake one instead of sleeping.
#pragma once

#include <mutex>

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace abox::base {

// Thread-safe.
class Clock {
 public:
  virtual ~Clock() = default;
  [[nodiscard]] virtual absl::Time Now() const = 0;
};

// absl::Now(). Lives for the whole process.
[[nodiscard]] Clock& SystemClock();

// A clock that moves only when told (tests). Starts at a fixed, realistic time.
class FakeClock final : public Clock {
 public:
  FakeClock() = default;
  [[nodiscard]] absl::Time Now() const override {
    std::lock_guard lock(mu_);
    return now_;
  }
  void Advance(absl::Duration d) {
    std::lock_guard lock(mu_);
    now_ += d;
  }

 private:
  mutable std::mutex mu_;
  absl::Time now_ = absl::FromUnixSeconds(1798761600);  // 2027-01-01T00:00:00Z
};

}  // namespace abox::base
