#include "src/daemon/services/model_grants.h"

#include <openssl/rand.h>

#include <algorithm>
#include <array>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "src/proto/messages.h"

namespace abox::daemon {

absl::StatusOr<std::vector<std::string>> CheckModelApis(const std::vector<std::string>& requested) {
  std::vector<std::string> apis;
  for (const std::string& api : requested) {
    if (api != kAnthropicApi && api != kOpenAiApi) {
      return absl::InvalidArgumentError(
          absl::StrCat("models: \"", absl::CHexEscape(api.substr(0, 64)),
                       "\" is not a model API the broker serves: use \"anthropic\" or \"openai\""));
    }
    if (std::find(apis.begin(), apis.end(), api) == apis.end()) {
      apis.push_back(api);
    }
  }
  std::sort(apis.begin(), apis.end());
  return apis;
}

absl::StatusOr<std::string> NewBrokerToken() {
  std::array<unsigned char, 32> random{};
  if (RAND_bytes(random.data(), static_cast<int>(random.size())) != 1) {
    return absl::InternalError(
        "OpenSSL's random generator failed (RAND_bytes); no broker token was made. Check that "
        "/dev/urandom (getrandom) works on this host");
  }
  return absl::StrCat("abox-broker-",
                      absl::BytesToHexString(absl::string_view(
                          reinterpret_cast<const char*>(random.data()), random.size())));
}

std::string GuestBrokerUrl() { return absl::StrCat("http://127.0.0.1:", proto::kModelBrokerPort); }

std::map<std::string, std::string> ModelEnv(const store::SandboxGrants& grants) {
  std::map<std::string, std::string> env;
  if (grants.models.empty()) {
    return env;
  }
  const std::string base = GuestBrokerUrl();
  for (const std::string& api : grants.models) {
    if (api == kAnthropicApi) {
      env["ANTHROPIC_BASE_URL"] = absl::StrCat(base, "/anthropic");
      env["ANTHROPIC_API_KEY"] = grants.model_token;
      // Claude Code: no telemetry, error reports, update checks or other calls the broker
      // would refuse anyway.
      env["CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"] = "1";
      env["DISABLE_AUTOUPDATER"] = "1";
      env["DISABLE_TELEMETRY"] = "1";
      env["DISABLE_ERROR_REPORTING"] = "1";
      // Claude Code refuses to skip its permission prompts as root unless told it runs in a
      // sandbox, which it does.
      env["IS_SANDBOX"] = "1";
    } else if (api == kOpenAiApi) {
      env["OPENAI_BASE_URL"] = absl::StrCat(base, "/openai/v1");
      env["OPENAI_API_KEY"] = grants.model_token;
    }
  }
  env["ABOX_MODEL_BROKER"] = base;
  return env;
}

}  // namespace abox::daemon
