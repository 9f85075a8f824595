#include "src/api/wire.h"

#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "src/api/errors.h"
#include "src/api/json_body.h"

namespace abox::api {

std::string FormatApiTime(absl::Time time) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", time, absl::UTCTimeZone());
}

absl::StatusOr<absl::Time> ParseApiTime(absl::string_view text) {
  absl::Time t;
  std::string err;
  if (text.empty() || !absl::ParseTime(absl::RFC3339_full, text, &t, &err)) {
    return absl::InvalidArgumentError(
        absl::StrCat("\"", text, "\" is not an RFC 3339 time", err.empty() ? "" : ": ", err));
  }
  return t;
}

void PutApiTime(nlohmann::json& object, const char* key, const std::optional<absl::Time>& time) {
  if (time) {
    object[key] = FormatApiTime(*time);
  }
}

std::string Dump(const nlohmann::json& value, int indent) {
  return value.dump(indent, ' ', /*ensure_ascii=*/false, nlohmann::json::error_handler_t::replace);
}

absl::StatusOr<nlohmann::json> ParseAnswer(absl::string_view text) {
  nlohmann::json value =
      nlohmann::json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (value.is_discarded()) {
    return absl::DataLossError("aboxd's answer is not valid JSON");
  }
  return value;
}

AnswerReader::AnswerReader(const nlohmann::json& value, std::string prefix)
    : value_(value), prefix_(std::move(prefix)) {
  if (!value_.is_object()) {
    std::string field = prefix_.empty() ? "answer" : prefix_;
    status_ = WithField(
        absl::DataLossError(absl::StrCat("aboxd's answer: \"", field, "\" must be an object, got ",
                                         JsonTypeName(value_))),
        prefix_);
  }
}

std::string AnswerReader::FieldName(absl::string_view name) const {
  return prefix_.empty() ? std::string(name) : absl::StrCat(prefix_, ".", name);
}

void AnswerReader::Fail(const std::string& field, absl::string_view expected,
                        const nlohmann::json& got) {
  if (status_.ok()) {
    status_ =
        WithField(absl::DataLossError(absl::StrCat("aboxd's answer: field \"", field, "\" must be ",
                                                   expected, ", got ", JsonTypeName(got))),
                  field);
  }
}

void AnswerReader::Adopt(const absl::Status& nested) {
  if (status_.ok() && !nested.ok()) {
    status_ = nested;
  }
}

const nlohmann::json* AnswerReader::Find(absl::string_view name) const {
  if (!status_.ok() || !value_.is_object()) {
    return nullptr;
  }
  auto it = value_.find(std::string(name));
  if (it == value_.end() || it->is_null()) {
    return nullptr;
  }
  return &*it;
}

bool AnswerReader::Has(absl::string_view name) const {
  if (!value_.is_object()) {
    return false;
  }
  auto it = value_.find(std::string(name));
  return it != value_.end() && !it->is_null();
}

void AnswerReader::String(absl::string_view name, std::string* out) {
  if (const nlohmann::json* v = Find(name)) {
    if (!v->is_string()) {
      return Fail(FieldName(name), "a string", *v);
    }
    *out = v->get<std::string>();
  }
}

void AnswerReader::String(absl::string_view name, std::optional<std::string>* out) {
  std::string s;
  if (Has(name)) {
    String(name, &s);
    if (status_.ok()) {
      *out = std::move(s);
    }
  }
}

void AnswerReader::Bool(absl::string_view name, std::optional<bool>* out) {
  bool b = false;
  if (Has(name)) {
    Bool(name, &b);
    if (status_.ok()) {
      *out = b;
    }
  }
}

void AnswerReader::Number(absl::string_view name, std::optional<double>* out) {
  double d = 0;
  if (Has(name)) {
    Number(name, &d);
    if (status_.ok()) {
      *out = d;
    }
  }
}

void AnswerReader::Int(absl::string_view name, int64_t* out) {
  const nlohmann::json* v = Find(name);
  if (v == nullptr) {
    return;
  }
  if (v->is_number_unsigned() && v->get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) {
    return Fail(FieldName(name), "a 64-bit integer", *v);
  }
  if (!v->is_number_integer()) {
    return Fail(FieldName(name), "an integer", *v);
  }
  *out = v->get<int64_t>();
}

