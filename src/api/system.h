// The daemon's own resources: GET /v1/health (with the capacity ledger) and GET /v1/version.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace abox::api {

// The host's vCPU and memory budget and how much of it sandboxes hold.
struct Ledger {
  int64_t cpus_used = 0;
  int64_t cpus_budget = 0;
  int64_t memory_mib_used = 0;
  int64_t memory_mib_budget = 0;

  friend bool operator==(const Ledger&, const Ledger&) = default;
};

struct Health {
  std::string status;  // "ok"
  std::optional<int64_t> pid;
  std::optional<double> uptime_seconds;
  std::optional<int64_t> sandboxes;  // running now
  std::optional<Ledger> ledger;
  std::string accel;  // the accelerator new sandboxes get (kvm / tcg); empty until known
  // Store or teardown failures aboxd logged and carried on after since it started.
  std::optional<int64_t> noted_failures;

  friend bool operator==(const Health&, const Health&) = default;
};
[[nodiscard]] nlohmann::json ToJson(const Health& health);
// Tolerant of unknown fields; a known field of the wrong type is an error naming it.
[[nodiscard]] absl::StatusOr<Health> DecodeHealth(const nlohmann::json& value);

struct Version {
  std::string version;   // aboxd's
  std::string api;       // "v1"
  int64_t protocol = 0;  // the host<->guest protocol

  friend bool operator==(const Version&, const Version&) = default;
};
[[nodiscard]] nlohmann::json ToJson(const Version& version);
[[nodiscard]] absl::StatusOr<Version> DecodeVersion(const nlohmann::json& value);

}  // namespace abox::api
