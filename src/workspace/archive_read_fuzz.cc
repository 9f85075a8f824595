// libFuzzer target: ReadSyncArchive over arbitrary bytes (a sync archive from the guest is
// hostile). Small limits so the fuzzer explores the checks, not the allocator; the handler
// drains every entry the way `ws unpack` does.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "src/workspace/archive.h"
#include "src/workspace/paths.h"

namespace {

using abox::workspace::Entry;
using abox::workspace::EntryReader;

class DrainingHandler final : public abox::workspace::SyncArchiveHandler {
 public:
  absl::Status OnDeletions(std::vector<std::string> paths) override {
    for (const std::string& p : paths) {
      if (!abox::workspace::ValidateRelativePath(p).ok()) {
        __builtin_trap();  // The reader must never hand over an invalid path.
      }
    }
    return absl::OkStatus();
  }
  absl::Status OnEntry(const std::string& rel, const Entry& e, EntryReader& data) override {
    if (!abox::workspace::ValidateRelativePath(rel).ok() || e.mode > 07777) {
      __builtin_trap();
    }
    char buf[4096];
    uint64_t total = 0;
    for (;;) {
      absl::StatusOr<size_t> n = data.Read(buf, sizeof(buf));
      if (!n.ok()) {
        return n.status();
      }
      if (*n == 0) {
        break;
      }
      total += *n;
    }
    if (total > e.size) {
      __builtin_trap();  // More content than the header declared.
    }
    return absl::OkStatus();
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  size_t pos = 0;
  // Hand out the input in uneven pieces to exercise the reader's buffering.
  auto source = [&](char* buf, size_t len) -> absl::StatusOr<size_t> {
    size_t n = std::min({len, size - pos, static_cast<size_t>(1 + pos % 777)});
    std::memcpy(buf, data + pos, n);
    pos += n;
    return n;
  };
  abox::workspace::ArchiveLimits limits{.max_entries = 64,
                                        .max_file_bytes = 1 << 20,
                                        .max_total_bytes = 4 << 20,
                                        .max_deletion_bytes = 1 << 16};
  DrainingHandler handler;
  (void)abox::workspace::ReadSyncArchive(source, limits, handler);
  return 0;
}
