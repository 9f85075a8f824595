#include "src/cli/create_template.h"

#include <cstdio>
#include <filesystem>
#include <optional>

#include "absl/strings/str_cat.h"
#include "src/base/host_layout.h"
#include "src/base/status_macros.h"
#include "src/cli/image_commands.h"
#include "src/template/project_template.h"

namespace abox::cli {
namespace {

absl::StatusOr<std::optional<tmpl::ProjectTemplate>> FindTemplate(const std::string& mode,
                                                                  const std::string& dir) {
  absl::StatusOr<std::optional<tmpl::ProjectTemplate>> file = tmpl::ReadTemplate(dir);
  if (!file.ok()) {
    return absl::Status(
        file.status().code(),
        absl::StrCat(file.status().message(), " (or create with --template none to leave it out)"));
  }
  if (file->has_value() || mode != "auto") {
    return file;
  }
  ABOX_ASSIGN_OR_RETURN(tmpl::ProjectTemplate guessed, tmpl::DetectTemplate(dir));
  return std::optional<tmpl::ProjectTemplate>(std::move(guessed));
}

absl::Status EnsureImage(const tmpl::AppliedTemplate& applied, const tmpl::ProjectTemplate& t,
                         bool build) {
  ABOX_ASSIGN_OR_RETURN(base::HostLayout layout, base::ResolveHostLayout());
  if (std::filesystem::exists(layout.ImageDir(applied.image) / "manifest.json")) {
    return absl::OkStatus();
  }
  if (t.image.has_value() || !build) {  // a named image is the person's to build
    return absl::FailedPreconditionError(
        absl::StrCat("the template needs image ", applied.image, ", which is not built: run `",
                     tmpl::TemplateImageBuildCommand(t), "` first"));
  }
  std::fprintf(stderr, "abox: building image %s for the template (once; later creates reuse it)\n",
               applied.image.c_str());
  ImageBuildOptions options;
  options.name = applied.image;
  options.preset = applied.preset;
  options.packages = applied.packages;
  return BuildImageWithProgress(options).status();
}

}  // namespace

absl::Status ApplyWorkspaceTemplate(const TemplateChoice& choice, api::SandboxCreate* body) {
  if (choice.mode != "" && choice.mode != "auto" && choice.mode != "none") {
    return absl::InvalidArgumentError(absl::StrCat(
        "--template ", choice.mode,
        ": use auto (the repository's .abox.toml, else a guess from its files) or none"));
  }
  if (!body->workspace) {
    if (!choice.mode.empty() || choice.allow_egress) {
      return absl::InvalidArgumentError(
          "--template and --allow-template-egress read the workspace: give -w/--workspace DIR");
    }
    return absl::OkStatus();
  }
  if (choice.mode == "none") {
    return absl::OkStatus();
  }
  ABOX_ASSIGN_OR_RETURN(std::optional<tmpl::ProjectTemplate> found,
                        FindTemplate(choice.mode, body->workspace->path));
  if (!found) {
    return absl::OkStatus();
  }
  tmpl::GivenFields given = choice.given;
  given.image = given.image || choice.keep_image;
  api::SandboxCreate next = *body;
  ABOX_ASSIGN_OR_RETURN(tmpl::AppliedTemplate applied,
                        tmpl::ApplyTemplate(*found, given, choice.allow_egress, &next));
  for (const std::string& line : applied.lines) {
    std::fprintf(stderr, "abox: %s\n", line.c_str());
  }
  if (!applied.image.empty()) {
    ABOX_RETURN_IF_ERROR(EnsureImage(applied, *found, choice.build_missing_image));
  }
  *body = std::move(next);
  return absl::OkStatus();
}

}  // namespace abox::cli
