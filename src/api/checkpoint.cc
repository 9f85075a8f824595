#include "src/api/checkpoint.h"

#include "src/api/errors.h"
#include "src/api/json_body.h"
#include "src/api/wire.h"
#include "src/base/status_macros.h"

namespace abox::api {

nlohmann::json ToJson(const Checkpoint& c) {
  nlohmann::json j = {{"id", c.id},       {"name", c.name},       {"sandbox_id", c.sandbox_id},
                      {"image", c.image}, {"cpus", c.cpus},       {"memory_mib", c.memory_mib},
                      {"bytes", c.bytes}, {"save_ms", c.save_ms}, {"workspace", c.workspace}};
  PutApiTime(j, "created_at", c.created_at);
  return j;
}

namespace {

Checkpoint ReadCheckpoint(AnswerReader& r) {
  Checkpoint c;
  r.String("id", &c.id);
  r.String("name", &c.name);
  r.String("sandbox_id", &c.sandbox_id);
  r.String("image", &c.image);
  r.Int("cpus", &c.cpus);
  r.Int("memory_mib", &c.memory_mib);
  r.Time("created_at", &c.created_at);
  r.Int("bytes", &c.bytes);
  r.Int("save_ms", &c.save_ms);
  r.Bool("workspace", &c.workspace);
  return c;
}

}  // namespace

absl::StatusOr<Checkpoint> DecodeCheckpoint(const nlohmann::json& value) {
  AnswerReader r(value);
  Checkpoint c = ReadCheckpoint(r);
  ABOX_RETURN_IF_ERROR(r.status());
  return c;
}

absl::StatusOr<std::vector<Checkpoint>> DecodeCheckpointList(const nlohmann::json& value) {
  AnswerReader r(value);
  std::vector<Checkpoint> out;
  r.ObjectArray("checkpoints", [&](AnswerReader& item) { out.push_back(ReadCheckpoint(item)); });
  ABOX_RETURN_IF_ERROR(r.status());
  return out;
}

nlohmann::json ToJson(const CheckpointCreate& create) {
  nlohmann::json j = nlohmann::json::object();
  if (!create.name.empty()) {
    j["name"] = create.name;
  }
  return j;
}

absl::StatusOr<CheckpointCreate> DecodeCheckpointCreate(absl::string_view body) {
  ABOX_ASSIGN_OR_RETURN(nlohmann::json j, ParseObject(std::string_view(body.data(), body.size())));
  Reader r(j);
  CheckpointCreate c;
  r.OptionalString("name", &c.name, 63);
  ABOX_RETURN_IF_ERROR(r.Finish());
  return c;
}

nlohmann::json ToJson(const RestoreRequest& request) {
  return {{"checkpoint", request.checkpoint}};
}

absl::StatusOr<RestoreRequest> DecodeRestoreRequest(absl::string_view body) {
  ABOX_ASSIGN_OR_RETURN(nlohmann::json j, ParseObject(std::string_view(body.data(), body.size())));
  Reader r(j);
  RestoreRequest request;
  r.RequiredString("checkpoint", &request.checkpoint, 64);
  ABOX_RETURN_IF_ERROR(r.Finish());
  if (request.checkpoint.empty()) {
    return FieldError("checkpoint", "checkpoint must name a checkpoint (abox checkpoint ls ID)");
  }
  return request;
}

nlohmann::json ToJson(const ForkRequest& request) {
  nlohmann::json j = {{"count", request.count}};
  if (!request.name_prefix.empty()) {
    j["name_prefix"] = request.name_prefix;
  }
  return j;
}

absl::StatusOr<ForkRequest> DecodeForkRequest(absl::string_view body) {
  ABOX_ASSIGN_OR_RETURN(nlohmann::json j, ParseObject(std::string_view(body.data(), body.size())));
  Reader r(j);
  ForkRequest request;
  r.OptionalInt("count", &request.count, 1, kMaxForkCount);
  r.OptionalString("name_prefix", &request.name_prefix, 56);
  ABOX_RETURN_IF_ERROR(r.Finish());
  return request;
}

}  // namespace abox::api
