#include "src/image/rootfs_build.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "spdlog/spdlog.h"
#include "src/base/child_process.h"
#include "src/base/fenced_remove.h"
#include "src/base/io.h"
#include "src/base/status_macros.h"
#include "src/image/fs_util.h"
#include "src/image/kernel_extract.h"
#include "src/image/kernel_modules.h"
#include "src/image/rootfs_scripts.h"
#include "src/image/sha256.h"

extern char** environ;

namespace abox::image {
namespace {

using nlohmann::json;

constexpr char kWorkLock[] = ".lock";

bool AllOf(absl::string_view s, absl::string_view extra_chars) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [&](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
           extra_chars.find(c) != absl::string_view::npos;
  });
}

std::string ShellQuote(absl::string_view s) {
  return absl::StrCat("'", absl::StrReplaceAll(s, {{"'", "'\\''"}}), "'");
}

std::vector<std::string> Lines(absl::string_view text) {
  std::vector<std::string> out;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipWhitespace())) {
    out.emplace_back(absl::StripAsciiWhitespace(line));
  }
  return out;
}

// Runs argv with stdout+stderr appended to `log`; fails naming the log and a hint.
// `keep_fds` are inherited (e.g. a lock that must stay held while the child lives).
absl::Status RunLogged(const std::vector<std::string>& argv, const std::filesystem::path& log,
                       const std::vector<std::string>& env, const std::vector<int>& keep_fds,
                       const std::string& what, const std::string& mirror) {
  base::UniqueFd fd(::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644));
  if (!fd) {
    return base::ErrnoError(absl::StrCat("open(", log.string(), ")"));
  }
  std::string shown = "+";
  for (const std::string& arg : argv) {  // The hook script is long: show its start only.
    absl::StrAppend(&shown, " ", arg.size() > 120 ? arg.substr(0, 120) + "..." : arg);
  }
  ABOX_RETURN_IF_ERROR(base::WriteAll(fd.get(), shown + "\n"));
  base::SpawnOptions o;
  o.argv = argv;
  o.env = env;
  o.stdout_fd = fd.get();
  o.stderr_fd = fd.get();
  o.keep_fds = keep_fds;
  o.parent_death_signal = SIGTERM;  // mmdebstrap cleans up its namespace on TERM.
  ABOX_ASSIGN_OR_RETURN(base::ChildProcess child, base::ChildProcess::Spawn(o));
  ABOX_ASSIGN_OR_RETURN(base::ExitStatus st, child.Wait());
  if (st.exit_code == 0) {
    return absl::OkStatus();
  }
  absl::Status hint = absl::InternalError("");
  if (auto text = base::ReadFile(log.string(), 64 << 20); text.ok()) {
    hint = MmdebstrapFailureHint(*text, mirror);
  }
  return absl::Status(hint.code(), absl::StrCat(what, " failed (", st.ToString(), ")",
                                                hint.message().empty() ? "" : ": ", hint.message(),
                                                "; full output in ", log.string()));
}

// `base` (default: our environment) with key=value set.
std::vector<std::string> EnvWith(const std::string& key, const std::string& value,
                                 std::optional<std::vector<std::string>> base = std::nullopt) {
  if (!base) {
    base.emplace();
    for (char** e = environ; *e != nullptr; ++e) {
      base->emplace_back(*e);
    }
  }
  std::vector<std::string> env;
  for (std::string& e : *base) {
    if (!absl::StartsWith(e, key + "=")) {
      env.push_back(std::move(e));
    }
  }
  env.push_back(absl::StrCat(key, "=", value));
  return env;
}

