#include "src/secrets/secret.h"

#include <openssl/crypto.h>

#include <algorithm>
#include <initializer_list>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "nlohmann/json.hpp"
#include "src/base/status_macros.h"

namespace abox::secrets {

void Cleanse(std::string& text) {
  // capacity() bytes are ours to write (the buffer holds one more for the terminator).
  OPENSSL_cleanse(text.data(), text.capacity());
  text.clear();
}

void CleanseJson(nlohmann::json& json) {
  if (json.is_string()) {
    Cleanse(json.get_ref<std::string&>());
  } else if (json.is_structured()) {
    for (auto& item : json) {
      CleanseJson(item);
    }
  }
}

SecretValue::SecretValue(std::string value) : value_(std::move(value)) { Cleanse(value); }

// After a move the source may still hold the bytes: a short value is copied out of its inline
// buffer, and move assignment can hand the target's old heap buffer to the source. Wiping the
// source's whole capacity covers both.
SecretValue::SecretValue(SecretValue&& other) noexcept : value_(std::move(other.value_)) {
  Cleanse(other.value_);
}

SecretValue& SecretValue::operator=(SecretValue&& other) noexcept {
  if (this != &other) {
    Cleanse(value_);
    value_ = std::move(other.value_);
    Cleanse(other.value_);
  }
  return *this;
}

SecretValue::~SecretValue() { Cleanse(value_); }

bool SecretValue::Equals(const SecretValue& other) const {
  return value_.size() == other.value_.size() &&
         CRYPTO_memcmp(value_.data(), other.value_.data(), value_.size()) == 0;
}

absl::string_view SourceKindName(SourceKind kind) {
  switch (kind) {
    case SourceKind::kStored:
      return "stored";
    case SourceKind::kCommand:
      return "command";
    case SourceKind::kVault:
      return "vault";
  }
  return "unknown";
}

namespace {

using nlohmann::json;

absl::Status Invalid(absl::string_view what) { return absl::InvalidArgumentError(what); }

bool IsUpperOrUnderscore(char c) { return (c >= 'A' && c <= 'Z') || c == '_'; }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// One DNS label as a host pattern takes it: lowercase letters, digits, '-' inside.
bool IsLabel(absl::string_view label) {
  if (label.empty() || label.size() > 63 || label.front() == '-' || label.back() == '-') {
    return false;
  }
  for (char c : label) {
    if (!((c >= 'a' && c <= 'z') || IsDigit(c) || c == '-')) {
      return false;
    }
  }
  return true;
}

// RFC 9110 token characters (header field names).
bool IsTokenChar(char c) {
  return absl::ascii_isalnum(static_cast<unsigned char>(c)) ||
         absl::string_view("!#$%&'*+-.^_`|~").find(c) != absl::string_view::npos;
}

// Reads an optional string field; a present value of another type is an error.
absl::Status ReadString(const json& object, absl::string_view key, std::string& out) {
  auto it = object.find(key);
  if (it == object.end()) {
    return absl::OkStatus();
  }
  if (!it->is_string()) {
    return Invalid(absl::StrCat("\"", key, "\" must be a string"));
  }
  out = it->get_ref<const std::string&>();
  return absl::OkStatus();
}

absl::Status ReadStringList(const json& object, absl::string_view key,
                            std::vector<std::string>& out) {
  auto it = object.find(key);
  if (it == object.end()) {
    return absl::OkStatus();
  }
  if (!it->is_array()) {
    return Invalid(absl::StrCat("\"", key, "\" must be a list of strings"));
  }
  out.clear();
  for (const json& item : *it) {
    if (!item.is_string()) {
      return Invalid(absl::StrCat("\"", key, "\" must be a list of strings"));
    }
    out.push_back(item.get_ref<const std::string&>());
  }
  return absl::OkStatus();
}

absl::Status RefuseUnknownKeys(const json& object, absl::string_view where,
                               std::initializer_list<absl::string_view> known) {
  for (const auto& [key, value] : object.items()) {
    bool found = false;
    for (absl::string_view k : known) {
      found = found || k == key;
    }
    if (!found) {
      return Invalid(absl::StrCat("unknown field \"", key, "\" in ", where,
                                  " (known: ", absl::StrJoin(known, ", "), ")"));
    }
  }
  return absl::OkStatus();
}

absl::Status ReadSource(const json& source, SecretSpec& spec) {
  if (!source.is_object()) {
    return Invalid("\"source\" must be an object with a \"kind\": stored, command or vault");
  }
  std::string kind = "stored";
  ABOX_RETURN_IF_ERROR(ReadString(source, "kind", kind));
  if (kind == "stored") {
    spec.source = SourceKind::kStored;
    return RefuseUnknownKeys(source, "a stored source", {"kind"});
  }
  if (kind == "command") {
    spec.source = SourceKind::kCommand;
    ABOX_RETURN_IF_ERROR(
        RefuseUnknownKeys(source, "a command source", {"kind", "argv", "timeout_ms"}));
    ABOX_RETURN_IF_ERROR(ReadStringList(source, "argv", spec.command.argv));
    if (auto it = source.find("timeout_ms"); it != source.end()) {
      if (!it->is_number_integer()) {
        return Invalid("\"timeout_ms\" must be a whole number of milliseconds");
      }
      spec.command.timeout = std::chrono::milliseconds(it->get<int64_t>());
    }
    return absl::OkStatus();
  }
  if (kind == "vault") {
    spec.source = SourceKind::kVault;
    ABOX_RETURN_IF_ERROR(
        RefuseUnknownKeys(source, "a vault source", {"kind", "addr", "mount", "path", "key"}));
    ABOX_RETURN_IF_ERROR(ReadString(source, "addr", spec.vault.addr));
    ABOX_RETURN_IF_ERROR(ReadString(source, "mount", spec.vault.mount));
    ABOX_RETURN_IF_ERROR(ReadString(source, "path", spec.vault.path));
    return ReadString(source, "key", spec.vault.key);
  }
  return Invalid(absl::StrCat("unknown source kind \"", kind, "\" (use stored, command or vault)"));
}

}  // namespace

absl::Status ValidateCommandReference(const CommandReference& command) {
  if (command.argv.empty() || command.argv[0].empty()) {
    return Invalid(
        "a command source needs the command to run (argv[0]), e.g. [\"pass\", \"show\", "
        "\"github/token\"]");
  }
  if (command.timeout.count() <= 0 || command.timeout > std::chrono::minutes(10)) {
    return Invalid("a command source's timeout must be between 1 ms and 10 minutes");
  }
  return absl::OkStatus();
}

absl::Status ValidateVaultReference(const VaultReference& vault) {
  if (!vault.addr.empty() &&
      !(vault.addr.starts_with("http://") || vault.addr.starts_with("https://"))) {
    return Invalid(
        "a Vault address starts with https:// (or http://), e.g. "
        "https://vault.example.com:8200; leave it empty to use $VAULT_ADDR");
  }
  for (auto [field, value] :
       {std::pair<absl::string_view, const std::string&>{"mount", vault.mount},
        {"path", vault.path},
        {"key", vault.key}}) {
    if (value.empty()) {
      return Invalid(absl::StrCat("a Vault source needs its ", field,
                                  " (KV v2: GET {addr}/v1/{mount}/data/{path}, field {key})"));
    }
  }
  // Mount and path go into the request target as they are: nothing that would end or escape
  // the path (the key is only looked up in the JSON answer).
  for (auto [field, value] :
       {std::pair<absl::string_view, const std::string&>{"mount", vault.mount},
        {"path", vault.path}}) {
    bool bad = value.find_first_of("?#%\\") != std::string::npos || value.find("..") != value.npos;
    for (char c : value) {
      bad = bad || static_cast<unsigned char>(c) <= 0x20 || static_cast<unsigned char>(c) >= 0x7f;
    }
    if (bad) {
      return Invalid(absl::StrCat("the Vault ", field,
                                  " must be printable ASCII without '?', '#', '%', '\\', '..' "
                                  "or spaces"));
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateSecretName(absl::string_view name) {
  bool ok = !name.empty() && name.size() <= kMaxSecretNameLength && IsUpperOrUnderscore(name[0]);
  for (char c : name) {
    ok = ok && (IsUpperOrUnderscore(c) || IsDigit(c));
  }
  if (!ok) {
    return Invalid(absl::StrCat(
        "secret name \"", name.substr(0, kMaxSecretNameLength + 1),
        "\" is not valid: use 1 to 64 upper-case letters, digits and '_', not starting with a "
        "digit (like an environment variable, e.g. GITHUB_TOKEN)"));
  }
  return absl::OkStatus();
}

absl::Status ValidateHostPattern(absl::string_view pattern) {
  auto bad = [&](absl::string_view why) {
    return Invalid(absl::StrCat("host \"", pattern.substr(0, 300), "\" is not valid: ", why,
                                " (use a lower-case DNS name such as api.github.com, "
                                "optionally *.example.com for its subdomains and :port)"));
  };
  absl::string_view host = pattern;
  if (size_t colon = host.rfind(':'); colon != absl::string_view::npos) {
    absl::string_view port = host.substr(colon + 1);
    int number = 0;
    if (port.empty() || port.size() > 5 || !std::all_of(port.begin(), port.end(), IsDigit) ||
        !absl::SimpleAtoi(port, &number) || number < 1 || number > 65535) {
      return bad("the port must be a number from 1 to 65535");
    }
    host = host.substr(0, colon);
  }
  bool wildcard = absl::StartsWith(host, "*.");
  if (wildcard) {
    host.remove_prefix(2);
  }
  if (host.empty() || host.size() > 253) {
    return bad("a host name has 1 to 253 characters");
  }
  std::vector<absl::string_view> labels = absl::StrSplit(host, '.');
  for (absl::string_view label : labels) {
    if (!IsLabel(label)) {
      return bad(
          "each dot-separated label is 1-63 lower-case letters, digits or '-' (not at either "
          "end); '*' only as a whole first label");
    }
  }
  // Like the egress policy: no top-level domain starts with a digit, which keeps IP literals
  // out (a secret is bound to a name the proxy can check against SNI and Host).
  if (!(labels.back()[0] >= 'a' && labels.back()[0] <= 'z')) {
    return bad("IP addresses are not accepted; bind the secret to the service's host name");
  }
  if (wildcard && labels.size() < 2) {
    return bad("a wildcard needs at least two labels after \"*.\" (not *.com)");
  }
  return absl::OkStatus();
}

absl::Status ValidateHeaderName(absl::string_view header) {
  if (header.empty() || header.size() > 256 ||
      !std::all_of(header.begin(), header.end(), IsTokenChar)) {
    return Invalid(absl::StrCat("header name \"", header.substr(0, 256),
                                "\" is not valid: use an HTTP header name such as Authorization "
                                "or X-Api-Key"));
  }
  return absl::OkStatus();
}

absl::Status ValidateFormat(absl::string_view format) {
  size_t first = format.find("{}");
  if (first == absl::string_view::npos || format.find("{}", first + 2) != absl::string_view::npos) {
    return Invalid(absl::StrCat("format \"", format.substr(0, 256),
                                "\" must contain \"{}\" exactly once, where the value goes "
                                "(e.g. \"Bearer {}\" or \"{}\")"));
  }
  for (char c : format) {
    if (c == '\r' || c == '\n' || c == '\0') {
      return Invalid("the format must not contain line breaks or NUL");
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateSecretSpec(const SecretSpec& spec) {
  ABOX_RETURN_IF_ERROR(ValidateSecretName(spec.name));
  if (spec.hosts.empty()) {
    return Invalid(absl::StrCat("secret ", spec.name,
                                " is bound to no host: give at least one (--host api.github.com)"));
  }
  for (const std::string& host : spec.hosts) {
    ABOX_RETURN_IF_ERROR(ValidateHostPattern(host));
  }
  ABOX_RETURN_IF_ERROR(ValidateHeaderName(spec.header));
  ABOX_RETURN_IF_ERROR(ValidateFormat(spec.format));
  switch (spec.source) {
    case SourceKind::kStored:
      return absl::OkStatus();
    case SourceKind::kCommand:
      return ValidateCommandReference(spec.command);
    case SourceKind::kVault:
      return ValidateVaultReference(spec.vault);
  }
  return Invalid("unknown source kind");
}

nlohmann::json SecretSpecToJson(const SecretSpec& spec) {
  json source = {{"kind", SourceKindName(spec.source)}};
  if (spec.source == SourceKind::kCommand) {
    source["argv"] = spec.command.argv;
    source["timeout_ms"] = spec.command.timeout.count();
  } else if (spec.source == SourceKind::kVault) {
    source["addr"] = spec.vault.addr;
    source["mount"] = spec.vault.mount;
    source["path"] = spec.vault.path;
    source["key"] = spec.vault.key;
  }
  return {{"name", spec.name},
          {"hosts", spec.hosts},
          {"header", spec.header},
          {"format", spec.format},
          {"allow_query", spec.allow_query},
          {"source", std::move(source)}};
}

absl::StatusOr<SecretSpec> SecretSpecFromJson(const nlohmann::json& json) {
  if (!json.is_object()) {
    return Invalid("a secret spec is a JSON object with at least \"name\" and \"hosts\"");
  }
  ABOX_RETURN_IF_ERROR(RefuseUnknownKeys(
      json, "a secret spec", {"name", "hosts", "header", "format", "allow_query", "source"}));
  SecretSpec spec;
  ABOX_RETURN_IF_ERROR(ReadString(json, "name", spec.name));
  ABOX_RETURN_IF_ERROR(ReadStringList(json, "hosts", spec.hosts));
  ABOX_RETURN_IF_ERROR(ReadString(json, "header", spec.header));
  ABOX_RETURN_IF_ERROR(ReadString(json, "format", spec.format));
  if (auto it = json.find("allow_query"); it != json.end()) {
    if (!it->is_boolean()) {
      return Invalid("\"allow_query\" must be true or false");
    }
    spec.allow_query = it->get<bool>();
  }
  if (auto it = json.find("source"); it != json.end()) {
    ABOX_RETURN_IF_ERROR(ReadSource(*it, spec));
  }
  ABOX_RETURN_IF_ERROR(ValidateSecretSpec(spec));
  return spec;
}

absl::StatusOr<SecretSpec> ParseSecretSpec(absl::string_view text) {
  json parsed = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded()) {
    return Invalid("a secret spec must be JSON text (it does not parse)");
  }
  return SecretSpecFromJson(parsed);
}

}  // namespace abox::secrets
