// libFuzzer target: request bodies are untrusted API input. ParseObject and Reader must never
// crash, throw or accept a body that breaks their contract, whatever the bytes.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "src/api/errors.h"
#include "src/api/json_body.h"

namespace {

void Check(bool condition) {
  if (!condition) {
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view body(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<nlohmann::json> parsed = abox::api::ParseObject(body);
  if (!parsed.ok()) {
    Check(parsed.status().code() == absl::StatusCode::kInvalidArgument);
    Check(abox::api::ErrorKindOf(parsed.status()).http_status == 400);
    return 0;
  }
  Check(parsed->is_object());
  abox::api::Reader reader(*parsed);
  std::string image;
  int64_t cpus = 1;
  bool tty = false;
  std::vector<std::string> argv;
  std::map<std::string, std::string> env;
  std::optional<std::string> name;
  int64_t memory = 0;
  reader.OptionalString("image", &image, 256);
  reader.OptionalInt("cpus", &cpus, 1, 64);
  reader.OptionalBool("tty", &tty);
  reader.OptionalStringArray("argv", &argv, 16);
  reader.OptionalStringMap("env", &env, 16);
  reader.OptionalString("name", &name);
  reader.OptionalObject("resources", [&memory](abox::api::Reader& nested) {
    nested.OptionalInt("memory_mib", &memory, 64, 1 << 20);
  });
  absl::Status status = reader.Finish();
  if (status.ok()) {
    Check(cpus >= 1 && cpus <= 64);
    Check(image.size() <= 256 && argv.size() <= 16 && env.size() <= 16);
    Check(image.find('\0') == std::string::npos);
  } else {
    Check(status.code() == absl::StatusCode::kInvalidArgument);
    Check(abox::api::FieldOf(status).has_value());
    // The error body is always valid JSON, even when the field name is not UTF-8.
    Check(!nlohmann::json::parse(abox::api::ErrorResponseFor(status).body, nullptr, false)
               .is_discarded());
  }
  return 0;
}