// Fetches the agents into <work>/agents (the tree that becomes /opt/abox/agents) and returns
// the mmdebstrap hooks that copy them in; they run before kCustomizeHook takes the image.
// The copy is a special hook: mmdebstrap reads <work> as us and unpacks inside its namespace,
// so the unprivileged hook's subuid never needs to reach <work>.
absl::StatusOr<std::vector<std::string>> StageAgentsForBuild(
    const base::HostLayout& paths, const RootfsInputs& in, const std::filesystem::path& work,
    const std::filesystem::path& log, const StageFn& stage, const NpmRunner& npm) {
  std::vector<std::string> names;
  for (const ResolvedAgent& a : in.agents) {
    names.push_back(absl::StrCat(a.name, " ", a.version));
  }
  stage(2, absl::StrCat("rootfs: fetching ", absl::StrJoin(names, ", "),
                        " with npm --ignore-scripts (log: ", log.string(), ")"));
  NpmContext ctx;
  ctx.run = npm;
  ctx.home = work / "npm-home";
  ctx.cache = paths.cache_dir / "npm";
  ctx.log = log;
  std::error_code ec;
  std::filesystem::create_directories(ctx.home, ec);
  std::filesystem::create_directories(ctx.cache, ec);
  const std::filesystem::path staged = work / "agents";
  std::filesystem::create_directories(staged, ec);
  if (ec) {
    return absl::InternalError(absl::StrCat("mkdir ", staged.string(), ": ", ec.message()));
  }
  absl::Status s = StageAgents(in.agents, in.suite, in.packages, work / "npm", staged, ctx);
  if (!s.ok() && !absl::StrContains(s.message(), log.string())) {
    return absl::Status(s.code(), absl::StrCat(s.message(), "; build log: ", log.string()));
  }
  ABOX_RETURN_IF_ERROR(s);
  return std::vector<std::string>{
      absl::StrCat("--customize-hook=mkdir -p \"$1", kAgentsDir, "\""),
      absl::StrCat("--customize-hook=sync-in ", ShellQuote(staged.string()), " ", kAgentsDir),
      absl::StrCat("--customize-hook=", AgentInstallHook(in.agents))};
}

// Stage 3: vmlinuz -> vmlinux, module selection; moves `rootfs` in. `out` holds the hook's
// other outputs.
absl::Status AssembleEntry(const std::filesystem::path& out,
                           const std::filesystem::path& rootfs_src, RootfsEntry* e) {
  ABOX_ASSIGN_OR_RETURN(std::string version, base::ReadFile((out / "kernel_version").string()));
  ABOX_ASSIGN_OR_RETURN(std::string kpkg, base::ReadFile((out / "kernel_package").string()));
  ABOX_ASSIGN_OR_RETURN(std::string pkgs, base::ReadFile((out / "packages.txt").string()));
  e->kernel_version = std::string(absl::StripAsciiWhitespace(version));
  e->kernel_package = std::string(absl::StripAsciiWhitespace(kpkg));
  e->packages = Lines(pkgs);

  ABOX_ASSIGN_OR_RETURN(std::string vmlinuz, base::ReadFile((out / "vmlinuz").string(), 256 << 20));
  auto vmlinux = ExtractVmlinux(vmlinuz);
  if (!vmlinux.ok()) {
    return base::Annotate(vmlinux.status(), absl::StrCat("kernel ", e->kernel_version));
  }
  ABOX_RETURN_IF_ERROR(base::WriteFileAtomic((e->dir / kVmlinuxFile).string(), *vmlinux, 0444));
  e->vmlinux = {Sha256Hex(*vmlinux), vmlinux->size(), 0};

  std::filesystem::path mods = out / "modules";
  ABOX_ASSIGN_OR_RETURN(std::string dep, base::ReadFile((mods / "modules.dep").string()));
  auto builtin = base::ReadFile((mods / "modules.builtin").string());
  ABOX_ASSIGN_OR_RETURN(ModuleIndex index,
                        ParseModuleIndex(dep, builtin.ok() ? *builtin : std::string()));
  ABOX_ASSIGN_OR_RETURN(
      std::vector<ModuleToLoad> order,
      ResolveModuleLoadOrder(index, std::vector<WantedModule>(std::begin(kInitramfsModules),
                                                              std::end(kInitramfsModules))));
  std::filesystem::create_directories(e->dir / "modules");
  for (const ModuleToLoad& m : order) {
    ABOX_ASSIGN_OR_RETURN(std::string ko, ReadModuleFile(mods / m.rel_path));
    e->modules.push_back(m.name);
    ABOX_RETURN_IF_ERROR(
        base::WriteFileAtomic(e->ModulePath(e->modules.size() - 1).string(), ko, 0444));
  }

  std::filesystem::path rootfs = e->dir / kRootfsFile;
  std::error_code ec;
  std::filesystem::rename(rootfs_src, rootfs, ec);
  if (ec) {
    return absl::InternalError(absl::StrCat("moving rootfs.ext4: ", ec.message()));
  }
  ABOX_ASSIGN_OR_RETURN(e->rootfs.sha256, Sha256File(rootfs));
  ABOX_ASSIGN_OR_RETURN(FileStamp st, StatFile(rootfs));
  e->rootfs.size = st.size;
  if (::chmod(rootfs.c_str(), 0444) != 0) {
    return base::ErrnoError(absl::StrCat("chmod(", rootfs.string(), ")"));
  }
  return FsyncPath(rootfs);
}

}  // namespace

