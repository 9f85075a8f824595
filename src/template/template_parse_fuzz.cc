// libFuzzer target: ParseTemplate over arbitrary bytes (.abox.toml comes with the repository).
// Whatever parses must stay within the limits, format to text that parses back to the same
// template, and describe itself without a control character reaching the terminal.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "src/template/project_template.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<abox::tmpl::ProjectTemplate> t = abox::tmpl::ParseTemplate(".abox.toml", text);
  if (!t.ok()) {
    return 0;
  }
  if (t->packages.size() > abox::tmpl::kMaxListEntries ||
      t->setup.size() > abox::tmpl::kMaxListEntries) {
    __builtin_trap();
  }
  absl::StatusOr<abox::tmpl::ProjectTemplate> back =
      abox::tmpl::ParseTemplate(".abox.toml", abox::tmpl::FormatTemplate(*t));
  if (!back.ok() || !(*back == *t)) {
    __builtin_trap();
  }
  for (const std::string& line : abox::tmpl::DescribeTemplate(*t)) {
    for (char c : line) {
      if (static_cast<unsigned char>(c) < 0x20) {
        __builtin_trap();
      }
    }
  }
  (void)abox::tmpl::CheckTemplateEgress(*t, false);
  return 0;
}
