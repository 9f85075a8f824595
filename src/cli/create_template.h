// The per-project template on the client side: `abox create -w DIR` (and `abox agent`) read the
// workspace's .abox.toml, or guess one with `--template auto`, fill in what the person did not
// set, print what the template asks for, and build the image it needs when it is missing.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "src/api/sandbox.h"
#include "src/template/apply_template.h"

namespace abox::cli {

struct TemplateChoice {
  std::string mode;           // "" (the file when there is one), "auto" or "none"
  bool allow_egress = false;  // --allow-template-egress
  tmpl::GivenFields given;
  // Build the template's image when $ABOX_HOME lacks it (abox create); false: say how.
  bool build_missing_image = true;
  // The image stays the caller's (abox agent: the agent's image); the rest applies.
  bool keep_image = false;
};

// kInvalidArgument for a bad --template value or a bad template file (its message says how to
// fix or skip it); kPermissionDenied when it asks for egress the person did not accept. `body`
// changes only on success.
[[nodiscard]] absl::Status ApplyWorkspaceTemplate(const TemplateChoice& choice,
                                                  api::SandboxCreate* body);

}  // namespace abox::cli
