// Picks the kernel modules the initramfs must load, from a kernel's modules.dep/modules.builtin.
#pragma once

#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace abox::image {

// What stage 1 needs before it can mount the root disk and talk to the host, in load order.
struct WantedModule {
  const char* name;
  bool required;  // false: skipped when the kernel has it neither built in nor as a module
};
inline constexpr WantedModule kInitramfsModules[] = {
    {"virtio_ring", true}, {"virtio", true},         {"virtio_mmio", true},
    {"virtio_blk", true},  {"virtio_console", true}, {"virtio_rng", false},
};

// Module name as the kernel sees it: basename without .ko[.xz|.zst|.gz], '-' mapped to '_'.
[[nodiscard]] std::string NormalizeModuleName(absl::string_view path_or_name);

// Parsed modules.dep + modules.builtin of one kernel.
struct ModuleIndex {
  std::map<std::string, std::string> path;               // name -> path relative to the dir
  std::map<std::string, std::vector<std::string>> deps;  // name -> names it depends on
  std::set<std::string> builtin;                         // names compiled into the kernel
};

// Parses the text of modules.dep ("kernel/a.ko: kernel/b.ko ...") and modules.builtin
// (one path per line). Rejects absolute paths and "..".
[[nodiscard]] absl::StatusOr<ModuleIndex> ParseModuleIndex(absl::string_view modules_dep,
                                                           absl::string_view modules_builtin);

// One module file to put in the initramfs.
struct ModuleToLoad {
  std::string name;      // normalized, e.g. "virtio_blk"
  std::string rel_path;  // relative to /lib/modules/<version>
};

// Orders `wanted` (and their dependencies, depth first) so every module follows what it
// depends on; built-in modules are dropped. A required module that is neither built in nor
// present fails with kNotFound; a dependency cycle fails with kFailedPrecondition.
[[nodiscard]] absl::StatusOr<std::vector<ModuleToLoad>> ResolveModuleLoadOrder(
    const ModuleIndex& index, const std::vector<WantedModule>& wanted);

// Reads a module file, decompressing .ko.xz / .ko.zst / .ko.gz (via libarchive) so the
// initramfs only holds plain .ko files that finit_module() loads without kernel help.
[[nodiscard]] absl::StatusOr<std::string> ReadModuleFile(const std::filesystem::path& path,
                                                         size_t limit = 64 << 20);

}  // namespace abox::image
