#include "src/api/secret.h"

#include "src/api/errors.h"
#include "src/api/json_body.h"
#include "src/api/wire.h"
#include "src/base/status_macros.h"

namespace abox::api {

nlohmann::json ToJson(const Secret& s) {
  nlohmann::json j = {
      {"name", s.name}, {"spec", s.spec}, {"source", s.source}, {"stored_in", s.stored_in}};
  PutApiTime(j, "created_at", s.created_at);
  PutApiTime(j, "updated_at", s.updated_at);
  j["used_by"] = s.used_by;
  return j;
}

namespace {

Secret ReadSecret(AnswerReader& r) {
  Secret s;
  r.String("name", &s.name);
  r.Json("spec", &s.spec);
  r.String("source", &s.source);
  r.String("stored_in", &s.stored_in);
  r.Time("created_at", &s.created_at);
  r.Time("updated_at", &s.updated_at);
  if (r.Has("used_by")) {
    r.StringArray("used_by", &s.used_by);
  }
  return s;
}

}  // namespace

absl::StatusOr<Secret> DecodeSecret(const nlohmann::json& value) {
  AnswerReader r(value);
  Secret s = ReadSecret(r);
  ABOX_RETURN_IF_ERROR(r.status());
  return s;
}

absl::StatusOr<std::vector<Secret>> DecodeSecretList(const nlohmann::json& value) {
  AnswerReader r(value);
  std::vector<Secret> out;
  r.ObjectArray("secrets", [&](AnswerReader& item) { out.push_back(ReadSecret(item)); });
  ABOX_RETURN_IF_ERROR(r.status());
  return out;
}

nlohmann::json ToJson(const SecretSet& set) {
  nlohmann::json j = {{"spec", set.spec}};
  if (set.value) {
    j["value"] = *set.value;
  }
  return j;
}

absl::StatusOr<SecretSet> DecodeSecretSet(absl::string_view body) {
  ABOX_ASSIGN_OR_RETURN(nlohmann::json j, ParseObject(std::string_view(body.data(), body.size())));
  Reader r(j);
  SecretSet set;
  r.Ignore("spec");  // an object: src/secrets reads it, refusing unknown fields
  r.OptionalString("value", &set.value, kMaxSecretValueBytes);
  ABOX_RETURN_IF_ERROR(r.Finish());
  auto spec = j.find("spec");
  if (spec == j.end() || !spec->is_object()) {
    return FieldError("spec", "spec must be an object: {\"name\": ..., \"hosts\": [...], ...}");
  }
  set.spec = *spec;
  return set;
}

}  // namespace abox::api
