// JSON for the workspace routes (docs/openapi.yaml: SyncReport, Diff, ApplyResult, Artifact).
#pragma once

#include "nlohmann/json.hpp"
#include "src/api/workspace.h"
#include "src/daemon/services/workspace_service.h"
#include "src/http/responder.h"

namespace abox::daemon {

[[nodiscard]] nlohmann::json SyncReportToJson(const workspace::SyncReport& report);
[[nodiscard]] nlohmann::json DiffToJson(const DiffOutcome& diff);
[[nodiscard]] api::Artifact ArtifactOf(const workspace::ArtifactSummary& artifact);
[[nodiscard]] nlohmann::json UndoToJson(const workspace::UndoResult& undo);
[[nodiscard]] nlohmann::json ApplyToJson(const ApplyOutcome& outcome);
// 200 with ApplyToJson for a plan that went through (or a dry run).
void RespondApply(http::Responder& res, const ApplyOutcome& outcome);

}  // namespace abox::daemon
