// aboxd's workspaces: binds a host directory to a sandbox, syncs it in (at create and before
// every exec), and reads the agent's work back out (diff, apply, pull) with backups and undo.
// Operations on one sandbox's workspace run one at a time; different sandboxes in parallel.
// The host tree is written only by apply / pull / undo, through workspace::HostTree's guards.
#pragma once

#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "src/workspace/apply.h"
#include "src/workspace/artifacts.h"
#include "src/workspace/diff_render.h"
#include "src/workspace/guest_changes.h"
#include "src/workspace/guest_tools.h"
#include "src/workspace/store_budget.h"
#include "src/workspace/sync.h"
#include "src/workspace/workspace_state.h"

namespace abox::daemon {

struct DiffOutcome {
  std::vector<workspace::FileDiff> files;
  size_t ignored = 0;
};

struct ApplyRequest {
  std::vector<std::string> paths;
  bool dry_run = false;
  bool markers = false;           // write conflicts with markers instead of refusing
  bool allow_exec_files = false;  // let CI / build / hook files through
};

struct PullRequest {
  std::vector<std::string> paths;  // at least one
  std::string to;                  // another host directory; empty = the bound one
  bool force = false;
};

struct ApplyOutcome {
  workspace::ApplyPlan plan;
  workspace::ApplyResult result;  // result.artifact_id empty: dry run or nothing written
};

class WorkspaceService final {
 public:
  // `home`: $ABOX_HOME (workspaces/ and artifacts/ go there). `budget`: what each sandbox's
  // guest content may take of the host's disk (a fetch beyond it is refused with 507).
  static absl::StatusOr<std::unique_ptr<WorkspaceService>> Create(
      const std::string& home, workspace::StoreBudget budget = {});

  // After a crash: finishes or rolls back interrupted applies (see workspace::ArtifactStore).
  [[nodiscard]] absl::Status Recover();

  // A new sandbox's binding (validated; the state dir is created).
  [[nodiscard]] absl::Status Bind(const std::string& sandbox_id, const workspace::Binding& binding);
  // The binding as the API shows it, or null when the sandbox has no workspace.
  [[nodiscard]] nlohmann::json Describe(const std::string& sandbox_id);
  [[nodiscard]] bool Has(const std::string& sandbox_id);
  // Checkpoints. SaveStateTo copies the workspace state into `dir` (which must not exist);
  // RestoreStateFrom makes such a copy the sandbox's state again (its base as it was then, so
  // a diff after a restore compares with that); BindCopy gives a new sandbox (a fork) a copy
  // as its own.
  [[nodiscard]] absl::Status SaveStateTo(const std::string& sandbox_id,
                                         const std::filesystem::path& dir);
  [[nodiscard]] absl::Status RestoreStateFrom(const std::string& sandbox_id,
                                              const std::filesystem::path& dir);
  [[nodiscard]] absl::Status BindCopy(const std::string& sandbox_id,
                                      const std::filesystem::path& dir);
  // The sandbox is gone: its workspace state goes too (artifacts stay, for undo).
  [[nodiscard]] absl::Status Forget(const std::string& sandbox_id);

  // Makes the check a sync of `sandbox_id` runs over everything it is about to send, before
  // any of it reaches the guest (a null result: nothing to check).
  using SyncCheckMaker =
      std::function<absl::StatusOr<workspace::ContentCheckFn>(const std::string& sandbox_id)>;
  // Set once by the composition root, before the first sync (issue 15: no stored secret's
  // value is synced in; see SecretGrants::SyncCheck).
  void set_sync_check(SyncCheckMaker maker) { sync_check_ = std::move(maker); }

  [[nodiscard]] absl::StatusOr<workspace::SyncReport> Sync(
      const std::string& sandbox_id, workspace::GuestTools& tools,
      const workspace::SyncProgressFn& progress = nullptr);
  [[nodiscard]] absl::StatusOr<DiffOutcome> Diff(const std::string& sandbox_id,
                                                 workspace::GuestTools& tools,
                                                 const std::vector<std::string>& paths,
                                                 const workspace::DiffOptions& options);
  [[nodiscard]] absl::StatusOr<ApplyOutcome> Apply(const std::string& sandbox_id,
                                                   workspace::GuestTools& tools,
                                                   const ApplyRequest& request);
  [[nodiscard]] absl::StatusOr<ApplyOutcome> Pull(const std::string& sandbox_id,
                                                  workspace::GuestTools& tools,
                                                  const PullRequest& request);

  [[nodiscard]] absl::StatusOr<std::vector<workspace::ArtifactSummary>> Artifacts();
  [[nodiscard]] absl::StatusOr<workspace::UndoResult> Undo(const std::string& artifact_id,
                                                           bool force);

 private:
  struct Slot {
    std::mutex mu;                                     // one operation at a time on this workspace
    std::unique_ptr<workspace::WorkspaceState> state;  // loaded on first use
    // What Describe shows, refreshed after each operation, so that listing sandboxes never
    // waits for a long sync or apply.
    std::mutex info_mu;
    nlohmann::json info;
  };
  static void RefreshInfo(Slot& slot);
  WorkspaceService(std::string home, workspace::StoreBudget budget,
                   workspace::ArtifactStore artifacts);
  // The guest's changes within the budget (its refusal carries "insufficient_storage").
  absl::StatusOr<workspace::GuestChanges> Fetch(workspace::WorkspaceState& state,
                                                workspace::GuestTools& tools,
                                                const std::vector<std::string>& paths);
  // The slot with its state loaded, locked; kNotFound when the sandbox has no workspace.
  absl::StatusOr<std::pair<std::shared_ptr<Slot>, std::unique_lock<std::mutex>>> Lock(
      const std::string& sandbox_id);
  std::string StateDir(const std::string& sandbox_id) const;

  std::string home_;
  workspace::StoreBudget budget_;
  SyncCheckMaker sync_check_;
  std::mutex mu_;  // guards slots_
  std::map<std::string, std::shared_ptr<Slot>> slots_;
  std::mutex artifacts_mu_;
  workspace::ArtifactStore artifacts_;
};

}  // namespace abox::daemon
