#include "src/api/json_body.h"

#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "src/api/errors.h"

namespace abox::api {
namespace {

using nlohmann::json;

// Object keys seen so far, one set per open object (innermost last).
struct DuplicateCheck {
  std::vector<std::set<std::string>> keys;
  std::string duplicate;
  bool too_deep = false;
};

}  // namespace

std::string JsonTypeName(const json& value) {
  switch (value.type()) {
    case json::value_t::null:
      return "null";
    case json::value_t::object:
      return "an object";
    case json::value_t::array:
      return "an array";
    case json::value_t::string:
      return "a string";
    case json::value_t::boolean:
      return "a boolean";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
      return "an integer";
    case json::value_t::number_float:
      return "a number with a fraction";
    default:
      return "an unsupported value";
  }
}

absl::StatusOr<json> ParseObject(std::string_view body) {
  if (absl::StripAsciiWhitespace(absl::string_view(body.data(), body.size())).empty()) {
    return json::object();
  }
  DuplicateCheck check;
  json::parser_callback_t callback = [&check](int depth, json::parse_event_t event, json& parsed) {
    if (depth > kMaxJsonDepth) {
      check.too_deep = true;
      return false;
    }
    switch (event) {
      case json::parse_event_t::object_start:
        check.keys.emplace_back();
        break;
      case json::parse_event_t::object_end:
        if (!check.keys.empty()) {
          check.keys.pop_back();
        }
        break;
      case json::parse_event_t::key:
        if (!check.keys.empty() && parsed.is_string() &&
            !check.keys.back().insert(parsed.get_ref<const std::string&>()).second &&
            check.duplicate.empty()) {
          check.duplicate = parsed.get<std::string>();
        }
        break;
      default:
        break;
    }
    return true;
  };
  json value = json::parse(body.begin(), body.end(), callback, /*allow_exceptions=*/false);
  if (value.is_discarded()) {
    if (check.too_deep) {
      return absl::InvalidArgumentError(
          absl::StrCat("request body nests deeper than ", kMaxJsonDepth, " levels"));
    }
    return absl::InvalidArgumentError(
        "request body is not valid JSON (check quoting, commas and UTF-8)");
  }
  if (check.too_deep) {
    return absl::InvalidArgumentError(
        absl::StrCat("request body nests deeper than ", kMaxJsonDepth, " levels"));
  }
  if (!check.duplicate.empty()) {
    return FieldError(check.duplicate,
                      absl::StrCat("field \"", check.duplicate, "\" appears more than once"));
  }
  if (!value.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat("request body must be a JSON object, got ", JsonTypeName(value)));
  }
  return value;
}

Reader::Reader(const json& object, std::string prefix)
    : object_(object), prefix_(std::move(prefix)) {}

std::string Reader::FieldName(absl::string_view name) const { return absl::StrCat(prefix_, name); }

void Reader::Fail(const std::string& field, absl::string_view message) {
  if (status_.ok()) {
    status_ = FieldError(field, absl::StrCat("field \"", field, "\" ", message));
  }
}

const json* Reader::Take(absl::string_view name) {
  known_.emplace(name);
  if (!status_.ok() || !object_.is_object()) {
    return nullptr;
  }
  auto it = object_.find(std::string(name));
  if (it == object_.end() || it->is_null()) {
    return nullptr;
  }
  return &*it;
}

const json* Reader::TakeRequired(absl::string_view name) {
  const json* value = Take(name);
  if (value == nullptr) {
    Fail(FieldName(name), "is required");
  }
  return value;
}

bool Reader::Has(absl::string_view name) const {
  if (!object_.is_object()) {
    return false;
  }
  auto it = object_.find(std::string(name));
  return it != object_.end() && !it->is_null();
}

bool Reader::ReadString(const json& value, const std::string& field, size_t max_bytes,
                        std::string* out) {
  if (!value.is_string()) {
    Fail(field, absl::StrCat("must be a string, got ", JsonTypeName(value)));
    return false;
  }
  const auto& s = value.get_ref<const std::string&>();
  if (s.size() > max_bytes) {
    Fail(field, absl::StrCat("is longer than ", max_bytes, " bytes"));
    return false;
  }
  if (s.find('\0') != std::string::npos) {
    Fail(field, "must not contain NUL characters");
    return false;
  }
  *out = s;
  return true;
}

bool Reader::ReadInt(const json& value, const std::string& field, int64_t min, int64_t max,
                     int64_t* out) {
  std::string range = absl::StrCat("an integer from ", min, " to ", max);
  if (value.is_number_unsigned()) {
    auto u = value.get<uint64_t>();
    // nlohmann stores non-negative literals as unsigned: check both ends here too.
    if (u > static_cast<uint64_t>(max) || (min > 0 && u < static_cast<uint64_t>(min))) {
      Fail(field, absl::StrCat("must be ", range, ", got ", u));
      return false;
    }
    *out = static_cast<int64_t>(u);
    return true;
  }
  if (!value.is_number_integer()) {
    Fail(field, absl::StrCat("must be ", range, ", got ", JsonTypeName(value)));
    return false;
  }
  auto i = value.get<int64_t>();
  if (i < min || i > max) {
    Fail(field, absl::StrCat("must be ", range, ", got ", i));
    return false;
  }
  *out = i;
  return true;
}

bool Reader::ReadBool(const json& value, const std::string& field, bool* out) {
  if (!value.is_boolean()) {
    Fail(field, absl::StrCat("must be true or false, got ", JsonTypeName(value)));
    return false;
  }
  *out = value.get<bool>();
  return true;
}

