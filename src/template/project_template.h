// Per-project templates: what a repository asks of its sandbox in `.abox.toml` at its top level
// (image, preset, extra packages, setup commands, resources, egress), or what `--template auto`
// guesses from the files it sees there. docs/templates.md describes the file.
//
// Trust boundary: the file comes from the repository, which the person running abox may not
// have written. Everything here is untrusted input: the parser bounds sizes and counts, names
// every mistake, and a template may not widen egress for the sandbox's life on its own
// (CheckTemplateEgress). No I/O beyond reading the workspace's top level; no exceptions.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace abox::tmpl {

// The template file's name, at the workspace's top level.
inline constexpr std::string_view kTemplateFileName = ".abox.toml";

// Limits on untrusted input: the file, each string in it, each list in it.
inline constexpr size_t kMaxTemplateBytes = 64 * 1024;
inline constexpr size_t kMaxStringBytes = 4096;
inline constexpr size_t kMaxListEntries = 64;

// Resource bounds, the API's where it has them (cpus 1..64, memory 128..262144 MiB).
inline constexpr int64_t kMinCpus = 1;
inline constexpr int64_t kMaxCpus = 64;
inline constexpr int64_t kMinMemoryMib = 128;
inline constexpr int64_t kMaxMemoryMib = 262144;
inline constexpr int64_t kMinDiskMib = 1024;
inline constexpr int64_t kMaxDiskMib = 1048576;

// The presets a template may name (the images are built elsewhere), in documentation order.
[[nodiscard]] const std::vector<std::string>& KnownPresets();

struct ProjectTemplate {
  // Where it came from, for messages: ".abox.toml", "auto (package.json, go.mod)" or "auto".
  std::string source;
  std::optional<std::string> image;
  std::optional<std::string> preset;
  std::vector<std::string> packages;    // extra Debian packages
  std::vector<std::string> setup;       // commands run in /workspace as the agent user
  std::vector<std::string> setup_root;  // commands run in /workspace as root, before `setup`
  std::optional<int64_t> cpus;
  std::optional<int64_t> memory_mib;
  std::optional<int64_t> disk_mib;
  // Egress rules for the sandbox's whole life (net's rule forms; checked there). A template
  // cannot grant these by itself: see CheckTemplateEgress.
  std::vector<std::string> egress_allow;
  // "preset:NAME" rules open only while the setup commands run.
  std::vector<std::string> setup_allow;
  // Auto only: the files that were recognised ("package.json", "go.mod").
  std::vector<std::string> detected;
  // Auto only: what the guess could not do ("Maven Central has no egress preset yet: ...").
  std::vector<std::string> notes;

  friend bool operator==(const ProjectTemplate&, const ProjectTemplate&) = default;
};

// Parses a template's text. `file_name` starts every error message. kInvalidArgument on invalid
// TOML (with line and column), an unknown key (named, with the known ones and a near-miss
// suggestion), a wrong type, an out-of-range number, a malformed size, a bad package name, an
// empty string, a setup_allow entry that is not preset:NAME, an unknown preset, a request for
// open egress, or anything over the limits above.
[[nodiscard]] absl::StatusOr<ProjectTemplate> ParseTemplate(std::string_view file_name,
                                                            std::string_view text);

// The template as .abox.toml text that ParseTemplate reads back to the same values (source,
// detected and notes become comments), e.g. to save what `--template auto` guessed. Sizes are
// written as "NGiB" when whole, else as an integer number of MiB.
[[nodiscard]] std::string FormatTemplate(const ProjectTemplate& t);

// A TOML basic string: quotes, backslashes and control characters escaped; other bytes as they
// are. Also what `abox mcp install` writes into Codex's config.toml.
[[nodiscard]] std::string TomlString(std::string_view text);

// Reads and parses `<workspace_dir>/.abox.toml`; nullopt when there is none. The file must be a
// regular file of at most kMaxTemplateBytes and not a symbolic link (a link could make abox read
// a file outside the repository), else kInvalidArgument saying so.
[[nodiscard]] absl::StatusOr<std::optional<ProjectTemplate>> ReadTemplate(
    const std::filesystem::path& workspace_dir);

// `--template auto`: a template guessed from marker files at the workspace's top level
// (package.json, pyproject.toml, requirements.txt, setup.py, go.mod, Cargo.toml, pom.xml,
// build.gradle, build.gradle.kts). Reads no file's contents and follows no symbolic link. When
// nothing is recognised the result has no preset and `detected` is empty.
[[nodiscard]] absl::StatusOr<ProjectTemplate> DetectTemplate(
    const std::filesystem::path& workspace_dir);

// Lines for `abox create` to print: what the template sets, its setup commands with the egress
// they may use, the persistent egress it asks for, and its notes.
[[nodiscard]] std::vector<std::string> DescribeTemplate(const ProjectTemplate& t);

// OK unless the template asks for egress for the sandbox's whole life and the person did not
// accept it (`--allow-template-egress`): then kPermissionDenied naming the rules and what to do.
// Open egress ("*") is refused even when accepted: a person who wants it says so themselves.
[[nodiscard]] absl::Status CheckTemplateEgress(const ProjectTemplate& t, bool person_allowed);

}  // namespace abox::tmpl
