#include "src/guest/identity_tool.h"

#include <fcntl.h>
#include <linux/random.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <ctime>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "src/base/io.h"
#include "src/base/status_macros.h"
#include "src/base/unique_fd.h"

namespace abox::guest {
namespace {

// Reseeds the CRNG from the input pool at once (Linux 4.17+); older uapi headers lack it.
#ifdef RNDRESEEDCRNG
constexpr unsigned long kReseedCrng = RNDRESEEDCRNG;
#else
constexpr unsigned long kReseedCrng = _IO('R', 0x07);
#endif

using nlohmann::json;

constexpr char kUsage[] = "usage: abox-guest identity   (one JSON request on stdin)\n";
constexpr size_t kMaxHostname = 63;  // one DNS label
constexpr size_t kMachineIdHex = 32;
constexpr size_t kMaxSandboxId = 64;

absl::Status Invalid(absl::string_view message) {
  return absl::InvalidArgumentError(absl::StrCat("bad identity request: ", message));
}

// The string field `name` of `j`, which must be present.
absl::StatusOr<std::string> StringField(const json& j, const char* name) {
  auto it = j.find(name);
  if (it == j.end()) {
    return Invalid(absl::StrCat("field '", name, "' is missing"));
  }
  if (!it->is_string()) {
    return Invalid(absl::StrCat("field '", name, "' must be a string"));
  }
  return it->get<std::string>();
}

bool AllOf(absl::string_view s, bool (*ok)(char)) { return std::all_of(s.begin(), s.end(), ok); }

absl::Status CheckHostname(absl::string_view h) {
  bool chars_ok = AllOf(h, [](char c) {
    return absl::ascii_islower(static_cast<unsigned char>(c)) ||
           absl::ascii_isdigit(static_cast<unsigned char>(c)) || c == '-';
  });
  if (h.empty() || h.size() > kMaxHostname || !chars_ok || h.front() == '-' || h.back() == '-') {
    return Invalid(absl::StrCat("'hostname' must be 1-", kMaxHostname,
                                " of [a-z0-9-], not starting or ending with '-'"));
  }
  return absl::OkStatus();
}

absl::Status CheckMachineId(absl::string_view id) {
  bool hex = AllOf(id, [](char c) {
    return absl::ascii_isdigit(static_cast<unsigned char>(c)) || (c >= 'a' && c <= 'f');
  });
  if (id.size() != kMachineIdHex || !hex) {
    return Invalid(absl::StrCat("'machine_id' must be ", kMachineIdHex, " lowercase hex digits"));
  }
  // systemd reads an all-zero id as "not set" (sd_id128_is_null).
  if (AllOf(id, [](char c) { return c == '0'; })) {
    return Invalid("'machine_id' must not be all zeros");
  }
  return absl::OkStatus();
}

absl::Status CheckSandboxId(absl::string_view id) {
  bool chars_ok = AllOf(id, [](char c) {
    return absl::ascii_islower(static_cast<unsigned char>(c)) ||
           absl::ascii_isdigit(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-';
  });
  if (id.empty() || id.size() > kMaxSandboxId || !chars_ok) {
    return Invalid(absl::StrCat("'sandbox_id' must be 1-", kMaxSandboxId, " of [a-z0-9_.-]"));
  }
  return absl::OkStatus();
}

// Standard base64 with padding, in its one canonical spelling (no whitespace, no missing or
// extra padding, zero trailing bits), of exactly kIdentitySeedBytes bytes.
absl::StatusOr<std::string> DecodeSeed(const std::string& text) {
  std::string seed;
  if (!absl::Base64Unescape(text, &seed) || absl::Base64Escape(seed) != text) {
    return Invalid("'seed' is not canonical base64");
  }
  if (seed.size() != kIdentitySeedBytes) {
    return Invalid(
        absl::StrCat("'seed' must hold ", kIdentitySeedBytes, " bytes, not ", seed.size()));
  }
  return seed;
}

absl::Status Step(absl::string_view step, const absl::Status& status) {
  return base::Annotate(status, step);
}

}  // namespace

absl::StatusOr<IdentityRequest> ParseIdentityRequest(absl::string_view text) {
  if (text.size() > kMaxIdentityRequestBytes) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "bad identity request: over ", kMaxIdentityRequestBytes, " bytes (", text.size(), ")"));
  }
  // nlohmann keeps the last of repeated keys silently; a request is refused instead.
  std::set<std::string> keys;
  bool repeated = false;
  json::parser_callback_t note_keys = [&](int depth, json::parse_event_t event, json& parsed) {
    if (event == json::parse_event_t::key && depth == 1 &&
        !keys.insert(parsed.get<std::string>()).second) {
      repeated = true;
    }
    return true;
  };
  json j = json::parse(text.begin(), text.end(), note_keys, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    return Invalid("not one valid JSON value");
  }
  if (!j.is_object()) {
    return Invalid("not a JSON object");
  }
  if (repeated) {
    return Invalid("a field is given twice");
  }
  static constexpr const char* kFields[] = {"seed", "unix_time_ns", "hostname", "machine_id",
                                            "sandbox_id"};
  for (const auto& item : j.items()) {
    if (std::find(std::begin(kFields), std::end(kFields), item.key()) == std::end(kFields)) {
      return Invalid(absl::StrCat("unknown field '", absl::CHexEscape(item.key()), "'"));
    }
  }
  IdentityRequest r;
  ABOX_ASSIGN_OR_RETURN(std::string seed_text, StringField(j, "seed"));
  ABOX_ASSIGN_OR_RETURN(r.seed, DecodeSeed(seed_text));
  auto time = j.find("unix_time_ns");
  if (time == j.end()) {
    return Invalid("field 'unix_time_ns' is missing");
  }
  // An integer within int64 (nlohmann stores big positives as unsigned) and not before 1970.
  bool fits =
      time->is_number_integer() &&
      !(time->is_number_unsigned() && time->get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) &&
      time->get<int64_t>() >= 0;
  if (!fits) {
    return Invalid("'unix_time_ns' must be an integer of nanoseconds since 1970 (int64)");
  }
  r.unix_time_ns = time->get<int64_t>();
  ABOX_ASSIGN_OR_RETURN(r.hostname, StringField(j, "hostname"));
  ABOX_RETURN_IF_ERROR(CheckHostname(r.hostname));
  ABOX_ASSIGN_OR_RETURN(r.machine_id, StringField(j, "machine_id"));
  ABOX_RETURN_IF_ERROR(CheckMachineId(r.machine_id));
  ABOX_ASSIGN_OR_RETURN(r.sandbox_id, StringField(j, "sandbox_id"));
  ABOX_RETURN_IF_ERROR(CheckSandboxId(r.sandbox_id));
  return r;
}

