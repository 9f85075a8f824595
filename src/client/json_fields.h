// Type-checked reads of fields in the API's JSON answers. nlohmann's value()/get() throw on a
// type mismatch; these return a fallback instead, so an unexpected answer from the daemon prints
// as a blank instead of crashing the client.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "nlohmann/json.hpp"

namespace abox::client {

// The member `key` of `object`, or nullptr when `object` is not an object or has no such member.
[[nodiscard]] const nlohmann::json* JsonMember(const nlohmann::json& object, absl::string_view key);

// The string member `key`, or `fallback` when absent or not a string.
[[nodiscard]] std::string JsonString(const nlohmann::json& object, absl::string_view key,
                                     absl::string_view fallback = "");

// The integer member `key` (JSON integers only), or nullopt.
[[nodiscard]] std::optional<int64_t> JsonInt(const nlohmann::json& object, absl::string_view key);

// The number member `key` (integer or floating point), or nullopt.
[[nodiscard]] std::optional<double> JsonNumber(const nlohmann::json& object, absl::string_view key);

// The boolean member `key`, or `fallback`.
[[nodiscard]] bool JsonBool(const nlohmann::json& object, absl::string_view key,
                            bool fallback = false);

// The RFC 3339 time in member `key`, or nullopt when absent or unparsable.
[[nodiscard]] std::optional<absl::Time> JsonTime(const nlohmann::json& object,
                                                 absl::string_view key);

// Parses JSON without exceptions; a discarded value (is_discarded()) when `text` is not JSON.
[[nodiscard]] nlohmann::json ParseJson(absl::string_view text);

// Serialises JSON for the wire; invalid UTF-8 in strings is replaced (U+FFFD), never thrown.
[[nodiscard]] std::string DumpJson(const nlohmann::json& value, int indent = -1);

}  // namespace abox::client
