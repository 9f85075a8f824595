#include "src/store/column_codec.h"

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace abox::store {
namespace {

using nlohmann::json;

std::string Dump(const json& value) {
  return value.dump(-1, ' ', false, json::error_handler_t::replace);
}

absl::Status Corrupt(absl::string_view column, absl::string_view expected) {
  return absl::DataLossError(
      absl::StrCat("column ", column, " does not hold ", expected, " (state database damaged?)"));
}

}  // namespace

int64_t ToMillis(absl::Time time) { return absl::ToUnixMillis(time); }

absl::Time FromMillis(int64_t millis) { return absl::FromUnixMillis(millis); }

std::optional<int64_t> ToMillis(std::optional<absl::Time> time) {
  if (!time.has_value()) {
    return std::nullopt;
  }
  return ToMillis(*time);
}

std::optional<absl::Time> FromMillis(std::optional<int64_t> millis) {
  if (!millis.has_value()) {
    return std::nullopt;
  }
  return FromMillis(*millis);
}

std::string StringMapToJson(const StringMap& map) {
  json object = json::object();
  for (const auto& [key, value] : map) {
    object[key] = value;
  }
  return Dump(object);
}

std::string StringListToJson(const std::vector<std::string>& list) {
  json array = json::array();
  for (const std::string& item : list) {
    array.push_back(item);
  }
  return Dump(array);
}

absl::StatusOr<StringMap> StringMapFromJson(absl::string_view text, absl::string_view column) {
  json value = json::parse(text.begin(), text.end(), nullptr, false);
  if (value.is_discarded() || !value.is_object()) {
    return Corrupt(column, "a JSON object");
  }
  StringMap map;
  for (const auto& [key, item] : value.items()) {
    if (!item.is_string()) {
      return Corrupt(column, "a JSON object of strings");
    }
    map.emplace(key, item.get<std::string>());
  }
  return map;
}

absl::StatusOr<std::vector<std::string>> StringListFromJson(absl::string_view text,
                                                            absl::string_view column) {
  json value = json::parse(text.begin(), text.end(), nullptr, false);
  if (value.is_discarded() || !value.is_array()) {
    return Corrupt(column, "a JSON array");
  }
  std::vector<std::string> list;
  list.reserve(value.size());
  for (const json& item : value) {
    if (!item.is_string()) {
      return Corrupt(column, "a JSON array of strings");
    }
    list.push_back(item.get<std::string>());
  }
  return list;
}

}  // namespace abox::store
