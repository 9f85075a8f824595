#include "src/api/sandbox.h"

#include <algorithm>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "src/api/errors.h"
#include "src/api/json_body.h"
#include "src/api/wire.h"
#include "src/base/status_macros.h"

namespace abox::api {

absl::Status ValidateSandboxName(absl::string_view name) {
  auto bad = [&](absl::string_view why) {
    return FieldError("name",
                      absl::StrCat("invalid sandbox name \"", absl::CHexEscape(name), "\": ", why));
  };
  if (name.empty() || name.size() > 63) {
    return bad("use 1-63 characters");
  }
  if (!absl::ascii_isalnum(static_cast<unsigned char>(name[0]))) {
    return bad("start it with a letter or digit");
  }
  for (char c : name) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '.' && c != '-') {
      return bad("use only letters, digits, '_', '.' and '-'");
    }
  }
  if (name.size() == 12 && std::all_of(name.begin(), name.end(), [](char c) {
        return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
      })) {
    return bad("12 hex characters look like a sandbox id; pick another name");
  }
  return absl::OkStatus();
}

nlohmann::json ToJson(const SandboxCreate& c) {
  const SandboxCreate defaults;
  nlohmann::json j = nlohmann::json::object();
  if (c.image != defaults.image) {
    j["image"] = c.image;
  }
  if (!c.name.empty()) {
    j["name"] = c.name;
  }
  if (c.cpus != defaults.cpus) {
    j["cpus"] = c.cpus;
  }
  if (c.memory_mib != defaults.memory_mib) {
    j["memory_mib"] = c.memory_mib;
  }
  if (c.disk_mib != defaults.disk_mib) {
    j["disk_mib"] = c.disk_mib;
  }
  if (!c.labels.empty()) {
    j["labels"] = c.labels;
  }
  if (c.ttl_seconds != 0) {
    j["ttl_seconds"] = c.ttl_seconds;
  }
  if (c.idle_timeout_seconds != 0) {
    j["idle_timeout_seconds"] = c.idle_timeout_seconds;
  }
  if (c.accel != defaults.accel) {
    j["accel"] = c.accel;
  }
  if (c.cold) {
    j["cold"] = true;
  }
  if (c.workspace) {
    const WorkspaceSpec ws_defaults;
    nlohmann::json ws = {{"path", c.workspace->path}};
    if (c.workspace->guest_path != ws_defaults.guest_path) {
      ws["guest_path"] = c.workspace->guest_path;
    }
    if (!c.workspace->exclude.empty()) {
      ws["exclude"] = c.workspace->exclude;
    }
    if (!c.workspace->include.empty()) {
      ws["include"] = c.workspace->include;
    }
    if (c.workspace->git_history) {
      ws["git_history"] = true;
    }
    j["workspace"] = std::move(ws);
  }
  if (c.egress) {
    nlohmann::json egress = nlohmann::json::object();
    if (c.egress->mode) {
      egress["mode"] = *c.egress->mode;
    }
    if (!c.egress->allow.empty()) {
      egress["allow"] = c.egress->allow;
    }
    j["egress"] = std::move(egress);
  }
  if (c.setup) {
    nlohmann::json setup = {{"commands", c.setup->commands}, {"allow", c.setup->allow}};
    if (!c.setup->root_commands.empty()) {
      setup["root_commands"] = c.setup->root_commands;
    }
    if (c.setup->timeout_seconds != 0) {
      setup["timeout_seconds"] = c.setup->timeout_seconds;
    }
    j["setup"] = std::move(setup);
  }
  if (!c.secrets.empty()) {
    j["secrets"] = c.secrets;
  }
  if (!c.git_push.empty()) {
    j["git_push"] = c.git_push;
  }
  if (!c.models.empty()) {
    j["models"] = c.models;
  }
  return j;
}

