// How typed values are kept in columns: times as integer milliseconds since the Unix epoch,
// string maps and string lists as JSON text. Shared by the repositories.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace abox::store {

using StringMap = std::map<std::string, std::string>;

[[nodiscard]] int64_t ToMillis(absl::Time time);
[[nodiscard]] absl::Time FromMillis(int64_t millis);
[[nodiscard]] std::optional<int64_t> ToMillis(std::optional<absl::Time> time);
[[nodiscard]] std::optional<absl::Time> FromMillis(std::optional<int64_t> millis);

// A JSON object of strings. Invalid UTF-8 is replaced by U+FFFD (JSON cannot carry it).
[[nodiscard]] std::string StringMapToJson(const StringMap& map);
// A JSON array of strings, same rule.
[[nodiscard]] std::string StringListToJson(const std::vector<std::string>& list);

// Parse what the functions above wrote. Anything else (not JSON, wrong types) is kDataLoss
// naming `column`: the database holds something abox did not write.
[[nodiscard]] absl::StatusOr<StringMap> StringMapFromJson(absl::string_view json,
                                                          absl::string_view column);
[[nodiscard]] absl::StatusOr<std::vector<std::string>> StringListFromJson(absl::string_view json,
                                                                          absl::string_view column);

}  // namespace abox::store
