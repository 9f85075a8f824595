#include "src/daemon/handlers/workspace_json.h"

#include "absl/time/time.h"
#include "src/api/workspace.h"
#include "src/workspace/apply.h"
#include "src/workspace/paths.h"

namespace abox::daemon {

nlohmann::json SyncReportToJson(const workspace::SyncReport& r) {
  return api::ToJson(api::SyncReport{
      .changed = r.changed,
      .files = static_cast<int64_t>(r.files),
      .deleted = static_cast<int64_t>(r.deleted),
      .total_files = static_cast<int64_t>(r.total_files),
      .bytes = static_cast<int64_t>(r.bytes),
      .archive_bytes = static_cast<int64_t>(r.archive_bytes),
      .hashed = static_cast<int64_t>(r.hashed),
      .excluded = r.excluded,
      .notes = r.notes,
      .duration_ms = absl::ToInt64Milliseconds(r.duration),
  });
}

nlohmann::json DiffToJson(const DiffOutcome& diff) {
  api::Diff out;
  out.ignored = static_cast<int64_t>(diff.ignored);
  for (const workspace::FileDiff& f : diff.files) {
    out.files.push_back({.path = f.path,
                         .status = f.status,
                         .old_kind = f.old_kind,
                         .new_kind = f.new_kind,
                         .old_mode = f.old_mode,
                         .new_mode = f.new_mode,
                         .binary = f.binary,
                         .additions = f.additions,
                         .deletions = f.deletions,
                         .exec_sensitive = f.exec_sensitive,
                         .patch = f.patch});
  }
  return api::ToJson(out);
}

api::Artifact ArtifactOf(const workspace::ArtifactSummary& a) {
  return {.id = a.id,
          .created_at = a.created,
          .sandbox = a.sandbox,
          .host_root = a.host_root,
          .kind = a.kind,
          .state = a.state,
          .files = static_cast<int64_t>(a.files)};
}

nlohmann::json UndoToJson(const workspace::UndoResult& u) {
  return api::ToJson(
      api::UndoResult{.id = u.id, .files = static_cast<int64_t>(u.restored), .notes = u.notes});
}

nlohmann::json ApplyToJson(const ApplyOutcome& outcome) {
  api::ApplyResult out;
  out.kind = outcome.plan.kind;
  out.dry_run = outcome.result.dry_run;
  for (const workspace::PlannedChange& c : outcome.plan.changes) {
    out.changes.push_back({.path = c.path,
                           .action = std::string(workspace::ActionName(c.action)),
                           .reason = c.reason,
                           .exec_sensitive = c.exec_sensitive,
                           .markers = c.markers});
    if (c.action == workspace::PlannedChange::Action::kConflict) {
      out.conflicts.push_back(c.path);
    } else if (c.action == workspace::PlannedChange::Action::kSkipExecFile) {
      out.exec_files_refused.push_back(c.path);
    }
  }
  out.written = static_cast<int64_t>(outcome.result.written);
  out.unresolved = outcome.result.unresolved;
  out.notes = outcome.result.notes;
  out.artifact = outcome.result.artifact_id;
  return api::ToJson(out);
}

void RespondApply(http::Responder& res, const ApplyOutcome& outcome) {
  res.Json(200, ApplyToJson(outcome));
}

}  // namespace abox::daemon
