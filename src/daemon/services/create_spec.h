// A create request checked and turned into what the create pipeline needs, before anything is
// reserved: a bad field is a 400 naming it, a missing image says how to build it.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "src/api/sandbox.h"
#include "src/daemon/lifecycle/checkpoints.h"
#include "src/image/image_store.h"
#include "src/net/policy.h"
#include "src/store/grant_repo.h"
#include "src/vmm/vmm.h"
#include "src/workspace/workspace_state.h"

namespace abox::daemon {

struct SandboxSpec {
  api::SandboxCreate request;
  vmm::Accel accel = vmm::Accel::kAuto;
  image::ImageFiles files;
  std::optional<workspace::Binding> binding;
  std::optional<net::EgressPolicy> egress_policy;
  std::vector<net::Rule> setup_rules;
  // A fork: restore this checkpoint instead of booting; the workspace state is a copy of the
  // checkpoint's (no binding, no sync).
  std::optional<CheckpointInfo> from_checkpoint;
  // The secrets and pushes it is given, placeholders drawn (SecretGrants::Prepare).
  store::SandboxGrants grants;
};

// Opens (and checks) an image by name for a boot.
using ImageOpener = std::function<absl::StatusOr<image::ImageFiles>(const std::string& name)>;

struct CreateSupport {
  bool workspaces = true;
  bool egress = true;
};

// Pure but for `open_image`. kUnimplemented when the request needs what this aboxd lacks.
[[nodiscard]] absl::StatusOr<SandboxSpec> ValidateCreate(const api::SandboxCreate& request,
                                                         const ImageOpener& open_image,
                                                         CreateSupport support);

// Parses the rule texts of request field `field` ("egress.allow"): 400 naming the bad one.
// `bare_presets`: "npm" means preset:npm (setup.allow takes preset names as they are).
[[nodiscard]] absl::Status ParseRules(const std::vector<std::string>& texts,
                                      absl::string_view field, bool bare_presets,
                                      std::vector<net::Rule>* out);

}  // namespace abox::daemon
