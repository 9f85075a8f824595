#include "src/client/json_fields.h"

namespace abox::client {

const nlohmann::json* JsonMember(const nlohmann::json& object, absl::string_view key) {
  if (!object.is_object()) {
    return nullptr;
  }
  auto it = object.find(std::string(key));
  return it == object.end() ? nullptr : &*it;
}

std::string JsonString(const nlohmann::json& object, absl::string_view key,
                       absl::string_view fallback) {
  const nlohmann::json* v = JsonMember(object, key);
  return v != nullptr && v->is_string() ? v->get<std::string>() : std::string(fallback);
}

std::optional<int64_t> JsonInt(const nlohmann::json& object, absl::string_view key) {
  const nlohmann::json* v = JsonMember(object, key);
  if (v == nullptr || !v->is_number_integer()) {
    return std::nullopt;
  }
  if (v->is_number_unsigned()) {
    auto u = v->get<uint64_t>();
    return u > static_cast<uint64_t>(INT64_MAX) ? std::nullopt
                                                : std::optional<int64_t>(static_cast<int64_t>(u));
  }
  return v->get<int64_t>();
}

std::optional<double> JsonNumber(const nlohmann::json& object, absl::string_view key) {
  const nlohmann::json* v = JsonMember(object, key);
  if (v == nullptr || !v->is_number()) {
    return std::nullopt;
  }
  return v->get<double>();
}

bool JsonBool(const nlohmann::json& object, absl::string_view key, bool fallback) {
  const nlohmann::json* v = JsonMember(object, key);
  return v != nullptr && v->is_boolean() ? v->get<bool>() : fallback;
}

std::optional<absl::Time> JsonTime(const nlohmann::json& object, absl::string_view key) {
  std::string text = JsonString(object, key);
  absl::Time t;
  std::string err;
  if (text.empty() || !absl::ParseTime(absl::RFC3339_full, text, &t, &err)) {
    return std::nullopt;
  }
  return t;
}

nlohmann::json ParseJson(absl::string_view text) {
  return nlohmann::json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
}

std::string DumpJson(const nlohmann::json& value, int indent) {
  return value.dump(indent, ' ', /*ensure_ascii=*/false, nlohmann::json::error_handler_t::replace);
}

}  // namespace abox::client
