#include "src/template/apply_template.h"

#include <algorithm>
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace abox::tmpl {
namespace {

// FNV-1a over the text: a stable name for an image, not a security property (the image's own
// manifest records what it holds).
uint64_t Fnv1a(const std::string& text) {
  uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  return h;
}

std::vector<std::string> SortedUnique(std::vector<std::string> v) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  return v;
}

std::string PresetOf(const ProjectTemplate& t) { return t.preset.value_or("developer"); }

}  // namespace

std::string TemplateImageName(const ProjectTemplate& t) {
  if (t.image.has_value()) {
    return *t.image;
  }
  if (!t.packages.empty()) {
    std::string key = absl::StrCat(PresetOf(t), "|", absl::StrJoin(SortedUnique(t.packages), ","));
    return absl::StrFormat("tpl-%016x", Fnv1a(key));
  }
  if (t.preset.has_value()) {
    return *t.preset == "developer" ? "default" : *t.preset;
  }
  return "";
}

std::string TemplateImageBuildCommand(const ProjectTemplate& t) {
  std::string name = TemplateImageName(t);
  std::string cmd = "abox image build";
  if (t.preset.has_value() || !t.packages.empty()) {
    absl::StrAppend(&cmd, " --preset ", PresetOf(t));
  }
  if (!t.packages.empty()) {
    absl::StrAppend(&cmd, " --packages ", absl::StrJoin(SortedUnique(t.packages), ","));
  }
  if (name != "default" && name != PresetOf(t)) {
    absl::StrAppend(&cmd, " --name ", name);
  }
  return cmd;
}

absl::StatusOr<AppliedTemplate> ApplyTemplate(const ProjectTemplate& t, const GivenFields& given,
                                              bool allow_egress, api::SandboxCreate* body) {
  if (absl::Status s = CheckTemplateEgress(t, allow_egress); !s.ok()) {
    return s;
  }
  AppliedTemplate out;
  out.lines = DescribeTemplate(t);
  out.preset = PresetOf(t);
  out.packages = SortedUnique(t.packages);
  api::SandboxCreate next = *body;
  if (std::string image = TemplateImageName(t); !image.empty()) {
    if (given.image) {
      out.lines.push_back(
          absl::StrCat("image ", next.image, " as asked (the template's ", image, " is not used)"));
    } else {
      next.image = image;
      out.image = image;
    }
  }
  if (t.cpus && !given.cpus) {
    next.cpus = *t.cpus;
  }
  if (t.memory_mib && !given.memory) {
    next.memory_mib = *t.memory_mib;
  }
  if (t.disk_mib && !given.disk) {
    next.disk_mib = *t.disk_mib;
  }
  if (!t.setup.empty() || !t.setup_root.empty()) {
    api::SetupSpec setup = next.setup.value_or(api::SetupSpec{});
    std::vector<std::string> commands = t.setup;
    commands.insert(commands.end(), setup.commands.begin(), setup.commands.end());
    setup.commands = std::move(commands);
    std::vector<std::string> root = t.setup_root;
    root.insert(root.end(), setup.root_commands.begin(), setup.root_commands.end());
    setup.root_commands = std::move(root);
    for (const std::string& rule : t.setup_allow) {
      if (std::find(setup.allow.begin(), setup.allow.end(), rule) == setup.allow.end()) {
        setup.allow.push_back(rule);
      }
    }
    next.setup = std::move(setup);
  }
  if (!t.egress_allow.empty()) {  // allow_egress, or CheckTemplateEgress refused above
    api::EgressSpec egress = next.egress.value_or(api::EgressSpec{});
    for (const std::string& rule : t.egress_allow) {
      if (std::find(egress.allow.begin(), egress.allow.end(), rule) == egress.allow.end()) {
        egress.allow.push_back(rule);
      }
    }
    next.egress = std::move(egress);
  }
  *body = std::move(next);
  return out;
}

}  // namespace abox::tmpl
