#include "src/image/manifest.h"

#include <limits>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "src/image/sha256.h"

namespace abox::image {
namespace {

using nlohmann::json;

// Reads typed fields out of a JSON object, remembering the first error.
class FieldReader {
 public:
  explicit FieldReader(const json& obj) : obj_(obj) {}

  void String(const char* key, std::string* out) {
    if (const json* v = Find(key, "a string", &json::is_string)) {
      *out = v->get<std::string>();
    }
  }
  void Sha256(const char* key, std::string* out) {
    String(key, out);
    if (status_.ok() && !IsSha256Hex(*out)) {
      Fail(key, "a sha256 hex string");
    }
  }
  template <typename T>
  void Unsigned(const char* key, T* out) {
    if (const json* v = Find(key, "a non-negative integer", &json::is_number_unsigned)) {
      auto u = v->get<uint64_t>();
      if (u > std::numeric_limits<T>::max()) {
        Fail(key, "in range");
      } else {
        *out = static_cast<T>(u);
      }
    }
  }
  void Int64(const char* key, int64_t* out) {
    if (const json* v = Find(key, "an integer", &json::is_number_integer)) {
      *out = v->get<int64_t>();
    }
  }
  void Strings(const char* key, std::vector<std::string>* out) {
    const json* v = Find(key, "an array of strings", &json::is_array);
    if (v == nullptr) {
      return;
    }
    out->clear();
    for (const json& e : *v) {
      if (!e.is_string()) {
        Fail(key, "an array of strings");
        return;
      }
      out->push_back(e.get<std::string>());
    }
  }
  const json* Object(const char* key) { return Find(key, "an object", &json::is_object); }

  [[nodiscard]] const absl::Status& status() const { return status_; }
  void Fail(const char* key, absl::string_view what) {
    if (status_.ok()) {
      status_ = absl::InvalidArgumentError(
          absl::StrCat("manifest field '", key, "' is missing or not ", what));
    }
  }

 private:
  const json* Find(const char* key, absl::string_view what, bool (json::*is)() const noexcept) {
    if (!status_.ok()) {
      return nullptr;
    }
    auto it = obj_.find(key);
    if (it == obj_.end() || !((*it).*is)()) {
      Fail(key, what);
      return nullptr;
    }
    return &*it;
  }

