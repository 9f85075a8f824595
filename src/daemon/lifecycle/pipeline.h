// A list of named steps, each with its undo, run in order; when one fails, the undos of the
// steps that ran are run in reverse and the failure is returned naming the step. The sandbox
// create is one (see services/create_pipeline.h); snapshot restore and the warm pool add or
// replace steps instead of writing their own rollback.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace abox::daemon {

// Not thread-safe: one thread runs it at a time (it may move between threads between Run()s).
class Pipeline final {
 public:
  using RunFn = std::function<absl::Status()>;
  // Gets the failure that unwinds the pipeline (what the undo may record, e.g. a failed state).
  using UndoFn = std::function<void(const absl::Status& why)>;
  // Tests: called before each step; a non-OK status fails the step instead of running it.
  using Injector = std::function<absl::Status(absl::string_view step)>;

  Pipeline() = default;
  Pipeline(const Pipeline&) = delete;
  Pipeline& operator=(const Pipeline&) = delete;
  // A pipeline dropped half-way (never finished, never failed) unwinds what it did.
  ~Pipeline();

  void Add(std::string name, RunFn run, UndoFn undo = nullptr);
  void set_injector(Injector injector) { injector_ = std::move(injector); }

  // Runs the next steps through the one named `through` (all the rest when empty). On a failure
  // every step done so far is undone, in reverse, and the failure is returned as it is (the
  // step's name is failed_step()). After a failure, Run() returns that failure again.
  [[nodiscard]] absl::Status Run(absl::string_view through = "");

  // Undoes every step done so far, in reverse, with `why` (a create abandoned by a shutdown).
  void Abandon(const absl::Status& why);

  [[nodiscard]] const std::string& failed_step() const { return failed_step_; }
  [[nodiscard]] bool finished() const { return next_ == steps_.size() && failure_.ok(); }
  // How long each step that ran took, in milliseconds (steady clock), in order: where a slow
  // create spent its time (the ready event carries it).
  [[nodiscard]] const std::vector<std::pair<std::string, double>>& step_ms() const {
    return step_ms_;
  }

 private:
  struct Step {
    std::string name;
    RunFn run;
    UndoFn undo;
  };
  void Unwind(const absl::Status& why);

  std::vector<Step> steps_;
  size_t next_ = 0;  // steps [0, next_) ran
  absl::Status failure_;
  std::string failed_step_;
  Injector injector_;
  std::vector<std::pair<std::string, double>> step_ms_;
};

}  // namespace abox::daemon
