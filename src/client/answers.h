// Reading aboxd's answers through the api codecs (src/api/<resource>.h): an answer that does
// not decode is an error that names the request it answered and the field that was off.
#pragma once

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "src/client/api_client.h"

namespace abox::client {

// `status` (a decoder's "aboxd's answer ..." error) saying which request it answered:
// "aboxd's answer to GET /v1/sandboxes has no ...". Code and payloads (the field) are kept.
[[nodiscard]] absl::Status AnswerError(const absl::Status& status, absl::string_view request);

// `decode(response.json)` with errors named by AnswerError, e.g.
//   ASSIGN_OR_RETURN(auto list, DecodeAnswer(*r, "GET /v1/sandboxes", api::DecodeSandboxList));
template <typename Decode>
auto DecodeAnswer(const ApiResponse& response, absl::string_view request, Decode decode)
    -> decltype(decode(response.json)) {
  auto decoded = decode(response.json);
  if (!decoded.ok()) {
    return AnswerError(decoded.status(), request);
  }
  return decoded;
}

}  // namespace abox::client
