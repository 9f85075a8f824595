// What every resource codec shares: the API's time format, serialising for the wire, and the
// tolerant reading of the daemon's answers on the client side (AnswerReader). No I/O.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "nlohmann/json.hpp"

namespace abox::api {

// RFC 3339 in UTC with milliseconds: "2026-11-30T16:05:31.123Z".
[[nodiscard]] std::string FormatApiTime(absl::Time time);
// Any RFC 3339 time (the API writes FormatApiTime's; clients accept any offset and precision).
[[nodiscard]] absl::StatusOr<absl::Time> ParseApiTime(absl::string_view text);

// Sets `key` to FormatApiTime(*time) when there is a time (absent otherwise).
void PutApiTime(nlohmann::json& object, const char* key, const std::optional<absl::Time>& time);

// Serialises for the wire; invalid UTF-8 (which should not be there) is replaced, never thrown.
[[nodiscard]] std::string Dump(const nlohmann::json& value, int indent = -1);

// Parses any JSON value without exceptions (an answer body, an SSE event's data);
// kDataLoss when `text` is not JSON.
[[nodiscard]] absl::StatusOr<nlohmann::json> ParseAnswer(absl::string_view text);

// Reads typed fields out of one object of an answer from aboxd. Unlike the strict Reader for
// request bodies (json_body.h), unknown fields are ignored (a newer daemon may add some) and
// absent or null fields leave the output alone (callers pre-fill defaults). A known field of
// the wrong type is an error naming it ("sandboxes[2].cpus"): kDataLoss, field attached with
// WithField(). The first error wins; later calls are then no-ops.
//
// Trust boundary: the daemon runs as the same user, but its answers are still only data: every
// value is type-checked here, none is trusted to be of the documented shape. Not thread-safe;
// the value must outlive the reader.
class AnswerReader final {
 public:
  // `value` should be an object (anything else is an error naming `prefix`, or "answer").
  // `prefix` is the path of this object in the answer ("sandboxes[0]"), for error messages.
  explicit AnswerReader(const nlohmann::json& value, std::string prefix = "");
  AnswerReader(const AnswerReader&) = delete;
  AnswerReader& operator=(const AnswerReader&) = delete;

  void String(absl::string_view name, std::string* out);
  void String(absl::string_view name, std::optional<std::string>* out);
  void Int(absl::string_view name, int64_t* out);
  void Int(absl::string_view name, std::optional<int64_t>* out);
  void Number(absl::string_view name, double* out);  // an integer or a fraction
  void Number(absl::string_view name, std::optional<double>* out);
  void Bool(absl::string_view name, bool* out);
  void Bool(absl::string_view name, std::optional<bool>* out);
  void Time(absl::string_view name, std::optional<absl::Time>* out);  // RFC 3339 text
  // A string of base64 text, decoded (bytes that are not UTF-8 travel so).
  void Base64(absl::string_view name, std::string* out);
  void StringArray(absl::string_view name, std::vector<std::string>* out);
  void StringMap(absl::string_view name, std::map<std::string, std::string>* out);
  // Any JSON value, unchecked (a free-form payload).
  void Json(absl::string_view name, nlohmann::json* out);
  // A nested object, read by `read` with a reader of prefix "name".
  void Object(absl::string_view name, const std::function<void(AnswerReader&)>& read);
  // An array of objects, each read by `read` with a reader of prefix "name[i]".
  void ObjectArray(absl::string_view name, const std::function<void(AnswerReader&)>& read);
  // Whether the field is present and not null.
  [[nodiscard]] bool Has(absl::string_view name) const;

  // OK, or the first error.
  [[nodiscard]] const absl::Status& status() const { return status_; }

 private:
  // The value of `name`, or nullptr when absent/null or after an error.
  const nlohmann::json* Find(absl::string_view name) const;
  [[nodiscard]] std::string FieldName(absl::string_view name) const;
  void Fail(const std::string& field, absl::string_view expected, const nlohmann::json& got);
  void Adopt(const absl::Status& nested);

  const nlohmann::json& value_;
  std::string prefix_;
  absl::Status status_;
};

}  // namespace abox::api
