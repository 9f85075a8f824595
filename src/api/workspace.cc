#include "src/api/workspace.h"

#include <utility>

#include "src/api/errors.h"
#include "src/api/json_body.h"
#include "src/api/wire.h"
#include "src/base/status_macros.h"

namespace abox::api {
namespace {

void ReadFileDiff(AnswerReader& r, FileDiff& f) {
  r.String("path", &f.path);
  r.String("status", &f.status);
  r.String("old_kind", &f.old_kind);
  r.String("new_kind", &f.new_kind);
  r.Int("old_mode", &f.old_mode);
  r.Int("new_mode", &f.new_mode);
  r.Bool("binary", &f.binary);
  r.Int("additions", &f.additions);
  r.Int("deletions", &f.deletions);
  r.String("exec_sensitive", &f.exec_sensitive);
  r.String("patch", &f.patch);
  r.Bool("control_characters", &f.control_characters);
}

void ReadChange(AnswerReader& r, PlannedChange& c) {
  r.String("path", &c.path);
  r.String("action", &c.action);
  r.String("reason", &c.reason);
  r.Bool("exec_sensitive", &c.exec_sensitive);
  r.Bool("markers", &c.markers);
}

void ReadArtifact(AnswerReader& r, Artifact& a) {
  r.String("id", &a.id);
  r.String("created_at", &a.created_at);
  r.String("sandbox", &a.sandbox);
  r.String("host_root", &a.host_root);
  r.String("kind", &a.kind);
  r.String("state", &a.state);
  r.Int("files", &a.files);
}

}  // namespace

nlohmann::json ToJson(const SyncReport& r) {
  return {{"changed", r.changed}, {"files", r.files},
          {"deleted", r.deleted}, {"total_files", r.total_files},
          {"bytes", r.bytes},     {"archive_bytes", r.archive_bytes},
          {"hashed", r.hashed},   {"excluded", r.excluded},
          {"notes", r.notes},     {"duration_ms", r.duration_ms}};
}

absl::StatusOr<SyncReport> DecodeSyncReport(const nlohmann::json& value) {
  AnswerReader r(value);
  SyncReport s;
  r.Bool("changed", &s.changed);
  r.Int("files", &s.files);
  r.Int("deleted", &s.deleted);
  r.Int("total_files", &s.total_files);
  r.Int("bytes", &s.bytes);
  r.Int("archive_bytes", &s.archive_bytes);
  r.Int("hashed", &s.hashed);
  r.StringArray("excluded", &s.excluded);
  r.StringArray("notes", &s.notes);
  r.Int("duration_ms", &s.duration_ms);
  ABOX_RETURN_IF_ERROR(r.status());
  return s;
}

nlohmann::json ToJson(const Diff& diff) {
  nlohmann::json files = nlohmann::json::array();
  for (const FileDiff& f : diff.files) {
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
    if (f.control_characters) {
      j["control_characters"] = *f.control_characters;
    }
    files.push_back(std::move(j));
  }
  return {{"files", std::move(files)}, {"ignored", diff.ignored}};
}

absl::StatusOr<Diff> DecodeDiff(const nlohmann::json& value) {
  AnswerReader r(value);
  Diff d;
  r.ObjectArray("files", [&](AnswerReader& item) {
    FileDiff f;
    ReadFileDiff(item, f);
    d.files.push_back(std::move(f));
  });
  r.Int("ignored", &d.ignored);
  ABOX_RETURN_IF_ERROR(r.status());
  return d;
}

nlohmann::json ToJson(const ApplyRequest& a) {
  nlohmann::json j = {{"dry_run", a.dry_run},
                      {"conflicts", a.markers ? "markers" : "refuse"},
                      {"allow_exec_files", a.allow_exec_files}};
  if (!a.paths.empty()) {
    j["paths"] = a.paths;
  }
  return j;
}

absl::StatusOr<ApplyRequest> DecodeApplyRequest(absl::string_view body) {
  ABOX_ASSIGN_OR_RETURN(nlohmann::json object,
                        ParseObject(std::string_view(body.data(), body.size())));
  Reader r(object);
  ApplyRequest a;
  std::string conflicts = "refuse";
  r.OptionalStringArray("paths", &a.paths, 100000);
  r.OptionalBool("dry_run", &a.dry_run);
  r.OptionalString("conflicts", &conflicts, 16);
  r.OptionalBool("allow_exec_files", &a.allow_exec_files);
  ABOX_RETURN_IF_ERROR(r.Finish());
  if (conflicts != "refuse" && conflicts != "markers") {
    return FieldError("conflicts", "conflicts must be \"refuse\" or \"markers\"");
  }
  a.markers = conflicts == "markers";
  return a;
}

nlohmann::json ToJson(const PullRequest& p) {
  nlohmann::json j = {{"paths", p.paths}, {"force", p.force}};
  if (!p.to.empty()) {
    j["to"] = p.to;
  }
  return j;
}

absl::StatusOr<PullRequest> DecodePullRequest(absl::string_view body) {
  ABOX_ASSIGN_OR_RETURN(nlohmann::json object,
                        ParseObject(std::string_view(body.data(), body.size())));
  Reader r(object);
  PullRequest p;
  r.RequiredStringArray("paths", &p.paths, 1, 100000);
  r.OptionalString("to", &p.to, 4096);
  r.OptionalBool("force", &p.force);
  ABOX_RETURN_IF_ERROR(r.Finish());
  return p;
}

nlohmann::json ToJson(const ApplyResult& a) {
  nlohmann::json changes = nlohmann::json::array();
  for (const PlannedChange& c : a.changes) {
    nlohmann::json j = {{"path", c.path},
                        {"action", c.action},
                        {"reason", c.reason},
                        {"exec_sensitive", c.exec_sensitive}};
    if (c.markers) {
      j["markers"] = true;
    }
    changes.push_back(std::move(j));
  }
  return {{"kind", a.kind},
          {"dry_run", a.dry_run},
          {"changes", std::move(changes)},
          {"conflicts", a.conflicts},
          {"exec_files_refused", a.exec_files_refused},
          {"written", a.written},
          {"unresolved", a.unresolved},
          {"notes", a.notes},
          {"artifact", a.artifact.empty() ? nlohmann::json(nullptr) : nlohmann::json(a.artifact)}};
}

absl::StatusOr<ApplyResult> DecodeApplyResult(const nlohmann::json& value) {
  AnswerReader r(value);
  ApplyResult a;
  r.String("kind", &a.kind);
  r.Bool("dry_run", &a.dry_run);
  r.ObjectArray("changes", [&](AnswerReader& item) {
    PlannedChange c;
    ReadChange(item, c);
    a.changes.push_back(std::move(c));
  });
  r.StringArray("conflicts", &a.conflicts);
  r.StringArray("exec_files_refused", &a.exec_files_refused);
  r.Int("written", &a.written);
  r.StringArray("unresolved", &a.unresolved);
  r.StringArray("notes", &a.notes);
  r.String("artifact", &a.artifact);
  ABOX_RETURN_IF_ERROR(r.status());
  return a;
}

nlohmann::json ArtifactListToJson(const std::vector<Artifact>& artifacts) {
  nlohmann::json items = nlohmann::json::array();
  for (const Artifact& a : artifacts) {
    items.push_back({{"id", a.id},
                     {"created_at", a.created_at},
                     {"sandbox", a.sandbox},
                     {"host_root", a.host_root},
                     {"kind", a.kind},
                     {"state", a.state},
                     {"files", a.files}});
  }
  return {{"artifacts", std::move(items)}};
}

absl::StatusOr<std::vector<Artifact>> DecodeArtifactList(const nlohmann::json& value) {
  AnswerReader r(value);
  std::vector<Artifact> artifacts;
  r.ObjectArray("artifacts", [&](AnswerReader& item) {
    Artifact a;
    ReadArtifact(item, a);
    artifacts.push_back(std::move(a));
  });
  ABOX_RETURN_IF_ERROR(r.status());
  return artifacts;
}

nlohmann::json UndoRequestToJson(bool force) { return {{"force", force}}; }

absl::StatusOr<bool> DecodeUndoRequest(absl::string_view body) {
  ABOX_ASSIGN_OR_RETURN(nlohmann::json object,
                        ParseObject(std::string_view(body.data(), body.size())));
  Reader r(object);
  bool force = false;
  r.OptionalBool("force", &force);
  ABOX_RETURN_IF_ERROR(r.Finish());
  return force;
}

nlohmann::json ToJson(const UndoResult& u) {
  return {{"id", u.id}, {"files", u.files}, {"notes", u.notes}};
}

absl::StatusOr<UndoResult> DecodeUndoResult(const nlohmann::json& value) {
  AnswerReader r(value);
  UndoResult u;
  r.String("id", &u.id);
  r.Int("files", &u.files);
  r.StringArray("notes", &u.notes);
  ABOX_RETURN_IF_ERROR(r.status());
  return u;
}

}  // namespace abox::api
