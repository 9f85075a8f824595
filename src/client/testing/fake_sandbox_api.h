// An in-memory imitation of aboxd's sandbox API (docs/openapi.yaml) for testing clients without
// VMs: sandboxes are records, and an exec runs its argv as a local process (no PTY, no user
// switch) whose output is kept and streamed as the API's NDJSON. Events are kept and served as
// SSE. Enough of the contract for the CLI's tests; not a model of the daemon's internals.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "src/daemon/http/router.h"

namespace abox::client::testing {

class FakeSandboxApi final {
 public:
  FakeSandboxApi();
  // Kills the processes of running execs and joins their threads. Stop the server first.
  ~FakeSandboxApi();
  FakeSandboxApi(const FakeSandboxApi&) = delete;
  FakeSandboxApi& operator=(const FakeSandboxApi&) = delete;

  // Registers the /v1/sandboxes... and /v1/events routes.
  void AddRoutes(daemon::http::Router& router);

  // Sandboxes in state creating or ready.
  [[nodiscard]] int RunningSandboxes();

  struct State;

 private:
  std::shared_ptr<State> state_;
};

}  // namespace abox::client::testing