void AnswerReader::Int(absl::string_view name, std::optional<int64_t>* out) {
  int64_t i = 0;
  if (Has(name)) {
    Int(name, &i);
    if (status_.ok()) {
      *out = i;
    }
  }
}

void AnswerReader::Number(absl::string_view name, double* out) {
  if (const nlohmann::json* v = Find(name)) {
    if (!v->is_number()) {
      return Fail(FieldName(name), "a number", *v);
    }
    *out = v->get<double>();
  }
}

void AnswerReader::Bool(absl::string_view name, bool* out) {
  if (const nlohmann::json* v = Find(name)) {
    if (!v->is_boolean()) {
      return Fail(FieldName(name), "true or false", *v);
    }
    *out = v->get<bool>();
  }
}

void AnswerReader::Time(absl::string_view name, std::optional<absl::Time>* out) {
  const nlohmann::json* v = Find(name);
  if (v == nullptr) {
    return;
  }
  if (!v->is_string()) {
    return Fail(FieldName(name), "an RFC 3339 time", *v);
  }
  absl::StatusOr<absl::Time> t = ParseApiTime(v->get_ref<const std::string&>());
  if (!t.ok()) {
    return Fail(FieldName(name), "an RFC 3339 time", *v);
  }
  *out = *t;
}

void AnswerReader::Base64(absl::string_view name, std::string* out) {
  const nlohmann::json* v = Find(name);
  if (v == nullptr) {
    return;
  }
  std::string bytes;
  if (!v->is_string() || !absl::Base64Unescape(v->get_ref<const std::string&>(), &bytes)) {
    return Fail(FieldName(name), "base64 text", *v);
  }
  *out = std::move(bytes);
}

void AnswerReader::StringArray(absl::string_view name, std::vector<std::string>* out) {
  const nlohmann::json* v = Find(name);
  if (v == nullptr) {
    return;
  }
  if (!v->is_array()) {
    return Fail(FieldName(name), "an array of strings", *v);
  }
  std::vector<std::string> items;
  for (size_t i = 0; i < v->size(); ++i) {
    if (!(*v)[i].is_string()) {
      return Fail(absl::StrCat(FieldName(name), "[", i, "]"), "a string", (*v)[i]);
    }
    items.push_back((*v)[i].get<std::string>());
  }
  *out = std::move(items);
}

void AnswerReader::StringMap(absl::string_view name, std::map<std::string, std::string>* out) {
  const nlohmann::json* v = Find(name);
  if (v == nullptr) {
    return;
  }
  if (!v->is_object()) {
    return Fail(FieldName(name), "an object of strings", *v);
  }
  std::map<std::string, std::string> entries;
  for (const auto& [key, value] : v->items()) {
    if (!value.is_string()) {
      return Fail(absl::StrCat(FieldName(name), ".", key), "a string", value);
    }
    entries.emplace(key, value.get<std::string>());
  }
  *out = std::move(entries);
}

void AnswerReader::Json(absl::string_view name, nlohmann::json* out) {
  if (const nlohmann::json* v = Find(name)) {
    *out = *v;
  }
}

void AnswerReader::Object(absl::string_view name, const std::function<void(AnswerReader&)>& read) {
  const nlohmann::json* v = Find(name);
  if (v == nullptr) {
    return;
  }
  if (!v->is_object()) {
    return Fail(FieldName(name), "an object", *v);
  }
  AnswerReader nested(*v, FieldName(name));
  read(nested);
  Adopt(nested.status());
}

void AnswerReader::ObjectArray(absl::string_view name,
                               const std::function<void(AnswerReader&)>& read) {
  const nlohmann::json* v = Find(name);
  if (v == nullptr) {
    return;
  }
  if (!v->is_array()) {
    return Fail(FieldName(name), "an array of objects", *v);
  }
  for (size_t i = 0; i < v->size() && status_.ok(); ++i) {
    AnswerReader item((*v)[i], absl::StrCat(FieldName(name), "[", i, "]"));
    if (item.status().ok()) {
      read(item);
    }
    Adopt(item.status());
  }
}

}  // namespace abox::api
