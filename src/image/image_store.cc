#include "src/image/image_store.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "src/base/io.h"
#include "src/base/status_macros.h"
#include "src/image/fs_util.h"
#include "src/image/image_name.h"
#include "src/image/image_presets.h"
#include "src/image/sha256.h"

namespace abox::image {
namespace {

absl::StatusOr<Manifest> ReadManifest(const base::HostLayout& paths, const std::string& name) {
  ABOX_RETURN_IF_ERROR(ValidateImageName(name));
  const std::filesystem::path dir = paths.ImageDir(name);
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) {
    return absl::NotFoundError(
        absl::StrCat("no image '", name, "': run `", BuildCommandFor(name, false), "`"));
  }
  auto text = base::ReadFile((dir / kManifestFile).string(), 16 << 20);
  if (!text.ok()) {
    return absl::DataLossError(absl::StrCat("image '", name, "' has no readable manifest (",
                                            text.status().message(), "): run `",
                                            BuildCommandFor(name, true), "`"));
  }
  auto m = ParseManifest(*text);
  absl::Status s = m.ok() ? CheckManifestName(*m, name) : m.status();
  if (!s.ok()) {
    return absl::DataLossError(absl::StrCat("image '", name, "' has a bad manifest (", s.message(),
                                            "): run `", BuildCommandFor(name, true), "`"));
  }
  return m;
}

}  // namespace

std::string BuildCommandFor(const std::string& name, bool force) {
  std::string what;
  if (name == "default") {
    what = "";
  } else if (name != kDeveloperPreset && FindImagePreset(name).ok()) {
    what = absl::StrCat(" --preset ", name);  // builds image `name` (DefaultImageNameFor)
  } else {
    what = absl::StrCat(" --name ", name);
  }
  return absl::StrCat("abox image build", what, force ? " --force" : "");
}

absl::StatusOr<std::vector<ListedImage>> ListImages(const base::HostLayout& paths) {
  std::vector<ListedImage> out;
  std::error_code ec;
  std::filesystem::directory_iterator it(paths.ImagesDir(), ec);
  if (ec == std::errc::no_such_file_or_directory) {
    return out;
  }
  if (ec) {
    return absl::PermissionDeniedError(
        absl::StrCat("cannot list ", paths.ImagesDir().string(), ": ", ec.message()));
  }
  for (; !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    std::string name = it->path().filename().string();
    if (name.empty() || name[0] == '.' || !it->is_directory(ec)) {
      continue;  // .tmp-* build dirs, lock files
    }
    out.push_back({name, it->path(), ReadManifest(paths, name)});
  }
  std::sort(out.begin(), out.end(),
            [](const ListedImage& a, const ListedImage& b) { return a.name < b.name; });
  return out;
}

absl::Status VerifyImage(const base::HostLayout& paths, const std::string& name) {
  ABOX_ASSIGN_OR_RETURN(Manifest m, ReadManifest(paths, name));
  std::vector<std::string> problems;
  for (const auto& [file, a] : m.artifacts) {
    const std::filesystem::path p = paths.ImageDir(name) / file;
    auto st = StatFile(p);
    if (!st.ok()) {
      problems.push_back(absl::StrCat(file, " is missing (", st.status().message(), ")"));
      continue;
    }
    if (st->size != a.size) {
      problems.push_back(absl::StrCat(file, " has size ", st->size, ", manifest says ", a.size));
      continue;
    }
    auto sha = Sha256File(p);
    if (!sha.ok()) {
      problems.push_back(absl::StrCat(file, " is unreadable (", sha.status().message(), ")"));
    } else if (*sha != a.sha256) {
      problems.push_back(absl::StrCat(file, " sha256 is ", *sha, ", manifest says ", a.sha256));
    }
  }
  if (!problems.empty()) {
    return absl::DataLossError(absl::StrCat("image '", name,
                                            "' is damaged: ", absl::StrJoin(problems, "; "),
                                            ": run `", BuildCommandFor(name, true), "`"));
  }
  return absl::OkStatus();
}

absl::StatusOr<ImageFiles> OpenImageForBoot(const base::HostLayout& paths, const std::string& name,
                                            uint32_t host_protocol_version) {
  ABOX_ASSIGN_OR_RETURN(Manifest m, ReadManifest(paths, name));
  if (m.protocol_version != host_protocol_version) {
    return absl::FailedPreconditionError(absl::StrCat(
        "image ", name, " was built for protocol ", m.protocol_version, ", this abox speaks ",
        host_protocol_version, ": run `", BuildCommandFor(name, true), "`"));
  }
  ImageFiles f;
  f.dir = paths.ImageDir(name);
  f.rootfs = f.dir / kRootfsFile;
  f.vmlinux = f.dir / kVmlinuxFile;
  f.initramfs = f.dir / kInitramfsFile;
  for (const auto& [file, a] : m.artifacts) {
    const std::filesystem::path p = f.dir / file;
    auto st = StatFile(p);
    absl::Status problem;
    if (!st.ok()) {
      problem = st.status();
    } else if (st->size != a.size) {
      problem = absl::DataLossError(absl::StrCat("size ", st->size, " != ", a.size));
    } else if (file == kRootfsFile) {
      if (st->mtime_ns != a.mtime_ns) {
        problem = absl::DataLossError("modified since the image was built");
      }
    } else {
      auto sha = Sha256File(p);
      if (!sha.ok()) {
        problem = sha.status();
      } else if (*sha != a.sha256) {
        problem = absl::DataLossError("sha256 mismatch");
      }
    }
    if (!problem.ok()) {
      return absl::DataLossError(absl::StrCat("image ", name, ": ", file, " is damaged (",
                                              problem.message(), "): run `",
                                              BuildCommandFor(name, true), "`"));
    }
  }
  f.kernel_cmdline = m.kernel_cmdline;
  f.manifest = std::move(m);
  return f;
}

}  // namespace abox::image
