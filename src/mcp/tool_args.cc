#include "src/mcp/tool_args.h"

#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace abox::mcp {
namespace {

bool HasType(const nlohmann::json& value, absl::string_view type) {
  if (type == "string") {
    return value.is_string();
  }
  if (type == "integer") {
    if (value.is_number_integer()) {
      return true;
    }
    // 3.0 is an integer in JSON Schema.
    return value.is_number_float() && std::trunc(value.get<double>()) == value.get<double>() &&
           std::fabs(value.get<double>()) < 9e15;
  }
  if (type == "number") {
    return value.is_number();
  }
  if (type == "boolean") {
    return value.is_boolean();
  }
  if (type == "array") {
    return value.is_array();
  }
  if (type == "object") {
    return value.is_object();
  }
  if (type == "null") {
    return value.is_null();
  }
  return false;
}

absl::Status Invalid(absl::string_view field, absl::string_view problem) {
  return absl::InvalidArgumentError(absl::StrCat("argument \"", field, "\" ", problem));
}

absl::Status CheckValue(absl::string_view field, const nlohmann::json& schema,
                        const nlohmann::json& value) {
  auto type = schema.find("type");
  if (type != schema.end()) {
    std::vector<std::string> types;
    if (type->is_string()) {
      types.push_back(type->get<std::string>());
    } else if (type->is_array()) {
      for (const auto& t : *type) {
        types.push_back(t.get<std::string>());
      }
    }
    bool ok = false;
    for (const std::string& t : types) {
      ok = ok || HasType(value, t);
    }
    if (!ok) {
      return Invalid(field, absl::StrCat("must be of type ", absl::StrJoin(types, " or ")));
    }
  }
  if (value.is_number()) {
    auto min = schema.find("minimum");
    if (min != schema.end() && value.get<double>() < min->get<double>()) {
      return Invalid(field, absl::StrCat("must be at least ", min->dump()));
    }
    auto max = schema.find("maximum");
    if (max != schema.end() && value.get<double>() > max->get<double>()) {
      return Invalid(field, absl::StrCat("must be at most ", max->dump()));
    }
  }
  if (value.is_string()) {
    auto max_length = schema.find("maxLength");
    if (max_length != schema.end() &&
        value.get_ref<const std::string&>().size() > max_length->get<size_t>()) {
      return Invalid(field, absl::StrCat("is longer than ", max_length->dump(), " bytes"));
    }
  }
  auto allowed = schema.find("enum");
  if (allowed != schema.end()) {
    bool found = false;
    for (const auto& a : *allowed) {
      found = found || a == value;
    }
    if (!found) {
      return Invalid(field, absl::StrCat("must be one of ", allowed->dump()));
    }
  }
  if (value.is_array()) {
    auto items = schema.find("items");
    if (items != schema.end()) {
      for (size_t i = 0; i < value.size(); ++i) {
        absl::Status s = CheckValue(absl::StrCat(field, "[", i, "]"), *items, value[i]);
        if (!s.ok()) {
          return s;
        }
      }
    }
  }
  if (value.is_object() && schema.contains("additionalProperties") &&
      schema["additionalProperties"].is_object()) {
    for (const auto& [key, item] : value.items()) {
      absl::Status s =
          CheckValue(absl::StrCat(field, ".", key), schema["additionalProperties"], item);
      if (!s.ok()) {
        return s;
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckArguments(const nlohmann::json& schema, const nlohmann::json& args) {
  if (!args.is_object()) {
    return absl::InvalidArgumentError("the arguments must be a JSON object");
  }
  const nlohmann::json empty = nlohmann::json::object();
  const nlohmann::json& props = schema.contains("properties") ? schema["properties"] : empty;
  bool closed = schema.contains("additionalProperties") &&
                schema["additionalProperties"].is_boolean() &&
                !schema["additionalProperties"].get<bool>();
  for (const auto& [key, value] : args.items()) {
    auto prop = props.find(key);
    if (prop == props.end()) {
      if (closed) {
        std::vector<std::string> known;
        for (const auto& [name, unused] : props.items()) {
          known.push_back(name);
        }
        return Invalid(key, absl::StrCat("is not an argument of this tool (it takes: ",
                                         absl::StrJoin(known, ", "), ")"));
      }
      continue;
    }
    absl::Status s = CheckValue(key, *prop, value);
    if (!s.ok()) {
      return s;
    }
  }
  if (schema.contains("required")) {
    for (const auto& key : schema["required"]) {
      if (!args.contains(key.get<std::string>())) {
        return Invalid(key.get<std::string>(), "is required");
      }
    }
  }
  return absl::OkStatus();
}

bool HasArg(const nlohmann::json& args, absl::string_view key) {
  auto it = args.find(std::string(key));
  return it != args.end() && !it->is_null();
}

std::string StringArg(const nlohmann::json& args, absl::string_view key,
                      absl::string_view fallback) {
  auto it = args.find(std::string(key));
  return it != args.end() && it->is_string() ? it->get<std::string>() : std::string(fallback);
}

int64_t IntArg(const nlohmann::json& args, absl::string_view key, int64_t fallback) {
  auto it = args.find(std::string(key));
  return it != args.end() && it->is_number() ? it->get<int64_t>() : fallback;
}

bool BoolArg(const nlohmann::json& args, absl::string_view key, bool fallback) {
  auto it = args.find(std::string(key));
  return it != args.end() && it->is_boolean() ? it->get<bool>() : fallback;
}

std::vector<std::string> StringListArg(const nlohmann::json& args, absl::string_view key) {
  std::vector<std::string> out;
  auto it = args.find(std::string(key));
  if (it != args.end() && it->is_array()) {
    for (const auto& item : *it) {
      if (item.is_string()) {
        out.push_back(item.get<std::string>());
      }
    }
  }
  return out;
}

std::map<std::string, std::string> StringMapArg(const nlohmann::json& args, absl::string_view key) {
  std::map<std::string, std::string> out;
  auto it = args.find(std::string(key));
  if (it != args.end() && it->is_object()) {
    for (const auto& [k, v] : it->items()) {
      if (v.is_string()) {
        out[k] = v.get<std::string>();
      }
    }
  }
  return out;
}

nlohmann::json ObjectSchema(nlohmann::json properties, std::vector<std::string> required) {
  if (!properties.is_object()) {
    properties = nlohmann::json::object();
  }
  nlohmann::json schema = {
      {"type", "object"}, {"properties", std::move(properties)}, {"additionalProperties", false}};
  if (!required.empty()) {
    schema["required"] = std::move(required);
  }
  return schema;
}

nlohmann::json Prop(absl::string_view type, absl::string_view description) {
  return {{"type", std::string(type)}, {"description", std::string(description)}};
}

nlohmann::json IntProp(absl::string_view description, int64_t min, int64_t max) {
  return {{"type", "integer"},
          {"description", std::string(description)},
          {"minimum", min},
          {"maximum", max}};
}

nlohmann::json StringListProp(absl::string_view description) {
  return {{"type", "array"},
          {"items", {{"type", "string"}}},
          {"description", std::string(description)}};
}

nlohmann::json SandboxProp() {
  return Prop("string", "The sandbox: its id, name or a unique id prefix (see sandbox_list).");
}

}  // namespace abox::mcp
