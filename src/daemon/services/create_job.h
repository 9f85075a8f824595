// A create in flight, shared by SandboxService's create steps and its shutdown. Internal to
// services/.
#pragma once

#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "absl/time/time.h"
#include "src/daemon/lifecycle/pipeline.h"
#include "src/daemon/lifecycle/vm_booter.h"
#include "src/daemon/lifecycle/warm_pool.h"
#include "src/daemon/services/sandbox_service.h"

namespace abox::daemon {

// One create in flight.
struct CreateJob {
  SandboxSpec spec;
  std::string id;
  store::SandboxRecord record;
  bool announced = false;
  std::shared_ptr<LiveSandbox> live;
  std::shared_ptr<VmHooks> hooks = std::make_shared<VmHooks>();
  std::mutex vm_mu;  // guards vm (Shutdown fails its agent from another thread)
  std::unique_ptr<runtime::Sandbox> vm;
  absl::Time started;
  // A VM taken from the warm pool (its id is this job's): the boot step adopts it instead of
  // starting one; a create that fails before then discards it.
  std::optional<PooledVm> pooled;
  bool from_pool = false;
  bool restored = false;  // from a golden snapshot (else booted)
  std::string boot_note;  // why a restore fell back to a boot, if it did
  Pipeline pipeline;
  SandboxService::AcceptedFn accepted;
  SandboxService::DoneFn done;
};

}  // namespace abox::daemon
