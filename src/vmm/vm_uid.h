// Per-VM uids for QEMU when abox runs as root (decision 0021): each running QEMU gets a uid of
// its own from kVmUidBase's range, held by a lock for as long as the holder (the VM's abox-shim)
// lives, so no two QEMUs share one, across every $ABOX_HOME on the host.
#pragma once

#include <sys/types.h>

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "src/base/unique_fd.h"

namespace abox::vmm {

// Where the leases live (tmpfs: they go with a reboot, as the VMs do).
inline constexpr char kVmUidLockDir[] = "/run/abox/vm-uids";

struct VmUidLease {
  uid_t uid = 0;
  base::UniqueFd lock;  // flock(LOCK_EX) on <dir>/<uid>; closing it gives the uid back
};

// Leases a free uid from the range, trying slots from one derived from `seed` (the VM id) on.
// Fails when all are taken or the lock directory cannot be made.
[[nodiscard]] absl::StatusOr<VmUidLease> LeaseVmUid(const std::string& lock_dir,
                                                    std::string_view seed);

}  // namespace abox::vmm