std::vector<std::string> PackageSet(const std::vector<std::string>& extra) {
  std::set<std::string> set(std::begin(kDefaultPackages), std::end(kDefaultPackages));
  set.insert(extra.begin(), extra.end());
  return {set.begin(), set.end()};
}

absl::Status ValidateRootfsInputs(const RootfsInputs& in) {
  if (!AllOf(in.suite, "-") || in.suite[0] == '-') {
    return absl::InvalidArgumentError(absl::StrCat("invalid Debian suite '", in.suite, "'"));
  }
  if (!(absl::StartsWith(in.mirror, "http://") || absl::StartsWith(in.mirror, "https://")) ||
      !AllOf(absl::AsciiStrToLower(in.mirror), ":/.-_~%+@[]")) {
    return absl::InvalidArgumentError(absl::StrCat(
        "invalid mirror '", in.mirror, "': give an http(s) URL such as ", kDefaultMirror));
  }
  for (const ResolvedAgent& a : in.agents) {
    ABOX_RETURN_IF_ERROR(ValidateResolvedAgent(a));
  }
  for (const std::string& p : in.packages) {
    // Debian policy: [a-z0-9][a-z0-9+.-]+; optionally pinned as name=version.
    std::vector<std::string> parts = absl::StrSplit(p, absl::MaxSplits('=', 1));
    bool ok = AllOf(parts[0], "+.-") && parts[0].size() >= 2 && parts[0][0] != '-' &&
              parts[0][0] != '+' && parts[0][0] != '.' &&
              (parts.size() == 1 || AllOf(absl::AsciiStrToLower(parts[1]), "+.~:-"));
    if (!ok) {
      return absl::InvalidArgumentError(absl::StrCat("invalid Debian package name '", p, "'"));
    }
  }
  return absl::OkStatus();
}

std::string RootfsCacheKey(const RootfsInputs& in) {
  std::vector<std::string> modules;
  for (const WantedModule& m : kInitramfsModules) {
    modules.push_back(absl::StrCat(m.name, m.required ? "" : "?"));
  }
  std::set<std::string> packages(in.packages.begin(), in.packages.end());
  json j = {{"builder", kBuilderVersion},
            {"hook", Sha256Hex(kCustomizeHook)},
            {"suite", in.suite},
            {"mirror", in.mirror},
            {"arch", in.arch},
            {"packages", packages},
            {"modules", modules}};
  if (!in.agents.empty()) {
    json agents = json::array();
    for (const ResolvedAgent& a : in.agents) {
      agents.push_back({{"name", a.name},
                        {"package", a.package},
                        {"version", a.version},
                        {"integrity", a.integrity}});
    }
    j["agents"] = agents;
    j["agents_hook"] = Sha256Hex(AgentInstallHook(in.agents));
  }
  return Sha256Hex(j.dump(-1, ' ', false, json::error_handler_t::replace));
}

absl::StatusOr<std::string> HostDebianArch() {
  struct utsname u {};
  if (::uname(&u) != 0) {
    return base::ErrnoError("uname");
  }
  if (absl::string_view(u.machine) == "x86_64") {
    return std::string("amd64");
  }
  return absl::UnimplementedError(absl::StrCat(
      "abox images are only built for x86_64 hosts so far (this host is ", u.machine, ")"));
}

