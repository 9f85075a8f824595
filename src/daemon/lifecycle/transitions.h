// A sandbox's lifecycle as data: which state may follow which (and the event that says so), and
// what each operation needs of the state. No I/O. Every state change in aboxd goes through
// StateRecorder::Transition, which refuses anything this table does not list; every handler
// asks Decide() before it touches a sandbox. A new state (paused, snapshotting, restoring)
// is new rows here, not new checks in every code path.
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "src/store/sandbox_repo.h"

namespace abox::daemon {

using store::SandboxState;

struct TransitionRule {
  SandboxState from;
  SandboxState to;
  // The event published with the change ("" for none); see store::event_type.
  const char* event;
  // When this happens, for the table in docs/architecture.md.
  const char* when;
};

// Every allowed transition. Creation (no state -> creating, event "created") is
// StateRecorder::Create; removal (-> removed) deletes the record.
[[nodiscard]] const std::vector<TransitionRule>& TransitionTable();

// The rule for from -> to, or null when the table does not allow it.
[[nodiscard]] const TransitionRule* FindTransition(SandboxState from, SandboxState to);

// What callers of the API do to a sandbox.
enum class Operation {
  kExec,       // start a command
  kWorkspace,  // sync, diff, apply, pull, an exec's sync
  kStop,
  kRemove,
  kForceRemove,  // remove, stopping it first if it runs
  kSnapshot,     // checkpoint, fork
  kRestore,      // restore a checkpoint (also into a stopped or failed sandbox)
  kPause,        // save to disk and free the VM
  kResume,       // bring a paused sandbox back
};

enum class Verdict {
  kAllow,
  kAlreadyDone,  // nothing to do: answer with the sandbox as it is (stop of a stopped one)
  kRefuse,       // kFailedPrecondition with the rule's hint
};

struct OperationRule {
  Operation op;
  SandboxState state;
  Verdict verdict;
  // For kRefuse: what follows "sandbox ID (NAME) is STATE" in the error, saying what to do.
  // "{id}" is replaced by the sandbox id.
  const char* hint;
};

// Every (operation, state) pair; a pair missing from the table is refused with a generic hint.
[[nodiscard]] const std::vector<OperationRule>& OperationTable();

struct Decision {
  Verdict verdict;
  absl::Status refusal;  // set for kRefuse
};

// What `op` may do to `sandbox` in its current state.
[[nodiscard]] Decision Decide(Operation op, const store::SandboxRecord& sandbox);

// "sandbox ID (NAME) is STATE".
[[nodiscard]] std::string StateText(const store::SandboxRecord& sandbox);

}  // namespace abox::daemon
