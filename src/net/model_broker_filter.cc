#include "src/net/model_broker_filter.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "src/net/host_name.h"

namespace abox::net {
namespace {

// Route text for records: a forwarded route is plain; a refused one may be any guest bytes.
std::string RouteForRecord(absl::string_view path) { return QuoteForLog(path, 120); }

ModelReply Reply(int status, std::string message) {
  ModelReply reply;
  reply.status = status;
  reply.message = std::move(message);
  return reply;
}

}  // namespace

ModelBrokerFilter::ModelBrokerFilter(const ModelBrokerConfig& config)
    : config_(config),
      requests_(
          [this](const HttpRequestHead& head, absl::string_view /*raw*/) { return OnHead(head); }),
      responses_([this](const HttpResponseHead&, const PendingRequest&) { return mask_; }) {
  responses_.set_observer(this);
}

ModelBrokerFilter::~ModelBrokerFilter() { Finish("the broker connection ended"); }

absl::Status ModelBrokerFilter::FeedUp(absl::string_view in, std::string* out) {
  absl::Status status;
  {
    std::lock_guard<std::mutex> lock(mu_);
    status = requests_.Feed(in, out);
    if (!status.ok() && !refusal_) {
      // Framing the broker cannot follow (HttpRequestStream refused it before OnHead).
      ModelRequestRecord record;
      record.api = api_.value_or(ModelApi::kAnthropic);
      record.status = 400;
      record.refused = true;
      record.error = std::string(status.message());
      ready_.push_back(std::move(record));
      refusal_ = Refusal{api_, Reply(400, std::string(status.message())), false, false};
    }
  }
  Emit();
  return status;
}

std::string ModelBrokerFilter::RefusalReply(const absl::Status& why) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (!refusal_) {
    return BuildModelErrorReply(api_, Reply(400, std::string(why.message())), false);
  }
  if (refusal_->probe) {
    return BuildModelProbeReply(refusal_->head_request);
  }
  return BuildModelErrorReply(refusal_->api, refusal_->reply, refusal_->head_request);
}

absl::Status ModelBrokerFilter::FeedDown(absl::string_view in, std::string* out) {
  absl::Status status;
  {
    std::lock_guard<std::mutex> lock(mu_);
    status = responses_.Feed(in, out);
  }
  Emit();
  return status;
}

absl::Status ModelBrokerFilter::FinishDown(std::string* out) {
  absl::Status status;
  {
    std::lock_guard<std::mutex> lock(mu_);
    status = responses_.Finish(out);
  }
  Emit();
  return status;
}

std::optional<ModelUpstream> ModelBrokerFilter::upstream() const {
  std::lock_guard<std::mutex> lock(mu_);
  return upstream_;
}

uint64_t ModelBrokerFilter::requests() const {
  std::lock_guard<std::mutex> lock(mu_);
  return accepted_;
}

std::string ModelBrokerFilter::FailUpstream(int status, const std::string& why) {
  std::string reply;
  {
    std::lock_guard<std::mutex> lock(mu_);
    absl::Time now = absl::Now();
    for (InFlight& f : in_flight_) {
      f.record.status = status;
      f.record.refused = true;
      f.record.error = why;
      f.record.total = now - f.start;
      ready_.push_back(std::move(f.record));
    }
    in_flight_.clear();
    reply = BuildModelErrorReply(api_, Reply(status, why), false);
  }
  Emit();
  return reply;
}

void ModelBrokerFilter::Finish(absl::string_view why) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    absl::Time now = absl::Now();
    for (InFlight& f : in_flight_) {
      f.record.error = absl::StrCat("the connection ended before the response was complete: ", why);
      f.record.total = now - f.start;
      if (f.reader) {
        f.record.input_tokens = f.reader->usage().input_tokens;
        f.record.output_tokens = f.reader->usage().output_tokens;
      }
      ready_.push_back(std::move(f.record));
    }
    in_flight_.clear();
  }
  Emit();
}

void ModelBrokerFilter::Emit() {
  std::vector<ModelRequestRecord> records;
  {
    std::lock_guard<std::mutex> lock(mu_);
    records.swap(ready_);
  }
  if (config_.on_request) {
    for (const ModelRequestRecord& r : records) {
      config_.on_request(r);
    }
  }
}

absl::Status ModelBrokerFilter::Refuse(const HttpRequestHead& head, std::optional<ModelApi> api,
                                       ModelReply reply, bool probe) {
  ModelRequestRecord record;
  record.api = api.value_or(api_.value_or(ModelApi::kAnthropic));
  record.method = head.method;
  record.route = RouteForRecord(head.target.substr(0, head.target.find('?')));
  record.status = reply.status;
  record.refused = true;
  record.error = probe ? "" : reply.message;
  ready_.push_back(std::move(record));
  std::string message = reply.message;
  refusal_ = Refusal{api, std::move(reply), head.method == "HEAD", probe};
  return absl::PermissionDeniedError(probe ? "health probe answered by the broker" : message);
}

