#include "src/daemon/services/secret_service.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "spdlog/spdlog.h"
#include "src/base/status_macros.h"
#include "src/secrets/command_source.h"
#include "src/secrets/vault_source.h"

namespace abox::daemon {
namespace {

// A value goes into an HTTP header line: no CR, LF, NUL or other control bytes.
absl::Status CheckValue(const secrets::SecretValue& value) {
  if (value.empty()) {
    return absl::InvalidArgumentError("the secret's value is empty");
  }
  for (unsigned char c : value.Reveal()) {
    if (c < 0x20 || c == 0x7f) {
      return absl::InvalidArgumentError(
          "the secret's value contains a line break or another control character: it could not "
          "go in an HTTP header (a file with a trailing newline is fine: one is removed)");
    }
  }
  return absl::OkStatus();
}

}  // namespace

SecretService::SecretService(store::SecretRepo& repo, ValueStoreOpener open_values,
                             SourceReader read_source)
    : repo_(&repo), open_values_(std::move(open_values)), read_source_(std::move(read_source)) {}

absl::StatusOr<secrets::SecretValue> SecretService::ReadSource(const secrets::SecretSpec& spec) {
  switch (spec.source) {
    case secrets::SourceKind::kCommand:
      return secrets::RunSecretCommand(spec.command.argv, {.timeout = spec.command.timeout});
    case secrets::SourceKind::kVault:
      return secrets::ReadVaultSecret(spec.vault, {});
    case secrets::SourceKind::kStored:
      break;
  }
  return absl::InternalError("a stored secret has no source to read");
}

absl::StatusOr<secrets::SecretValueStore*> SecretService::Values() {
  if (values_ == nullptr) {
    ABOX_ASSIGN_OR_RETURN(secrets::DefaultValueStore opened, open_values_());
    if (!opened.warning.empty()) {
      spdlog::warn("secrets: {}", opened.warning);
    }
    values_ = std::move(opened.store);
  }
  return values_.get();
}

absl::StatusOr<SecretView> SecretService::View(const store::SecretRow& row) {
  absl::StatusOr<secrets::SecretSpec> spec = secrets::ParseSecretSpec(row.spec);
  if (!spec.ok()) {
    return absl::DataLossError(absl::StrCat("the stored spec of secret ", row.name, " is damaged (",
                                            spec.status().message(),
                                            "): set it again with abox secret set"));
  }
  SecretView view{
      .spec = *std::move(spec), .created_at = row.created_at, .updated_at = row.updated_at};
  if (view.spec.source == secrets::SourceKind::kStored) {
    absl::MutexLock lock(&mu_);
    absl::StatusOr<secrets::SecretValueStore*> values = Values();
    view.stored_in = values.ok() ? (*values)->Describe() : "unavailable";
  }
  return view;
}

absl::StatusOr<SecretView> SecretService::Set(const nlohmann::json& spec_json,
                                              std::optional<secrets::SecretValue> value) {
  ABOX_ASSIGN_OR_RETURN(secrets::SecretSpec spec, secrets::SecretSpecFromJson(spec_json));
  const bool stored = spec.source == secrets::SourceKind::kStored;
  if (stored && !value) {
    return absl::InvalidArgumentError(absl::StrCat(
        "secret ", spec.name,
        " keeps its value in abox: give one (--from-env, --from-file or --stdin), or use "
        "--from-command or --vault"));
  }
  if (!stored && value) {
    return absl::InvalidArgumentError(absl::StrCat("secret ", spec.name, " is read from its ",
                                                   secrets::SourceKindName(spec.source),
                                                   " on each use: it takes no value"));
  }
  if (value) {
    ABOX_RETURN_IF_ERROR(CheckValue(*value));
  } else {
    // Read once to check the source works; the value is dropped at once.
    absl::StatusOr<secrets::SecretValue> read = read_source_(spec);
    if (!read.ok()) {
      return absl::Status(
          read.status().code(),
          absl::StrCat("reading secret ", spec.name, " from its ",
                       secrets::SourceKindName(spec.source), " failed: ", read.status().message()));
    }
    ABOX_RETURN_IF_ERROR(CheckValue(*read));
  }
  absl::MutexLock lock(&mu_);
  if (stored || repo_->Get(spec.name).ok()) {
    ABOX_ASSIGN_OR_RETURN(secrets::SecretValueStore * values, Values());
    if (stored) {
      ABOX_RETURN_IF_ERROR(values->Put(spec.name, *value));
    } else if (absl::Status s = values->Remove(spec.name);
               !s.ok() && s.code() != absl::StatusCode::kNotFound) {
      return s;  // a stored value replaced by a source goes
    }
  }
  ABOX_ASSIGN_OR_RETURN(store::SecretRow row,
                        repo_->Put(spec.name, secrets::SecretSpecToJson(spec).dump()));
  spdlog::info("secret {} set ({} source, hosts {})", spec.name,
               std::string(secrets::SourceKindName(spec.source)), absl::StrJoin(spec.hosts, ","));
  SecretView view{
      .spec = std::move(spec), .created_at = row.created_at, .updated_at = row.updated_at};
  if (stored) {
    view.stored_in = values_->Describe();
  }
  return view;
}

absl::StatusOr<SecretView> SecretService::Get(const std::string& name) {
  ABOX_ASSIGN_OR_RETURN(store::SecretRow row, repo_->Get(name));
  return View(row);
}

absl::StatusOr<std::vector<SecretView>> SecretService::List() {
  ABOX_ASSIGN_OR_RETURN(std::vector<store::SecretRow> rows, repo_->List());
  std::vector<SecretView> out;
  for (const store::SecretRow& row : rows) {
    ABOX_ASSIGN_OR_RETURN(SecretView view, View(row));
    out.push_back(std::move(view));
  }
  return out;
}

absl::Status SecretService::Remove(const std::string& name) {
  absl::MutexLock lock(&mu_);
  ABOX_ASSIGN_OR_RETURN(store::SecretRow row, repo_->Get(name));
  absl::StatusOr<secrets::SecretSpec> spec = secrets::ParseSecretSpec(row.spec);
  if (!spec.ok() || spec->source == secrets::SourceKind::kStored) {
    ABOX_ASSIGN_OR_RETURN(secrets::SecretValueStore * values, Values());
    if (absl::Status s = values->Remove(name); !s.ok() && s.code() != absl::StatusCode::kNotFound) {
      return absl::Status(s.code(), absl::StrCat("secret ", name,
                                                 " was not removed: its value "
                                                 "could not be: ",
                                                 s.message()));
    }
  }
  ABOX_RETURN_IF_ERROR(repo_->Delete(name));
  spdlog::info("secret {} removed", name);
  return absl::OkStatus();
}

absl::StatusOr<secrets::SecretValue> SecretService::Resolve(const std::string& name) {
  ABOX_ASSIGN_OR_RETURN(SecretView view, Get(name));
  if (view.spec.source != secrets::SourceKind::kStored) {
    return read_source_(view.spec);
  }
  absl::MutexLock lock(&mu_);
  ABOX_ASSIGN_OR_RETURN(secrets::SecretValueStore * values, Values());
  return values->Get(name);
}

}  // namespace abox::daemon
