// The daemon's own resources: GET /v1/health (with the capacity ledger) and GET /v1/version.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

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

// The warm pool: idle VMs kept ready per image and machine shape.
struct PoolShapeInfo {
  std::string image;
  int64_t cpus = 0;
  int64_t memory_mib = 0;
  int64_t idle = 0;        // ready to hand out
  bool filling = false;    // one is starting now
  std::string last_error;  // why the latest fill failed; empty after a good one

  friend bool operator==(const PoolShapeInfo&, const PoolShapeInfo&) = default;
};

struct Pool {
  int64_t size = 0;  // idle VMs kept per shape
  std::vector<PoolShapeInfo> shapes;
  int64_t handed_out = 0;  // since aboxd started
  int64_t made = 0;
  int64_t drained = 0;      // destroyed idle: memory short, budget needed, shape dropped
  bool memory_low = false;  // the host is short of memory: the pool drains, does not fill

  friend bool operator==(const Pool&, const Pool&) = default;
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
  std::optional<Pool> pool;  // absent when aboxd keeps no pool

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
