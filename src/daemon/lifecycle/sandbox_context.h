// What the sandbox services share: the daemon's settings for sandboxes and the pieces they work
// with. Built once by the composition root (src/daemon/daemon.h); everything outlives the
// services.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/time/time.h"
#include "src/base/clock.h"
#include "src/base/host_layout.h"
#include "src/daemon/lifecycle/checkpoints.h"
#include "src/daemon/lifecycle/golden_templates.h"
#include "src/daemon/lifecycle/live_sandbox.h"
#include "src/daemon/lifecycle/state_recorder.h"
#include "src/daemon/lifecycle/warm_pool.h"
#include "src/daemon/services/egress_service.h"
#include "src/daemon/services/event_bus.h"
#include "src/daemon/services/ledger.h"
#include "src/daemon/services/secret_grants.h"
#include "src/daemon/services/workspace_service.h"
#include "src/daemon/timer_queue.h"
#include "src/image/image_store.h"
#include "src/runtime/agent_guest_tools.h"
#include "src/store/exec_repo.h"
#include "src/store/sandbox_repo.h"
#include "src/vmm/vmm.h"

namespace abox::daemon {

struct SandboxOptions {
  absl::Duration boot_timeout = absl::Seconds(90);
  // Restore creates from a golden snapshot of their image (made by the first create of each
  // image and size) instead of booting, when the VMM can.
  bool golden_snapshots = true;
  // Give every new or restored guest its own identity before any command runs (RNG reseeded,
  // clock, hostname, machine-id; runtime/guest_identity.h). aboxd turns it on; it stays off
  // for a fake VMM, whose "guest" is this host (never set its clock).
  bool guest_identity = false;
  // aboxd's stop pauses the running sandboxes (saved to disk, the VMs end) instead of leaving
  // them running; they resume on their next command or `abox resume`, after a host reboot too.
  bool pause_on_stop = false;
  // An idle timeout pauses the sandbox instead of stopping it.
  bool pause_when_idle = false;
  // What all checkpoints together may take of the host's disk.
  uint64_t checkpoint_budget_bytes = uint64_t{20} << 30;
  // How long a re-attached guest agent may take to answer again.
  absl::Duration attach_timeout = absl::Seconds(15);
  // An exec started with kill_on_disconnect that no client attached to within this long is
  // killed (its client died between the create and the attach).
  absl::Duration exec_attach_deadline = absl::Seconds(10);
  // How long a create's setup commands may take together, unless setup.timeout_seconds says.
  absl::Duration setup_timeout = absl::Minutes(10);
  // How often TTL and idle timeouts are checked.
  absl::Duration reap_interval = absl::Seconds(1);
  // Tests with a fake VMM: boot these files for every image instead of $ABOX_HOME/images.
  std::optional<image::ImageFiles> image_files;
  // The agent binary in the guest that runs the workspace tools (tests with a fake VMM, whose
  // guest is this host, pass the built abox-guest).
  std::string guest_tool_path = runtime::kGuestAgentPath;
  // How long each guest workspace tool (ws manifest / unpack / pack) may run before it is
  // killed and its operation fails (see runtime::GuestToolDeadline).
  runtime::GuestToolDeadline guest_tool_deadline;
  // Workspace operations (sync, diff, apply, pull, an exec's sync) one sandbox may have in
  // flight; more are refused at once, so a guest that stalls them holds at most this many of
  // the daemon's blocking workers and other sandboxes' stop, rm and exec still get one.
  int max_guest_operations_per_sandbox = 2;
  // Workspace operations of all sandboxes together; aboxd has 8 blocking workers, and this
  // keeps 2 of them for stop, rm and exec even when several guests stall theirs.
  int max_guest_operations = 6;
  // Tests: stands in for the workspace tools of every workspace operation (a hostile guest's
  // crafted manifests and packs), given the real ones; null, or a null result: the real ones.
  std::function<std::unique_ptr<workspace::GuestTools>(workspace::GuestTools& real)>
      wrap_guest_tools;
};

struct SandboxContext {
  SandboxOptions options;
  base::HostLayout layout;
  base::Clock* clock;
  vmm::Vmm* vmm;
  store::SandboxRepo* sandboxes;
  store::ExecRepo* execs;
  StateRecorder* recorder;
  Registry* registry;
  EventBus* events;
  Ledger* ledger;
  TimerQueue* timers;
  WorkspaceService* workspaces;  // null: no workspace support
  // Null: every create boots (no golden snapshots).
  GoldenTemplates* templates = nullptr;
  // Null: no warm pool (every create starts its VM).
  WarmPool* pool = nullptr;
  // Null: no checkpoints, restores or forks (the VMM cannot save state).
  CheckpointStore* checkpoints = nullptr;
  // Null: sandboxes get no egress (every tunnel is reset) and egress requests are refused.
  EgressService* egress = nullptr;
  // Null: sandboxes cannot be given secrets (a create asking for one is refused).
  SecretGrants* grants = nullptr;
};

}  // namespace abox::daemon
