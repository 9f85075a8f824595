#include "src/daemon/handlers/workspace_json.h"

#include "absl/time/time.h"
#include "src/workspace/apply.h"
#include "src/workspace/paths.h"

namespace abox::daemon {

nlohmann::json SyncReportToJson(const workspace::SyncReport& r) {
  return {{"changed", r.changed}, {"files", r.files},
          {"deleted", r.deleted}, {"total_files", r.total_files},
          {"bytes", r.bytes},     {"archive_bytes", r.archive_bytes},
          {"hashed", r.hashed},   {"excluded", r.excluded},
          {"notes", r.notes},     {"duration_ms", absl::ToInt64Milliseconds(r.duration)}};
}

nlohmann::json DiffToJson(const DiffOutcome& diff) {
  nlohmann::json files = nlohmann::json::array();
  for (const workspace::FileDiff& f : diff.files) {
    nlohmann::json j = {
        {"path", f.path},         {"status", f.status},       {"old_kind", f.old_kind},
        {"new_kind", f.new_kind}, {"old_mode", f.old_mode},   {"new_mode", f.new_mode},
        {"binary", f.binary},     {"additions", f.additions}, {"deletions", f.deletions}};
    if (f.exec_sensitive) {
      j["exec_sensitive"] = *f.exec_sensitive;
    }
    if (!f.patch.empty()) {
      j["patch"] = f.patch;
    }
    files.push_back(std::move(j));
  }
  return {{"files", std::move(files)}, {"ignored", diff.ignored}};
}

nlohmann::json ArtifactToJson(const workspace::ArtifactSummary& a) {
  return {{"id", a.id},           {"created_at", a.created},
          {"sandbox", a.sandbox}, {"host_root", a.host_root},
          {"kind", a.kind},       {"state", a.state},
          {"files", a.files}};
}

nlohmann::json UndoToJson(const workspace::UndoResult& u) {
  return {{"id", u.id}, {"files", u.restored}, {"notes", u.notes}};
}

}  // namespace abox::daemon

namespace abox::daemon {

nlohmann::json ApplyToJson(const ApplyOutcome& outcome) {
  nlohmann::json changes = nlohmann::json::array();
  nlohmann::json conflicts = nlohmann::json::array();
  nlohmann::json blocked = nlohmann::json::array();
  for (const workspace::PlannedChange& c : outcome.plan.changes) {
    nlohmann::json j = {{"path", c.path},
                        {"action", std::string(workspace::ActionName(c.action))},
                        {"reason", c.reason},
                        {"exec_sensitive", c.exec_sensitive}};
    if (c.markers) {
      j["markers"] = true;
    }
    if (c.action == workspace::PlannedChange::Action::kConflict) {
      conflicts.push_back(c.path);
    } else if (c.action == workspace::PlannedChange::Action::kSkipExecFile) {
      blocked.push_back(c.path);
    }
    changes.push_back(std::move(j));
  }
  nlohmann::json j = {{"kind", outcome.plan.kind},
                      {"dry_run", outcome.result.dry_run},
                      {"changes", std::move(changes)},
                      {"conflicts", std::move(conflicts)},
                      {"exec_files_refused", std::move(blocked)},
                      {"written", outcome.result.written},
                      {"unresolved", outcome.result.unresolved},
                      {"notes", outcome.result.notes}};
  j["artifact"] = outcome.result.artifact_id.empty() ? nlohmann::json(nullptr)
                                                     : nlohmann::json(outcome.result.artifact_id);
  return j;
}

void RespondApply(http::Responder& res, const ApplyOutcome& outcome) {
  res.Json(200, ApplyToJson(outcome));
}

}  // namespace abox::daemon
