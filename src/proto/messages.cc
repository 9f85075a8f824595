#include "src/proto/messages.h"

#include <arpa/inet.h>

#include <algorithm>
#include <csignal>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "src/base/status_macros.h"
#include "src/proto/frame.h"

namespace abox::proto {
namespace {

using nlohmann::json;

absl::StatusOr<json> ParseObject(absl::string_view payload, absl::string_view what) {
  json j = json::parse(payload.begin(), payload.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": payload is not valid JSON"));
  }
  if (!j.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": payload is not a JSON object"));
  }
  return j;
}

absl::Status FieldError(absl::string_view what, absl::string_view field, absl::string_view want) {
  return absl::InvalidArgumentError(absl::StrCat(what, ": field '", field, "' must be ", want));
}

// Reads an optional unsigned integer field within [0, max].
absl::Status GetUint(const json& j, const char* field, uint64_t max, uint64_t* out,
                     absl::string_view what, bool required = false) {
  auto it = j.find(field);
  if (it == j.end()) {
    return required ? FieldError(what, field, "present") : absl::OkStatus();
  }
  if (!it->is_number_unsigned() || it->get<uint64_t>() > max) {
    return FieldError(what, field, absl::StrCat("an integer in [0, ", max, "]"));
  }
  *out = it->get<uint64_t>();
  return absl::OkStatus();
}

absl::Status GetString(const json& j, const char* field, size_t max, std::string* out,
                       absl::string_view what) {
  auto it = j.find(field);
  if (it == j.end()) {
    return absl::OkStatus();
  }
  if (!it->is_string() || it->get_ref<const std::string&>().size() > max) {
    return FieldError(what, field, absl::StrCat("a string of at most ", max, " bytes"));
  }
  *out = it->get<std::string>();
  return absl::OkStatus();
}

absl::Status GetBool(const json& j, const char* field, bool* out, absl::string_view what) {
  auto it = j.find(field);
  if (it == j.end()) {
    return absl::OkStatus();
  }
  if (!it->is_boolean()) {
    return FieldError(what, field, "a boolean");
  }
  *out = it->get<bool>();
  return absl::OkStatus();
}

bool HasNul(const std::string& s) { return s.find('\0') != std::string::npos; }

// Fails on the first key of `j` not in `known`.
template <size_t N>
absl::Status CheckKnownFields(const json& j, const char* const (&known)[N],
                              absl::string_view what) {
  for (const auto& item : j.items()) {
    const std::string& key = item.key();
    if (std::find_if(std::begin(known), std::end(known),
                     [&key](const char* k) { return key == k; }) == std::end(known)) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": unknown field '", key, "'"));
    }
  }
  return absl::OkStatus();
}

// An IPv4 or IPv6 literal exactly as inet_pton reads it (no shorthands, zones or brackets).
bool IsAddressLiteral(const std::string& text) {
  unsigned char buf[16];
  return !HasNul(text) && (::inet_pton(AF_INET, text.c_str(), buf) == 1 ||
                           ::inet_pton(AF_INET6, text.c_str(), buf) == 1);
}

