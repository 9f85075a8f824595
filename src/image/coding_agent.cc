#include "src/image/coding_agent.h"

#include <algorithm>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace abox::image {
namespace {

constexpr size_t kMaxVersionLength = 64;

bool CharsIn(absl::string_view s, absl::string_view extra) {
  return std::all_of(s.begin(), s.end(), [&](char c) {
    return absl::ascii_isalnum(static_cast<unsigned char>(c)) ||
           extra.find(c) != absl::string_view::npos;
  });
}

}  // namespace

const AgentKind* FindAgentKind(absl::string_view name) {
  for (const AgentKind& k : kAgentKinds) {
    if (name == k.name) {
      return &k;
    }
  }
  return nullptr;
}

std::string KnownAgentNames() {
  std::vector<std::string> names;
  for (const AgentKind& k : kAgentKinds) {
    names.emplace_back(k.name);
  }
  return absl::StrJoin(names, ", ");
}

absl::StatusOr<AgentSpec> ParseAgentSpec(absl::string_view text) {
  AgentSpec spec;
  const size_t at = text.find('@');
  spec.name = std::string(text.substr(0, at));
  if (FindAgentKind(spec.name) == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("unknown agent '", spec.name, "' in --agent ",
                                                   text, ": known agents are ", KnownAgentNames()));
  }
  if (at != absl::string_view::npos) {
    spec.version = std::string(text.substr(at + 1));
    // An npm version, range or dist-tag; it becomes part of one npm argument (`pkg@spec`), so
    // nothing that npm could read as an option or a second package.
    if (spec.version.empty() || spec.version.size() > kMaxVersionLength || spec.version[0] == '-' ||
        !CharsIn(spec.version, ".+-~^*<>=_")) {
      return absl::InvalidArgumentError(
          absl::StrCat("invalid version '", spec.version, "' in --agent ", text,
                       ": give NAME or NAME@VERSION, e.g. ", kAgentKinds[0].name, "@latest or ",
                       kAgentKinds[0].name, "@2.1.0"));
    }
  }
  return spec;
}

absl::StatusOr<std::vector<AgentSpec>> ParseAgentSpecs(const std::vector<std::string>& texts) {
  std::vector<AgentSpec> specs;
  std::set<std::string> seen;
  for (const std::string& t : texts) {
    absl::StatusOr<AgentSpec> spec = ParseAgentSpec(t);
    if (!spec.ok()) {
      return spec.status();
    }
    if (!seen.insert(spec->name).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("--agent ", spec->name,
                       " is given twice: an image holds one version of "
                       "each agent"));
    }
    specs.push_back(*std::move(spec));
  }
  return specs;
}

absl::Status ValidateResolvedAgent(const ResolvedAgent& a) {
  const AgentKind* kind = FindAgentKind(a.name);
  if (kind == nullptr || a.package != kind->package) {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown agent '", a.name, "' (package '", a.package, "')"));
  }
  // An exact semver: it names a directory in the image, so no '/' and no leading dot.
  if (a.version.empty() || a.version.size() > kMaxVersionLength ||
      !absl::ascii_isdigit(static_cast<unsigned char>(a.version[0])) ||
      !CharsIn(a.version, ".+-")) {
    return absl::InvalidArgumentError(absl::StrCat("the npm registry answered version '", a.version,
                                                   "' for ", a.package,
                                                   ", which is not an exact version"));
  }
  const bool sri = absl::StartsWith(a.integrity, "sha512-") ||
                   absl::StartsWith(a.integrity, "sha384-") ||
                   absl::StartsWith(a.integrity, "sha256-");
  if (!sri || a.integrity.size() > 200 || !CharsIn(a.integrity, "+/=-")) {
    return absl::InvalidArgumentError(absl::StrCat("the npm registry answered integrity '",
                                                   a.integrity, "' for ", a.package, "@", a.version,
                                                   ", which is not an SRI hash"));
  }
  return absl::OkStatus();
}

std::string AgentInstallDir(const ResolvedAgent& a) {
  return absl::StrCat(kAgentsDir, "/", a.name, "/", a.version);
}

std::string AgentEntryPath(const ResolvedAgent& a) {
  const AgentKind* kind = FindAgentKind(a.name);
  return absl::StrCat(AgentInstallDir(a), "/", kind != nullptr ? kind->entry : "");
}

std::string AgentCommandPath(const ResolvedAgent& a) {
  const AgentKind* kind = FindAgentKind(a.name);
  return absl::StrCat(kAgentCommandDir, "/", kind != nullptr ? kind->command : a.name);
}

std::string AgentInstallHook(const std::vector<ResolvedAgent>& agents) {
  if (agents.empty()) {
    return "";
  }
  // Names and versions are validated (ValidateResolvedAgent): no quotes or spaces in them.
  std::string s = absl::StrCat("set -eu\nroot=\"$1\"\n", "chown -R 0:0 \"$root/opt/abox\"\n",
                               "chmod -R u+rwX,go+rX,go-w \"$root/opt/abox\"\n", "mkdir -p \"$root",
                               kAgentCommandDir, "\"\n");
  for (const ResolvedAgent& a : agents) {
    absl::StrAppend(&s, "test -f \"$root", AgentEntryPath(a), "\"\n", "test -x \"$root",
                    AgentEntryPath(a), "\"\n", "ln -sfn '", AgentEntryPath(a), "' \"$root",
                    AgentCommandPath(a), "\"\n", "echo \"abox: installed ", a.name, " ", a.version,
                    " as ", AgentCommandPath(a), "\"\n");
  }
  return s;
}

}  // namespace abox::image
