#include "src/image/image_build.h"

#include <elf.h>
#include <sys/stat.h>

#include <cstring>
#include <nlohmann/json.hpp>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "spdlog/spdlog.h"
#include "src/base/fenced_remove.h"
#include "src/base/io.h"
#include "src/base/status_macros.h"
#include "src/image/fs_util.h"
#include "src/image/image_name.h"
#include "src/image/image_presets.h"
#include "src/image/initramfs.h"
#include "src/image/sha256.h"

namespace abox::image {
namespace {

constexpr int kStages = 5;

class Reporter {
 public:
  explicit Reporter(const ProgressFn& fn) : fn_(fn), start_(std::chrono::steady_clock::now()) {}
  void operator()(int stage, const std::string& message) const {
    if (fn_) {
      fn_(Progress{stage, kStages, message,
                   std::chrono::duration_cast<std::chrono::milliseconds>(
                       std::chrono::steady_clock::now() - start_)});
    }
  }

 private:
  const ProgressFn& fn_;
  std::chrono::steady_clock::time_point start_;
};

// The installed image is current if its manifest has the same inputs and its files look intact.
bool UpToDate(const std::filesystem::path& dir, const std::string& name, const std::string& inputs,
              Manifest* out) {
  auto text = base::ReadFile((dir / kManifestFile).string(), 16 << 20);
  if (!text.ok()) {
    return false;
  }
  auto m = ParseManifest(*text);
  if (!m.ok() || !CheckManifestName(*m, name).ok() || m->inputs != inputs) {
    return false;
  }
  for (const auto& [file, a] : m->artifacts) {
    auto st = StatFile(dir / file);
    if (!st.ok() || st->size != a.size || st->mtime_ns != a.mtime_ns) {
      return false;
    }
  }
  *out = *std::move(m);
  return true;
}

// Places a cached artifact in the image dir (hard link when possible) and describes it.
absl::StatusOr<ArtifactInfo> Install(const std::filesystem::path& src,
                                     const std::filesystem::path& dst, const ArtifactInfo& known) {
  bool linked = false;
  ABOX_RETURN_IF_ERROR(LinkOrCopy(src, dst, &linked));
  ArtifactInfo a = known;
  if (!linked) {
    ABOX_ASSIGN_OR_RETURN(a.sha256, Sha256File(dst));
    if (a.sha256 != known.sha256) {
      return absl::DataLossError(
          absl::StrCat(src.string(), " does not match its recorded hash: rebuild with --force"));
    }
  }
  ABOX_ASSIGN_OR_RETURN(FileStamp st, StatFile(dst));
  a.size = st.size;
  a.mtime_ns = st.mtime_ns;
  return a;
}

// `npm view` for each agent; npm's stderr goes to <cache>/logs/npm-resolve.log (fresh each time).
absl::StatusOr<std::vector<ResolvedAgent>> ResolveCodingAgents(const base::HostLayout& paths,
                                                               const std::vector<AgentSpec>& specs,
                                                               const NpmRunner& npm) {
  std::error_code ec;
  std::filesystem::create_directories(paths.LogsDir(), ec);
  NpmContext ctx;
  ctx.run = npm;
  ctx.cache = paths.cache_dir / "npm";
  ctx.log = paths.LogsDir() / "npm-resolve.log";
  (void)base::RemoveFileUnder(paths.cache_dir, ctx.log);
  ABOX_ASSIGN_OR_RETURN(ctx.home, MakeTempDir(paths.cache_dir / "tmp", "npm-home-", 0700));
  absl::Cleanup remove_home = [&] { (void)base::RemoveUnder(paths.cache_dir, ctx.home); };
  return ResolveAgents(specs, ctx);
}

void CleanStaleImageTemps(const base::HostLayout& paths) {
  std::error_code ec;
  std::filesystem::directory_iterator it(paths.ImagesDir(), ec);
  for (; !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    if (it->path().filename().string().rfind(".tmp-", 0) == 0) {
      if (absl::Status s = base::RemoveUnder(paths.home, it->path()); !s.ok()) {
        spdlog::warn("stale temp dir {} could not be removed: {}", it->path().string(),
                     s.ToString());
      }
    }
  }
}

}  // namespace

absl::Status CheckStaticAgentBinary(absl::string_view elf) {
  if (elf.size() < sizeof(Elf64_Ehdr) || std::memcmp(elf.data(), ELFMAG, SELFMAG) != 0) {
    return absl::InvalidArgumentError("agent binary is not an ELF file");
  }
  Elf64_Ehdr eh;
  std::memcpy(&eh, elf.data(), sizeof(eh));
  if (eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_machine != EM_X86_64) {
    return absl::InvalidArgumentError("agent binary is not an x86-64 ELF");
  }
  if (eh.e_phentsize != sizeof(Elf64_Phdr) || eh.e_phoff > elf.size() ||
      uint64_t{eh.e_phnum} * sizeof(Elf64_Phdr) > elf.size() - eh.e_phoff) {
    return absl::InvalidArgumentError("agent binary has corrupt ELF program headers");
  }
  for (size_t i = 0; i < eh.e_phnum; ++i) {
    Elf64_Phdr ph;
    std::memcpy(&ph, elf.data() + eh.e_phoff + i * sizeof(ph), sizeof(ph));
    if (ph.p_type == PT_INTERP) {
      return absl::InvalidArgumentError(
          "agent binary is dynamically linked; /init must be static (build the abox-guest "
          "target, which links with -static)");
    }
  }
  return absl::OkStatus();
}

std::string ImageInputsHash(const std::string& rootfs_key, const std::string& agent_sha256,
                            const std::string& agent_version, uint32_t protocol_version) {
  nlohmann::json j = {{"builder", kBuilderVersion},           {"rootfs", rootfs_key},
                      {"agent_sha256", agent_sha256},         {"agent_version", agent_version},
                      {"protocol_version", protocol_version}, {"cmdline", kKernelCmdline}};
  return Sha256Hex(j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
}

absl::StatusOr<BuildResult> BuildImage(const base::HostLayout& paths, const BuildOptions& opts,
                                       const ProgressFn& progress) {
  const Reporter report(progress);
  report(1, absl::StrCat("resolving inputs of image ", opts.name));
  ABOX_RETURN_IF_ERROR(ValidateImageName(opts.name));
  if (opts.protocol_version == 0) {
    return absl::InvalidArgumentError("BuildOptions.protocol_version must be set");
  }
  if (opts.agent_binary.empty()) {
    return absl::InvalidArgumentError("no agent binary given (the static abox-guest)");
  }
  auto agent = base::ReadFile(opts.agent_binary.string(), 512 << 20);
  if (!agent.ok()) {
    return base::Annotate(agent.status(),
                          absl::StrCat("reading agent binary ", opts.agent_binary.string()));
  }
  ABOX_RETURN_IF_ERROR(CheckStaticAgentBinary(*agent));
  ABOX_ASSIGN_OR_RETURN(std::vector<AgentSpec> agent_specs, ParseAgentSpecs(opts.coding_agents));
  const NpmRunner npm = opts.npm ? opts.npm : SystemNpmRunner();
  RootfsInputs in;
  in.suite = opts.suite;
  in.mirror = opts.mirror;
  ABOX_ASSIGN_OR_RETURN(in.arch, HostDebianArch());
  ABOX_ASSIGN_OR_RETURN(const ImagePreset* preset, FindImagePreset(opts.preset));
  std::vector<std::string> wanted = preset->packages;
  wanted.insert(wanted.end(), opts.extra_packages.begin(), opts.extra_packages.end());
  in.packages = PackageSet(wanted);
  ABOX_RETURN_IF_ERROR(ValidateRootfsInputs(in));

  std::error_code ec;
  for (const auto& dir : {paths.ImagesDir(), paths.cache_dir}) {
    std::filesystem::create_directories(dir, ec);
    if (ec) {
      return absl::PermissionDeniedError(
          absl::StrCat("cannot create ", dir.string(), ": ", ec.message()));
    }
  }
  ABOX_ASSIGN_OR_RETURN(
      FileLock images_lock,
      FileLock::TryAcquire(paths.ImagesDir() / ".lock", "another `abox image build` is running"));
  ABOX_ASSIGN_OR_RETURN(FileLock cache_lock,
                        FileLock::TryAcquire(paths.cache_dir / ".lock",
                                             "another `abox image build` is using the cache"));
  CleanStaleImageTemps(paths);
  CleanStaleRootfsBuilds(paths);
  if (!agent_specs.empty()) {
    ABOX_ASSIGN_OR_RETURN(in.agents, ResolveCodingAgents(paths, agent_specs, npm));
    ABOX_RETURN_IF_ERROR(ValidateRootfsInputs(in));
  }
  const std::string key = RootfsCacheKey(in);
  const std::string agent_sha = Sha256Hex(*agent);
  const std::string inputs =
      ImageInputsHash(key, agent_sha, opts.agent_version, opts.protocol_version);

  const std::filesystem::path image_dir = paths.ImageDir(opts.name);
  BuildResult result;
  result.dir = image_dir;
  if (!opts.force && UpToDate(image_dir, opts.name, inputs, &result.manifest)) {
    result.up_to_date = true;
    report(kStages, absl::StrCat("image ", opts.name, " is up to date"));
    return result;
  }

  auto entry = opts.force ? absl::NotFoundError("--force") : LoadRootfsEntry(paths, key);
  if (entry.ok()) {
    result.rootfs_cached = true;
    report(2, absl::StrCat("rootfs: cached (", key.substr(0, 12), ")"));
    report(3, absl::StrCat("kernel: cached ", entry->kernel_version));
  } else {
    entry = BuildRootfsEntry(
        paths, in, [&](int stage, const std::string& m) { report(stage, m); }, npm);
    if (!entry.ok()) {
      return entry.status();
    }
  }

  report(4, absl::StrCat("initramfs: /init (agent ", agent_sha.substr(0, 12), ") + ",
                         entry->modules.size(), " modules"));
  ABOX_ASSIGN_OR_RETURN(std::filesystem::path tmp,
                        MakeTempDir(paths.ImagesDir(), absl::StrCat(".tmp-", opts.name, "-")));
  absl::Cleanup remove_tmp = [&] {
    if (absl::Status s = base::RemoveUnder(paths.home, tmp); !s.ok()) {
      spdlog::warn("could not remove {}: {}", tmp.string(), s.ToString());
    }
  };
  std::vector<InitramfsModule> modules;
  for (size_t i = 0; i < entry->modules.size(); ++i) {
    ABOX_ASSIGN_OR_RETURN(std::string ko, base::ReadFile(entry->ModulePath(i).string()));
    modules.push_back({entry->modules[i], std::move(ko)});
  }
  const std::filesystem::path initramfs = tmp / kInitramfsFile;
  ABOX_RETURN_IF_ERROR(WriteCpio(initramfs, InitramfsEntries(*std::move(agent), modules)));
  ABOX_RETURN_IF_ERROR(FsyncPath(initramfs));
  ::chmod(initramfs.c_str(), 0444);

  report(5, absl::StrCat("manifest: hashing and installing ", image_dir.string()));
  Manifest& m = result.manifest;
  m.name = opts.name;
  m.created_at = absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", absl::Now(), absl::UTCTimeZone());
  ABOX_ASSIGN_OR_RETURN(m.artifacts[kRootfsFile],
                        Install(entry->dir / kRootfsFile, tmp / kRootfsFile, entry->rootfs));
  ABOX_ASSIGN_OR_RETURN(m.artifacts[kVmlinuxFile],
                        Install(entry->dir / kVmlinuxFile, tmp / kVmlinuxFile, entry->vmlinux));
  ArtifactInfo& ird = m.artifacts[kInitramfsFile];
  ABOX_ASSIGN_OR_RETURN(ird.sha256, Sha256File(initramfs));
  ABOX_ASSIGN_OR_RETURN(FileStamp ist, StatFile(initramfs));
  ird.size = ist.size;
  ird.mtime_ns = ist.mtime_ns;
  m.kernel_version = entry->kernel_version;
  m.kernel_package = entry->kernel_package;
  m.kernel_cmdline = kKernelCmdline;
  m.agent_version = opts.agent_version;
  m.agent_sha256 = agent_sha;
  m.protocol_version = opts.protocol_version;
  m.suite = in.suite;
  m.mirror = in.mirror;
  m.arch = in.arch;
  m.extra_packages = opts.extra_packages;
  m.preset = opts.preset;
  m.packages = entry->packages;
  m.initramfs_modules = entry->modules;
  m.rootfs_key = key;
  m.inputs = inputs;
  m.builder_version = kBuilderVersion;
  for (const ResolvedAgent& a : in.agents) {
    m.coding_agents.push_back(
        {a.name, a.package, a.version, a.integrity, AgentCommandPath(a), AgentEntryPath(a)});
  }
  ABOX_RETURN_IF_ERROR(
      base::WriteFileAtomic((tmp / kManifestFile).string(), ManifestToJson(m), 0444));
  ABOX_RETURN_IF_ERROR(FsyncPath(tmp));
  ABOX_RETURN_IF_ERROR(ReplaceDir(paths.home, tmp, image_dir));
  std::move(remove_tmp).Cancel();
  report(kStages, absl::StrCat("image ", opts.name, " built (", m.kernel_version, ", ",
                               m.packages.size(), " packages)"));
  return result;
}

}  // namespace abox::image
