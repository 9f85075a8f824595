// What a sandbox given model APIs (`abox create --model anthropic`, `abox agent`; issue 16) gets:
// a broker token of its own, drawn at create and kept with its grants (store::GrantRepo), and
// the variables every command in it sees, which point agent CLIs at the broker's guest address
// with the token as their "API key". The real key never enters the VM: the broker adds it on
// the host (ModelService).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "src/store/grant_repo.h"

namespace abox::daemon {

// The APIs the broker serves, as the API and CLI name them.
inline constexpr absl::string_view kAnthropicApi = "anthropic";
inline constexpr absl::string_view kOpenAiApi = "openai";

// The request's `models` checked (each "anthropic" or "openai"), without duplicates, sorted.
// InvalidArgument naming the field otherwise.
[[nodiscard]] absl::StatusOr<std::vector<std::string>> CheckModelApis(
    const std::vector<std::string>& requested);

// "abox-broker-" and 64 hex digits from OpenSSL's CSPRNG (Internal when it fails).
[[nodiscard]] absl::StatusOr<std::string> NewBrokerToken();

// The variables agent CLIs read, for the APIs in `grants.models` (empty when none):
// ANTHROPIC_BASE_URL / ANTHROPIC_API_KEY, OPENAI_BASE_URL / OPENAI_API_KEY (the token), and
// those that turn off the CLIs' telemetry and self-update (the broker refuses those routes).
[[nodiscard]] std::map<std::string, std::string> ModelEnv(const store::SandboxGrants& grants);

// The broker's address inside the VM: "http://127.0.0.1:15080".
[[nodiscard]] std::string GuestBrokerUrl();

}  // namespace abox::daemon
