#include "src/net/model_broker_limiter.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace abox::net {

void ModelBrokerLimiter::Permit::Release() {
  if (limiter_ != nullptr) {
    limiter_->Return();
    limiter_.reset();
  }
}

std::shared_ptr<ModelBrokerLimiter> ModelBrokerLimiter::Create(Options options) {
  return std::shared_ptr<ModelBrokerLimiter>(new ModelBrokerLimiter(std::move(options)));
}

ModelBrokerLimiter::ModelBrokerLimiter(Options options)
    : options_(std::move(options)),
      tokens_(std::max(1, options_.burst)),
      refilled_(options_.now()) {}

ModelBrokerLimiter::Admission ModelBrokerLimiter::Admit() {
  Admission out;
  std::lock_guard<std::mutex> lock(mu_);
  absl::Time now = options_.now();
  double per_second = std::max(1, options_.per_minute) / 60.0;
  if (now > refilled_) {
    tokens_ = std::min<double>(std::max(1, options_.burst),
                               tokens_ + absl::ToDoubleSeconds(now - refilled_) * per_second);
    refilled_ = now;
  }
  if (in_flight_ >= options_.max_in_flight) {
    out.why =
        absl::StrCat(options_.max_in_flight, " requests of this sandbox are already in flight");
    out.retry_after = absl::Seconds(1);
    return out;
  }
  if (tokens_ < 1.0) {
    out.why =
        absl::StrCat("this sandbox sent more than ", options_.per_minute, " requests per minute");
    out.retry_after = absl::Seconds(std::ceil((1.0 - tokens_) / per_second));
    return out;
  }
  tokens_ -= 1.0;
  ++in_flight_;
  out.admitted = true;
  out.permit = Permit(shared_from_this());
  return out;
}

int ModelBrokerLimiter::in_flight() const {
  std::lock_guard<std::mutex> lock(mu_);
  return in_flight_;
}

void ModelBrokerLimiter::Return() {
  std::lock_guard<std::mutex> lock(mu_);
  --in_flight_;
}

}  // namespace abox::net
