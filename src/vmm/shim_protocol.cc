#include "src/vmm/shim_protocol.h"

#include <limits>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "src/base/io.h"
#include "src/base/status_macros.h"

namespace abox::vmm {
namespace {

using nlohmann::json;

constexpr int kStateVersion = 1;
constexpr size_t kMaxFileBytes = 1 << 20;

std::string Dump(const json& j) { return j.dump(2, ' ', false, json::error_handler_t::replace); }

absl::StatusOr<json> ParseObject(const std::string& text, const char* what) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return absl::DataLossError(absl::StrCat(what, ": not a JSON object"));
  }
  return j;
}

// Typed field readers: a missing optional field leaves `out` unchanged; a field of the wrong
// type is an error naming it.
absl::Status BadField(const char* key) {
  return absl::DataLossError(absl::StrCat("field \"", key, "\" missing or of the wrong type"));
}

absl::Status Get(const json& j, const char* key, std::string* out, bool required = true) {
  auto it = j.find(key);
  if (it == j.end() && !required) {
    return absl::OkStatus();
  }
  if (it == j.end() || !it->is_string()) {
    return BadField(key);
  }
  *out = it->get<std::string>();
  return absl::OkStatus();
}

absl::Status Get(const json& j, const char* key, bool* out, bool required = true) {
  auto it = j.find(key);
  if (it == j.end() && !required) {
    return absl::OkStatus();
  }
  if (it == j.end() || !it->is_boolean()) {
    return BadField(key);
  }
  *out = it->get<bool>();
  return absl::OkStatus();
}

template <typename T>
absl::Status GetInt(const json& j, const char* key, T* out, bool required = true) {
  auto it = j.find(key);
  if (it == j.end() && !required) {
    return absl::OkStatus();
  }
  if (it == j.end() || !it->is_number_integer()) {
    return BadField(key);
  }
  if (it->is_number_unsigned()) {
    auto v = it->get<uint64_t>();
    if (v > static_cast<uint64_t>(std::numeric_limits<T>::max())) {
      return BadField(key);
    }
    *out = static_cast<T>(v);
    return absl::OkStatus();
  }
  auto v = it->get<int64_t>();
  if (v < static_cast<int64_t>(std::numeric_limits<T>::min()) ||
      (v > 0 && static_cast<uint64_t>(v) > static_cast<uint64_t>(std::numeric_limits<T>::max()))) {
    return BadField(key);
  }
  *out = static_cast<T>(v);
  return absl::OkStatus();
}

absl::Status GetAccel(const json& j, Accel* out) {
  std::string name;
  ABOX_RETURN_IF_ERROR(Get(j, "accel", &name));
  ABOX_ASSIGN_OR_RETURN(*out, ParseAccel(name));
  return absl::OkStatus();
}

const char* PhaseName(VmPhase phase) {
  switch (phase) {
    case VmPhase::kStarting:
      return "starting";
    case VmPhase::kRunning:
      return "running";
    case VmPhase::kExited:
      break;
  }
  return "exited";
}

}  // namespace

std::string RunDirPath(const std::string& run_dir, const char* name) {
  return absl::StrCat(run_dir, "/", name);
}

std::string ShimConfigToJson(const ShimConfig& c) {
  json j = {{"id", c.id},
            {"run_dir", c.run_dir},
            {"qemu_binary", c.qemu_binary},
            {"jail_binary", c.jail_binary},
            {"jail", c.jail},
            {"namespaces", c.namespaces},
            {"accel", AccelName(c.accel)},
            {"accel_note", c.accel_note},
            {"cpus", c.cpus},
            {"memory_mib", c.memory_mib},
            {"kernel", c.kernel},
            {"initrd", c.initrd},
            {"rootfs", c.rootfs},
            {"kernel_cmdline", c.kernel_cmdline},
            {"console_log_limit", c.console_log_limit},
            {"qemu_log_limit", c.qemu_log_limit},
            {"ready_timeout_ms", c.ready_timeout_ms},
            {"tie_to_caller", c.tie_to_caller},
            {"disk_layers", c.disk_layers},
            {"memory_fd", c.memory_fd},
            {"memory_shared", c.memory_shared},
            {"incoming", c.incoming}};
  if (c.drop) {
    j["drop"] = {{"uid", c.drop->uid}, {"gid", c.drop->gid}, {"groups", c.drop->groups}};
  }
  return Dump(j);
}

