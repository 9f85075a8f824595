// Strict query-string reading for handlers: unknown parameters and bad values are 400 errors
// that name the parameter.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "src/http/request.h"

namespace abox::daemon {

// OK when every query parameter is one of `allowed`; else 400 naming the first stranger.
[[nodiscard]] absl::Status CheckQuery(const http::Request& request,
                                      std::initializer_list<absl::string_view> allowed);
// "true"/"1"/"" → true, "false"/"0" → false; absent → `fallback`.
[[nodiscard]] absl::StatusOr<bool> QueryBool(const http::Request& request, absl::string_view name,
                                             bool fallback);
// An integer in [min, max]; absent → `fallback`.
[[nodiscard]] absl::StatusOr<int64_t> QueryInt(const http::Request& request, absl::string_view name,
                                               int64_t fallback, int64_t min, int64_t max);

}  // namespace abox::daemon
