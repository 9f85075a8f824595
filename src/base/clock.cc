#include "src/base/clock.h"

namespace abox::base {
namespace {

class SystemClockImpl final : public Clock {
 public:
  [[nodiscard]] absl::Time Now() const override { return absl::Now(); }
};

}  // namespace

Clock& SystemClock() {
  static SystemClockImpl* const clock = new SystemClockImpl();  // never destroyed
  return *clock;
}

}  // namespace abox::base
