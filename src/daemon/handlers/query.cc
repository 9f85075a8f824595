#include "src/daemon/handlers/query.h"

#include <algorithm>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "src/api/errors.h"

namespace abox::daemon {
namespace {

absl::Status ParamError(absl::string_view name, absl::string_view message) {
  return api::FieldError(name, absl::StrCat("query parameter \"", name, "\": ", message));
}

}  // namespace

absl::Status CheckQuery(const http::Request& request,
                        std::initializer_list<absl::string_view> allowed) {
  for (const auto& [name, value] : request.query) {
    if (std::find(allowed.begin(), allowed.end(), name) == allowed.end()) {
      return api::FieldError(
          name, absl::StrCat("unknown query parameter \"", absl::CHexEscape(name), "\"",
                             allowed.size() == 0
                                 ? ": this endpoint takes none"
                                 : absl::StrCat(" (known: ", absl::StrJoin(allowed, ", "), ")")));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<bool> QueryBool(const http::Request& request, absl::string_view name,
                               bool fallback) {
  std::optional<std::string> value = request.Query(name);
  if (!value) {
    return fallback;
  }
  if (*value == "true" || *value == "1" || value->empty()) {
    return true;
  }
  if (*value == "false" || *value == "0") {
    return false;
  }
  return ParamError(name,
                    absl::StrCat("expected true or false, got \"", absl::CHexEscape(*value), "\""));
}

absl::StatusOr<int64_t> QueryInt(const http::Request& request, absl::string_view name,
                                 int64_t fallback, int64_t min, int64_t max) {
  std::optional<std::string> value = request.Query(name);
  if (!value) {
    return fallback;
  }
  int64_t n = 0;
  if (!absl::SimpleAtoi(*value, &n) || n < min || n > max) {
    return ParamError(name, absl::StrCat("expected an integer from ", min, " to ", max, ", got \"",
                                         absl::CHexEscape(*value), "\""));
  }
  return n;
}

}  // namespace abox::daemon
