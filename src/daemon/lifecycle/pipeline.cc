#include "src/daemon/lifecycle/pipeline.h"

namespace abox::daemon {

Pipeline::~Pipeline() {
  if (failure_.ok() && next_ > 0 && next_ < steps_.size()) {
    Unwind(absl::AbortedError("the create was abandoned half-way"));
  }
}

void Pipeline::Add(std::string name, RunFn run, UndoFn undo) {
  steps_.push_back({std::move(name), std::move(run), std::move(undo)});
}

absl::Status Pipeline::Run(absl::string_view through) {
  if (!failure_.ok()) {
    return failure_;
  }
  while (next_ < steps_.size()) {
    Step& step = steps_[next_];
    absl::Status status = injector_ ? injector_(step.name) : absl::OkStatus();
    if (status.ok()) {
      auto started = std::chrono::steady_clock::now();
      status = step.run();
      step_ms_.emplace_back(step.name, std::chrono::duration<double, std::milli>(
                                           std::chrono::steady_clock::now() - started)
                                           .count());
    }
    if (!status.ok()) {
      failed_step_ = step.name;
      failure_ = status;
      Unwind(status);
      return status;
    }
    ++next_;
    if (!through.empty() && step.name == through) {
      break;
    }
  }
  return absl::OkStatus();
}

void Pipeline::Abandon(const absl::Status& why) {
  if (!failure_.ok()) {
    return;
  }
  failure_ = why;
  Unwind(why);
}

void Pipeline::Unwind(const absl::Status& why) {
  while (next_ > 0) {
    --next_;
    if (steps_[next_].undo) {
      steps_[next_].undo(why);
    }
  }
}

}  // namespace abox::daemon
