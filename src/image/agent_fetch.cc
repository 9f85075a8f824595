#include "src/image/agent_fetch.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <csignal>
#include <nlohmann/json.hpp>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "src/base/io.h"
#include "src/base/status_macros.h"
#include "src/image/elf_deps.h"

extern char** environ;

namespace abox::image {
namespace {

using nlohmann::json;

// Passed through to npm: the ways people reach a registry from behind a proxy, a mirror or a
// TLS-intercepting gateway (an extra CA for node).
constexpr const char* kPassThroughEnv[] = {"PATH",
                                           "http_proxy",
                                           "https_proxy",
                                           "no_proxy",
                                           "HTTP_PROXY",
                                           "HTTPS_PROXY",
                                           "NO_PROXY",
                                           "npm_config_registry",
                                           "NPM_CONFIG_REGISTRY",
                                           "NODE_EXTRA_CA_CERTS"};

// npm error codes that mean the registry could not be reached.
constexpr const char* kNetworkCodes[] = {"ECONNREFUSED", "ENOTFOUND",         "EAI_AGAIN",
                                         "ETIMEDOUT",    "ECONNRESET",        "ENETUNREACH",
                                         "EHOSTUNREACH", "ERR_SOCKET_TIMEOUT"};

std::string LogHint(const std::filesystem::path& log) {
  return absl::StrCat("; npm's output is in ", log.string());
}

json ParseJson(absl::string_view text) {
  return json::parse(text.data(), text.data() + text.size(), nullptr, /*allow_exceptions=*/false);
}

std::string StringField(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// npm's {"error": {"code", "summary"}} answer as a status.
absl::Status NpmError(const json& err, const std::string& what, const std::filesystem::path& log) {
  const std::string code = StringField(err, "code");
  const std::string summary = StringField(err, "summary");
  if (code == "E404") {
    return absl::NotFoundError(absl::StrCat(what, " was not found in the npm registry (", summary,
                                            "): check the version (`npm view <package> versions`)",
                                            LogHint(log)));
  }
  for (const char* net : kNetworkCodes) {
    if (code == net) {
      return absl::UnavailableError(absl::StrCat(
          "cannot reach the npm registry for ", what, " (", summary,
          "): check the network, or set https_proxy / npm_config_registry", LogHint(log)));
    }
  }
  return absl::InternalError(
      absl::StrCat("npm failed for ", what, " (", code, ": ", summary, ")", LogHint(log)));
}

absl::StatusOr<NpmOutput> RunNpm(const NpmContext& ctx, std::vector<std::string> argv,
                                 std::chrono::seconds timeout) {
  NpmCommand c;
  c.argv = std::move(argv);
  c.env = NpmEnvironment(ctx);
  c.log = ctx.log;
  c.timeout = timeout;
  c.cwd = ctx.home;
  return ctx.run(c);
}

}  // namespace

NpmRunner SystemNpmRunner() {
  return [](const NpmCommand& c) -> absl::StatusOr<NpmOutput> {
    std::optional<std::string> npm = base::FindExecutable("npm");
    if (!npm) {
      return absl::FailedPreconditionError(
          "npm is not installed (--agent downloads the agent with it): install it with `sudo "
          "apt-get install npm`");
    }
    base::UniqueFd log(::open(c.log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644));
    if (!log) {
      return base::ErrnoError(absl::StrCat("open(", c.log.string(), ")"));
    }
    std::string shown = "+";
    for (const std::string& a : c.argv) {
      absl::StrAppend(&shown, " ", a);
    }
    ABOX_RETURN_IF_ERROR(base::WriteAll(log.get(), shown + "\n"));
    // stdout to an unlinked temp file: bounded, no pipe to drain while waiting with a timeout.
    const std::filesystem::path out_dir = c.log.parent_path();
    base::UniqueFd out(::open(out_dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600));
    if (!out) {
      return base::ErrnoError(absl::StrCat("open(O_TMPFILE in ", out_dir.string(), ")"));
    }
    base::SpawnOptions o;
    o.argv = c.argv;
    o.argv[0] = *npm;
    o.env = c.env;
    if (!c.cwd.empty()) {
      o.cwd = c.cwd.string();
    }
    o.stdout_fd = out.get();
    o.stderr_fd = log.get();
    o.close_other_fds = true;
    o.parent_death_signal = SIGKILL;
    ABOX_ASSIGN_OR_RETURN(base::ChildProcess child, base::ChildProcess::Spawn(o));
    absl::StatusOr<base::ExitStatus> st = child.Wait(c.timeout);
    if (absl::IsDeadlineExceeded(st.status())) {
      child.KillAndReap();
      return absl::DeadlineExceededError(absl::StrCat(
          "npm did not finish within ", c.timeout.count(), "s: check the network", LogHint(c.log)));
    }
    ABOX_RETURN_IF_ERROR(st.status());
    if (::lseek(out.get(), 0, SEEK_SET) != 0) {
      return base::ErrnoError("lseek(npm stdout)");
    }
    NpmOutput result{*st, ""};
    ABOX_ASSIGN_OR_RETURN(result.out, base::ReadAllFd(out.get(), 16 << 20));
    ABOX_RETURN_IF_ERROR(base::WriteAll(log.get(), result.out));
    return result;
  };
}

std::vector<std::string> NpmEnvironment(const NpmContext& ctx) {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    absl::string_view kv(*e);
    for (const char* keep : kPassThroughEnv) {
      if (absl::StartsWith(kv, absl::StrCat(keep, "="))) {
        env.emplace_back(kv);
      }
    }
  }
  env.push_back(absl::StrCat("HOME=", ctx.home.string()));
  env.push_back(absl::StrCat("npm_config_cache=", ctx.cache.string()));
  // A file that does not exist: the user's ~/.npmrc (tokens, scripts settings) is not read.
  env.push_back(absl::StrCat("npm_config_userconfig=", (ctx.home / "npmrc-none").string()));
  // --prefix would also move npm's global config to <prefix>/etc/npmrc; keep the host's
  // (<node's prefix>/etc/npmrc, as npm finds it: admin-set cafile, proxy, registry).
  if (std::optional<std::string> node = base::FindExecutable("node")) {
    std::error_code ec;
    const std::filesystem::path real = std::filesystem::canonical(*node, ec);
    if (!ec) {
      env.push_back(absl::StrCat("npm_config_globalconfig=",
                                 (real.parent_path().parent_path() / "etc" / "npmrc").string()));
    }
  }
  env.emplace_back("npm_config_update_notifier=false");
  env.emplace_back("LANG=C.UTF-8");
  return env;
}

std::vector<std::string> NpmViewArgv(const AgentSpec& spec) {
  const AgentKind* kind = FindAgentKind(spec.name);
  return {"npm",     "view",
          "--json",  absl::StrCat(kind != nullptr ? kind->package : "", "@", spec.version),
          "version", "dist.integrity"};
}

std::vector<std::string> NpmInstallArgv(const std::filesystem::path& prefix,
                                        const ResolvedAgent& a) {
  return {"npm", "install", "--prefix", prefix.string(),
          // No install scripts: npm only downloads and verifies tarballs; no package code runs
          // on the host (the native build sits in an optional dependency, no postinstall needed).
          "--ignore-scripts", "--no-audit", "--no-fund", "--omit=dev",
          // The guest's platform, whatever the host's: selects the linux-x64 (glibc) build.
          "--os=linux", "--cpu=x64", "--libc=glibc", absl::StrCat(a.package, "@", a.version)};
}

absl::StatusOr<ResolvedAgent> ParseNpmView(const AgentSpec& spec, absl::string_view text,
                                           const std::filesystem::path& log) {
  const AgentKind* kind = FindAgentKind(spec.name);
  if (kind == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("unknown agent '", spec.name, "'"));
  }
  const std::string what = absl::StrCat(kind->package, "@", spec.version);
  json j = ParseJson(text);
  if (j.is_object() && j.contains("error") && j["error"].is_object()) {
    return NpmError(j["error"], what, log);
  }
  if (j.is_array() && !j.empty()) {
    j = json(j.back());  // a range: npm lists matching versions in ascending order
  }
  if (text.find_first_not_of(" \t\r\n") == absl::string_view::npos || j.is_array()) {
    return absl::NotFoundError(absl::StrCat(what, " matches no published version", LogHint(log)));
  }
  if (!j.is_object()) {
    return absl::InternalError(
        absl::StrCat("npm view answered something other than JSON for ", what, LogHint(log)));
  }
  ResolvedAgent a{spec.name, kind->package, StringField(j, "version"),
                  StringField(j, "dist.integrity")};
  ABOX_RETURN_IF_ERROR(ValidateResolvedAgent(a));
  return a;
}

