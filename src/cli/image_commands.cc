#include "src/cli/image_commands.h"

#include <unistd.h>

#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "nlohmann/json.hpp"
#include "src/base/self_path.h"
#include "src/base/status_macros.h"
#include "src/cli/output.h"
#include "src/image/image_build.h"
#include "src/image/image_presets.h"
#include "src/image/image_store.h"
#include "src/proto/frame.h"

namespace abox::cli {

std::vector<std::string> SplitPackageList(const std::string& text) {
  return absl::StrSplit(text, absl::ByAnyChar(", \t\n"), absl::SkipEmpty());
}

std::string ImagePresetHelp() {
  std::string out = "Package set:";
  for (const image::ImagePreset& p : image::ImagePresets()) {
    absl::StrAppend(&out, "\n  ", p.name, ": ", p.summary);
  }
  return out;
}

absl::StatusOr<image::BuildResult> BuildImageWithProgress(const ImageBuildOptions& options) {
  ABOX_ASSIGN_OR_RETURN(base::HostLayout paths, base::ResolveHostLayout());
  ABOX_RETURN_IF_ERROR(image::FindImagePreset(options.preset).status());
  image::BuildOptions b;
  b.name = options.name.empty() ? image::DefaultImageNameFor(options.preset) : options.name;
  b.preset = options.preset;
  b.extra_packages = options.packages;
  b.force = options.force;
  b.protocol_version = proto::kProtocolVersion;
  b.coding_agents = options.agents;
  if (!options.guest_binary.empty()) {
    b.agent_binary = options.guest_binary;
  } else {
    ABOX_ASSIGN_OR_RETURN(b.agent_binary,
                          base::FindCompanionBinary("abox-guest", "ABOX_GUEST_BIN"));
  }
  bool tty = ::isatty(STDERR_FILENO) != 0;
  auto result = image::BuildImage(paths, b, [tty](const image::Progress& p) {
    std::fprintf(stderr, "%s[%d/%d] %s (%.1fs)%s", tty ? "\r\033[K" : "", p.stage, p.total,
                 p.message.c_str(), static_cast<double>(p.elapsed.count()) / 1000.0,
                 tty ? "" : "\n");
  });
  if (tty) {
    std::fprintf(stderr, "\n");
  }
  return result;
}

int ImageBuild(const ImageBuildOptions& options) {
  absl::StatusOr<image::BuildResult> result = BuildImageWithProgress(options);
  if (!result.ok()) {
    PrintError(result.status());
    return 1;
  }
  const auto& m = result->manifest;
  std::printf("image %s %s: preset %s, kernel %s, %zu packages, agent %s (protocol %u)\n  %s\n",
              m.name.c_str(), result->up_to_date ? "is up to date" : "built",
              m.preset.empty() ? "minimal" : m.preset.c_str(), m.kernel_version.c_str(),
              m.packages.size(), m.agent_version.c_str(), m.protocol_version, result->dir.c_str());
  for (const auto& a : m.coding_agents) {
    std::printf("  %s %s: %s -> %s\n", a.name.c_str(), a.version.c_str(), a.command.c_str(),
                a.binary.c_str());
  }
  return 0;
}

int ImageList(bool json) {
  auto paths = base::ResolveHostLayout();
  if (!paths.ok()) {
    PrintError(paths.status());
    return 1;
  }
  auto images = image::ListImages(*paths);
  if (!images.ok()) {
    PrintError(images.status());
    return 1;
  }
  if (json) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& img : *images) {
      nlohmann::json j = {{"name", img.name}, {"dir", img.dir.string()}};
      if (img.manifest.ok()) {
        const auto& m = *img.manifest;
        uint64_t size = 0;
        for (const auto& [_, a] : m.artifacts) {
          size += a.size;
        }
        j["created_at"] = m.created_at;
        j["kernel_version"] = m.kernel_version;
        j["agent_version"] = m.agent_version;
        j["protocol_version"] = m.protocol_version;
        j["suite"] = m.suite;
        j["preset"] = m.preset.empty() ? "minimal" : m.preset;
        j["packages"] = m.packages.size();
        j["size_bytes"] = size;
        nlohmann::json agents = nlohmann::json::array();
        for (const auto& a : m.coding_agents) {
          agents.push_back({{"name", a.name},
                            {"version", a.version},
                            {"package", a.package},
                            {"command", a.command}});
        }
        j["coding_agents"] = agents;
        j["usable"] = m.protocol_version == proto::kProtocolVersion;
      } else {
        j["error"] = std::string(img.manifest.status().message());
        j["usable"] = false;
      }
      out.push_back(j);
    }
    std::printf("%s\n", out.dump(2).c_str());
    return 0;
  }
  if (images->empty()) {
    std::printf("no images in %s; run `abox image build`\n", paths->ImagesDir().c_str());
    return 0;
  }
  std::vector<std::vector<std::string>> rows;
  for (const auto& img : *images) {
    if (!img.manifest.ok()) {
      rows.push_back({img.name, "-", "-", "-", "-", "-", "-",
                      "broken: " + std::string(img.manifest.status().message())});
      continue;
    }
    const auto& m = *img.manifest;
    uint64_t size = 0;
    for (const auto& [_, a] : m.artifacts) {
      size += a.size;
    }
    std::string status = m.protocol_version == proto::kProtocolVersion
                             ? "ok"
                             : "needs " + image::BuildCommandFor(img.name, true);
    std::vector<std::string> agents;
    for (const auto& a : m.coding_agents) {
      agents.push_back(a.name + " " + a.version);
    }
    rows.push_back({img.name, m.preset.empty() ? "minimal" : m.preset, m.created_at,
                    m.kernel_version,
                    m.agent_version + " (protocol " + std::to_string(m.protocol_version) + ")",
                    agents.empty() ? "-" : absl::StrJoin(agents, ", "), HumanBytes(size), status});
  }
  std::printf("%s", FormatTable({"NAME", "PRESET", "CREATED", "KERNEL", "AGENT", "CODING AGENTS",
                                 "SIZE", "STATUS"},
                                rows)
                        .c_str());
  return 0;
}

int ImageVerify(const std::string& name) {
  auto paths = base::ResolveHostLayout();
  if (!paths.ok()) {
    PrintError(paths.status());
    return 1;
  }
  if (auto s = image::VerifyImage(*paths, name); !s.ok()) {
    PrintError(s);
    return 1;
  }
  std::printf("image %s: every artifact matches its manifest\n", name.c_str());
  return 0;
}

}  // namespace abox::cli