absl::StatusOr<SandboxCreate> DecodeSandboxCreate(absl::string_view body) {
  SandboxCreate c;
  ABOX_ASSIGN_OR_RETURN(nlohmann::json object,
                        ParseObject(std::string_view(body.data(), body.size())));
  Reader r(object);
  r.OptionalString("image", &c.image, 64);
  r.OptionalString("name", &c.name, 256);
  r.OptionalInt("cpus", &c.cpus, 1, 64);
  r.OptionalInt("memory_mib", &c.memory_mib, 128, 262144);
  r.OptionalInt("disk_mib", &c.disk_mib, kMinDiskMib, kMaxDiskMib);
  r.OptionalStringMap("labels", &c.labels, 64);
  r.OptionalInt("ttl_seconds", &c.ttl_seconds, 0, int64_t{10} * 365 * 86400);
  r.OptionalInt("idle_timeout_seconds", &c.idle_timeout_seconds, 0, int64_t{10} * 365 * 86400);
  r.OptionalString("accel", &c.accel, 16);
  r.OptionalBool("cold", &c.cold);
  r.OptionalObject("workspace", [&](Reader& w) {
    WorkspaceSpec spec;
    w.RequiredString("path", &spec.path, 4096);
    w.OptionalString("guest_path", &spec.guest_path, 4096);
    w.OptionalStringArray("exclude", &spec.exclude, 256);
    w.OptionalStringArray("include", &spec.include, 256);
    w.OptionalBool("git_history", &spec.git_history);
    c.workspace = std::move(spec);
  });
  r.OptionalObject("egress", [&](Reader& e) {
    EgressSpec spec;
    e.OptionalString("mode", &spec.mode, 16);
    e.OptionalStringArray("allow", &spec.allow, 1024);
    c.egress = std::move(spec);
  });
  r.OptionalObject("setup", [&](Reader& s) {
    SetupSpec spec;
    s.OptionalStringArray("commands", &spec.commands, 64);
    s.OptionalStringArray("root_commands", &spec.root_commands, 64);
    s.OptionalStringArray("allow", &spec.allow, 1024);
    s.OptionalInt("timeout_seconds", &spec.timeout_seconds, 0, int64_t{7} * 86400);
    c.setup = std::move(spec);
  });
  r.OptionalStringMap("secrets", &c.secrets, 64);
  r.OptionalStringArray("git_push", &c.git_push, 16);
  r.OptionalStringArray("models", &c.models, 4);
  ABOX_RETURN_IF_ERROR(r.Finish());
  if (c.egress && c.egress->mode && *c.egress->mode != "none" && *c.egress->mode != "allowlist" &&
      *c.egress->mode != "open") {
    return FieldError("egress.mode", absl::StrCat("egress mode must be none, allowlist or open, "
                                                  "not \"",
                                                  absl::CHexEscape(*c.egress->mode), "\""));
  }
  if (c.setup) {
    if (c.setup->commands.empty() && c.setup->root_commands.empty()) {
      return FieldError("setup.commands",
                        "setup needs at least one command (commands or "
                        "root_commands)");
    }
    for (const auto& [field, list] : {std::pair{"commands", &c.setup->commands},
                                      std::pair{"root_commands", &c.setup->root_commands}}) {
      for (size_t i = 0; i < list->size(); ++i) {
        if (absl::StripAsciiWhitespace((*list)[i]).empty()) {
          return FieldError(absl::StrCat("setup.", field, "[", i, "]"), "a setup command is empty");
        }
      }
    }
  }
  if (!c.name.empty()) {
    ABOX_RETURN_IF_ERROR(ValidateSandboxName(c.name));
  }
  if (c.accel != "auto" && c.accel != "kvm" && c.accel != "tcg") {
    return FieldError("accel", absl::StrCat("accel must be auto, kvm or tcg, not \"",
                                            absl::CHexEscape(c.accel), "\""));
  }
  for (const auto& [key, value] : c.labels) {
    if (key.empty() || key.size() > 128 || key.find('=') != std::string::npos ||
        value.size() > 1024) {
      return FieldError(absl::StrCat("labels.", key),
                        "label keys are 1-128 characters without '=', values at most 1024");
    }
  }
  return c;
}

