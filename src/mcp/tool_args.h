// Tool arguments: checking them against the tool's inputSchema (the subset of JSON Schema the
// tools use), and reading them once checked. The arguments come from the model: untrusted.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

namespace abox::mcp {

// kInvalidArgument naming the first argument that breaks `schema`: an unknown property
// (additionalProperties false), a missing required one, a wrong type (type or a list of types:
// string, integer, number, boolean, array, object, null), a value outside minimum / maximum /
// maxLength / enum, or an array item of the wrong type.
[[nodiscard]] absl::Status CheckArguments(const nlohmann::json& schema, const nlohmann::json& args);

// Readers for arguments already checked: the value, or `fallback` when absent or null.
[[nodiscard]] std::string StringArg(const nlohmann::json& args, absl::string_view key,
                                    absl::string_view fallback = "");
[[nodiscard]] int64_t IntArg(const nlohmann::json& args, absl::string_view key, int64_t fallback);
[[nodiscard]] bool BoolArg(const nlohmann::json& args, absl::string_view key, bool fallback);
[[nodiscard]] std::vector<std::string> StringListArg(const nlohmann::json& args,
                                                     absl::string_view key);
[[nodiscard]] std::map<std::string, std::string> StringMapArg(const nlohmann::json& args,
                                                              absl::string_view key);
[[nodiscard]] bool HasArg(const nlohmann::json& args, absl::string_view key);

// Schema builders, so tool definitions stay short.
// {"type":"object","properties":props,"required":required,"additionalProperties":false}.
[[nodiscard]] nlohmann::json ObjectSchema(nlohmann::json properties,
                                          std::vector<std::string> required = {});
// {"type": type, "description": description}.
[[nodiscard]] nlohmann::json Prop(absl::string_view type, absl::string_view description);
// An integer in [min, max].
[[nodiscard]] nlohmann::json IntProp(absl::string_view description, int64_t min, int64_t max);
// An array of strings.
[[nodiscard]] nlohmann::json StringListProp(absl::string_view description);
// The `sandbox` argument every sandbox tool takes.
[[nodiscard]] nlohmann::json SandboxProp();

}  // namespace abox::mcp
