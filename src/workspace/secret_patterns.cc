#include "src/workspace/secret_patterns.h"

#include <fnmatch.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "src/base/status_macros.h"
#include "src/workspace/paths.h"

namespace abox::workspace {
namespace {

// Only names that are very likely secrets: a false positive silently drops a file the agent
// needs, so generic names (secrets.yml, credentials.json, config.yml) stay out of the list.
const std::vector<SecretPattern>* MakeDefaults() {
  return new std::vector<SecretPattern>{
      {".env", "dotenv files hold API keys and database passwords"},
      {".env.*", "dotenv variants (.env.local, .env.production) hold the same secrets"},
      {"*.pem", "PEM files are usually private keys or certificates with keys"},
      {"*.key", "private keys (TLS, signing)"},
      {"id_rsa*", "SSH private keys (RSA)"},
      {"id_dsa*", "SSH private keys (DSA)"},
      {"id_ecdsa*", "SSH private keys (ECDSA)"},
      {"id_ed25519*", "SSH private keys (Ed25519)"},
      {"*.ppk", "PuTTY private keys"},
      {".npmrc", "npm registry auth tokens"},
      {".pypirc", "PyPI upload credentials"},
      {".netrc", "login names and passwords for hosts (curl, git, ftp)"},
      {"_netrc", "the Windows spelling of .netrc"},
      {".git-credentials", "git's credential store: tokens in plain text"},
      {".pgpass", "PostgreSQL passwords"},
      {".htpasswd", "web server password hashes"},
      {".vault-token", "HashiCorp Vault token"},
      {".aws/", "AWS access keys and session tokens"},
      {".ssh/", "SSH keys and known hosts"},
      {".gnupg/", "GnuPG private keyrings"},
      {".docker/config.json", "container registry auth tokens"},
      {".kube/config", "Kubernetes cluster credentials"},
      {"*.p12", "PKCS#12 bundles: certificates with private keys"},
      {"*.pfx", "PKCS#12 bundles (Windows name)"},
      {"*.jks", "Java keystores"},
      {"*.keystore", "Java and Android signing keystores"},
      {"*.kdbx", "KeePass password databases"},
      {"*.tfstate", "Terraform state holds every secret of the managed resources"},
      {"*.tfstate.backup", "Terraform state backups, same content"},
      {"*.tfvars", "Terraform variable files carry the passwords and tokens fed to a plan"},
      {"*.tfvars.json", "Terraform variable files (JSON), same content"},
      {".terraform.d/credentials.tfrc.json", "Terraform Cloud / registry API tokens"},
      {".envrc", "direnv files export API keys and tokens into the shell"},
      {".cargo/credentials*", "crates.io publish tokens (credentials, credentials.toml)"},
      {".config/gh/hosts.yml", "GitHub CLI OAuth tokens"},
      {".config/hub", "hub (GitHub CLI) OAuth tokens"},
      {".config/gcloud/", "gcloud credentials and access tokens"},
      {".azure/", "Azure CLI tokens (and azd environments' .env files)"},
      {".gem/credentials", "RubyGems push API keys"},
      {"auth.json", "Composer's (and other CLIs') auth file: registry and API tokens"},
      {".s3cfg", "s3cmd access keys"},
      {".boto", "boto / gsutil access keys"},
      {".my.cnf", "MySQL client passwords"},
  };
}

absl::Status ValidatePattern(absl::string_view pattern) {
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat("exclude pattern '", EscapePath(pattern), "': ", why));
  };
  if (pattern.empty()) {
    return bad("empty");
  }
  if (pattern.size() > kMaxPathBytes) {
    return bad(absl::StrCat("longer than ", kMaxPathBytes, " bytes"));
  }
  for (unsigned char c : pattern) {
    if (c == '\0' || c == '\n' || c == '\r') {
      return bad("NUL, newline and carriage return are not allowed");
    }
  }
  if (pattern.front() == '!') {
    return bad("'!' negation is not supported: to let a default in, remove that default pattern");
  }
  if (absl::StrContains(pattern, "**")) {
    return bad(
        "'**' is not supported: a pattern without a leading '/' already matches at any "
        "depth");
  }
  absl::string_view body = pattern;
  absl::ConsumePrefix(&body, "/");
  absl::ConsumeSuffix(&body, "/");
  if (body.empty()) {
    return bad("matches nothing (only '/')");
  }
  for (absl::string_view part : absl::StrSplit(body, '/')) {
    if (part.empty() || part == "." || part == "..") {
      return bad("empty, '.' and '..' components are not allowed");
    }
  }
  return absl::OkStatus();
}

// fnmatch(glob, name, 0) for one path component. Every file of a tree meets every pattern, so
// the common shapes ("name", "*.ext", "prefix*") are compared directly; the rest go to fnmatch.
bool GlobMatches(const std::string& glob, absl::string_view name) {
  auto wild = [](absl::string_view g) {
    return g.find_first_of("*?[\\") != absl::string_view::npos;
  };
  absl::string_view g(glob);
  if (!wild(g)) {
    return name == g;
  }
  if (g.size() > 1 && g.front() == '*' && !wild(g.substr(1))) {
    return absl::EndsWith(name, g.substr(1));
  }
  if (g.size() > 1 && g.back() == '*' && !wild(g.substr(0, g.size() - 1))) {
    return absl::StartsWith(name, g.substr(0, g.size() - 1));
  }
  std::string s(name);
  return ::fnmatch(glob.c_str(), s.c_str(), 0) == 0;
}

}  // namespace

