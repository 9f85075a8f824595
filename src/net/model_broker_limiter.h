// The flood bound of one sandbox's model broker: requests in flight at once, and requests per
// minute (a token bucket), shared by all of the sandbox's broker connections. A guest that
// loops on the API spends the user's money; past either cap the broker answers 429 itself,
// with retry-after, and nothing reaches the provider.
//
// Thread-safe (one lock, no I/O under it). The clock is injected for tests.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace abox::net {

class ModelBrokerLimiter final : public std::enable_shared_from_this<ModelBrokerLimiter> {
 public:
  struct Options {
    int max_in_flight = 16;
    int per_minute = 600;  // the bucket refills at this rate
    int burst = 60;        // and holds at most this many (starts full)
    std::function<absl::Time()> now = [] { return absl::Now(); };
  };

  // One admitted request: its in-flight slot is given back when this is destroyed or Released.
  class Permit final {
   public:
    Permit() = default;
    Permit(Permit&& other) noexcept : limiter_(std::move(other.limiter_)) {}
    Permit& operator=(Permit&& other) noexcept {
      Release();
      limiter_ = std::move(other.limiter_);
      return *this;
    }
    Permit(const Permit&) = delete;
    Permit& operator=(const Permit&) = delete;
    ~Permit() { Release(); }

    void Release();
    bool held() const { return limiter_ != nullptr; }

   private:
    friend class ModelBrokerLimiter;
    explicit Permit(std::shared_ptr<ModelBrokerLimiter> limiter) : limiter_(std::move(limiter)) {}
    std::shared_ptr<ModelBrokerLimiter> limiter_;
  };

  struct Admission {
    bool admitted = false;
    Permit permit;                                      // admitted
    std::string why;                                    // refused: which cap, for the 429 text
    absl::Duration retry_after = absl::ZeroDuration();  // refused: when to try again
  };

  static std::shared_ptr<ModelBrokerLimiter> Create(Options options);
  ModelBrokerLimiter(const ModelBrokerLimiter&) = delete;
  ModelBrokerLimiter& operator=(const ModelBrokerLimiter&) = delete;

  // Takes an in-flight slot and a token, or says which cap refused (and takes neither).
  Admission Admit();
  int in_flight() const;

 private:
  explicit ModelBrokerLimiter(Options options);
  void Return();

  const Options options_;
  mutable std::mutex mu_;
  int in_flight_ = 0;
  double tokens_;
  absl::Time refilled_;
};

}  // namespace abox::net