absl::Status ModelBrokerFilter::Bind(ModelApi api, ModelReply* refusal) {
  absl::string_view name = ModelApiDisplayName(api);
  absl::StatusOr<ModelUpstream> upstream =
      config_.upstream ? config_.upstream(api) : DefaultModelUpstream(api);
  if (!upstream.ok()) {
    *refusal =
        Reply(503, absl::IsNotFound(upstream.status())
                       ? absl::StrCat("the ", name,
                                      " API is not configured for this "
                                      "sandbox: ask the host's user to enable it")
                       : absl::StrCat("the ", name,
                                      " upstream is misconfigured: ", upstream.status().message()));
    return absl::FailedPreconditionError(refusal->message);
  }
  absl::StatusOr<std::string> key =
      config_.key ? config_.key(api) : absl::NotFoundError("no key source");
  if (!key.ok()) {
    *refusal = Reply(503, absl::IsNotFound(key.status())
                              ? absl::StrCat("no ", name,
                                             " API key is stored on the host: run `abox agent "
                                             "login ",
                                             ModelApiPrefix(api), "`")
                              : absl::StrCat("the ", name,
                                             " API key could not be read on the "
                                             "host: ",
                                             key.status().message()));
    return absl::FailedPreconditionError(refusal->message);
  }
  if (absl::Status valid = CheckModelKey(api, *key); !valid.ok()) {
    *refusal = Reply(503, std::string(valid.message()));
    return valid;
  }
  // Masked with as many '*': a response echoing the key keeps its length (and its framing).
  absl::StatusOr<ValueScrubber> mask =
      ValueScrubber::Create({{*key, std::string(key->size(), '*')}});
  if (!mask.ok()) {
    *refusal = Reply(503, std::string(mask.status().message()));
    return mask.status();
  }
  api_ = api;
  upstream_ = *std::move(upstream);
  key_ = *std::move(key);
  mask_ = *std::move(mask);
  return absl::OkStatus();
}

absl::StatusOr<std::string> ModelBrokerFilter::OnHead(const HttpRequestHead& head) {
  ModelRoute route = ClassifyModelRoute(head.method, head.target);
  std::optional<ModelApi> reply_api = route.api ? route.api : api_;
  switch (route.kind) {
    case ModelRouteKind::kProbe:
      return Refuse(head, reply_api, Reply(200, ""), /*probe=*/true);
    case ModelRouteKind::kNotFound:
      return Refuse(
          head, reply_api,
          Reply(404, absl::StrCat("no route ", head.method, " ", QuoteForLog(route.path, 120),
                                  ": the broker forwards only the model API calls of "
                                  "the supported agent CLIs")));
    case ModelRouteKind::kMethodNotAllowed: {
      ModelReply reply =
          Reply(405, absl::StrCat(head.method, " is not allowed on ", QuoteForLog(route.path, 120),
                                  " (use ", route.allow, ")"));
      reply.headers.push_back({"allow", route.allow});
      return Refuse(head, reply_api, std::move(reply));
    }
    case ModelRouteKind::kForward:
      break;
  }
  if (!HasModelToken(head, config_.token)) {
    return Refuse(head, reply_api,
                  Reply(401,
                        "this token is not this sandbox's broker token: use the "
                        "ANTHROPIC_API_KEY / OPENAI_API_KEY abox set in the sandbox"));
  }
  if (api_ && *api_ != *route.api) {
    return Refuse(head, reply_api,
                  Reply(400, absl::StrCat("this connection serves the ", ModelApiDisplayName(*api_),
                                          " API: open a new connection for ",
                                          ModelApiDisplayName(*route.api))));
  }
  if (!api_) {
    ModelReply refusal;
    if (!Bind(*route.api, &refusal).ok()) {
      return Refuse(head, reply_api, std::move(refusal));
    }
  }
  ModelBrokerLimiter::Permit permit;
  if (config_.limiter != nullptr) {
    ModelBrokerLimiter::Admission admission = config_.limiter->Admit();
    if (!admission.admitted) {
      ModelReply reply = Reply(429, absl::StrCat(admission.why, ": wait and retry"));
      reply.headers.push_back(
          {"retry-after", absl::StrCat(absl::ToInt64Seconds(admission.retry_after))});
      return Refuse(head, reply_api, std::move(reply));
    }
    permit = std::move(admission.permit);
  }
  if (!responses_.ExpectResponse(
          {.is_head = head.method == "HEAD", .minor_version = head.minor_version})) {
    return Refuse(head, reply_api, Reply(429, "too many pipelined requests on one connection"));
  }
  InFlight f;
  f.record.api = *route.api;
  f.record.method = head.method;
  f.record.route = RouteForRecord(route.path);
  f.usage = route.usage;
  f.start = absl::Now();
  f.permit = std::move(permit);
  in_flight_.push_back(std::move(f));
  ++accepted_;
  return RewriteModelHead(head, route, *upstream_, key_);
}

void ModelBrokerFilter::OnResponseHead(const HttpResponseHead& head,
                                       const PendingRequest& /*request*/) {
  if (in_flight_.empty()) {
    return;  // a response nobody asked for: followed, not recorded
  }
  InFlight& f = in_flight_.front();
  f.record.status = head.status;
  f.record.first_byte = absl::Now() - f.start;
  if (head.status >= 400) {
    f.record.error = absl::StrCat("the provider answered ", head.status);
  }
  f.reader.emplace(f.usage, head);
}

void ModelBrokerFilter::OnResponseBody(absl::string_view data) {
  if (!in_flight_.empty() && in_flight_.front().reader) {
    in_flight_.front().reader->Feed(data);
  }
}

void ModelBrokerFilter::OnResponseEnd() {
  if (in_flight_.empty()) {
    return;
  }
  InFlight& f = in_flight_.front();
  if (f.reader) {
    f.reader->Finish();
    f.record.input_tokens = f.reader->usage().input_tokens;
    f.record.output_tokens = f.reader->usage().output_tokens;
  }
  f.record.total = absl::Now() - f.start;
  ready_.push_back(std::move(f.record));
  in_flight_.pop_front();  // gives the in-flight slot back
}

}  // namespace abox::net