const std::vector<SecretPattern>& DefaultSecretPatterns() {
  static const std::vector<SecretPattern>* const kDefaults = MakeDefaults();
  return *kDefaults;
}

absl::StatusOr<ExcludeRules> ExcludeRules::Create(const std::vector<std::string>& add,
                                                  const std::vector<std::string>& remove) {
  std::vector<std::string> patterns;
  for (const SecretPattern& d : DefaultSecretPatterns()) {
    patterns.emplace_back(d.pattern);
  }
  for (const std::string& r : remove) {
    auto it = std::find(patterns.begin(), patterns.end(), r);
    if (it != patterns.end()) {
      patterns.erase(it);
      continue;
    }
    bool is_default = std::any_of(DefaultSecretPatterns().begin(), DefaultSecretPatterns().end(),
                                  [&](const SecretPattern& d) { return r == d.pattern; });
    if (!is_default) {
      std::vector<std::string> names;
      for (const SecretPattern& d : DefaultSecretPatterns()) {
        names.emplace_back(d.pattern);
      }
      return absl::InvalidArgumentError(absl::StrCat(
          "cannot remove exclude pattern '", EscapePath(r),
          "': not a default pattern (the defaults are: ", absl::StrJoin(names, " "), ")"));
    }
    // Removed twice: already gone, nothing to do.
  }
  for (const std::string& a : add) {
    ABOX_RETURN_IF_ERROR(ValidatePattern(a));
    if (std::find(patterns.begin(), patterns.end(), a) == patterns.end()) {
      patterns.push_back(a);
    }
  }
  std::vector<Compiled> compiled;
  compiled.reserve(patterns.size());
  for (const std::string& p : patterns) {
    Compiled c;
    absl::string_view body = p;
    c.anchored = absl::ConsumePrefix(&body, "/");
    c.dir_only = absl::ConsumeSuffix(&body, "/");
    c.glob = std::string(body);
    c.components = absl::StrSplit(body, '/');
    compiled.push_back(std::move(c));
  }
  return ExcludeRules(std::move(patterns), std::move(compiled));
}

ExcludeRules ExcludeRules::WithExactPaths(std::map<std::string, std::string> paths) const {
  ExcludeRules copy = *this;
  copy.exact_.insert(paths.begin(), paths.end());
  return copy;
}

std::optional<std::string> ExcludeRules::Match(absl::string_view rel_path, bool is_dir) const {
  if (!is_dir) {
    if (auto it = exact_.find(rel_path); it != exact_.end()) {
      return it->second;
    }
  }
  std::vector<absl::string_view> parts = absl::StrSplit(rel_path, '/');
  const size_t n = parts.size();
  for (size_t p = 0; p < compiled_.size(); ++p) {
    const Compiled& c = compiled_[p];
    const size_t k = c.components.size();
    if (k > n) {
      continue;
    }
    // Try every run of k components; a run ending before the last component is a directory
    // that contains the path, so the path is excluded with it.
    for (size_t start = 0; start + k <= n; ++start) {
      if (c.anchored && start != 0) {
        break;
      }
      const size_t end = start + k;
      if (c.dir_only && end == n && !is_dir) {
        continue;
      }
      bool all = true;
      for (size_t i = 0; i < k && all; ++i) {
        all = GlobMatches(c.components[i], parts[start + i]);
      }
      if (all) {
        return patterns_[p];
      }
    }
  }
  return std::nullopt;
}

namespace {

size_t SkipSpace(absl::string_view s, size_t i) {
  while (i < s.size() && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r')) {
    ++i;
  }
  return i;
}

// True when `head` has the JSON member `"key": "value"` (any whitespace around the colon).
bool HasJsonMember(absl::string_view head, absl::string_view key, absl::string_view value) {
  std::string quoted_key = absl::StrCat("\"", key, "\"");
  std::string quoted_value = absl::StrCat("\"", value, "\"");
  for (size_t at = head.find(quoted_key); at != absl::string_view::npos;
       at = head.find(quoted_key, at + 1)) {
    size_t i = SkipSpace(head, at + quoted_key.size());
    if (i >= head.size() || head[i] != ':') {
      continue;
    }
    i = SkipSpace(head, i + 1);
    if (head.substr(i, quoted_value.size()) == quoted_value) {
      return true;
    }
  }
  return false;
}

}  // namespace

bool ShouldProbeSecretContent(absl::string_view rel, uint64_t size) {
  size_t slash = rel.rfind('/');
  absl::string_view base = slash == absl::string_view::npos ? rel : rel.substr(slash + 1);
  return size <= (uint64_t{1} << 20) && base.size() > 5 && absl::EndsWithIgnoreCase(base, ".json");
}

std::optional<std::string> SecretContentReason(absl::string_view head) {
  // A Google Cloud service-account key (often named after the project, e.g.
  // my-project-3f2a1b.json, so no name pattern finds it): a JSON object with
  // "type": "service_account" (and the key's "private_key"). Only a file that starts as a JSON
  // object counts, so source code or docs that mention the string stay in.
  size_t start = SkipSpace(head, absl::StartsWith(head, "\xEF\xBB\xBF") ? 3 : 0);
  if (start < head.size() && head[start] == '{' && HasJsonMember(head, "type", "service_account")) {
    return std::string("a Google Cloud service-account key (\"type\": \"service_account\")");
  }
  return std::nullopt;
}

}  // namespace abox::workspace
