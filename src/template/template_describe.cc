// DescribeTemplate and CheckTemplateEgress: what `abox create` tells the person about a template,
// and the one thing a template may not do on its own (widen egress for the sandbox's life).
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "src/template/project_template.h"
#include "src/template/template_values.h"

namespace abox::tmpl {
namespace {

// Commands and rules come from the repository: shown escaped, and long ones cut.
constexpr size_t kShownBytes = 200;

std::string JoinPrintable(const std::vector<std::string>& items, const char* separator) {
  std::vector<std::string> shown;
  shown.reserve(items.size());
  for (const std::string& item : items) {
    shown.push_back(Printable(item, kShownBytes));
  }
  return absl::StrJoin(shown, separator);
}

}  // namespace

std::vector<std::string> DescribeTemplate(const ProjectTemplate& t) {
  std::vector<std::string> lines;
  std::vector<std::string> parts;
  if (t.image.has_value()) {
    parts.push_back(absl::StrCat("image ", Printable(*t.image)));
  }
  if (t.preset.has_value()) {
    parts.push_back(absl::StrCat("preset ", Printable(*t.preset)));
  }
  if (t.cpus.has_value()) {
    parts.push_back(absl::StrCat(*t.cpus, *t.cpus == 1 ? " CPU" : " CPUs"));
  }
  if (t.memory_mib.has_value()) {
    parts.push_back(absl::StrCat(*t.memory_mib, " MiB"));
  }
  if (t.disk_mib.has_value()) {
    parts.push_back(absl::StrCat("disk ", *t.disk_mib, " MiB"));
  }
  std::string source = Printable(t.source);
  bool automatic = absl::StartsWith(t.source, "auto");
  if (automatic && t.detected.empty() && !t.preset.has_value()) {
    lines.push_back(absl::StrCat("template ", source, ": nothing recognised; using the ",
                                 t.image.has_value() ? Printable(*t.image) : "developer",
                                 " image"));
  } else if (parts.empty()) {
    lines.push_back(
        absl::StrCat("template ", source, ": no image, preset or resources set (defaults apply)"));
  } else {
    lines.push_back(absl::StrCat("template ", source, ": ", absl::StrJoin(parts, ", ")));
  }
  if (!t.packages.empty()) {
    lines.push_back(absl::StrCat("packages: ", JoinPrintable(t.packages, ", ")));
  }
  if (!t.setup_root.empty()) {
    lines.push_back(absl::StrCat("setup as root: ", JoinPrintable(t.setup_root, "; ")));
  }
  if (!t.setup.empty() || !t.setup_root.empty()) {
    std::string reach =
        t.setup_allow.empty()
            ? ""
            : absl::StrCat(" (may reach ", JoinPrintable(t.setup_allow, ", "), " while it runs)");
    lines.push_back(t.setup.empty() ? absl::StrCat("setup", reach)
                                    : absl::StrCat("setup: ", JoinPrintable(t.setup, "; "), reach));
  } else if (!t.setup_allow.empty()) {
    lines.push_back(absl::StrCat("setup_allow (", JoinPrintable(t.setup_allow, ", "),
                                 ") has no effect: there are no setup commands"));
  }
  if (!t.egress_allow.empty()) {
    lines.push_back(absl::StrCat("asks for egress: ", JoinPrintable(t.egress_allow, ", "),
                                 " (needs --allow-template-egress)"));
  }
  for (const std::string& note : t.notes) {
    lines.push_back(absl::StrCat("note: ", Printable(note, 1000)));
  }
  return lines;
}

absl::Status CheckTemplateEgress(const ProjectTemplate& t, bool person_allowed) {
  std::string source = Printable(t.source);
  // Checked again here, not only by the parser: a template may also be built in code.
  for (const std::string& rule : t.egress_allow) {
    if (IsOpenEgressRule(rule)) {
      return absl::PermissionDeniedError(absl::StrCat(
          "the repository's ", source, " asks for open egress (", Printable(rule),
          "); a template cannot open egress, even with --allow-template-egress: list the hosts "
          "it needs instead, or pass --egress open yourself if you mean it"));
    }
  }
  for (const std::string& rule : t.setup_allow) {
    if (!IsPresetRule(rule)) {
      return absl::PermissionDeniedError(absl::StrCat(
          "the repository's ", source, " asks to allow ", Printable(rule),
          " while setup runs, but setup egress may only name package presets (preset:NAME); "
          "move it to the [egress] allow list, which needs --allow-template-egress"));
    }
  }
  if (t.egress_allow.empty() || person_allowed) {
    return absl::OkStatus();
  }
  return absl::PermissionDeniedError(absl::StrCat(
      "the repository's ", source, " asks to allow ", JoinPrintable(t.egress_allow, ", "),
      " for the sandbox's whole life; a template cannot widen egress on its own: rerun with "
      "--allow-template-egress to accept, or drop the [egress] allow list"));
}

}  // namespace abox::tmpl
