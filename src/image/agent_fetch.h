// Fetching coding agents with the host's npm for `abox image build --agent`: resolve a spec to
// an exact version + dist.integrity (`npm view`), download it (`npm install --ignore-scripts`)
// into a staging dir, find the native build, check it, and lay it out as it will sit under
// /opt/abox/agents in the image.
// Trust boundary: npm and the registry are outside abox. npm runs with --ignore-scripts, so no
// package code runs on the host; a clean environment (HOME in a temp dir, cache in the build
// cache, no user npmrc); a timeout; output to the build log. Its JSON answers and the
// downloaded tree are untrusted: parsed without exceptions, checked against the resolution,
// and only the native package's payload goes on (never a path that leaves node_modules).
#pragma once

#include <chrono>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "src/base/child_process.h"
#include "src/image/coding_agent.h"

namespace abox::image {

// One npm invocation: argv[0] is "npm"; stdout is captured, stderr goes to `log`.
struct NpmCommand {
  std::vector<std::string> argv;
  std::vector<std::string> env;
  std::filesystem::path log;
  std::chrono::seconds timeout{0};
  // npm reads <cwd>/.npmrc as project config: run it in our temp HOME, never the user's cwd.
  std::filesystem::path cwd;
};
struct NpmOutput {
  base::ExitStatus status;
  std::string out;  // stdout (also appended to the log)
};
// Runs npm. Tests inject a fake; SystemNpmRunner() runs the host's npm.
using NpmRunner = std::function<absl::StatusOr<NpmOutput>(const NpmCommand&)>;

// The host's npm: kFailedPrecondition when it is not installed (how to install it), else spawns
// it and waits up to the timeout (kDeadlineExceeded, naming the log, after killing it).
[[nodiscard]] NpmRunner SystemNpmRunner();

// Where and how npm runs.
struct NpmContext {
  NpmRunner run;
  std::filesystem::path home;   // empty temp dir used as HOME (no user npmrc is read)
  std::filesystem::path cache;  // npm's download cache (kept across builds)
  std::filesystem::path log;    // npm's stderr; named in errors
  std::chrono::seconds view_timeout{120};
  std::chrono::seconds install_timeout{1200};  // a native build is 100-400 MB
};

// npm's environment: PATH (npm needs node), HOME, npm_config_cache, npm_config_userconfig (an
// absent file), no update notifier; proxy variables and a registry override pass through.
[[nodiscard]] std::vector<std::string> NpmEnvironment(const NpmContext& ctx);

// npm view --json <package>@<spec> version dist.integrity
[[nodiscard]] std::vector<std::string> NpmViewArgv(const AgentSpec& spec);

// npm install --prefix <prefix> --ignore-scripts ... <package>@<version>, exact version only.
[[nodiscard]] std::vector<std::string> NpmInstallArgv(const std::filesystem::path& prefix,
                                                      const ResolvedAgent& agent);

// Reads `npm view --json` output (an object, or an array when a range matches several versions:
// the newest, which npm lists last) into a validated resolution. A {"error": ...} answer
// becomes kNotFound (no such version) or kUnavailable (registry unreachable).
[[nodiscard]] absl::StatusOr<ResolvedAgent> ParseNpmView(const AgentSpec& spec,
                                                         absl::string_view json,
                                                         const std::filesystem::path& log);

// Resolves every spec with `npm view`.
[[nodiscard]] absl::StatusOr<std::vector<ResolvedAgent>> ResolveAgents(
    const std::vector<AgentSpec>& specs, const NpmContext& ctx);

// The native payload of `agent` inside an installed node_modules (checking the installed
// version): kNotFound naming the package version and path when it is missing.
[[nodiscard]] absl::StatusOr<std::filesystem::path> LocateAgentPayload(
    const std::filesystem::path& node_modules, const ResolvedAgent& agent);

// Installs each agent with npm under `staging`, checks the lock file's version and integrity
// against the resolution, checks the executable (x86-64 ELF; its libraries in the image: see
// CheckImageProvides with `suite` and `packages`) and moves the payload to
// <out>/<name>/<version>/, the tree that becomes /opt/abox/agents.
[[nodiscard]] absl::Status StageAgents(const std::vector<ResolvedAgent>& agents,
                                       const std::string& suite,
                                       const std::vector<std::string>& packages,
                                       const std::filesystem::path& staging,
                                       const std::filesystem::path& out, const NpmContext& ctx);

}  // namespace abox::image