std::string Dump(const json& j) {
  // Invalid UTF-8 is replaced rather than thrown on.
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace

std::string EncodeHello(const Hello& h) {
  return Dump(json{{"version", h.version},
                   {"min_version", h.min_version},
                   {"agent_version", h.agent_version},
                   {"capabilities", h.capabilities},
                   {"max_payload", h.max_payload},
                   {"window", h.window}});
}

absl::StatusOr<Hello> DecodeHello(absl::string_view payload) {
  constexpr absl::string_view kWhat = "hello";
  ABOX_ASSIGN_OR_RETURN(json j, ParseObject(payload, kWhat));
  Hello h;
  uint64_t v = 0;
  ABOX_RETURN_IF_ERROR(GetUint(j, "version", UINT32_MAX, &v, kWhat, true));
  h.version = static_cast<uint32_t>(v);
  ABOX_RETURN_IF_ERROR(GetUint(j, "min_version", UINT32_MAX, &v, kWhat, true));
  h.min_version = static_cast<uint32_t>(v);
  if (h.min_version > h.version) {
    return absl::InvalidArgumentError("hello: min_version is above version");
  }
  ABOX_RETURN_IF_ERROR(GetString(j, "agent_version", 128, &h.agent_version, kWhat));
  ABOX_RETURN_IF_ERROR(GetUint(j, "max_payload", UINT32_MAX, &v, kWhat, true));
  h.max_payload = static_cast<uint32_t>(v);
  ABOX_RETURN_IF_ERROR(GetUint(j, "window", UINT32_MAX, &v, kWhat, true));
  h.window = static_cast<uint32_t>(v);
  if (auto it = j.find("capabilities"); it != j.end()) {
    if (!it->is_array() || it->size() > kMaxCapabilities) {
      return FieldError(kWhat, "capabilities", "an array of at most 64 strings");
    }
    for (const auto& c : *it) {
      if (!c.is_string() || c.get_ref<const std::string&>().size() > 64) {
        return FieldError(kWhat, "capabilities", "an array of short strings");
      }
      h.capabilities.push_back(c.get<std::string>());
    }
  }
  return h;
}

absl::StatusOr<uint32_t> NegotiateVersion(const Hello& ours, const Hello& theirs) {
  uint32_t hi = std::min(ours.version, theirs.version);
  uint32_t lo = std::max(ours.min_version, theirs.min_version);
  if (hi < lo) {
    return absl::FailedPreconditionError(
        absl::StrCat("protocol mismatch: we speak versions ", ours.min_version, "-", ours.version,
                     ", the peer speaks ", theirs.min_version, "-", theirs.version));
  }
  return hi;
}

std::string EncodeExecRequest(const ExecRequest& r) {
  json j = json::object();
  if (r.shell) {
    j["shell"] = *r.shell;
  } else {
    j["argv"] = r.argv;
  }
  if (!r.env.empty()) {
    j["env"] = r.env;
  }
  if (!r.cwd.empty()) {
    j["cwd"] = r.cwd;
  }
  if (!r.user.empty()) {
    j["user"] = r.user;
  }
  if (r.timeout_ms != 0) {
    j["timeout_ms"] = r.timeout_ms;
  }
  if (r.stdin_open) {
    j["stdin"] = true;
  }
  if (r.pty) {
    j["pty"] = {{"rows", r.pty->rows}, {"cols", r.pty->cols}};
  }
  if (r.kill_leftovers) {
    j["kill_leftovers"] = true;
  }
  return Dump(j);
}

static absl::StatusOr<PtySize> DecodePtySize(const nlohmann::json& j, absl::string_view what) {
  if (!j.is_object()) {
    return FieldError(what, "pty", "an object");
  }
  PtySize s;
  uint64_t v = s.rows;
  ABOX_RETURN_IF_ERROR(GetUint(j, "rows", 4096, &v, what));
  s.rows = static_cast<uint16_t>(v);
  v = s.cols;
  ABOX_RETURN_IF_ERROR(GetUint(j, "cols", 4096, &v, what));
  s.cols = static_cast<uint16_t>(v);
  return s;
}

absl::StatusOr<ExecRequest> DecodeExecRequest(absl::string_view payload) {
  constexpr absl::string_view kWhat = "exec request";
  ABOX_ASSIGN_OR_RETURN(json j, ParseObject(payload, kWhat));
  static const char* const kKnown[] = {"argv",       "shell", "env", "cwd",           "user",
                                       "timeout_ms", "stdin", "pty", "kill_leftovers"};
  ABOX_RETURN_IF_ERROR(CheckKnownFields(j, kKnown, kWhat));
  ExecRequest r;
  auto argv = j.find("argv");
  auto shell = j.find("shell");
  if ((argv == j.end()) == (shell == j.end())) {
    return absl::InvalidArgumentError(absl::StrCat(kWhat, ": exactly one of argv, shell"));
  }
  if (argv != j.end()) {
    if (!argv->is_array() || argv->empty() || argv->size() > kMaxArgs) {
      return FieldError(kWhat, "argv", "a non-empty array of strings");
    }
    for (const auto& a : *argv) {
      if (!a.is_string() || HasNul(a.get_ref<const std::string&>())) {
        return FieldError(kWhat, "argv", "an array of strings without NUL bytes");
      }
      r.argv.push_back(a.get<std::string>());
    }
    if (r.argv[0].empty()) {
      return FieldError(kWhat, "argv", "an array whose first element is not empty");
    }
  } else {
    if (!shell->is_string() || HasNul(shell->get_ref<const std::string&>())) {
      return FieldError(kWhat, "shell", "a string without NUL bytes");
    }
    r.shell = shell->get<std::string>();
  }
  if (auto env = j.find("env"); env != j.end()) {
    if (!env->is_object() || env->size() > kMaxEnv) {
      return FieldError(kWhat, "env", "an object of strings");
    }
    for (const auto& [k, v] : env->items()) {
      if (k.empty() || k.find('=') != std::string::npos || HasNul(k) || !v.is_string() ||
          HasNul(v.get_ref<const std::string&>())) {
        return FieldError(kWhat, "env", "an object of NAME: value strings (no '=' in NAME)");
      }
      r.env[k] = v.get<std::string>();
    }
  }
  ABOX_RETURN_IF_ERROR(GetString(j, "cwd", 4096, &r.cwd, kWhat));
  if (HasNul(r.cwd)) {
    return FieldError(kWhat, "cwd", "a path without NUL bytes");
  }
  ABOX_RETURN_IF_ERROR(GetString(j, "user", 64, &r.user, kWhat));
  if (!r.user.empty() && r.user != "agent" && r.user != "root") {
    return FieldError(kWhat, "user", "\"agent\" or \"root\"");
  }
  ABOX_RETURN_IF_ERROR(GetUint(j, "timeout_ms", 366ULL * 24 * 3600 * 1000, &r.timeout_ms, kWhat));
  ABOX_RETURN_IF_ERROR(GetBool(j, "stdin", &r.stdin_open, kWhat));
  ABOX_RETURN_IF_ERROR(GetBool(j, "kill_leftovers", &r.kill_leftovers, kWhat));
  if (auto pty = j.find("pty"); pty != j.end()) {
    ABOX_ASSIGN_OR_RETURN(r.pty, DecodePtySize(*pty, kWhat));
  }
  return r;
}

std::string EncodeExitInfo(const ExitInfo& e) {
  json j = json::object();
  if (e.exit_code) {
    j["exit_code"] = *e.exit_code;
  } else {
    j["signal"] = e.signal.value_or(0);
  }
  if (e.timed_out) {
    j["timed_out"] = true;
  }
  if (!e.error.empty()) {
    j["error"] = e.error.substr(0, kMaxErrorText);
  }
  j["duration_us"] = e.duration_us;
  if (e.oom_kills != 0) {
    j["oom_kills"] = std::min(e.oom_kills, kMaxOomKills);
  }
  return Dump(j);
}

absl::StatusOr<ExitInfo> DecodeExitInfo(absl::string_view payload) {
  constexpr absl::string_view kWhat = "exit";
  ABOX_ASSIGN_OR_RETURN(json j, ParseObject(payload, kWhat));
  ExitInfo e;
  auto code = j.find("exit_code");
  auto sig = j.find("signal");
  if ((code == j.end()) == (sig == j.end())) {
    return absl::InvalidArgumentError("exit: exactly one of exit_code, signal");
  }
  uint64_t v = 0;
  if (code != j.end()) {
    ABOX_RETURN_IF_ERROR(GetUint(j, "exit_code", 255, &v, kWhat));
    e.exit_code = static_cast<int>(v);
  } else {
    ABOX_RETURN_IF_ERROR(GetUint(j, "signal", 64, &v, kWhat));
    if (v == 0) {
      return FieldError(kWhat, "signal", "a signal number in [1, 64]");
    }
    e.signal = static_cast<int>(v);
  }
  ABOX_RETURN_IF_ERROR(GetBool(j, "timed_out", &e.timed_out, kWhat));
  ABOX_RETURN_IF_ERROR(GetString(j, "error", kMaxErrorText, &e.error, kWhat));
  ABOX_RETURN_IF_ERROR(GetUint(j, "duration_us", UINT64_MAX, &e.duration_us, kWhat));
  // Optional (agents before it send none): absent is 0. A negative, fractional or larger count
  // is a lie the guest cannot mean, and refused like any malformed field.
  v = 0;
  ABOX_RETURN_IF_ERROR(GetUint(j, "oom_kills", kMaxOomKills, &v, kWhat));
  e.oom_kills = static_cast<uint32_t>(v);
  return e;
}

std::string EncodeSignal(int signal) { return Dump(json{{"signal", signal}}); }

absl::StatusOr<int> DecodeSignal(absl::string_view payload) {
  ABOX_ASSIGN_OR_RETURN(json j, ParseObject(payload, "signal"));
  uint64_t v = 0;
  ABOX_RETURN_IF_ERROR(GetUint(j, "signal", 64, &v, "signal", true));
  if (v == 0) {
    return FieldError("signal", "signal", "a signal number in [1, 64]");
  }
  return static_cast<int>(v);
}

std::string EncodeResize(const PtySize& s) {
  return Dump(json{{"rows", s.rows}, {"cols", s.cols}});
}

absl::StatusOr<PtySize> DecodeResize(absl::string_view payload) {
  ABOX_ASSIGN_OR_RETURN(json j, ParseObject(payload, "resize"));
  return DecodePtySize(j, "resize");
}

std::string EncodeError(absl::string_view error) {
  return Dump(json{{"error", std::string(error.substr(0, kMaxErrorText))}});
}

absl::StatusOr<std::string> DecodeError(absl::string_view payload) {
  ABOX_ASSIGN_OR_RETURN(json j, ParseObject(payload, "error"));
  std::string text;
  ABOX_RETURN_IF_ERROR(GetString(j, "error", kMaxErrorText, &text, "error"));
  // Printable ASCII only: the text ends up in terminals and logs.
  for (char& c : text) {
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) > 0x7e) {
      c = '?';
    }
  }
  return text;
}

