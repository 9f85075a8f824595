#include "src/api/system.h"

#include "src/api/wire.h"
#include "src/base/status_macros.h"

namespace abox::api {

nlohmann::json ToJson(const Health& h) {
  nlohmann::json j = {{"status", h.status}};
  if (h.pid) {
    j["pid"] = *h.pid;
  }
  if (h.uptime_seconds) {
    j["uptime_seconds"] = *h.uptime_seconds;
  }
  if (h.sandboxes) {
    j["sandboxes"] = *h.sandboxes;
  }
  if (h.ledger) {
    j["ledger"] = {{"cpus_used", h.ledger->cpus_used},
                   {"cpus_budget", h.ledger->cpus_budget},
                   {"memory_mib_used", h.ledger->memory_mib_used},
                   {"memory_mib_budget", h.ledger->memory_mib_budget}};
  }
  if (!h.accel.empty()) {
    j["accel"] = h.accel;
  }
  if (h.noted_failures) {
    j["noted_failures"] = *h.noted_failures;
  }
  return j;
}

absl::StatusOr<Health> DecodeHealth(const nlohmann::json& value) {
  AnswerReader r(value);
  Health h;
  r.String("status", &h.status);
  r.Int("pid", &h.pid);
  r.Number("uptime_seconds", &h.uptime_seconds);
  r.Int("sandboxes", &h.sandboxes);
  r.Object("ledger", [&](AnswerReader& l) {
    Ledger ledger;
    l.Int("cpus_used", &ledger.cpus_used);
    l.Int("cpus_budget", &ledger.cpus_budget);
    l.Int("memory_mib_used", &ledger.memory_mib_used);
    l.Int("memory_mib_budget", &ledger.memory_mib_budget);
    h.ledger = ledger;
  });
  r.String("accel", &h.accel);
  r.Int("noted_failures", &h.noted_failures);
  ABOX_RETURN_IF_ERROR(r.status());
  return h;
}

nlohmann::json ToJson(const Version& v) {
  return {{"version", v.version}, {"api", v.api}, {"protocol", v.protocol}};
}

absl::StatusOr<Version> DecodeVersion(const nlohmann::json& value) {
  AnswerReader r(value);
  Version v;
  r.String("version", &v.version);
  r.String("api", &v.api);
  r.Int("protocol", &v.protocol);
  ABOX_RETURN_IF_ERROR(r.status());
  return v;
}

}  // namespace abox::api
