#include "src/daemon/services/create_spec.h"

#include "absl/strings/str_cat.h"
#include "src/api/errors.h"
#include "src/base/status_macros.h"

namespace abox::daemon {

absl::Status ParseRules(const std::vector<std::string>& texts, absl::string_view field,
                        bool bare_presets, std::vector<net::Rule>* out) {
  for (size_t i = 0; i < texts.size(); ++i) {
    std::string text = texts[i];
    if (bare_presets && net::FindPreset(text) != nullptr) {
      text = absl::StrCat("preset:", text);
    }
    absl::StatusOr<net::Rule> rule = net::ParseRule(text);
    if (!rule.ok()) {
      return api::FieldError(absl::StrCat(field, "[", i, "]"), rule.status().message());
    }
    out->push_back(*std::move(rule));
  }
  return absl::OkStatus();
}

absl::StatusOr<SandboxSpec> ValidateCreate(const api::SandboxCreate& request,
                                           const ImageOpener& open_image, CreateSupport support) {
  SandboxSpec spec;
  spec.request = request;
  ABOX_ASSIGN_OR_RETURN(spec.accel, vmm::ParseAccel(request.accel));
  // A missing or stale image fails here with how to build it; the boot uses these files
  // instead of opening them again.
  ABOX_ASSIGN_OR_RETURN(spec.files, open_image(request.image));
  if (request.workspace) {
    if (!support.workspaces) {
      return absl::UnimplementedError("this aboxd has no workspace support");
    }
    workspace::Binding b;
    b.host_root = request.workspace->path;
    b.guest_path = request.workspace->guest_path;
    b.exclude_add = request.workspace->exclude;
    b.exclude_remove = request.workspace->include;
    b.git_history = request.workspace->git_history;
    ABOX_ASSIGN_OR_RETURN(spec.binding, workspace::ValidateBinding(std::move(b)));
  }
  // Egress rules are checked before anything is reserved: a typo is a 400 naming the rule.
  if ((request.egress || request.setup) && !support.egress) {
    return absl::UnimplementedError("this aboxd has no egress support");
  }
  if (request.egress) {
    net::EgressPolicy policy;
    if (request.egress->mode) {
      ABOX_ASSIGN_OR_RETURN(policy.mode, net::ParseMode(*request.egress->mode));
    }
    ABOX_RETURN_IF_ERROR(ParseRules(request.egress->allow, "egress.allow", false, &policy.allow));
    spec.egress_policy = std::move(policy);
  }
  if (request.setup) {
    ABOX_RETURN_IF_ERROR(ParseRules(request.setup->allow, "setup.allow", true, &spec.setup_rules));
  }
  return spec;
}

}  // namespace abox::daemon