const char* TunnelKindName(TunnelKind kind) {
  switch (kind) {
    case TunnelKind::kTcp:
      return "tcp";
    case TunnelKind::kProxy:
      return "proxy";
    case TunnelKind::kDns:
      return "dns";
    case TunnelKind::kModel:
      return "model";
  }
  return "unknown";
}

std::string EncodeTunnelRequest(const TunnelRequest& r) {
  json j{{"kind", TunnelKindName(r.kind)}};
  if (r.kind == TunnelKind::kTcp) {
    j["dst"] = r.dst;
    j["port"] = r.port;
  }
  return Dump(j);
}

absl::StatusOr<TunnelRequest> DecodeTunnelRequest(absl::string_view payload) {
  constexpr absl::string_view kWhat = "tunnel_open";
  ABOX_ASSIGN_OR_RETURN(json j, ParseObject(payload, kWhat));
  static const char* const kKnown[] = {"kind", "dst", "port"};
  ABOX_RETURN_IF_ERROR(CheckKnownFields(j, kKnown, kWhat));
  std::string kind;
  ABOX_RETURN_IF_ERROR(GetString(j, "kind", 16, &kind, kWhat));
  TunnelRequest r;
  if (kind == "tcp") {
    r.kind = TunnelKind::kTcp;
  } else if (kind == "proxy") {
    r.kind = TunnelKind::kProxy;
  } else if (kind == "dns") {
    r.kind = TunnelKind::kDns;
  } else if (kind == "model") {
    r.kind = TunnelKind::kModel;
  } else {
    return FieldError(kWhat, "kind", "\"tcp\", \"proxy\", \"dns\" or \"model\"");
  }
  bool has_dst = j.contains("dst");
  bool has_port = j.contains("port");
  if (r.kind != TunnelKind::kTcp) {
    if (has_dst || has_port) {
      return absl::InvalidArgumentError(
          absl::StrCat(kWhat, ": dst and port belong to kind \"tcp\" only"));
    }
    return r;
  }
  if (!has_dst || !has_port) {
    return absl::InvalidArgumentError(absl::StrCat(kWhat, ": kind \"tcp\" needs dst and port"));
  }
  // INET6_ADDRSTRLEN: the longest literal inet_pton accepts.
  ABOX_RETURN_IF_ERROR(GetString(j, "dst", 45, &r.dst, kWhat));
  if (!IsAddressLiteral(r.dst)) {
    return FieldError(kWhat, "dst", "an IPv4 or IPv6 address literal");
  }
  uint64_t port = 0;
  ABOX_RETURN_IF_ERROR(GetUint(j, "port", 65535, &port, kWhat, true));
  if (port == 0) {
    return FieldError(kWhat, "port", "a port in [1, 65535]");
  }
  r.port = static_cast<uint16_t>(port);
  return r;
}

}  // namespace abox::proto
