// Small status helpers: Debian's abseil (20220623) has no RETURN_IF_ERROR / ASSIGN_OR_RETURN.
#pragma once

#include <cerrno>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

#define ABOX_CONCAT_INNER_(a, b) a##b
#define ABOX_CONCAT_(a, b) ABOX_CONCAT_INNER_(a, b)

// Returns from the enclosing function if `expr` (an absl::Status) is not OK.
#define ABOX_RETURN_IF_ERROR(expr)        \
  do {                                    \
    ::absl::Status abox_status_ = (expr); \
    if (!abox_status_.ok())               \
      return abox_status_;                \
  } while (0)

// `ABOX_ASSIGN_OR_RETURN(auto x, F());` declares/assigns x from a StatusOr or returns its error.
#define ABOX_ASSIGN_OR_RETURN(lhs, expr) \
  ABOX_ASSIGN_OR_RETURN_IMPL_(ABOX_CONCAT_(abox_statusor_, __LINE__), lhs, expr)
#define ABOX_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                \
  if (!tmp.ok())                                    \
    return std::move(tmp).status();                 \
  lhs = std::move(tmp).value()

namespace abox::base {

// absl::ErrnoToStatus with the failing call named, e.g. ErrnoError("open(qmp.sock)").
// Reads errno at the call; pass `err` explicitly when errno may have been clobbered.
[[nodiscard]] absl::Status ErrnoError(absl::string_view call, int err);
[[nodiscard]] inline absl::Status ErrnoError(absl::string_view call) {
  return ErrnoError(call, errno);
}

// Adds context in front of a status message, keeping its code: "while X: <message>".
[[nodiscard]] absl::Status Annotate(const absl::Status& status, absl::string_view context);

}  // namespace abox::base