absl::StatusOr<std::vector<ResolvedAgent>> ResolveAgents(const std::vector<AgentSpec>& specs,
                                                         const NpmContext& ctx) {
  std::vector<ResolvedAgent> out;
  for (const AgentSpec& spec : specs) {
    ABOX_ASSIGN_OR_RETURN(NpmOutput r, RunNpm(ctx, NpmViewArgv(spec), ctx.view_timeout));
    if (r.status.exit_code != 0 && r.out.find_first_not_of(" \t\r\n") == std::string::npos) {
      return absl::InternalError(absl::StrCat("npm view ", NpmViewArgv(spec)[3], " failed (",
                                              r.status.ToString(), ")", LogHint(ctx.log)));
    }
    absl::StatusOr<ResolvedAgent> a = ParseNpmView(spec, r.out, ctx.log);
    if (!a.ok()) {
      return a.status();
    }
    out.push_back(*std::move(a));
  }
  return out;
}

absl::StatusOr<std::filesystem::path> LocateAgentPayload(const std::filesystem::path& node_modules,
                                                         const ResolvedAgent& a) {
  const AgentKind* kind = FindAgentKind(a.name);
  if (kind == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("unknown agent '", a.name, "'"));
  }
  const std::filesystem::path native = node_modules / kind->native_package;
  const std::filesystem::path payload = native / kind->payload;
  std::error_code ec;
  const auto st = std::filesystem::symlink_status(payload, ec);
  if (ec || !std::filesystem::exists(st) || std::filesystem::is_symlink(st)) {
    return absl::NotFoundError(absl::StrCat(
        a.package, "@", a.version, " was installed but its native build is not where abox looks (",
        payload.string(),
        "): the package layout may have changed; pin a version that works with --agent ", a.name,
        "@VERSION and report this"));
  }
  const std::filesystem::path entry =
      std::filesystem::is_directory(st) ? payload / kind->entry : payload;
  if (!std::filesystem::is_regular_file(std::filesystem::symlink_status(entry, ec))) {
    return absl::NotFoundError(absl::StrCat(a.package, "@", a.version,
                                            ": the native package has no ", kind->entry,
                                            " (looked for ", entry.string(), ")"));
  }
  return payload;
}

