// libFuzzer target: ParseManifest over arbitrary bytes (the guest's manifest is hostile). What
// parses must serialize and parse back to the same manifest.
#include <cstddef>
#include <cstdint>

#include "src/workspace/manifest.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  absl::string_view text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<abox::workspace::Manifest> m =
      abox::workspace::ParseManifest(text, {.max_entries = 1000, .max_bytes = 1 << 20});
  if (!m.ok()) {
    return 0;
  }
  std::string again = abox::workspace::SerializeManifest(*m);
  absl::StatusOr<abox::workspace::Manifest> back = abox::workspace::ParseManifest(again);
  if (!back.ok() || back->size() != m->size()) {
    __builtin_trap();
  }
  for (auto a = m->begin(), b = back->begin(); a != m->end(); ++a, ++b) {
    if (a->first != b->first || !a->second.SameContent(b->second) ||
        a->second.mtime_ns != b->second.mtime_ns) {
      __builtin_trap();
    }
  }
  return 0;
}