absl::Status SystemIdentityEffects::AddEntropy(absl::string_view seed) {
  if (seed.size() != kIdentitySeedBytes) {
    return absl::InvalidArgumentError("the seed has the wrong size");
  }
  base::UniqueFd fd(::open("/dev/urandom", O_WRONLY | O_CLOEXEC));
  if (!fd) {
    return base::ErrnoError("open(/dev/urandom)");
  }
  // struct rand_pool_info ends in a flexible array: the seed goes right behind the header.
  alignas(rand_pool_info) unsigned char pool[sizeof(rand_pool_info) + kIdentitySeedBytes] = {};
  auto* info = reinterpret_cast<rand_pool_info*>(pool);
  info->entropy_count = static_cast<int>(kIdentitySeedBytes * 8);  // bits, credited in full
  info->buf_size = static_cast<int>(kIdentitySeedBytes);
  std::memcpy(pool + sizeof(rand_pool_info), seed.data(), seed.size());
  int rc = ::ioctl(fd.get(), RNDADDENTROPY, info);
  int err = errno;
  ::explicit_bzero(pool, sizeof(pool));
  if (rc != 0) {
    return base::ErrnoError("ioctl(/dev/urandom, RNDADDENTROPY)", err);
  }
  // Without this the CRNG would keep the template's key until its next scheduled reseed.
  if (::ioctl(fd.get(), kReseedCrng) != 0) {
    return base::ErrnoError("ioctl(/dev/urandom, RNDRESEEDCRNG)");
  }
  return absl::OkStatus();
}

absl::Status SystemIdentityEffects::SetClock(int64_t unix_time_ns) {
  timespec ts{.tv_sec = static_cast<time_t>(unix_time_ns / 1'000'000'000),
              .tv_nsec = static_cast<long>(unix_time_ns % 1'000'000'000)};
  if (::clock_settime(CLOCK_REALTIME, &ts) != 0) {
    return base::ErrnoError("clock_settime(CLOCK_REALTIME)");
  }
  return absl::OkStatus();
}

absl::Status SystemIdentityEffects::SetHostname(absl::string_view hostname) {
  if (::sethostname(hostname.data(), hostname.size()) != 0) {
    return base::ErrnoError("sethostname");
  }
  return absl::OkStatus();
}

absl::Status SystemIdentityEffects::WriteFile(const std::string& path, absl::string_view data) {
  return base::WriteFileAtomic(path, std::string_view(data.data(), data.size()), 0444);
}

absl::Status ApplyIdentity(const IdentityRequest& r, IdentityEffects& effects) {
  ABOX_RETURN_IF_ERROR(Step("seeding the kernel RNG", effects.AddEntropy(r.seed)));
  ABOX_RETURN_IF_ERROR(Step("setting the clock", effects.SetClock(r.unix_time_ns)));
  ABOX_RETURN_IF_ERROR(Step("setting the hostname", effects.SetHostname(r.hostname)));
  ABOX_RETURN_IF_ERROR(Step(absl::StrCat("writing ", kMachineIdPath),
                            effects.WriteFile(kMachineIdPath, r.machine_id + "\n")));
  ABOX_RETURN_IF_ERROR(Step(absl::StrCat("writing ", kSandboxIdPath),
                            effects.WriteFile(kSandboxIdPath, r.sandbox_id + "\n")));
  return absl::OkStatus();
}

int RunIdentityTool(int argc, char** argv, int in_fd, int out_fd, int err_fd,
                    IdentityEffects& effects) {
  auto fail = [&](int code, absl::string_view message) {
    std::string line = absl::StrCat("abox-guest identity: ", message, "\n");
    if (code == 2) {
      line += kUsage;
    }
    (void)base::WriteAll(err_fd, line);
    return code;
  };
  if (argc != 1) {
    return fail(2, absl::StrCat("unexpected argument: ", argv[1]));
  }
  absl::StatusOr<std::string> text = base::ReadAllFd(in_fd, kMaxIdentityRequestBytes);
  if (!text.ok()) {
    return fail(1, absl::StrCat("reading the request: ", text.status().message()));
  }
  absl::StatusOr<IdentityRequest> request = ParseIdentityRequest(*text);
  if (!request.ok()) {
    return fail(1, request.status().message());
  }
  if (absl::Status s = ApplyIdentity(*request, effects); !s.ok()) {
    return fail(1, s.message());
  }
  if (absl::Status s = base::WriteAll(out_fd, "{\"ok\":true}\n"); !s.ok()) {
    return fail(1, absl::StrCat("writing the answer: ", s.message()));
  }
  return 0;
}

}  // namespace abox::guest
