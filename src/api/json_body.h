// Strict decoding of JSON request bodies, the same for every handler: malformed JSON, a body
// that is not an object, duplicate keys, wrong types, out-of-range numbers and unknown fields
// are all 400 "bad_request" errors that name the field (api::FieldOf).
//
//   ABOX_ASSIGN_OR_RETURN(nlohmann::json body, api::ParseObject(request.body));
//   api::Reader r(body);
//   r.RequiredString("image", &create.image);
//   r.OptionalInt("cpus", &create.cpus, 1, 64);
//   r.OptionalStringMap("labels", &create.labels);
//   ABOX_RETURN_IF_ERROR(r.Finish());  // first error, or the first unknown field
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

namespace abox::api {

// Limits ParseObject enforces beyond the server's body-size limit.
inline constexpr int kMaxJsonDepth = 32;

// Parses `body` as a JSON object. An empty (or all-whitespace) body is the empty object, so
// endpoints whose fields are all optional accept a bodiless POST. Rejects invalid JSON or
// UTF-8, a non-object top level, duplicate keys (they smuggle a second value past a checker)
// and nesting deeper than kMaxJsonDepth. Never throws.
[[nodiscard]] absl::StatusOr<nlohmann::json> ParseObject(std::string_view body);

// Pulls typed fields out of one JSON object and remembers which were asked for, so that
// Finish() can reject the rest. The first error wins; later calls are then no-ops that leave
// their outputs alone. Absent fields and JSON null leave optional outputs untouched (callers
// pre-fill defaults). Strings must not contain NUL bytes (they end up in argv, paths and env).
//
// Trust boundary: the object is API input (same user, but possibly a confused agent): every
// value is type- and range-checked here. Not thread-safe; the object must outlive the Reader.
class Reader final {
 public:
  // `object` must be a JSON object (ParseObject guarantees it). `prefix` is put in front of
  // field names in errors ("resources." for a nested object).
  explicit Reader(const nlohmann::json& object, std::string prefix = "");
  Reader(const Reader&) = delete;
  Reader& operator=(const Reader&) = delete;

  static constexpr size_t kDefaultMaxStringBytes = 64 << 10;
  static constexpr size_t kDefaultMaxItems = 1024;

  // Strings up to `max_bytes`; Required* fails when the field is absent or null.
  void RequiredString(absl::string_view name, std::string* out,
                      size_t max_bytes = kDefaultMaxStringBytes);
  void OptionalString(absl::string_view name, std::string* out,
                      size_t max_bytes = kDefaultMaxStringBytes);
  void OptionalString(absl::string_view name, std::optional<std::string>* out,
                      size_t max_bytes = kDefaultMaxStringBytes);

  // Integers in [min, max]. 2.0 and "2" are rejected: the API's integers are JSON integers.
  void RequiredInt(absl::string_view name, int64_t* out, int64_t min, int64_t max);
  void OptionalInt(absl::string_view name, int64_t* out, int64_t min, int64_t max);
  void OptionalInt(absl::string_view name, std::optional<int64_t>* out, int64_t min, int64_t max);

  void RequiredBool(absl::string_view name, bool* out);
  void OptionalBool(absl::string_view name, bool* out);
  void OptionalBool(absl::string_view name, std::optional<bool>* out);

  // Arrays of strings with [min_items, max_items] entries (errors name "argv[2]").
  void RequiredStringArray(absl::string_view name, std::vector<std::string>* out,
                           size_t min_items = 0, size_t max_items = kDefaultMaxItems);
  void OptionalStringArray(absl::string_view name, std::vector<std::string>* out,
                           size_t max_items = kDefaultMaxItems);

  // Objects whose values are all strings, e.g. labels or env (errors name "labels.app").
  void OptionalStringMap(absl::string_view name, std::map<std::string, std::string>* out,
                         size_t max_entries = kDefaultMaxItems);

  // A nested object read by `read` with its own Reader (prefix "name."), whose unknown fields
  // are rejected too. `read` is not called when the field is absent or null.
  void OptionalObject(absl::string_view name, const std::function<void(Reader&)>& read);

  // Accepts the field without reading it (e.g. a client-side hint the server ignores).
  void Ignore(absl::string_view name);
  // Whether the field is present and not null (does not mark it as known).
  [[nodiscard]] bool Has(absl::string_view name) const;

  // OK, or the first error, or 400 for the first unknown field (listing the allowed ones).
  [[nodiscard]] absl::Status Finish() const;
  // The first error so far (OK if none); does not check unknown fields.
  [[nodiscard]] const absl::Status& status() const { return status_; }

 private:
  // Marks `name` known and returns its value, or nullptr when absent/null or after an error.
  const nlohmann::json* Take(absl::string_view name);
  // Like Take(), but records "field is required" when absent or null.
  const nlohmann::json* TakeRequired(absl::string_view name);
  [[nodiscard]] std::string FieldName(absl::string_view name) const;
  void Fail(const std::string& field, absl::string_view message);
  // Validates a string value (type, size, NUL) for error field `field`.
  bool ReadString(const nlohmann::json& value, const std::string& field, size_t max_bytes,
                  std::string* out);
  bool ReadInt(const nlohmann::json& value, const std::string& field, int64_t min, int64_t max,
               int64_t* out);
  bool ReadBool(const nlohmann::json& value, const std::string& field, bool* out);
  bool ReadStringArray(const nlohmann::json& value, const std::string& field, size_t min_items,
                       size_t max_items, std::vector<std::string>* out);

  const nlohmann::json& object_;
  std::string prefix_;
  std::set<std::string, std::less<>> known_;
  absl::Status status_;
};

// "a string", "an integer", ... for messages about JSON values.
[[nodiscard]] std::string JsonTypeName(const nlohmann::json& value);

}  // namespace abox::api
