#include "src/client/api_client.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cstdint>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "src/api/wire.h"
#include "src/base/status_macros.h"
#include "src/client/api_error.h"

namespace abox::client {
namespace {

// Whole bodies larger than this are refused (an exec list with output is the largest answer:
// 1 MiB kept per exec).
constexpr size_t kMaxBodyBytes = 256 << 20;
// Error bodies are small JSON objects.
constexpr size_t kMaxErrorBodyBytes = 1 << 20;

bool IsIdempotent(const HttpRequest& request) {
  return request.method == "GET" || request.method == "DELETE";
}

// `status` with `message`, keeping its code and payloads.
absl::Status WithMessage(const absl::Status& status, absl::string_view message) {
  absl::Status out(status.code(), message);
  status.ForEachPayload(
      [&](absl::string_view url, const absl::Cord& payload) { out.SetPayload(url, payload); });
  return out;
}

}  // namespace

absl::StatusOr<std::unique_ptr<ApiClient>> ApiClient::Create(std::string socket_path) {
  base::UniqueFd cancel(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!cancel) {
    return base::ErrnoError("eventfd");
  }
  return std::unique_ptr<ApiClient>(new ApiClient(std::move(socket_path), std::move(cancel)));
}

ApiClient::~ApiClient() = default;

void ApiClient::Cancel() {
  uint64_t one = 1;
  (void)!::write(cancel_fd_.get(), &one, sizeof(one));
}

absl::Time ApiClient::Deadline() const {
  return timeout_ == absl::InfiniteDuration() ? absl::InfiniteFuture() : absl::Now() + timeout_;
}

absl::Status ApiClient::Describe(const HttpRequest& request, const absl::Status& status) const {
  std::string message = absl::StrCat(request.method, " ", request.target, " (aboxd at ",
                                     socket_path_, "): ", status.message());
  if (status.code() == absl::StatusCode::kUnavailable && !IsNothingListening(status)) {
    absl::StrAppend(&message, "; check the daemon with `abox daemon status`");
  }
  return WithMessage(status, message);
}

absl::StatusOr<HttpResponseHead> ApiClient::Send(const HttpRequest& request, absl::Time deadline) {
  bool reused = connection_ != nullptr && connection_->Reusable();
  if (!reused) {
    connection_.reset();
  }
  for (;;) {
    if (!connection_) {
      ABOX_ASSIGN_OR_RETURN(connection_,
                            HttpConnection::Connect(socket_path_, cancel_fd_.get(), deadline));
    }
    absl::Status written = connection_->Write(request, deadline);
    if (!written.ok()) {
      connection_.reset();
      // A write that fails on a kept connection means the daemon closed it before the request
      // was complete: it cannot have acted on it, so any request may go again on a new one.
      if (reused && written.code() == absl::StatusCode::kUnavailable) {
        reused = false;
        continue;
      }
      return written;
    }
    absl::StatusOr<HttpResponseHead> head = connection_->ReadHead(deadline);
    if (!head.ok()) {
      connection_.reset();
      // Closed without an answer: only requests that are safe to repeat go again.
      if (reused && head.status().code() == absl::StatusCode::kUnavailable &&
          IsIdempotent(request)) {
        reused = false;
        continue;
      }
    }
    return head;
  }
}

absl::StatusOr<ApiResponse> ApiClient::Finish(const HttpRequest& request,
                                              const HttpResponseHead& head, absl::Time deadline) {
  bool success = head.status >= 200 && head.status < 300;
  ApiResponse response;
  response.status = head.status;
  response.content_type = head.Header("content-type");
  absl::Status read = connection_->ReadBodyAll(
      &response.body, success ? kMaxBodyBytes : kMaxErrorBodyBytes, deadline);
  if (!read.ok()) {
    connection_.reset();
    return Describe(request, read);
  }
  if (!success) {
    return StatusFromHttpError(head.status, response.body);
  }
  if (absl::StartsWithIgnoreCase(response.content_type, "application/json") &&
      !response.body.empty()) {
    absl::StatusOr<nlohmann::json> parsed = api::ParseAnswer(response.body);
    if (!parsed.ok()) {
      return absl::DataLossError(
          absl::StrCat("aboxd sent malformed JSON for ", request.method, " ", request.target));
    }
    response.json = *std::move(parsed);
  }
  return response;
}

absl::StatusOr<ApiResponse> ApiClient::Exchange(HttpRequest request) {
  request.headers.emplace_back("Accept", "application/json");
  absl::Time deadline = Deadline();
  absl::StatusOr<HttpResponseHead> head = Send(request, deadline);
  if (!head.ok()) {
    return Describe(request, head.status());
  }
  return Finish(request, *head, deadline);
}

absl::StatusOr<ApiResponse> ApiClient::Get(absl::string_view target) {
  return Exchange(HttpRequest{"GET", std::string(target), {}, ""});
}

absl::StatusOr<ApiResponse> ApiClient::Post(absl::string_view target, const nlohmann::json& body) {
  if (body.is_null()) {
    return Exchange(HttpRequest{"POST", std::string(target), {}, ""});
  }
  return Exchange(HttpRequest{
      "POST", std::string(target), {{"Content-Type", "application/json"}}, api::Dump(body)});
}

absl::StatusOr<ApiResponse> ApiClient::PostBytes(absl::string_view target,
                                                 absl::string_view bytes) {
  return Exchange(HttpRequest{"POST",
                              std::string(target),
                              {{"Content-Type", "application/octet-stream"}},
                              std::string(bytes)});
}

absl::StatusOr<ApiResponse> ApiClient::Put(absl::string_view target, const nlohmann::json& body) {
  return Exchange(HttpRequest{
      "PUT", std::string(target), {{"Content-Type", "application/json"}}, api::Dump(body)});
}

absl::StatusOr<ApiResponse> ApiClient::Delete(absl::string_view target) {
  return Exchange(HttpRequest{"DELETE", std::string(target), {}, ""});
}

absl::Status ApiClient::StreamBody(
    const HttpRequest& request,
    const std::function<absl::StatusOr<bool>(absl::string_view bytes)>& feed,
    const std::function<bool()>& finish) {
  absl::Time deadline = Deadline();
  absl::StatusOr<HttpResponseHead> head = Send(request, deadline);
  if (!head.ok()) {
    return Describe(request, head.status());
  }
  if (head->status < 200 || head->status >= 300) {
    return Finish(request, *head, deadline).status();
  }
  for (;;) {
    std::string bytes;
    absl::StatusOr<bool> more = connection_->ReadBodySome(&bytes, absl::InfiniteFuture());
    if (!more.ok()) {
      connection_.reset();
      return Describe(request, more.status());
    }
    if (!*more) {
      finish();
      return absl::OkStatus();
    }
    absl::StatusOr<bool> keep_going = feed(bytes);
    if (!keep_going.ok() || !*keep_going) {
      connection_.reset();  // leaving mid-stream: the daemon sees this reader go away
      return keep_going.status();
    }
  }
}

absl::Status ApiClient::StreamNdjson(absl::string_view target, const NdjsonFn& on_line) {
  HttpRequest request{"GET", std::string(target), {{"Accept", "application/x-ndjson"}}, ""};
  LineSplitter lines;
  absl::Status bad_line;
  auto line_fn = [&](absl::string_view line) {
    if (line.empty()) {
      return true;
    }
    absl::StatusOr<nlohmann::json> value = api::ParseAnswer(line);
    if (!value.ok()) {
      bad_line = absl::DataLossError(absl::StrCat("aboxd sent a malformed line in ", request.target,
                                                  ": ", line.substr(0, 200)));
      return false;
    }
    return on_line(*value);
  };
  return StreamBody(
      request,
      [&](absl::string_view bytes) -> absl::StatusOr<bool> {
        ABOX_ASSIGN_OR_RETURN(bool keep_going, lines.Feed(bytes, line_fn));
        ABOX_RETURN_IF_ERROR(bad_line);
        return keep_going;
      },
      [&] { return lines.Finish(line_fn); });
}

absl::Status ApiClient::StreamSse(absl::string_view target, const SseFn& on_event,
                                  absl::string_view last_event_id) {
  HttpRequest request{"GET", std::string(target), {{"Accept", "text/event-stream"}}, ""};
  if (!last_event_id.empty()) {
    request.headers.emplace_back("Last-Event-ID", std::string(last_event_id));
  }
  SseParser parser;
  return StreamBody(
      request, [&](absl::string_view bytes) { return parser.Feed(bytes, on_event); },
      [] { return true; });
}

}  // namespace abox::client
