#include "src/client/answers.h"

#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace abox::client {

absl::Status AnswerError(const absl::Status& status, absl::string_view request) {
  constexpr absl::string_view kPrefix = "aboxd's answer";
  absl::string_view message = status.message();
  std::string text = absl::StartsWith(message, kPrefix)
                         ? absl::StrCat(kPrefix, " to ", request, message.substr(kPrefix.size()))
                         : absl::StrCat("aboxd's answer to ", request, ": ", message);
  absl::Status out(status.code(), text);
  status.ForEachPayload(
      [&](absl::string_view url, const absl::Cord& payload) { out.SetPayload(url, payload); });
  return out;
}

}  // namespace abox::client
