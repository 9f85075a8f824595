#include "src/api/model.h"

#include "src/api/json_body.h"
#include "src/api/wire.h"
#include "src/base/status_macros.h"

namespace abox::api {

nlohmann::json ToJson(const ModelProvider& p) {
  nlohmann::json j = {{"api", p.api},
                      {"secret", p.secret},
                      {"base_url", p.base_url},
                      {"configured", p.configured},
                      {"key_stored", p.key_stored}};
  PutApiTime(j, "updated_at", p.updated_at);
  return j;
}

namespace {

ModelProvider ReadProvider(AnswerReader& r) {
  ModelProvider p;
  r.String("api", &p.api);
  r.String("secret", &p.secret);
  r.String("base_url", &p.base_url);
  r.Bool("configured", &p.configured);
  r.Bool("key_stored", &p.key_stored);
  r.Time("updated_at", &p.updated_at);
  return p;
}

}  // namespace

absl::StatusOr<ModelProvider> DecodeModelProvider(const nlohmann::json& value) {
  AnswerReader r(value);
  ModelProvider p = ReadProvider(r);
  ABOX_RETURN_IF_ERROR(r.status());
  return p;
}

absl::StatusOr<std::vector<ModelProvider>> DecodeModelProviderList(const nlohmann::json& value) {
  AnswerReader r(value);
  std::vector<ModelProvider> out;
  r.ObjectArray("providers", [&](AnswerReader& item) { out.push_back(ReadProvider(item)); });
  ABOX_RETURN_IF_ERROR(r.status());
  return out;
}

nlohmann::json ToJson(const ModelProviderSet& set) {
  nlohmann::json j = {{"secret", set.secret}};
  if (!set.base_url.empty()) {
    j["base_url"] = set.base_url;
  }
  return j;
}

absl::StatusOr<ModelProviderSet> DecodeModelProviderSet(absl::string_view body) {
  ABOX_ASSIGN_OR_RETURN(nlohmann::json j, ParseObject(std::string_view(body.data(), body.size())));
  Reader r(j);
  ModelProviderSet set;
  r.RequiredString("secret", &set.secret, 64);
  r.OptionalString("base_url", &set.base_url, 2048);
  ABOX_RETURN_IF_ERROR(r.Finish());
  return set;
}

nlohmann::json ToJson(const ModelUsage& u) {
  nlohmann::json j = {
      {"api", u.api},         {"requests", u.requests},         {"errors", u.errors},
      {"refused", u.refused}, {"input_tokens", u.input_tokens}, {"output_tokens", u.output_tokens}};
  PutApiTime(j, "last_at", u.last_at);
  return j;
}

absl::StatusOr<std::vector<ModelUsage>> DecodeModelUsageList(const nlohmann::json& value) {
  AnswerReader r(value);
  std::vector<ModelUsage> out;
  r.ObjectArray("usage", [&](AnswerReader& item) {
    ModelUsage u;
    item.String("api", &u.api);
    item.Int("requests", &u.requests);
    item.Int("errors", &u.errors);
    item.Int("refused", &u.refused);
    item.Int("input_tokens", &u.input_tokens);
    item.Int("output_tokens", &u.output_tokens);
    item.Time("last_at", &u.last_at);
    out.push_back(std::move(u));
  });
  ABOX_RETURN_IF_ERROR(r.status());
  return out;
}

}  // namespace abox::api