absl::StatusOr<ShimConfig> ShimConfigFromJson(const std::string& text) {
  ABOX_ASSIGN_OR_RETURN(json j, ParseObject(text, "shim config"));
  ShimConfig c;
  ABOX_RETURN_IF_ERROR(Get(j, "id", &c.id));
  ABOX_RETURN_IF_ERROR(Get(j, "run_dir", &c.run_dir));
  ABOX_RETURN_IF_ERROR(Get(j, "qemu_binary", &c.qemu_binary));
  ABOX_RETURN_IF_ERROR(Get(j, "jail_binary", &c.jail_binary));
  ABOX_RETURN_IF_ERROR(Get(j, "jail", &c.jail));
  ABOX_RETURN_IF_ERROR(GetInt(j, "namespaces", &c.namespaces, false));
  ABOX_RETURN_IF_ERROR(GetAccel(j, &c.accel));
  ABOX_RETURN_IF_ERROR(Get(j, "accel_note", &c.accel_note, false));
  ABOX_RETURN_IF_ERROR(GetInt(j, "cpus", &c.cpus));
  ABOX_RETURN_IF_ERROR(GetInt(j, "memory_mib", &c.memory_mib));
  ABOX_RETURN_IF_ERROR(Get(j, "kernel", &c.kernel));
  ABOX_RETURN_IF_ERROR(Get(j, "initrd", &c.initrd));
  ABOX_RETURN_IF_ERROR(Get(j, "rootfs", &c.rootfs));
  ABOX_RETURN_IF_ERROR(Get(j, "kernel_cmdline", &c.kernel_cmdline));
  ABOX_RETURN_IF_ERROR(GetInt(j, "console_log_limit", &c.console_log_limit));
  ABOX_RETURN_IF_ERROR(GetInt(j, "qemu_log_limit", &c.qemu_log_limit));
  ABOX_RETURN_IF_ERROR(GetInt(j, "ready_timeout_ms", &c.ready_timeout_ms));
  ABOX_RETURN_IF_ERROR(Get(j, "tie_to_caller", &c.tie_to_caller));
  if (auto layers = j.find("disk_layers"); layers != j.end()) {
    if (!layers->is_array() || layers->size() > kMaxDiskLayers) {
      return BadField("disk_layers");
    }
    for (const json& layer : *layers) {
      if (!layer.is_string() || layer.get_ref<const std::string&>().empty() ||
          layer.get_ref<const std::string&>()[0] != '/') {
        return BadField("disk_layers");
      }
      c.disk_layers.push_back(layer.get<std::string>());
    }
  }
  ABOX_RETURN_IF_ERROR(GetInt(j, "memory_fd", &c.memory_fd, false));
  ABOX_RETURN_IF_ERROR(Get(j, "memory_shared", &c.memory_shared, false));
  ABOX_RETURN_IF_ERROR(Get(j, "incoming", &c.incoming, false));
  if (auto d = j.find("drop"); d != j.end()) {
    if (!d->is_object()) {
      return BadField("drop");
    }
    PrivilegeDrop drop;
    ABOX_RETURN_IF_ERROR(GetInt(*d, "uid", &drop.uid));
    ABOX_RETURN_IF_ERROR(GetInt(*d, "gid", &drop.gid));
    auto groups = d->find("groups");
    if (groups == d->end() || !groups->is_array()) {
      return BadField("groups");
    }
    for (const json& g : *groups) {
      if (!g.is_number_unsigned() || g.get<uint64_t>() > std::numeric_limits<gid_t>::max()) {
        return BadField("groups");
      }
      drop.groups.push_back(g.get<gid_t>());
    }
    c.drop = drop;
  }
  if (c.accel == Accel::kAuto) {
    return absl::DataLossError("shim config: accel must be kvm or tcg");
  }
  return c;
}