absl::StatusOr<RootfsEntry> BuildRootfsEntry(const base::HostLayout& paths, const RootfsInputs& in,
                                             const StageFn& stage, const NpmRunner& npm) {
  ABOX_RETURN_IF_ERROR(ValidateRootfsInputs(in));
  if (!base::FindExecutable("mmdebstrap")) {
    return absl::FailedPreconditionError(
        "mmdebstrap is not installed: install it with `sudo apt-get install mmdebstrap`");
  }
  if (!base::FindExecutable("mke2fs") && ::access("/sbin/mke2fs", X_OK) != 0 &&
      ::access("/usr/sbin/mke2fs", X_OK) != 0) {
    return absl::FailedPreconditionError(
        "mke2fs is not installed: install it with `sudo apt-get install e2fsprogs`");
  }
  const std::string key = RootfsCacheKey(in);
  std::error_code ec;
  std::filesystem::create_directories(paths.LogsDir(), ec);
  std::filesystem::create_directories(paths.cache_dir / "rootfs", ec);
  const std::filesystem::path log =
      paths.LogsDir() / absl::StrCat("build-", key.substr(0, 12), ".log");
  (void)base::RemoveFileUnder(paths.cache_dir, log);  // a fresh log per build
  const bool privileged = ::geteuid() == 0;
  // Unprivileged, the hook runs as a subuid that must not reach this dir (0700): it writes the
  // image through an inherited descriptor and mmdebstrap copies the rest out. As root, the
  // chroot lives in here and apt's _apt user needs to traverse it (0755).
  ABOX_ASSIGN_OR_RETURN(std::filesystem::path work,
                        MakeTempDir(paths.cache_dir / "tmp", "build-", privileged ? 0755 : 0700));
  absl::Cleanup remove_work = [&] {
    if (absl::Status s = base::RemoveUnder(paths.cache_dir, work); !s.ok()) {
      spdlog::warn("could not remove {} ({}); the next build retries", work.string(), s.ToString());
    }
  };
  // Held by us and inherited by mmdebstrap: if we are killed, mmdebstrap (which finishes its
  // current step before honouring TERM) keeps `work` locked until it is gone.
  ABOX_ASSIGN_OR_RETURN(FileLock work_lock, FileLock::TryAcquire(work / kWorkLock, "build"));
  const std::filesystem::path rootfs_path = work / kRootfsFile;
  // Writable by the hook's subuid through the descriptor only: nobody else can reach `work`.
  base::UniqueFd rootfs_fd(
      ::open(rootfs_path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, privileged ? 0600 : 0666));
  if (!rootfs_fd || ::fchmod(rootfs_fd.get(), privileged ? 0600 : 0666) != 0) {
    return base::ErrnoError(absl::StrCat("create(", rootfs_path.string(), ")"));
  }
  std::vector<std::string> env = EnvWith("ABOX_ROOTFS_FD", std::to_string(rootfs_fd.get()));
  if (privileged) {
    // Keep the chroot on the cache's file system. Unprivileged, mmdebstrap needs a TMPDIR its
    // subuids can reach, which the environment's (default /tmp) is.
    std::filesystem::create_directories(work / "tmp", ec);
    env = EnvWith("TMPDIR", (work / "tmp").string(), env);
  }

  std::vector<std::string> agent_hooks;
  if (!in.agents.empty()) {
    ABOX_ASSIGN_OR_RETURN(agent_hooks, StageAgentsForBuild(paths, in, work, log, stage, npm));
  }

  stage(2, absl::StrCat("rootfs: mmdebstrap ", in.suite, " from ", in.mirror, ", ",
                        in.packages.size(), " packages (log: ", log.string(), ")"));
  std::vector<std::string> argv = {
      "mmdebstrap", "--variant=minbase",
      // unshare mode: rootless for users; as root it still keeps the build's mounts in a
      // private mount namespace, so a killed build leaves no mounts behind.
      "--mode=unshare",
      // The chroot is a temp dir mmdebstrap deletes itself (from inside its namespace); the
      // hook takes everything we keep out of it.
      "--format=null", absl::StrCat("--architectures=", in.arch),
      absl::StrCat("--include=", absl::StrJoin(in.packages, ",")),
      "--aptopt=Acquire::Retries \"3\"",
      // Documentation is dead weight for an agent VM; keep licences.
      "--dpkgopt=path-exclude=/usr/share/doc/*",
      "--dpkgopt=path-include=/usr/share/doc/*/copyright",
      "--dpkgopt=path-exclude=/usr/share/man/*", "--dpkgopt=path-exclude=/usr/share/info/*",
      "--dpkgopt=path-exclude=/usr/share/locale/*",
      "--dpkgopt=path-include=/usr/share/locale/locale.alias",
      // With man pages excluded, OpenJDK's postinst fails: update-alternatives links its man
      // page into /usr/share/man/man1, which must exist. An empty directory;
      // images that built before are unchanged by it, so it is not part of the cache key.
      "--essential-hook=mkdir -p \"$1/usr/share/man/man1\""};
  argv.insert(argv.end(), agent_hooks.begin(), agent_hooks.end());
  argv.insert(argv.end(),
              {absl::StrCat("--customize-hook=", kCustomizeHook),
               absl::StrCat("--customize-hook=copy-out /tmp/abox-out ", ShellQuote(work.string())),
               in.suite, "/dev/null", in.mirror});
  ABOX_RETURN_IF_ERROR(
      RunLogged(argv, log, env, {work_lock.fd(), rootfs_fd.get()}, "mmdebstrap", in.mirror));
  rootfs_fd.reset();
  const std::filesystem::path out = work / "abox-out";

  stage(3, "kernel: extracting vmlinux and initramfs modules");
  RootfsEntry e;
  e.key = key;
  e.dir = work / "entry";
  std::filesystem::create_directories(e.dir, ec);
  ABOX_RETURN_IF_ERROR(AssembleEntry(out, rootfs_path, &e));
  ABOX_RETURN_IF_ERROR(WriteRootfsEntryJson(e, in.suite, in.mirror, in.arch));
  ABOX_RETURN_IF_ERROR(FsyncPath(e.dir));
  const std::filesystem::path final_dir = RootfsEntryDir(paths, key);
  ABOX_RETURN_IF_ERROR(ReplaceDir(paths.cache_dir, e.dir, final_dir));
  e.dir = final_dir;
  stage(3, absl::StrCat("kernel: ", e.kernel_version, " (", e.kernel_package,
                        "), modules: ", absl::StrJoin(e.modules, " ")));
  return e;
}