absl::Status StageAgents(const std::vector<ResolvedAgent>& agents, const std::string& suite,
                         const std::vector<std::string>& packages,
                         const std::filesystem::path& staging, const std::filesystem::path& out,
                         const NpmContext& ctx) {
  for (const ResolvedAgent& a : agents) {
    ABOX_RETURN_IF_ERROR(ValidateResolvedAgent(a));
    const AgentKind* kind = FindAgentKind(a.name);
    const std::string what = absl::StrCat(a.package, "@", a.version);
    const std::filesystem::path prefix = staging / absl::StrCat("npm-", a.name);
    std::error_code ec;
    std::filesystem::create_directories(prefix, ec);
    if (ec) {
      return absl::InternalError(absl::StrCat("mkdir ", prefix.string(), ": ", ec.message()));
    }
    ABOX_ASSIGN_OR_RETURN(NpmOutput r, RunNpm(ctx, NpmInstallArgv(prefix, a), ctx.install_timeout));
    if (r.status.exit_code != 0) {
      std::string code;
      if (auto log = base::ReadFile(ctx.log.string()); log.ok()) {
        for (const char* net : kNetworkCodes) {
          if (absl::StrContains(*log, net)) {
            code = net;
          }
        }
      }
      const std::string msg = absl::StrCat("npm install ", what, " failed (", r.status.ToString(),
                                           ")", LogHint(ctx.log));
      return code.empty() ? absl::InternalError(msg)
                          : absl::UnavailableError(
                                absl::StrCat(msg, " (", code, ": cannot reach the npm registry?)"));
    }
    // npm checked each tarball against the registry's integrity; check that what it installed
    // is the version and tarball the cache key names.
    auto lock = base::ReadFile((prefix / "package-lock.json").string(), 64 << 20);
    if (!lock.ok()) {
      return base::Annotate(lock.status(), absl::StrCat("npm install ", what, LogHint(ctx.log)));
    }
    const json j = ParseJson(*lock);
    const json* pkg = nullptr;
    if (j.is_object() && j.contains("packages") && j["packages"].is_object()) {
      auto it = j["packages"].find(absl::StrCat("node_modules/", a.package));
      if (it != j["packages"].end() && it->is_object()) {
        pkg = &*it;
      }
    }
    if (pkg == nullptr || StringField(*pkg, "version") != a.version ||
        StringField(*pkg, "integrity") != a.integrity) {
      return absl::DataLossError(absl::StrCat(
          "npm installed something other than ", what, " (integrity ", a.integrity,
          ") according to ", (prefix / "package-lock.json").string(), ": retry the build"));
    }
    ABOX_ASSIGN_OR_RETURN(std::filesystem::path payload,
                          LocateAgentPayload(prefix / "node_modules", a));
    const std::filesystem::path dest = out / a.name / a.version;
    const bool is_dir = std::filesystem::is_directory(payload, ec);
    const std::filesystem::path entry = is_dir ? payload / kind->entry : payload;
    const std::string where = absl::StrCat(what, " (", kind->native_package, "/", kind->payload,
                                           is_dir ? absl::StrCat("/", kind->entry) : "", ")");
    absl::StatusOr<ElfDeps> deps = ReadElfDeps(entry);
    if (!deps.ok()) {
      return absl::FailedPreconditionError(absl::StrCat(
          where, " is not a usable Linux x86-64 executable: ", deps.status().message()));
    }
    ABOX_RETURN_IF_ERROR(CheckImageProvides(*deps, suite, packages, where));
    std::filesystem::create_directories(dest.parent_path(), ec);
    std::filesystem::path target = is_dir ? dest : dest / payload.filename();
    if (!is_dir) {
      std::filesystem::create_directories(dest, ec);
    }
    std::filesystem::rename(payload, target, ec);
    if (ec) {
      return absl::InternalError(
          absl::StrCat("moving ", payload.string(), " to ", target.string(), ": ", ec.message()));
    }
    // The hook gives everyone read (and search/exec where someone has it): the entry needs x.
    std::filesystem::permissions(dest / kind->entry,
                                 std::filesystem::perms::owner_exec |
                                     std::filesystem::perms::group_exec |
                                     std::filesystem::perms::others_exec,
                                 std::filesystem::perm_options::add, ec);
    if (ec) {
      return absl::InternalError(
          absl::StrCat("chmod +x ", (dest / kind->entry).string(), ": ", ec.message()));
    }
  }
  return absl::OkStatus();
}

}  // namespace abox::image
