#include "src/daemon/services/workspace_service.h"

#include <sys/stat.h>

#include <filesystem>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "spdlog/spdlog.h"
#include "src/api/errors.h"
#include "src/base/fenced_remove.h"
#include "src/base/io.h"
#include "src/base/status_macros.h"
#include "src/workspace/guest_changes.h"
#include "src/workspace/host_tree.h"
#include "src/workspace/paths.h"

namespace abox::daemon {
namespace {

constexpr char kWorkspacesDir[] = "workspaces";
constexpr char kArtifactsDir[] = "artifacts";

bool IsSandboxId(absl::string_view id) {
  if (id.size() != 12) {
    return false;
  }
  for (char c : id) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) {
      return false;
    }
  }
  return true;
}

}  // namespace

absl::StatusOr<std::unique_ptr<WorkspaceService>> WorkspaceService::Create(
    const std::string& home, workspace::StoreBudget budget) {
  for (const char* sub : {kWorkspacesDir, kArtifactsDir}) {
    std::string dir = absl::StrCat(home, "/", sub);
    if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
      return base::ErrnoError(absl::StrCat("mkdir(", dir, ")"), errno);
    }
  }
  ABOX_ASSIGN_OR_RETURN(workspace::ArtifactStore artifacts,
                        workspace::ArtifactStore::Open(absl::StrCat(home, "/", kArtifactsDir)));
  return std::unique_ptr<WorkspaceService>(
      new WorkspaceService(home, std::move(budget), std::move(artifacts)));
}

WorkspaceService::WorkspaceService(std::string home, workspace::StoreBudget budget,
                                   workspace::ArtifactStore artifacts)
    : home_(std::move(home)), budget_(std::move(budget)), artifacts_(std::move(artifacts)) {}

absl::StatusOr<workspace::GuestChanges> WorkspaceService::Fetch(
    workspace::WorkspaceState& state, workspace::GuestTools& tools,
    const std::vector<std::string>& paths) {
  absl::StatusOr<workspace::GuestChanges> changes =
      workspace::FetchGuestChanges(state, tools, paths, budget_);
  if (!changes.ok() && workspace::IsStorageRefusal(changes.status())) {
    return api::WithErrorCode(changes.status(), api::kInsufficientStorage);
  }
  return changes;
}

std::string WorkspaceService::StateDir(const std::string& sandbox_id) const {
  return absl::StrCat(home_, "/", kWorkspacesDir, "/", sandbox_id);
}

absl::Status WorkspaceService::Recover() {
  std::lock_guard lock(artifacts_mu_);
  ABOX_ASSIGN_OR_RETURN(std::vector<std::string> rolled_back, artifacts_.RecoverInterrupted());
  for (const std::string& id : rolled_back) {
    spdlog::warn(
        "recovery: apply {} was cut short: the host files it touched are back as they "
        "were before it (abox artifacts)",
        id);
  }
  return absl::OkStatus();
}

absl::Status WorkspaceService::Bind(const std::string& sandbox_id,
                                    const workspace::Binding& binding) {
  if (!IsSandboxId(sandbox_id)) {
    return absl::InternalError(absl::StrCat("not a sandbox id: ", sandbox_id));
  }
  ABOX_ASSIGN_OR_RETURN(std::unique_ptr<workspace::WorkspaceState> state,
                        workspace::WorkspaceState::Create(StateDir(sandbox_id), binding));
  auto slot = std::make_shared<Slot>();
  slot->state = std::move(state);
  RefreshInfo(*slot);
  std::lock_guard lock(mu_);
  slots_[sandbox_id] = std::move(slot);
  return absl::OkStatus();
}

