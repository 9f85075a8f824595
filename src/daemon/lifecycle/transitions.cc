#include "src/daemon/lifecycle/transitions.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "src/store/event_repo.h"

namespace abox::daemon {

using S = SandboxState;
namespace event = store::event_type;

const std::vector<TransitionRule>& TransitionTable() {
  static const auto* const table = new std::vector<TransitionRule>{
      {S::kCreating, S::kReady, event::kReady, "booted, workspace synced in, setup done"},
      {S::kCreating, S::kFailed, event::kFailed,
       "a create step failed (its undo ran), or aboxd stopped during the create"},
      {S::kReady, S::kStopping, "", "stop requested, or its TTL or idle timeout passed"},
      {S::kReady, S::kFailed, event::kFailed,
       "the VM died or the guest broke the protocol, or it died while aboxd was not running"},
      {S::kStopping, S::kStopped, event::kStopped, "the VM is gone and its capacity released"},
      {S::kStopped, S::kRemoved, event::kRemoved, "removed: the record and its history go"},
      {S::kFailed, S::kRemoved, event::kRemoved, "removed: the record and its history go"},
      {S::kReady, S::kPaused, event::kPaused,
       "paused: its whole state saved to disk, the VM gone and its capacity released"},
      {S::kPaused, S::kReady, event::kResumed,
       "resumed (abox resume, or a command started in it): restored from the saved state"},
      {S::kPaused, S::kStopped, event::kStopped, "stopped while paused: the saved state goes"},
      {S::kPaused, S::kRemoved, event::kRemoved, "removed: the record and its history go"},
      {S::kPaused, S::kFailed, event::kFailed, "its saved state is gone"},
      {S::kStopped, S::kReady, event::kRestored,
       "restored from one of its checkpoints into a new VM (abox restore)"},
      {S::kFailed, S::kReady, event::kRestored,
       "restored from one of its checkpoints into a new VM (abox restore): nothing is lost when "
       "its VM died"},
  };
  return *table;
}

const TransitionRule* FindTransition(SandboxState from, SandboxState to) {
  for (const TransitionRule& rule : TransitionTable()) {
    if (rule.from == from && rule.to == to) {
      return &rule;
    }
  }
  return nullptr;
}

const std::vector<OperationRule>& OperationTable() {
  using O = Operation;
  using V = Verdict;
  constexpr const char* kNoExec = ": only ready sandboxes run commands (create a new one)";
  constexpr const char* kNoTools = ": the workspace is read through a running sandbox";
  constexpr const char* kBusy = ": retry once it is ready or stopped (watch with abox events)";
  constexpr const char* kNoSnapshot =
      ": checkpoints are taken of, restored into and forked from running sandboxes";
  constexpr const char* kResumeFirst = ": resume it first (abox resume {id})";
  constexpr const char* kNoPause = ": only ready sandboxes can be paused";
  static const auto* const table = new std::vector<OperationRule>{
      {O::kExec, S::kReady, V::kAllow, ""},
      {O::kExec, S::kCreating, V::kRefuse,
       ": only ready sandboxes run commands (wait for it to boot)"},
      {O::kExec, S::kStopping, V::kRefuse, kNoExec},
      {O::kExec, S::kStopped, V::kRefuse, kNoExec},
      {O::kExec, S::kFailed, V::kRefuse, kNoExec},
      // ExecService resumes a paused sandbox before it asks.
      {O::kExec, S::kPaused, V::kRefuse,
       ": only ready sandboxes run commands (resume it: abox resume {id})"},

      {O::kWorkspace, S::kReady, V::kAllow, ""},
      {O::kWorkspace, S::kCreating, V::kRefuse, kNoTools},
      {O::kWorkspace, S::kStopping, V::kRefuse, kNoTools},
      {O::kWorkspace, S::kStopped, V::kRefuse, kNoTools},
      {O::kWorkspace, S::kFailed, V::kRefuse, kNoTools},
      {O::kWorkspace, S::kPaused, V::kRefuse,
       ": the workspace is read through a running sandbox (resume it: abox resume {id})"},

      {O::kStop, S::kReady, V::kAllow, ""},
      {O::kStop, S::kCreating, V::kRefuse, ": wait until it is ready (or failed), then retry"},
      {O::kStop, S::kStopping, V::kRefuse, " and already stopping: retry in a moment"},
      {O::kStop, S::kStopped, V::kAlreadyDone, ""},
      {O::kStop, S::kFailed, V::kAlreadyDone, ""},
      {O::kStop, S::kPaused, V::kAllow, ""},  // its saved state goes

      {O::kRemove, S::kStopped, V::kAllow, ""},
      {O::kRemove, S::kFailed, V::kAllow, ""},
      {O::kRemove, S::kCreating, V::kRefuse, kBusy},
      {O::kRemove, S::kStopping, V::kRefuse, kBusy},
      {O::kRemove, S::kReady, V::kRefuse,
       " (running): stop it first (abox stop {id}) or remove it anyway with force "
       "(abox rm -f {id})"},
      {O::kRemove, S::kPaused, V::kRefuse,
       " (its processes are saved): stop it first (abox stop {id}) or remove it anyway with "
       "force (abox rm -f {id})"},

      {O::kForceRemove, S::kStopped, V::kAllow, ""},
      {O::kForceRemove, S::kFailed, V::kAllow, ""},
      {O::kForceRemove, S::kReady, V::kAllow, ""},
      {O::kForceRemove, S::kPaused, V::kAllow, ""},
      {O::kForceRemove, S::kCreating, V::kRefuse, kBusy},
      {O::kForceRemove, S::kStopping, V::kRefuse, kBusy},

      {O::kSnapshot, S::kReady, V::kAllow, ""},
      {O::kSnapshot, S::kCreating, V::kRefuse, ": wait until it is ready, then retry"},
      {O::kSnapshot, S::kStopping, V::kRefuse, kNoSnapshot},
      {O::kSnapshot, S::kStopped, V::kRefuse, kNoSnapshot},
      {O::kSnapshot, S::kFailed, V::kRefuse, kNoSnapshot},
      {O::kSnapshot, S::kPaused, V::kRefuse, kResumeFirst},

      {O::kRestore, S::kReady, V::kAllow, ""},
      {O::kRestore, S::kStopped, V::kAllow, ""},
      {O::kRestore, S::kFailed, V::kAllow, ""},
      {O::kRestore, S::kCreating, V::kRefuse, ": wait until it is ready, then retry"},
      {O::kRestore, S::kStopping, V::kRefuse, ": retry once it is stopped"},
      {O::kRestore, S::kPaused, V::kRefuse, kResumeFirst},

      {O::kPause, S::kReady, V::kAllow, ""},
      {O::kPause, S::kPaused, V::kAlreadyDone, ""},
      {O::kPause, S::kCreating, V::kRefuse, ": wait until it is ready, then retry"},
      {O::kPause, S::kStopping, V::kRefuse, kNoPause},
      {O::kPause, S::kStopped, V::kRefuse, kNoPause},
      {O::kPause, S::kFailed, V::kRefuse, kNoPause},

      {O::kResume, S::kPaused, V::kAllow, ""},
      {O::kResume, S::kReady, V::kAlreadyDone, ""},
      {O::kResume, S::kCreating, V::kAlreadyDone, ""},  // it will be ready: nothing to resume
      {O::kResume, S::kStopping, V::kRefuse, ": only paused sandboxes are resumed"},
      {O::kResume, S::kStopped, V::kRefuse,
       ": only paused sandboxes are resumed (a stopped one is gone: create a new one)"},
      {O::kResume, S::kFailed, V::kRefuse, ": only paused sandboxes are resumed"},
  };
  return *table;
}

std::string StateText(const store::SandboxRecord& r) {
  return absl::StrCat("sandbox ", r.id, r.name.empty() ? "" : absl::StrCat(" (", r.name, ")"),
                      " is ", store::SandboxStateName(r.state));
}

Decision Decide(Operation op, const store::SandboxRecord& sandbox) {
  for (const OperationRule& rule : OperationTable()) {
    if (rule.op == op && rule.state == sandbox.state) {
      if (rule.verdict != Verdict::kRefuse) {
        return {rule.verdict, absl::OkStatus()};
      }
      return {Verdict::kRefuse,
              absl::FailedPreconditionError(absl::StrCat(
                  StateText(sandbox), absl::StrReplaceAll(rule.hint, {{"{id}", sandbox.id}})))};
    }
  }
  return {Verdict::kRefuse,
          absl::FailedPreconditionError(absl::StrCat(StateText(sandbox), ": not possible now"))};
}

}  // namespace abox::daemon