  const json& obj_;
  absl::Status status_;
};

}  // namespace

std::string ManifestToJson(const Manifest& m) {
  json artifacts = json::object();
  for (const auto& [file, a] : m.artifacts) {
    artifacts[file] = {{"sha256", a.sha256}, {"size", a.size}, {"mtime_ns", a.mtime_ns}};
  }
  json j = {
      {"format", m.format},
      {"name", m.name},
      {"created_at", m.created_at},
      {"artifacts", artifacts},
      {"kernel_version", m.kernel_version},
      {"kernel_package", m.kernel_package},
      {"kernel_cmdline", m.kernel_cmdline},
      {"agent_version", m.agent_version},
      {"agent_sha256", m.agent_sha256},
      {"protocol_version", m.protocol_version},
      {"suite", m.suite},
      {"mirror", m.mirror},
      {"arch", m.arch},
      {"extra_packages", m.extra_packages},
      {"packages", m.packages},
      {"initramfs_modules", m.initramfs_modules},
      {"rootfs_key", m.rootfs_key},
      {"inputs", m.inputs},
      {"builder_version", m.builder_version},
  };
  if (!m.preset.empty()) {
    j["preset"] = m.preset;
  }
  if (!m.coding_agents.empty()) {  // absent when empty: older readers see an unchanged layout
    json agents = json::array();
    for (const ManifestAgent& a : m.coding_agents) {
      agents.push_back({{"name", a.name},
                        {"package", a.package},
                        {"version", a.version},
                        {"integrity", a.integrity},
                        {"command", a.command},
                        {"binary", a.binary}});
    }
    j["coding_agents"] = agents;
  }
  // `replace` keeps dump() from throwing on invalid UTF-8 (e.g. in a user-supplied mirror).
  return j.dump(2, ' ', false, json::error_handler_t::replace) + "\n";
}

absl::StatusOr<Manifest> ParseManifest(absl::string_view text) {
  json j = json::parse(text.data(), text.data() + text.size(), nullptr,
                       /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return absl::InvalidArgumentError("manifest is not a JSON object");
  }
  Manifest m;
  FieldReader r(j);
  r.Unsigned("format", &m.format);
  if (r.status().ok() && m.format != kManifestFormat) {
    return absl::InvalidArgumentError(absl::StrCat(
        "manifest format ", m.format, " is not supported (expected ", kManifestFormat, ")"));
  }
  r.String("name", &m.name);
  r.String("created_at", &m.created_at);
  r.String("kernel_version", &m.kernel_version);
  r.String("kernel_package", &m.kernel_package);
  r.String("kernel_cmdline", &m.kernel_cmdline);
  r.String("agent_version", &m.agent_version);
  r.Sha256("agent_sha256", &m.agent_sha256);
  r.Unsigned("protocol_version", &m.protocol_version);
  r.String("suite", &m.suite);
  r.String("mirror", &m.mirror);
  r.String("arch", &m.arch);
  r.Strings("extra_packages", &m.extra_packages);
  r.Strings("packages", &m.packages);
  r.Strings("initramfs_modules", &m.initramfs_modules);
  r.Sha256("rootfs_key", &m.rootfs_key);
  r.Sha256("inputs", &m.inputs);
  r.String("builder_version", &m.builder_version);
  const json* artifacts = r.Object("artifacts");
  if (!r.status().ok()) {
    return r.status();
  }
  if (auto it = j.find("preset"); it != j.end()) {
    if (!it->is_string()) {
      return absl::InvalidArgumentError("manifest field 'preset' is not a string");
    }
    m.preset = it->get<std::string>();
  }
  if (auto it = j.find("coding_agents"); it != j.end()) {
    if (!it->is_array()) {
      return absl::InvalidArgumentError("manifest field 'coding_agents' is not an array");
    }
    for (const json& e : *it) {
      if (!e.is_object()) {
        return absl::InvalidArgumentError("manifest field 'coding_agents' holds a non-object");
      }
      ManifestAgent a;
      FieldReader ar(e);
      ar.String("name", &a.name);
      ar.String("package", &a.package);
      ar.String("version", &a.version);
      ar.String("integrity", &a.integrity);
      ar.String("command", &a.command);
      ar.String("binary", &a.binary);
      if (!ar.status().ok()) {
        return absl::InvalidArgumentError(absl::StrCat("coding_agents: ", ar.status().message()));
      }
      m.coding_agents.push_back(std::move(a));
    }
  }
  for (const char* file : {kRootfsFile, kVmlinuxFile, kInitramfsFile}) {
    auto it = artifacts->find(file);
    if (it == artifacts->end() || !it->is_object()) {
      return absl::InvalidArgumentError(absl::StrCat("manifest lacks artifact '", file, "'"));
    }
    ArtifactInfo a;
    FieldReader ar(*it);
    ar.Sha256("sha256", &a.sha256);
    ar.Unsigned("size", &a.size);
    ar.Int64("mtime_ns", &a.mtime_ns);
    if (!ar.status().ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("artifact '", file, "': ", ar.status().message()));
    }
    m.artifacts[file] = a;
  }
  if (artifacts->size() != m.artifacts.size()) {
    return absl::InvalidArgumentError("manifest lists unknown artifacts");
  }
  if (m.kernel_version.empty() || m.kernel_version.find('/') != std::string::npos) {
    return absl::InvalidArgumentError("manifest has an invalid kernel_version");
  }
  return m;
}

absl::Status CheckManifestName(const Manifest& manifest, const std::string& expected_name) {
  if (manifest.name != expected_name) {
    return absl::DataLossError(absl::StrCat("manifest names image '", manifest.name,
                                            "' but lives in the directory of image '",
                                            expected_name, "'"));
  }
  return absl::OkStatus();
}

}  // namespace abox::image