namespace {

absl::Status CopyTree(const std::filesystem::path& from, const std::filesystem::path& to) {
  std::error_code ec;
  if (std::filesystem::exists(to, ec)) {
    return absl::AlreadyExistsError(absl::StrCat(to.string(), " exists already"));
  }
  std::filesystem::copy(from, to, std::filesystem::copy_options::recursive, ec);
  if (ec) {
    return absl::InternalError(
        absl::StrCat("copying ", from.string(), " to ", to.string(), ": ", ec.message()));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status WorkspaceService::SaveStateTo(const std::string& sandbox_id,
                                           const std::filesystem::path& dir) {
  ABOX_ASSIGN_OR_RETURN(auto held, Lock(sandbox_id));
  return CopyTree(StateDir(sandbox_id), dir);
}

absl::Status WorkspaceService::RestoreStateFrom(const std::string& sandbox_id,
                                                const std::filesystem::path& dir) {
  ABOX_ASSIGN_OR_RETURN(auto held, Lock(sandbox_id));
  Slot& slot = *held.first;
  const std::string staged = absl::StrCat(StateDir(sandbox_id), ".restoring");
  (void)base::RemoveUnder(home_, staged);  // a restore a crash cut short
  ABOX_RETURN_IF_ERROR(CopyTree(dir, staged));
  slot.state.reset();
  ABOX_RETURN_IF_ERROR(base::RemoveUnder(home_, StateDir(sandbox_id)));
  std::error_code ec;
  std::filesystem::rename(staged, StateDir(sandbox_id), ec);
  if (ec) {
    return absl::InternalError(
        absl::StrCat("putting back the workspace state of ", sandbox_id, ": ", ec.message()));
  }
  ABOX_ASSIGN_OR_RETURN(slot.state, workspace::WorkspaceState::Open(StateDir(sandbox_id)));
  RefreshInfo(slot);
  return absl::OkStatus();
}

absl::Status WorkspaceService::BindCopy(const std::string& sandbox_id,
                                        const std::filesystem::path& dir) {
  if (!IsSandboxId(sandbox_id)) {
    return absl::InternalError(absl::StrCat("not a sandbox id: ", sandbox_id));
  }
  ABOX_RETURN_IF_ERROR(CopyTree(dir, StateDir(sandbox_id)));
  auto slot = std::make_shared<Slot>();
  ABOX_ASSIGN_OR_RETURN(slot->state, workspace::WorkspaceState::Open(StateDir(sandbox_id)));
  RefreshInfo(*slot);
  std::lock_guard lock(mu_);
  slots_[sandbox_id] = std::move(slot);
  return absl::OkStatus();
}

absl::StatusOr<std::pair<std::shared_ptr<WorkspaceService::Slot>, std::unique_lock<std::mutex>>>
WorkspaceService::Lock(const std::string& sandbox_id) {
  std::shared_ptr<Slot> slot;
  {
    std::lock_guard lock(mu_);
    auto it = slots_.find(sandbox_id);
    if (it != slots_.end()) {
      slot = it->second;
    } else if (IsSandboxId(sandbox_id) && std::filesystem::exists(StateDir(sandbox_id))) {
      slot = std::make_shared<Slot>();  // loaded below, under its own lock
      slots_[sandbox_id] = slot;
    }
  }
  if (slot == nullptr) {
    return absl::NotFoundError(absl::StrCat(
        "sandbox ", sandbox_id, " has no workspace: create it with abox create -w DIR"));
  }
  std::unique_lock lock(slot->mu);
  if (slot->state == nullptr) {
    ABOX_ASSIGN_OR_RETURN(slot->state, workspace::WorkspaceState::Open(StateDir(sandbox_id)));
    RefreshInfo(*slot);
  }
  return std::make_pair(std::move(slot), std::move(lock));
}

bool WorkspaceService::Has(const std::string& sandbox_id) {
  {
    std::lock_guard lock(mu_);
    if (slots_.contains(sandbox_id)) {
      return true;
    }
  }
  return IsSandboxId(sandbox_id) && std::filesystem::exists(StateDir(sandbox_id));
}

void WorkspaceService::RefreshInfo(Slot& slot) {
  const workspace::WorkspaceState& s = *slot.state;
  nlohmann::json j = {{"path", s.binding().host_root},
                      {"guest_path", s.binding().guest_path},
                      {"syncs", s.sync_count()},
                      {"files", s.base().size()}};
  if (s.last_sync() != absl::InfinitePast()) {
    j["last_sync_at"] =
        absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", s.last_sync(), absl::UTCTimeZone());
  }
  if (!s.binding().exclude_add.empty()) {
    j["exclude"] = s.binding().exclude_add;
  }
  if (!s.binding().exclude_remove.empty()) {
    j["include"] = s.binding().exclude_remove;
  }
  if (s.binding().git_history) {
    j["git_history"] = true;
  }
  std::lock_guard lock(slot.info_mu);
  slot.info = std::move(j);
}

nlohmann::json WorkspaceService::Describe(const std::string& sandbox_id) {
  std::shared_ptr<Slot> slot;
  {
    std::lock_guard lock(mu_);
    if (auto it = slots_.find(sandbox_id); it != slots_.end()) {
      slot = it->second;
    }
  }
  if (slot != nullptr) {
    std::lock_guard lock(slot->info_mu);
    if (!slot->info.is_null()) {
      return slot->info;
    }
  }
  if (!Has(sandbox_id)) {
    return nullptr;
  }
  // First look after a restart: load it (waits only if an operation is loading it too).
  auto locked = Lock(sandbox_id);
  if (!locked.ok()) {
    return {{"error", std::string(locked.status().message())}};
  }
  std::lock_guard lock(locked->first->info_mu);
  return locked->first->info;
}

absl::Status WorkspaceService::Forget(const std::string& sandbox_id) {
  if (!IsSandboxId(sandbox_id)) {
    return absl::OkStatus();
  }
  std::shared_ptr<Slot> slot;
  {
    std::lock_guard lock(mu_);
    auto it = slots_.find(sandbox_id);
    if (it != slots_.end()) {
      slot = it->second;
      slots_.erase(it);
    }
  }
  std::unique_lock<std::mutex> held;
  if (slot != nullptr) {
    held = std::unique_lock(slot->mu);  // wait for an operation in flight
  }
  return base::RemoveUnder(home_, StateDir(sandbox_id));
}

absl::StatusOr<workspace::SyncReport> WorkspaceService::Sync(
    const std::string& sandbox_id, workspace::GuestTools& tools,
    const workspace::SyncProgressFn& progress) {
  ABOX_ASSIGN_OR_RETURN(auto locked, Lock(sandbox_id));
  workspace::ContentCheckFn check;
  if (sync_check_) {
    ABOX_ASSIGN_OR_RETURN(check, sync_check_(sandbox_id));
  }
  absl::StatusOr<workspace::SyncReport> report =
      workspace::SyncIn(*locked.first->state, tools, progress, check);
  if (report.ok() && report->changed) {
    // The old base's content nothing refers to any more goes (what was fetched from the guest
    // too: the next diff fetches what it still needs).
    if (absl::Status s = workspace::CollectObjects(*locked.first->state, {}); !s.ok()) {
      spdlog::warn("workspace of {}: collecting unreferenced objects failed: {}", sandbox_id,
                   std::string(s.message()));
    }
  }
  RefreshInfo(*locked.first);
  return report;
}

absl::StatusOr<DiffOutcome> WorkspaceService::Diff(const std::string& sandbox_id,
                                                   workspace::GuestTools& tools,
                                                   const std::vector<std::string>& paths,
                                                   const workspace::DiffOptions& options) {
  ABOX_ASSIGN_OR_RETURN(auto locked, Lock(sandbox_id));
  workspace::WorkspaceState& state = *locked.first->state;
  ABOX_ASSIGN_OR_RETURN(workspace::GuestChanges changes, Fetch(state, tools, paths));
  DiffOutcome out;
  ABOX_ASSIGN_OR_RETURN(out.files, workspace::RenderDiff(state.objects(), changes, options));
  out.ignored = changes.ignored;
  return out;
}

absl::StatusOr<std::vector<workspace::ArtifactSummary>> WorkspaceService::Artifacts() {
  std::lock_guard lock(artifacts_mu_);
  return artifacts_.List();
}

}  // namespace abox::daemon

namespace abox::daemon {
namespace {

// After an apply / pull into the bound directory, the base follows what the host now holds
// from the sandbox: the next diff shows only newer work, and the next sync does not send those
// files back. The replaced base entries are kept by artifact so an undo can restore them.
absl::Status AdvanceBase(workspace::WorkspaceState& state, const workspace::ApplyPlan& plan,
                         const workspace::GuestChanges& changes,
                         const workspace::ApplyResult& result) {
  if (result.artifact_id.empty()) {
    return absl::OkStatus();
  }
  std::set<std::string> unresolved(result.unresolved.begin(), result.unresolved.end());
  workspace::Manifest updated;
  workspace::Manifest previous;
  std::vector<std::string> removed;
  std::vector<std::string> touched;
  for (const workspace::PlannedChange& c : plan.changes) {
    using Action = workspace::PlannedChange::Action;
    if (c.action == Action::kSkipExecFile || unresolved.contains(c.path) ||
        (c.action == Action::kConflict && !c.markers)) {
      continue;
    }
    touched.push_back(c.path);
    if (auto it = state.base().find(c.path); it != state.base().end()) {
      previous.emplace(c.path, it->second);
    }
    if (auto it = changes.guest.find(c.path); it != changes.guest.end()) {
      updated.emplace(c.path, it->second);
    } else {
      removed.push_back(c.path);
    }
  }
  ABOX_RETURN_IF_ERROR(state.SaveUndoBase(result.artifact_id, touched, previous));
  return state.UpdateBase(updated, removed);
}

workspace::ApplyOptions OptionsOf(const std::vector<std::string>& paths, bool dry_run) {
  workspace::ApplyOptions o;
  o.paths = paths;
  o.dry_run = dry_run;
  return o;
}

}  // namespace

absl::StatusOr<ApplyOutcome> WorkspaceService::Apply(const std::string& sandbox_id,
                                                     workspace::GuestTools& tools,
                                                     const ApplyRequest& request) {
  ABOX_ASSIGN_OR_RETURN(auto locked, Lock(sandbox_id));
  workspace::WorkspaceState& state = *locked.first->state;
  ABOX_ASSIGN_OR_RETURN(workspace::GuestChanges changes, Fetch(state, tools, request.paths));
  ABOX_ASSIGN_OR_RETURN(workspace::HostTree tree,
                        workspace::HostTree::Open(state.binding().host_root));
  workspace::ApplyOptions options = OptionsOf(request.paths, request.dry_run);
  options.conflicts =
      request.markers ? workspace::ConflictMode::kMarkers : workspace::ConflictMode::kRefuse;
  options.allow_exec_files = request.allow_exec_files;
  ApplyOutcome out;
  ABOX_ASSIGN_OR_RETURN(
      out.plan, workspace::PlanApply(tree, changes.base, changes.guest, state.objects(), options));
  if (request.dry_run) {
    out.result.dry_run = true;  // the plan, conflicts included; nothing written
    return out;
  }
  std::lock_guard lock(artifacts_mu_);
  ABOX_ASSIGN_OR_RETURN(out.result, workspace::Apply(tree, out.plan, state.objects(), artifacts_,
                                                     {.sandbox = sandbox_id,
                                                      .host_root = state.binding().host_root,
                                                      .kind = "apply"}));
  ABOX_RETURN_IF_ERROR(AdvanceBase(state, out.plan, changes, out.result));
  RefreshInfo(*locked.first);
  return out;
}

absl::StatusOr<ApplyOutcome> WorkspaceService::Pull(const std::string& sandbox_id,
                                                    workspace::GuestTools& tools,
                                                    const PullRequest& request) {
  if (request.paths.empty()) {
    return absl::InvalidArgumentError("name the files or directories to pull");
  }
  ABOX_ASSIGN_OR_RETURN(auto locked, Lock(sandbox_id));
  workspace::WorkspaceState& state = *locked.first->state;
  ABOX_ASSIGN_OR_RETURN(workspace::GuestChanges changes, Fetch(state, tools, request.paths));
  workspace::ApplyOptions options = OptionsOf(request.paths, false);
  options.force = request.force;
  bool into_root = request.to.empty();
  std::string root = into_root ? state.binding().host_root : request.to;
  ABOX_ASSIGN_OR_RETURN(workspace::HostTree tree, workspace::HostTree::Open(root));
  ApplyOutcome out;
  if (into_root) {
    ABOX_ASSIGN_OR_RETURN(
        out.plan, workspace::PlanPull(tree, changes.base, changes.guest, state.objects(), options));
  } else {
    ABOX_ASSIGN_OR_RETURN(out.plan,
                          workspace::PlanPullInto(tree, changes.guest, state.objects(), options));
  }
  std::lock_guard lock(artifacts_mu_);
  ABOX_ASSIGN_OR_RETURN(
      out.result,
      workspace::Apply(tree, out.plan, state.objects(), artifacts_,
                       {.sandbox = sandbox_id, .host_root = tree.root(), .kind = "pull"}));
  if (into_root) {
    ABOX_RETURN_IF_ERROR(AdvanceBase(state, out.plan, changes, out.result));
  }
  return out;
}

absl::StatusOr<workspace::UndoResult> WorkspaceService::Undo(const std::string& artifact_id,
                                                             bool force) {
  std::string sandbox;
  workspace::UndoResult result;
  {
    std::lock_guard lock(artifacts_mu_);
    ABOX_ASSIGN_OR_RETURN(workspace::Artifact artifact, artifacts_.Load(artifact_id));
    sandbox = artifact.journal.sandbox;
    ABOX_ASSIGN_OR_RETURN(result, artifacts_.Undo(artifact_id, force));
  }
  if (Has(sandbox)) {
    if (auto locked = Lock(sandbox); locked.ok()) {
      if (absl::Status s = locked->first->state->RestoreUndoBase(artifact_id); !s.ok()) {
        result.notes.push_back(
            absl::StrCat("the sandbox's sync base was not restored: ", s.message()));
      }
    }
  }
  return result;
}

}  // namespace abox::daemon
