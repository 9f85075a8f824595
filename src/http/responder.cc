#include "src/http/responder.h"

#include <utility>

#include "spdlog/spdlog.h"
#include "src/api/errors.h"
#include "src/http/response_state.h"
#include "src/http/stream_format.h"

namespace abox::http {
namespace internal {

ResponseState::ResponseState(std::weak_ptr<ResponseSink> sink, std::shared_ptr<LoopGuard> loop,
                             uint64_t seq, std::string route)
    : sink_(std::move(sink)), loop_(std::move(loop)), seq_(seq), route_(std::move(route)) {}

ResponseState::~ResponseState() {
  // Last handle gone: no lock needed. Posted lambdas capture values, never `this`.
  uint64_t seq = seq_;
  if (phase_ == Phase::kNone && !cancelled_) {
    spdlog::error("http: handler for {} returned without responding", route_);
    api::ErrorResponse error = api::ErrorResponseFor(absl::InternalError(
        "the handler for " + route_ + " finished without responding; this is an aboxd bug"));
    PostToSink([seq, error = std::move(error)](ResponseSink& sink) mutable {
      sink.SendWhole(seq, error.http_status, "application/json", std::move(error.body), {});
    });
  } else if (phase_ == Phase::kStreaming) {
    PostToSink([seq](ResponseSink& sink) { sink.FinishStream(seq); });
  }
}

void ResponseState::PostToSink(std::function<void(ResponseSink&)> fn) {
  loop_->RunIfAlive([&] {
    std::shared_ptr<ResponseSink> sink = sink_.lock();
    if (sink == nullptr) {
      return;
    }
    ResponseSink* raw = sink.get();
    // The closure keeps the connection alive until it ran (or the loop is destroyed).
    raw->Post([sink = std::move(sink), fn = std::move(fn)] { fn(*sink); });
  });
}

bool ResponseState::SendWhole(int status, std::string content_type, std::string body,
                              HttpHeaders headers) {
  std::vector<std::function<void()>> dropped;  // destroyed after the lock is released
  std::lock_guard<std::mutex> lock(mu_);
  if (phase_ != Phase::kNone) {
    spdlog::warn("http: {} responded twice; the second response is dropped", route_);
    return false;
  }
  phase_ = Phase::kWhole;
  // Answered: cancellation no longer concerns the handler, and dropping the callbacks breaks
  // cycles through handles they captured.
  dropped.swap(on_cancel_);
  if (cancelled_) {
    return false;
  }
  PostToSink([seq = seq_, status, content_type = std::move(content_type), body = std::move(body),
              headers = std::move(headers)](ResponseSink& sink) mutable {
    sink.SendWhole(seq, status, std::move(content_type), std::move(body), std::move(headers));
  });
  return true;
}

bool ResponseState::StartStream(StreamKind kind, int status, HttpHeaders headers) {
  std::lock_guard<std::mutex> lock(mu_);
  if (phase_ != Phase::kNone) {
    spdlog::warn("http: {} started a stream after responding; ignored", route_);
    return false;
  }
  phase_ = Phase::kStreaming;
  kind_ = kind;
  if (cancelled_) {
    return false;
  }
  PostToSink([seq = seq_, kind, status, headers = std::move(headers)](ResponseSink& sink) mutable {
    sink.StartStream(seq, kind, status, std::move(headers));
  });
  return true;
}

bool ResponseState::StreamWrite(StreamKind kind, std::string bytes, SentCallback on_sent) {
  std::lock_guard<std::mutex> lock(mu_);
  if (phase_ != Phase::kStreaming || cancelled_) {
    return false;
  }
  if (kind != kind_) {
    spdlog::error("http: {} wrote the wrong kind of stream item; dropped", route_);
    return false;
  }
  PostToSink([seq = seq_, bytes = std::move(bytes),
              on_sent = std::move(on_sent)](ResponseSink& sink) mutable {
    sink.StreamWrite(seq, std::move(bytes), std::move(on_sent));
  });
  return true;
}

void ResponseState::FinishStream() {
  std::vector<std::function<void()>> dropped;  // as in SendWhole
  std::lock_guard<std::mutex> lock(mu_);
  if (phase_ != Phase::kStreaming) {
    return;
  }
  phase_ = Phase::kFinished;
  dropped.swap(on_cancel_);
  if (!cancelled_) {
    PostToSink([seq = seq_](ResponseSink& sink) { sink.FinishStream(seq); });
  }
}

void ResponseState::Cancel() {
  std::vector<std::function<void()>> callbacks;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (cancelled_) {
      return;
    }
    cancelled_ = true;
    callbacks.swap(on_cancel_);
  }
  for (auto& callback : callbacks) {
    callback();
  }
}

bool ResponseState::cancelled() const {
  std::lock_guard<std::mutex> lock(mu_);
  return cancelled_;
}

bool ResponseState::responded() const {
  std::lock_guard<std::mutex> lock(mu_);
  return phase_ != Phase::kNone;
}

void ResponseState::OnCancel(std::function<void()> callback) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!cancelled_) {
      on_cancel_.push_back(std::move(callback));
      return;
    }
  }
  callback();
}

}  // namespace internal

bool Stream::WriteLine(absl::string_view line, SentCallback on_sent) {
  if (state_ == nullptr) {
    return false;
  }
  std::string bytes(line);
  bytes.push_back('\n');
  return state_->StreamWrite(internal::StreamKind::kNdjson, std::move(bytes), std::move(on_sent));
}

bool Stream::WriteJson(const nlohmann::json& value, SentCallback on_sent) {
  return WriteLine(value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace),
                   std::move(on_sent));
}

bool Stream::WriteEvent(const SseEvent& event, SentCallback on_sent) {
  if (state_ == nullptr) {
    return false;
  }
  return state_->StreamWrite(internal::StreamKind::kSse, FormatSseEvent(event), std::move(on_sent));
}

void Stream::Finish() {
  if (state_ != nullptr) {
    state_->FinishStream();
  }
}

bool Stream::cancelled() const { return state_ == nullptr || state_->cancelled(); }

void Stream::OnCancel(std::function<void()> callback) {
  if (state_ == nullptr) {
    callback();
    return;
  }
  state_->OnCancel(std::move(callback));
}

void Responder::Json(int status, const nlohmann::json& body, HttpHeaders headers) {
  Send(status, "application/json",
       body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), std::move(headers));
}

void Responder::Send(int status, std::string content_type, std::string body, HttpHeaders headers) {
  state_->SendWhole(status, std::move(content_type), std::move(body), std::move(headers));
}

void Responder::Error(const absl::Status& status, HttpHeaders headers) {
  api::ErrorResponse error = api::ErrorResponseFor(status);
  Send(error.http_status, "application/json", std::move(error.body), std::move(headers));
}

Stream Responder::StartNdjson(int status, HttpHeaders headers) {
  if (!state_->StartStream(internal::StreamKind::kNdjson, status, std::move(headers))) {
    return {};
  }
  return Stream(state_);
}

Stream Responder::StartSse(HttpHeaders headers) {
  if (!state_->StartStream(internal::StreamKind::kSse, 200, std::move(headers))) {
    return {};
  }
  return Stream(state_);
}

bool Responder::responded() const { return state_->responded(); }
bool Responder::cancelled() const { return state_->cancelled(); }
void Responder::OnCancel(std::function<void()> callback) { state_->OnCancel(std::move(callback)); }

}  // namespace abox::http
