#include "src/daemon/lifecycle/state_recorder.h"

#include "absl/strings/str_cat.h"
#include "spdlog/spdlog.h"
#include "src/base/status_macros.h"
#include "src/store/event_repo.h"

namespace abox::daemon {

absl::StatusOr<store::SandboxRecord> StateRecorder::Insert(const store::SandboxRecord& record) {
  if (record.state != SandboxState::kCreating) {
    return absl::InternalError(absl::StrCat("sandbox ", record.id, " must start as creating"));
  }
  return sandboxes_->Insert(record);
}

absl::Status StateRecorder::Withdraw(absl::string_view id) {
  ABOX_ASSIGN_OR_RETURN(store::SandboxRecord now, sandboxes_->Get(id));
  if (now.state != SandboxState::kCreating) {
    return absl::FailedPreconditionError(
        absl::StrCat("sandbox ", id, " is ", store::SandboxStateName(now.state), ", not creating"));
  }
  return sandboxes_->Delete(id);
}

void StateRecorder::Announce(absl::string_view id, nlohmann::json payload) {
  events_->Publish(id, store::event_type::kCreated, std::move(payload));
}

absl::Status StateRecorder::Transition(absl::string_view id, SandboxState from, SandboxState to,
                                       nlohmann::json payload, absl::string_view failure) {
  const TransitionRule* rule = FindTransition(from, to);
  if (rule == nullptr) {
    absl::Status refused = absl::InternalError(
        absl::StrCat("sandbox ", id, ": the lifecycle has no transition from ",
                     store::SandboxStateName(from), " to ", store::SandboxStateName(to)));
    spdlog::error("{}", std::string(refused.message()));
    return refused;
  }
  if (to == SandboxState::kRemoved) {
    ABOX_ASSIGN_OR_RETURN(store::SandboxRecord now, sandboxes_->Get(id));
    if (now.state != from) {
      return absl::FailedPreconditionError(absl::StrCat("sandbox ", id, " is ",
                                                        store::SandboxStateName(now.state),
                                                        ", not ", store::SandboxStateName(from)));
    }
    ABOX_RETURN_IF_ERROR(sandboxes_->Delete(id));
  } else {
    ABOX_RETURN_IF_ERROR(sandboxes_->TransitionState(id, from, to, failure));
  }
  if (rule->event[0] != '\0') {
    events_->Publish(id, rule->event, std::move(payload));
  }
  return absl::OkStatus();
}

void StateRecorder::Note(const absl::Status& status, absl::string_view what) {
  if (status.ok()) {
    return;
  }
  ++noted_;
  spdlog::warn("{}: {}", std::string(what), status.ToString());
}

}  // namespace abox::daemon