bool Reader::ReadStringArray(const json& value, const std::string& field, size_t min_items,
                             size_t max_items, std::vector<std::string>* out) {
  if (!value.is_array()) {
    Fail(field, absl::StrCat("must be an array of strings, got ", JsonTypeName(value)));
    return false;
  }
  if (value.size() < min_items || value.size() > max_items) {
    Fail(field,
         absl::StrCat("must have ", min_items, " to ", max_items, " items, got ", value.size()));
    return false;
  }
  std::vector<std::string> items;
  items.reserve(value.size());
  for (size_t i = 0; i < value.size(); ++i) {
    std::string item;
    if (!ReadString(value[i], absl::StrCat(field, "[", i, "]"), kDefaultMaxStringBytes, &item)) {
      return false;
    }
    items.push_back(std::move(item));
  }
  *out = std::move(items);
  return true;
}

void Reader::RequiredString(absl::string_view name, std::string* out, size_t max_bytes) {
  if (const json* v = TakeRequired(name)) {
    ReadString(*v, FieldName(name), max_bytes, out);
  }
}

void Reader::OptionalString(absl::string_view name, std::string* out, size_t max_bytes) {
  if (const json* v = Take(name)) {
    ReadString(*v, FieldName(name), max_bytes, out);
  }
}

void Reader::OptionalString(absl::string_view name, std::optional<std::string>* out,
                            size_t max_bytes) {
  std::string s;
  if (const json* v = Take(name); v != nullptr && ReadString(*v, FieldName(name), max_bytes, &s)) {
    *out = std::move(s);
  }
}

void Reader::RequiredInt(absl::string_view name, int64_t* out, int64_t min, int64_t max) {
  if (const json* v = TakeRequired(name)) {
    ReadInt(*v, FieldName(name), min, max, out);
  }
}

void Reader::OptionalInt(absl::string_view name, int64_t* out, int64_t min, int64_t max) {
  if (const json* v = Take(name)) {
    ReadInt(*v, FieldName(name), min, max, out);
  }
}

void Reader::OptionalInt(absl::string_view name, std::optional<int64_t>* out, int64_t min,
                         int64_t max) {
  int64_t i = 0;
  if (const json* v = Take(name); v != nullptr && ReadInt(*v, FieldName(name), min, max, &i)) {
    *out = i;
  }
}

void Reader::RequiredBool(absl::string_view name, bool* out) {
  if (const json* v = TakeRequired(name)) {
    ReadBool(*v, FieldName(name), out);
  }
}

void Reader::OptionalBool(absl::string_view name, bool* out) {
  if (const json* v = Take(name)) {
    ReadBool(*v, FieldName(name), out);
  }
}

void Reader::OptionalBool(absl::string_view name, std::optional<bool>* out) {
  bool b = false;
  if (const json* v = Take(name); v != nullptr && ReadBool(*v, FieldName(name), &b)) {
    *out = b;
  }
}

void Reader::RequiredStringArray(absl::string_view name, std::vector<std::string>* out,
                                 size_t min_items, size_t max_items) {
  if (const json* v = TakeRequired(name)) {
    ReadStringArray(*v, FieldName(name), min_items, max_items, out);
  }
}

void Reader::OptionalStringArray(absl::string_view name, std::vector<std::string>* out,
                                 size_t max_items) {
  if (const json* v = Take(name)) {
    ReadStringArray(*v, FieldName(name), 0, max_items, out);
  }
}

void Reader::OptionalStringMap(absl::string_view name, std::map<std::string, std::string>* out,
                               size_t max_entries) {
  const json* v = Take(name);
  if (v == nullptr) {
    return;
  }
  std::string field = FieldName(name);
  if (!v->is_object()) {
    Fail(field, absl::StrCat("must be an object of strings, got ", JsonTypeName(*v)));
    return;
  }
  if (v->size() > max_entries) {
    Fail(field, absl::StrCat("must have at most ", max_entries, " entries, got ", v->size()));
    return;
  }
  std::map<std::string, std::string> entries;
  for (const auto& [key, value] : v->items()) {
    std::string entry_field = absl::StrCat(field, ".", key);
    if (key.find('\0') != std::string::npos) {
      Fail(field, "must not have keys containing NUL characters");
      return;
    }
    std::string s;
    if (!ReadString(value, entry_field, kDefaultMaxStringBytes, &s)) {
      return;
    }
    entries.emplace(key, std::move(s));
  }
  *out = std::move(entries);
}

void Reader::OptionalObject(absl::string_view name, const std::function<void(Reader&)>& read) {
  const json* v = Take(name);
  if (v == nullptr) {
    return;
  }
  std::string field = FieldName(name);
  if (!v->is_object()) {
    Fail(field, absl::StrCat("must be an object, got ", JsonTypeName(*v)));
    return;
  }
  Reader nested(*v, absl::StrCat(field, "."));
  read(nested);
  if (absl::Status s = nested.Finish(); !s.ok() && status_.ok()) {
    status_ = std::move(s);
  }
}

void Reader::Ignore(absl::string_view name) { known_.emplace(name); }

absl::Status Reader::Finish() const {
  if (!status_.ok()) {
    return status_;
  }
  if (!object_.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat(prefix_.empty() ? "request body" : prefix_, " must be a JSON object"));
  }
  std::vector<std::string> unknown;
  for (const auto& [key, value] : object_.items()) {
    if (known_.find(key) == known_.end()) {
      unknown.push_back(key);
    }
  }
  if (unknown.empty()) {
    return absl::OkStatus();
  }
  std::string field = FieldName(unknown.front());
  std::string message = absl::StrCat("unknown field \"", field, "\"");
  if (unknown.size() > 1) {
    absl::StrAppend(&message, " (and ", unknown.size() - 1, " more)");
  }
  absl::StrAppend(&message, "; allowed fields: ",
                  known_.empty() ? std::string("none") : absl::StrJoin(known_, ", "));
  return FieldError(field, message);
}

}  // namespace abox::api
