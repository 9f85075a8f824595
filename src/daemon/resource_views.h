// How the daemon's records become the API's resources: store rows (plus the live facts the
// store does not hold) to the api types, which the api codecs then encode. The one place where
// store enums and defaults turn into their wire values.
#pragma once

#include <cstdint>

#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"
#include "src/api/event.h"
#include "src/api/exec.h"
#include "src/api/sandbox.h"
#include "src/store/event_repo.h"
#include "src/store/exec_repo.h"
#include "src/store/sandbox_repo.h"

namespace abox::daemon {

// The sandbox with its live facts; expires_at (the earlier of the TTL and the idle timeout,
// which does not run while a command does) only while it is creating or ready.
[[nodiscard]] api::Sandbox SandboxOf(const store::SandboxRecord& record,
                                     const api::SandboxLive& live = {});
[[nodiscard]] nlohmann::json SandboxJson(const store::SandboxRecord& record,
                                         const api::SandboxLive& live = {});

[[nodiscard]] api::Exec ExecOf(const store::ExecRecord& record);
// The exec with its kept output.
[[nodiscard]] api::Exec ExecOf(const store::ExecWithOutput& exec);
[[nodiscard]] nlohmann::json ExecJson(const store::ExecRecord& record);
[[nodiscard]] nlohmann::json ExecJson(const store::ExecWithOutput& exec);

[[nodiscard]] api::OutputChunk ChunkOf(int64_t seq, store::ExecStream stream,
                                       absl::string_view data);
// Lines of the output stream: an output chunk, and the last line with the ended exec.
[[nodiscard]] nlohmann::json OutputLineJson(int64_t seq, store::ExecStream stream,
                                            absl::string_view data);
[[nodiscard]] nlohmann::json ExitLineJson(const store::ExecRecord& record);

[[nodiscard]] api::Event EventOf(const store::Event& event);
[[nodiscard]] nlohmann::json EventJson(const store::Event& event);

}  // namespace abox::daemon