std::string ShimReadyToJson(const ShimReady& r) {
  json j = {{"ok", r.ok}, {"error", r.error}, {"shim_pid", r.shim_pid}, {"qemu_pid", r.qemu_pid}};
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

absl::StatusOr<ShimReady> ShimReadyFromJson(const std::string& text) {
  ABOX_ASSIGN_OR_RETURN(json j, ParseObject(text, "shim readiness message"));
  ShimReady r;
  ABOX_RETURN_IF_ERROR(Get(j, "ok", &r.ok));
  ABOX_RETURN_IF_ERROR(Get(j, "error", &r.error, false));
  ABOX_RETURN_IF_ERROR(GetInt(j, "shim_pid", &r.shim_pid));
  ABOX_RETURN_IF_ERROR(GetInt(j, "qemu_pid", &r.qemu_pid));
  if (r.ok && (r.shim_pid <= 0 || r.qemu_pid <= 0)) {
    return absl::DataLossError("shim readiness message: missing pids");
  }
  return r;
}

std::string VmStateToJson(const VmState& s) {
  json j = {{"version", kStateVersion},    {"id", s.id},
            {"phase", PhaseName(s.phase)}, {"shim_pid", s.shim_pid},
            {"qemu_pid", s.qemu_pid},      {"accel", AccelName(s.accel)},
            {"accel_note", s.accel_note},  {"tie_to_caller", s.tie_to_caller},
            {"privileges", s.privileges},  {"started_at_ms", s.started_at_ms}};
  if (s.phase == VmPhase::kExited) {
    json exit = {{"reason", s.exit_reason}, {"at_ms", s.exited_at_ms}};
    if (s.exit_code) {
      exit["code"] = *s.exit_code;
    }
    if (s.exit_signal) {
      exit["signal"] = *s.exit_signal;
    }
    j["exit"] = exit;
  }
  return Dump(j);
}

absl::StatusOr<VmState> VmStateFromJson(const std::string& text) {
  ABOX_ASSIGN_OR_RETURN(json j, ParseObject(text, "VM state"));
  int version = 0;
  ABOX_RETURN_IF_ERROR(GetInt(j, "version", &version));
  if (version != kStateVersion) {
    return absl::FailedPreconditionError(absl::StrCat(
        "VM state version ", version, " is not supported (expected ", kStateVersion, ")"));
  }
  VmState s;
  std::string phase;
  ABOX_RETURN_IF_ERROR(Get(j, "id", &s.id));
  ABOX_RETURN_IF_ERROR(Get(j, "phase", &phase));
  ABOX_RETURN_IF_ERROR(GetInt(j, "shim_pid", &s.shim_pid));
  ABOX_RETURN_IF_ERROR(GetInt(j, "qemu_pid", &s.qemu_pid));
  ABOX_RETURN_IF_ERROR(GetAccel(j, &s.accel));
  ABOX_RETURN_IF_ERROR(Get(j, "accel_note", &s.accel_note, false));
  ABOX_RETURN_IF_ERROR(Get(j, "tie_to_caller", &s.tie_to_caller));
  ABOX_RETURN_IF_ERROR(Get(j, "privileges", &s.privileges, false));
  ABOX_RETURN_IF_ERROR(GetInt(j, "started_at_ms", &s.started_at_ms));
  if (phase == "starting") {
    s.phase = VmPhase::kStarting;
  } else if (phase == "running") {
    s.phase = VmPhase::kRunning;
  } else if (phase == "exited") {
    s.phase = VmPhase::kExited;
    auto exit = j.find("exit");
    if (exit == j.end() || !exit->is_object()) {
      return BadField("exit");
    }
    ABOX_RETURN_IF_ERROR(Get(*exit, "reason", &s.exit_reason));
    ABOX_RETURN_IF_ERROR(GetInt(*exit, "at_ms", &s.exited_at_ms));
    int value = 0;
    if (exit->contains("code")) {
      ABOX_RETURN_IF_ERROR(GetInt(*exit, "code", &value));
      s.exit_code = value;
    }
    if (exit->contains("signal")) {
      ABOX_RETURN_IF_ERROR(GetInt(*exit, "signal", &value));
      s.exit_signal = value;
    }
  } else {
    return BadField("phase");
  }
  return s;
}

absl::Status WriteVmState(const std::string& run_dir, const VmState& state) {
  return base::WriteFileAtomic(RunDirPath(run_dir, kStateFile), VmStateToJson(state), 0600);
}

absl::StatusOr<VmState> ReadVmState(const std::string& run_dir) {
  std::string path = RunDirPath(run_dir, kStateFile);
  ABOX_ASSIGN_OR_RETURN(std::string text, base::ReadFile(path, kMaxFileBytes));
  absl::StatusOr<VmState> state = VmStateFromJson(text);
  if (!state.ok()) {
    return base::Annotate(state.status(), path);
  }
  return state;
}

}  // namespace abox::vmm