nlohmann::json ToJson(const Sandbox& s) {
  nlohmann::json j = {
      {"id", s.id},
      {"name", s.name},
      {"image", s.image},
      {"cpus", s.cpus},
      {"memory_mib", s.memory_mib},
      {"disk_mib", s.disk_mib},
      {"labels", s.labels},
      {"state", s.state},
      {"ttl_seconds", s.ttl_seconds},
      {"idle_timeout_seconds", s.idle_timeout_seconds},
      {"running_execs", s.running_execs},
  };
  PutApiTime(j, "created_at", s.created_at);
  if (!s.failure.empty()) {
    j["failure"] = s.failure;
  }
  if (!s.workspace.is_null()) {
    j["workspace"] = s.workspace;
  }
  if (s.dropped) {
    j["dropped"] = {{"queue", s.dropped->queue},
                    {"connections", s.dropped->connections},
                    {"dns", s.dropped->dns},
                    {"events", s.dropped->events}};
  }
  if (!s.egress_mode.empty()) {
    j["egress"] = {{"mode", s.egress_mode}};
  }
  PutApiTime(j, "ready_at", s.ready_at);
  PutApiTime(j, "last_active_at", s.last_active_at);
  if (!s.accel.empty()) {
    j["accel"] = s.accel;
  }
  if (s.vmm_pid != 0) {
    j["vmm_pid"] = s.vmm_pid;
  }
  if (s.disk_used_bytes != 0) {
    j["disk_used_bytes"] = s.disk_used_bytes;
  }
  PutApiTime(j, "expires_at", s.expires_at);
  if (!s.secrets.empty()) {
    j["secrets"] = s.secrets;
  }
  if (!s.git_push.empty()) {
    j["git_push"] = s.git_push;
  }
  if (!s.models.empty()) {
    j["models"] = s.models;
  }
  return j;
}

namespace {

void ReadSandbox(AnswerReader& r, Sandbox& s) {
  r.String("id", &s.id);
  r.String("name", &s.name);
  r.String("image", &s.image);
  r.Int("cpus", &s.cpus);
  r.Int("memory_mib", &s.memory_mib);
  if (r.Has("disk_mib")) {
    r.Int("disk_mib", &s.disk_mib);
  }
  if (r.Has("disk_used_bytes")) {
    r.Int("disk_used_bytes", &s.disk_used_bytes);
  }
  r.StringMap("labels", &s.labels);
  r.String("state", &s.state);
  r.String("failure", &s.failure);
  r.Time("created_at", &s.created_at);
  r.Time("ready_at", &s.ready_at);
  r.Time("last_active_at", &s.last_active_at);
  r.Time("expires_at", &s.expires_at);
  r.Int("ttl_seconds", &s.ttl_seconds);
  r.Int("idle_timeout_seconds", &s.idle_timeout_seconds);
  r.String("accel", &s.accel);
  r.Int("vmm_pid", &s.vmm_pid);
  r.Int("running_execs", &s.running_execs);
  r.Json("workspace", &s.workspace);
  r.Object("egress", [&](AnswerReader& e) { e.String("mode", &s.egress_mode); });
  if (r.Has("secrets")) {
    r.StringMap("secrets", &s.secrets);
  }
  if (r.Has("git_push")) {
    r.StringArray("git_push", &s.git_push);
  }
  if (r.Has("models")) {
    r.StringArray("models", &s.models);
  }
  r.Object("dropped", [&](AnswerReader& d) {
    SandboxDropped dropped;
    d.Int("queue", &dropped.queue);
    d.Int("connections", &dropped.connections);
    d.Int("dns", &dropped.dns);
    d.Int("events", &dropped.events);
    s.dropped = dropped;
  });
}

}  // namespace

absl::StatusOr<Sandbox> DecodeSandbox(const nlohmann::json& value) {
  AnswerReader r(value);
  Sandbox s;
  ReadSandbox(r, s);
  ABOX_RETURN_IF_ERROR(r.status());
  return s;
}

nlohmann::json SandboxListToJson(const std::vector<Sandbox>& sandboxes) {
  nlohmann::json list = nlohmann::json::array();
  for (const Sandbox& s : sandboxes) {
    list.push_back(ToJson(s));
  }
  return {{"sandboxes", std::move(list)}};
}

absl::StatusOr<std::vector<Sandbox>> DecodeSandboxList(const nlohmann::json& value) {
  AnswerReader r(value);
  if (r.status().ok() && !r.Has("sandboxes")) {
    return WithField(absl::DataLossError("aboxd's answer has no \"sandboxes\""), "sandboxes");
  }
  std::vector<Sandbox> sandboxes;
  r.ObjectArray("sandboxes", [&](AnswerReader& item) {
    Sandbox s;
    ReadSandbox(item, s);
    sandboxes.push_back(std::move(s));
  });
  ABOX_RETURN_IF_ERROR(r.status());
  return sandboxes;
}

}  // namespace abox::api
