// What a downloaded agent executable needs from the image: its ELF interpreter, DT_NEEDED
// libraries and the glibc symbol versions it asks for, read with bounded preads (the files are
// hundreds of MB). Trust boundary: the file comes from the npm registry; every offset and count
// in it is checked against the file size and fixed caps before use.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace abox::image {

struct ElfDeps {
  std::string interpreter;            // PT_INTERP, empty for static executables
  std::vector<std::string> needed;    // DT_NEEDED sonames
  std::vector<std::string> versions;  // required symbol versions, e.g. "GLIBC_2.17"
};

// Reads `path`: kInvalidArgument unless it is an x86-64 little-endian ELF executable (static,
// static-pie or dynamic) with sane headers.
[[nodiscard]] absl::StatusOr<ElfDeps> ReadElfDeps(const std::filesystem::path& path);

// Checks that an image of Debian `suite` with `packages` (the full set, see PackageSet) can run
// an executable needing `deps`: the standard x86-64 interpreter, only libraries abox knows the
// Debian package of (libc6, libgcc-s1, libstdc++6, zlib1g ...), each package present or always
// installed, and no GLIBC_x.y newer than the suite ships (bookworm: 2.36; unknown suites are
// not version-checked). `what` names the executable in errors (agent, version, path).
[[nodiscard]] absl::Status CheckImageProvides(const ElfDeps& deps, const std::string& suite,
                                              const std::vector<std::string>& packages,
                                              absl::string_view what);

}  // namespace abox::image
