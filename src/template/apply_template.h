// Applying a project template to a create request: what the person did not set comes from the
// template; what the template may not do alone (egress for the sandbox's life) needs the
// person's consent. Used by every client that creates sandboxes on a workspace (abox create,
// abox agent, abox-mcp's sandbox_create), so they all read a repository the same way.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "src/api/sandbox.h"
#include "src/template/project_template.h"

namespace abox::tmpl {

// The request fields the person set themselves (flags, tool arguments): a template never
// overrides them.
struct GivenFields {
  bool image = false;
  bool cpus = false;
  bool memory = false;
  bool disk = false;
};

struct AppliedTemplate {
  std::vector<std::string> lines;  // DescribeTemplate's, for the person
  // The image the template needs (empty: it names none, the request's stands). A template
  // with packages gets an image of its own, "tpl-" and a hash of its preset and packages.
  std::string image;
  std::string preset;                 // the preset that image is built from ("developer" if none)
  std::vector<std::string> packages;  // its extra packages
};

// The image a template needs; empty when it names neither image, preset nor packages.
[[nodiscard]] std::string TemplateImageName(const ProjectTemplate& t);
// `abox image build ...` that makes TemplateImageName(t).
[[nodiscard]] std::string TemplateImageBuildCommand(const ProjectTemplate& t);

// Fills `body` from `t` where `given` says the person did not: image, cpus, memory, disk; adds
// the template's setup commands (before the person's) and its setup-time presets; adds its
// persistent egress rules only when `allow_egress` (else kPermissionDenied, see
// CheckTemplateEgress). `body` is unchanged on error.
[[nodiscard]] absl::StatusOr<AppliedTemplate> ApplyTemplate(const ProjectTemplate& t,
                                                            const GivenFields& given,
                                                            bool allow_egress,
                                                            api::SandboxCreate* body);

}  // namespace abox::tmpl
