// Value rules shared by the template parser, detector and describer: names, sizes, egress rule
// shapes, and quoting untrusted text for messages. Internal to src/template.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "src/base/unique_fd.h"

namespace abox::tmpl {

// `text` as it may appear in a message or on a terminal: control characters and bytes outside
// ASCII as \xNN, cut to `max` bytes with "..." (the text is untrusted: it could hold escape
// codes that rewrite what the person sees).
[[nodiscard]] std::string Printable(std::string_view text, size_t max = 80);

// The candidate `typed` most likely misspells, "" when none is within 2 edits (and within a
// third of the longer name's length).
[[nodiscard]] std::string NearestName(std::string_view typed,
                                      const std::vector<std::string>& candidates);

// A size in MiB from "512MiB", "2GiB", "1TiB" (a space before the unit is accepted); nullopt when
// `text` is not in one of these forms or is absurdly large.
[[nodiscard]] std::optional<int64_t> ParseSizeMib(std::string_view text);

// Debian package names: [a-z0-9][a-z0-9+.-]+ (Debian Policy 5.6.1).
[[nodiscard]] bool IsPackageName(std::string_view name);

// Image names, the rule image::ValidateImageName applies (src/template may not depend on
// src/image): 1-64 of [a-z0-9._-], starting with [a-z0-9].
[[nodiscard]] bool IsImageName(std::string_view name);

// "preset:NAME" with NAME of [a-z0-9-]; whether NAME exists is net's to say.
[[nodiscard]] bool IsPresetRule(std::string_view rule);

// A rule that would open egress to every host or a whole top-level domain: "*", "*:443",
// "*.com", "*.com:80".
[[nodiscard]] bool IsOpenEgressRule(std::string_view rule);

[[nodiscard]] bool IsKnownPreset(std::string_view name);

// The workspace directory, opened to look at names in it with *at() calls; `purpose` ("read its
// .abox.toml") goes into the error.
[[nodiscard]] absl::StatusOr<base::UniqueFd> OpenWorkspace(const std::filesystem::path& dir,
                                                           std::string_view purpose);

}  // namespace abox::tmpl