void CleanStaleRootfsBuilds(const base::HostLayout& paths) {
  std::error_code ec;
  std::filesystem::directory_iterator it(paths.cache_dir / "tmp", ec);
  for (; !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    const std::filesystem::path p = it->path();
    std::error_code lock_ec;
    if (std::filesystem::exists(p / kWorkLock, lock_ec) &&
        !FileLock::TryAcquire(p / kWorkLock, "stale build").ok()) {
      spdlog::info("{} is still used by an orphaned mmdebstrap; leaving it", p.string());
      continue;
    }
    absl::Status s = base::RemoveUnder(paths.cache_dir, p);
    if (!s.ok()) {
      spdlog::warn("stale build dir {} could not be removed: {}", p.string(), s.ToString());
    } else {
      spdlog::info("removed stale build dir {}", p.string());
    }
  }
}

absl::Status MmdebstrapFailureHint(absl::string_view log, const std::string& mirror) {
  static constexpr absl::string_view kNetwork[] = {
      "Temporary failure resolving", "Could not resolve",      "Could not connect",
      "Connection timed out",        "Network is unreachable", "Connection refused"};
  for (absl::string_view marker : kNetwork) {
    if (absl::StrContains(log, marker)) {
      return absl::UnavailableError(
          absl::StrCat("cannot reach the Debian mirror ", mirror,
                       " (no network access?): check the connection or pass --mirror"));
    }
  }
  std::string last_error;
  for (absl::string_view line : absl::StrSplit(log, '\n')) {
    line = absl::StripAsciiWhitespace(line);
    if (absl::StrContains(line, "Unable to locate package") ||
        absl::StrContains(line, "has no installation candidate")) {
      return absl::NotFoundError(absl::StrCat("a requested package does not exist in this suite (",
                                              line, "): check --packages"));
    }
    if (absl::StartsWith(line, "E: ") || absl::StartsWith(line, "abox: error: ")) {
      last_error = std::string(line);
    }
  }
  return absl::InternalError(last_error);
}

}  // namespace abox::image
