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
  if (h.pool) {
    nlohmann::json shapes = nlohmann::json::array();
    for (const PoolShapeInfo& s : h.pool->shapes) {
      nlohmann::json shape = {{"image", s.image},
                              {"cpus", s.cpus},
                              {"memory_mib", s.memory_mib},
                              {"idle", s.idle},
                              {"filling", s.filling}};
      if (!s.last_error.empty()) {
        shape["last_error"] = s.last_error;
      }
      shapes.push_back(std::move(shape));
    }
    j["pool"] = {
        {"size", h.pool->size}, {"shapes", std::move(shapes)}, {"handed_out", h.pool->handed_out},
        {"made", h.pool->made}, {"drained", h.pool->drained},  {"memory_low", h.pool->memory_low}};
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
  r.Object("pool", [&](AnswerReader& p) {
    Pool pool;
    p.Int("size", &pool.size);
    p.ObjectArray("shapes", [&](AnswerReader& s) {
      PoolShapeInfo shape;
      s.String("image", &shape.image);
      s.Int("cpus", &shape.cpus);
      s.Int("memory_mib", &shape.memory_mib);
      s.Int("idle", &shape.idle);
      s.Bool("filling", &shape.filling);
      s.String("last_error", &shape.last_error);
      pool.shapes.push_back(std::move(shape));
    });
    p.Int("handed_out", &pool.handed_out);
    p.Int("made", &pool.made);
    p.Int("drained", &pool.drained);
    p.Bool("memory_low", &pool.memory_low);
    h.pool = std::move(pool);
  });
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
