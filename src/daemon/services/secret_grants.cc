#include "src/daemon/services/secret_grants.h"

#include <algorithm>
#include <iterator>
#include <set>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "spdlog/spdlog.h"
#include "src/base/status_macros.h"
#include "src/daemon/services/model_grants.h"
#include "src/net/git_ref_policy.h"
#include "src/net/host_name.h"
#include "src/proto/messages.h"
#include "src/secrets/placeholder.h"

namespace abox::daemon {
namespace {

absl::Status FieldError(absl::string_view field, absl::string_view message) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", message));
}

// Variables a secret may not take: the ones abox sets itself, and the ones that change how
// every program runs.
bool ReservedVariable(absl::string_view name) {
  static const auto* const kReserved =
      new std::set<std::string, std::less<>>{"PATH",
                                             "HOME",
                                             "USER",
                                             "SHELL",
                                             "LD_PRELOAD",
                                             "LD_LIBRARY_PATH",
                                             "SSL_CERT_FILE",
                                             "REQUESTS_CA_BUNDLE",
                                             "CURL_CA_BUNDLE",
                                             "NODE_EXTRA_CA_CERTS",
                                             "CODEX_CA_CERTIFICATE",
                                             "GIT_SSL_CAINFO"};
  return kReserved->contains(name);
}

bool ValidVariable(absl::string_view name) {
  if (name.empty() || name.size() > 128 || absl::ascii_isdigit(name[0])) {
    return false;
  }
  for (char c : name) {
    if (!absl::ascii_isalnum(c) && c != '_') {
      return false;
    }
  }
  return true;
}

constexpr char kGitPushForm[] =
    "write HOST/OWNER/REPO:BRANCH-PATTERN, e.g. github.com/acme/app:agent/*";

// The guest script InstallGuestCa runs as root, the PEM on its stdin.
constexpr char kInstallCaScript[] = R"sh(set -eu
umask 022
ca=/usr/local/share/ca-certificates/abox-egress.crt
bundle=/etc/ssl/certs/ca-certificates.crt
mkdir -p /usr/local/share/ca-certificates /etc/ssl/certs
new=$(mktemp)
cat > "$new"
if [ -f "$ca" ] && cmp -s "$new" "$ca" && [ -f "$bundle" ] && grep -qF "$(sed -n 2p "$new")" "$bundle"; then
  rm -f "$new"
  exit 0
fi
chmod 644 "$new"
mv "$new" "$ca"
cat "$ca" >> "$bundle"
)sh";

}  // namespace

absl::StatusOr<GitPushGrant> ParseGitPushGrant(absl::string_view text) {
  GitPushGrant g;
  g.text = std::string(text);
  const std::string field = absl::StrCat("git_push \"", absl::CHexEscape(text), "\"");
  size_t colon = text.rfind(':');
  size_t slash = text.find('/');
  if (slash == absl::string_view::npos || colon == absl::string_view::npos || colon < slash) {
    return FieldError(field, kGitPushForm);
  }
  absl::string_view authority = text.substr(0, slash);
  absl::string_view repo = text.substr(slash + 1, colon - slash - 1);
  g.pattern = std::string(text.substr(colon + 1));
  if (size_t port_at = authority.find(':'); port_at != absl::string_view::npos) {
    uint32_t port = 0;
    if (!absl::SimpleAtoi(authority.substr(port_at + 1), &port) || port == 0 || port > 65535) {
      return FieldError(field, "the port must be 1-65535");
    }
    g.port = static_cast<uint16_t>(port);
    authority = authority.substr(0, port_at);
  }
  absl::StatusOr<std::string> host = net::NormalizeHostName(authority);
  if (!host.ok() || host->find('.') == std::string::npos) {
    return FieldError(field, absl::StrCat("\"", absl::CHexEscape(authority),
                                          "\" is not a host name (", kGitPushForm, ")"));
  }
  g.host = *host;
  absl::ConsumeSuffix(&repo, ".git");
  std::vector<absl::string_view> parts = absl::StrSplit(repo, '/');
  if (parts.size() != 2) {
    return FieldError(field,
                      absl::StrCat("the repository must be OWNER/REPO (", kGitPushForm, ")"));
  }
  for (absl::string_view part : parts) {
    if (part.empty() || part == "." || part == ".." || part.size() > 100) {
      return FieldError(field, "OWNER and REPO must each be 1-100 characters, not . or ..");
    }
    for (char c : part) {
      if (!absl::ascii_isalnum(c) && c != '-' && c != '_' && c != '.') {
        return FieldError(field, "OWNER and REPO may hold letters, digits, '-', '_' and '.'");
      }
    }
  }
  g.repo = std::string(repo);
  if (absl::Status s = net::ValidateBranchPattern(g.pattern); !s.ok()) {
    return FieldError(field, s.message());
  }
  return g;
}

SecretGrants::SecretGrants(SecretService& secrets, store::GrantRepo& repo, base::HostLayout layout,
                           std::vector<std::string> upstream_ca_files)
    : secrets_(&secrets),
      repo_(&repo),
      layout_(std::move(layout)),
      upstream_ca_files_(std::move(upstream_ca_files)) {}

absl::StatusOr<store::SandboxGrants> SecretGrants::Prepare(const api::SandboxCreate& request) {
  store::SandboxGrants grants;
  std::set<std::string> variables;
  for (const auto& [name, env_given] : request.secrets) {
    const std::string field = absl::StrCat("secrets.", name);
    if (absl::Status s = secrets::ValidateSecretName(name); !s.ok()) {
      return FieldError(field, s.message());
    }
    absl::StatusOr<SecretView> view = secrets_->Get(name);
    if (!view.ok()) {
      if (absl::IsNotFound(view.status())) {
        return FieldError(field, absl::StrCat("there is no secret named ", name,
                                              ": set it first (abox secret set ", name,
                                              " --host HOST --stdin), or see abox secret ls"));
      }
      return view.status();
    }
    std::string env = env_given.empty() ? name : env_given;
    if (!ValidVariable(env)) {
      return FieldError(field, absl::StrCat("\"", absl::CHexEscape(env),
                                            "\" is not a variable name (letters, digits and _, "
                                            "not starting with a digit)"));
    }
    if (ReservedVariable(env)) {
      return FieldError(field, absl::StrCat(env,
                                            " is set by abox or the system: choose another "
                                            "variable (NAME=VARIABLE)"));
    }
    if (!variables.insert(env).second) {
      return FieldError(field, absl::StrCat("two secrets would go in ", env));
    }
    ABOX_ASSIGN_OR_RETURN(std::string placeholder, secrets::NewPlaceholder(name));
    grants.secrets.push_back({.name = name, .env = env, .placeholder = std::move(placeholder)});
  }
  std::set<std::string> seen;
  for (const std::string& text : request.git_push) {
    ABOX_ASSIGN_OR_RETURN(GitPushGrant push, ParseGitPushGrant(text));
    if (seen.insert(text).second) {
      grants.git_push.push_back(text);
    }
  }
  ABOX_ASSIGN_OR_RETURN(grants.models, CheckModelApis(request.models));
  if (!grants.models.empty()) {
    for (const std::string& api : grants.models) {
      if (models_check_) {
        ABOX_RETURN_IF_ERROR(models_check_(api));
      }
    }
    ABOX_ASSIGN_OR_RETURN(grants.model_token, NewBrokerToken());
  }
  return grants;
}

absl::StatusOr<std::vector<net::Rule>> SecretGrants::RulesFor(const store::SandboxGrants& grants) {
  std::vector<net::Rule> rules;
  for (const store::SandboxSecretRow& row : grants.secrets) {
    ABOX_ASSIGN_OR_RETURN(SecretView view, secrets_->Get(row.name));
    for (const std::string& host : view.spec.hosts) {
      ABOX_ASSIGN_OR_RETURN(net::Rule rule, net::ParseRule(host));
      rules.push_back(std::move(rule));
    }
  }
  for (const std::string& text : grants.git_push) {
    ABOX_ASSIGN_OR_RETURN(GitPushGrant push, ParseGitPushGrant(text));
    ABOX_ASSIGN_OR_RETURN(
        net::Rule rule,
        net::ParseRule(push.port == 443 ? push.host : absl::StrCat(push.host, ":", push.port)));
    rules.push_back(std::move(rule));
  }
  return rules;
}

absl::Status SecretGrants::Record(const std::string& sandbox_id,
                                  const store::SandboxGrants& grants) {
  if (grants.empty()) {
    return absl::OkStatus();
  }
  ABOX_RETURN_IF_ERROR(repo_->Put(sandbox_id, grants));
  std::lock_guard lock(mu_);
  store::SandboxGrants& cached = cache_[sandbox_id];
  cached = grants;
  for (store::SandboxSecretRow& row : cached.secrets) {
    row.sandbox_id = sandbox_id;
  }
  return absl::OkStatus();
}

absl::StatusOr<store::SandboxGrants> SecretGrants::Of(const std::string& sandbox_id) {
  {
    std::lock_guard lock(mu_);
    if (auto it = cache_.find(sandbox_id); it != cache_.end()) {
      return it->second;
    }
  }
  ABOX_ASSIGN_OR_RETURN(store::SandboxGrants grants, repo_->Get(sandbox_id));
  std::lock_guard lock(mu_);
  cache_[sandbox_id] = grants;
  return grants;
}

absl::StatusOr<std::vector<GrantedSecret>> SecretGrants::SecretsOf(const std::string& sandbox_id) {
  ABOX_ASSIGN_OR_RETURN(store::SandboxGrants grants, Of(sandbox_id));
  std::vector<GrantedSecret> out;
  for (store::SandboxSecretRow& row : grants.secrets) {
    absl::StatusOr<SecretView> view = secrets_->Get(row.name);
    if (!view.ok()) {
      if (absl::IsNotFound(view.status())) {
        continue;  // removed: the placeholder is just a string now
      }
      return view.status();
    }
    out.push_back(GrantedSecret{.row = std::move(row), .spec = std::move(view->spec)});
  }
  return out;
}

absl::StatusOr<std::vector<std::string>> SecretGrants::UsersOf(const std::string& name) {
  return repo_->UsersOf(name);
}

void SecretGrants::Forget(const std::string& sandbox_id) {
  std::lock_guard lock(mu_);
  cache_.erase(sandbox_id);
}

absl::StatusOr<std::map<std::string, std::string>> SecretGrants::Env(
    const std::string& sandbox_id) {
  ABOX_ASSIGN_OR_RETURN(store::SandboxGrants grants, Of(sandbox_id));
  std::map<std::string, std::string> env = ModelEnv(grants);
  if (!grants.intercepts()) {
    return env;
  }
  for (const store::SandboxSecretRow& row : grants.secrets) {
    env[row.env] = row.placeholder;
  }
  // Clients that do not read the system bundle by default, pointed at it (it holds abox's CA).
  for (const char* name : {"SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE",
                           "CODEX_CA_CERTIFICATE", "GIT_SSL_CAINFO"}) {
    env[name] = kGuestCaBundle;
  }
  env["NODE_EXTRA_CA_CERTS"] = kGuestCaFile;
  return env;
}

absl::StatusOr<const net::InterceptCa*> SecretGrants::Ca() {
  std::lock_guard lock(mu_);
  if (ca_ == nullptr) {
    ABOX_ASSIGN_OR_RETURN(ca_, net::InterceptCa::LoadOrCreate((layout_.home / "ca").string()));
  }
  return ca_.get();
}

absl::StatusOr<std::shared_ptr<const net::LeakPatterns>> SecretGrants::ValuePatterns() {
  {
    std::lock_guard lock(mu_);
    if (patterns_valid_) {
      return patterns_;
    }
  }
  ABOX_ASSIGN_OR_RETURN(std::vector<SecretView> views, secrets_->List());
  std::vector<net::Needle> needles;
  for (const SecretView& view : views) {
    if (view.spec.source != secrets::SourceKind::kStored) {
      continue;  // read on use: not known ahead of a command
    }
    absl::StatusOr<secrets::SecretValue> value = secrets_->Resolve(view.spec.name);
    if (!value.ok()) {
      spdlog::warn("secret {}: its value could not be read to check commands against it: {}",
                   view.spec.name, std::string(value.status().message()));
      continue;
    }
    if (value->size() < net::kMinNeedleSize || value->size() > net::kMaxNeedleSize) {
      continue;  // too short to tell from ordinary text
    }
    needles.push_back({.name = view.spec.name, .bytes = std::string(value->Reveal())});
  }
  std::shared_ptr<const net::LeakPatterns> patterns;
  if (!needles.empty()) {
    absl::StatusOr<std::shared_ptr<const net::LeakPatterns>> made =
        net::LeakPatterns::Create(std::move(needles));
    for (net::Needle& n : needles) {
      secrets::Cleanse(n.bytes);
    }
    ABOX_RETURN_IF_ERROR(made.status());
    patterns = *std::move(made);
  }
  std::lock_guard lock(mu_);
  patterns_ = patterns;
  patterns_valid_ = true;
  return patterns;
}

void SecretGrants::SecretsChanged() {
  std::lock_guard lock(mu_);
  patterns_valid_ = false;
  patterns_.reset();
}

absl::Status SecretGrants::CheckNoValues(absl::string_view what, absl::string_view text) {
  if (text.size() < net::kMinNeedleSize) {
    return absl::OkStatus();
  }
  ABOX_ASSIGN_OR_RETURN(std::shared_ptr<const net::LeakPatterns> patterns, ValuePatterns());
  if (patterns == nullptr) {
    return absl::OkStatus();
  }
  net::LeakDetector detector(patterns);
  if (std::optional<net::Leak> leak = detector.Feed(text)) {
    return absl::PermissionDeniedError(absl::StrCat(
        what, " holds the real value of secret ", leak->name, " (", leak->encoding,
        "): secrets never enter a sandbox. Give the sandbox the secret instead (abox create "
        "--secret ",
        leak->name, ") and use the placeholder in its $", leak->name));
  }
  return absl::OkStatus();
}

absl::StatusOr<workspace::ContentCheckFn> SecretGrants::SyncCheck(const std::string& sandbox_id) {
  ABOX_ASSIGN_OR_RETURN(std::shared_ptr<const net::LeakPatterns> patterns, ValuePatterns());
  if (patterns == nullptr) {
    return workspace::ContentCheckFn();
  }
  return [patterns, sandbox_id](const std::string& path) -> workspace::ContentScanFn {
    // A detector per file, fed its chunks in order: a value split across two is still found.
    auto detector = std::make_shared<net::LeakDetector>(patterns);
    return [detector, path, sandbox_id](absl::string_view data) -> absl::Status {
      if (std::optional<net::Leak> leak = detector->Feed(data)) {
        return absl::PermissionDeniedError(absl::StrCat(
            path, " holds the real value of secret ", leak->name, " (", leak->encoding,
            "): it was not synced into sandbox ", sandbox_id,
            ", nor was any other change; remove the value from the file, or keep the file out "
            "of the sandbox (abox create --exclude PATTERN)"));
      }
      return absl::OkStatus();
    };
  };
}

namespace {

// The hosts of a secret as an allowlist, to decide whether host:port is one of them.
absl::StatusOr<net::EgressPolicy> HostsPolicy(const secrets::SecretSpec& spec) {
  net::EgressPolicy policy;
  policy.mode = net::EgressPolicy::Mode::kAllowlist;
  for (const std::string& host : spec.hosts) {
    ABOX_ASSIGN_OR_RETURN(net::Rule rule, net::ParseRule(host));
    policy.allow.push_back(std::move(rule));
  }
  return policy;
}

bool BoundTo(const secrets::SecretSpec& spec, const std::string& host, uint16_t port) {
  absl::StatusOr<net::EgressPolicy> policy = HostsPolicy(spec);
  return policy.ok() && net::Decide(*policy, host, port).allowed;
}

}  // namespace

absl::StatusOr<std::shared_ptr<const net::InterceptSource>> SecretGrants::InterceptFor(
    const std::string& sandbox_id) {
  ABOX_ASSIGN_OR_RETURN(store::SandboxGrants grants, Of(sandbox_id));
  if (!grants.intercepts()) {
    return nullptr;
  }
  ABOX_ASSIGN_OR_RETURN(const net::InterceptCa* ca, Ca());
  std::vector<GitPushGrant> pushes;
  for (const std::string& text : grants.git_push) {
    ABOX_ASSIGN_OR_RETURN(GitPushGrant push, ParseGitPushGrant(text));
    pushes.push_back(std::move(push));
  }
  {
    std::lock_guard lock(mu_);
    if (leaves_ == nullptr) {
      leaves_ = std::make_shared<net::LeafCache>(*ca, net::LeafCache::Options{});
    }
    if (trust_ == nullptr) {
      ABOX_ASSIGN_OR_RETURN(trust_, net::UpstreamTrust::Create(upstream_ca_files_));
    }
  }
  auto source = std::make_shared<net::InterceptSource>();
  {
    std::lock_guard lock(mu_);
    source->leaves = leaves_;
    source->trust = trust_;
  }
  source->terminates = [this, sandbox_id, pushes](const std::string& host, uint16_t port) {
    for (const GitPushGrant& push : pushes) {
      if (push.host == host && push.port == port) {
        return true;
      }
    }
    absl::StatusOr<std::vector<GrantedSecret>> given = SecretsOf(sandbox_id);
    if (!given.ok()) {
      spdlog::warn("{}: the secrets could not be read: {}", sandbox_id,
                   std::string(given.status().message()));
      return false;
    }
    for (const GrantedSecret& g : *given) {
      if (BoundTo(g.spec, host, port)) {
        return true;
      }
    }
    return false;
  };
  source->rules = [this, sandbox_id, pushes](
                      const std::string& host,
                      uint16_t port) -> absl::StatusOr<std::shared_ptr<const net::InterceptRules>> {
    ABOX_ASSIGN_OR_RETURN(std::vector<GrantedSecret> given, SecretsOf(sandbox_id));
    std::vector<net::SecretBinding> bindings;
    auto rules = std::make_shared<net::InterceptRules>();
    for (GrantedSecret& g : given) {
      net::SecretBinding b;
      b.name = g.spec.name;
      b.placeholder = g.row.placeholder;
      b.hosts = g.spec.hosts;
      if (!g.spec.header.empty()) {
        b.headers = {g.spec.header};
      }
      b.allow_query = g.spec.allow_query;
      bool token_here = false;
      for (const GitPushGrant& push : pushes) {
        token_here |= push.host == host && push.port == port && BoundTo(g.spec, host, port);
      }
      if (BoundTo(g.spec, host, port) || token_here) {
        // Read now: a command or Vault source may have rotated it.
        absl::StatusOr<secrets::SecretValue> value = secrets_->Resolve(g.spec.name);
        if (!value.ok()) {
          return absl::Status(value.status().code(),
                              absl::StrCat("secret ", g.spec.name, ": ", value.status().message()));
        }
        b.value = std::string(value->Reveal());
      } else {
        // Not bound here: never sent nor scrubbed on this connection, only watched for (its
        // placeholder is a leak here). A stand-in keeps the real value off this connection.
        b.value = absl::StrCat("unbound-", g.spec.name);
      }
      bindings.push_back(std::move(b));
    }
    if (!bindings.empty()) {
      absl::StatusOr<std::shared_ptr<const net::SecretTable>> table =
          net::SecretTable::Create(bindings);
      for (net::SecretBinding& b : bindings) {
        secrets::Cleanse(b.value);
      }
      ABOX_RETURN_IF_ERROR(table.status());
      rules->secrets = *std::move(table);
    }
    // One rule per repository, its branch patterns together.
    for (const GitPushGrant& push : pushes) {
      auto same = [&](const net::GitPushRule& r) {
        return r.host == push.host && r.port == push.port && r.repo == push.repo;
      };
      auto it = std::find_if(rules->git_push.begin(), rules->git_push.end(), same);
      if (it == rules->git_push.end()) {
        net::GitPushRule rule;
        rule.host = push.host;
        rule.port = push.port;
        rule.repo = push.repo;
        for (const GrantedSecret& g : given) {
          if (BoundTo(g.spec, push.host, push.port)) {
            rule.token_secret = g.spec.name;
            break;
          }
        }
        rules->git_push.push_back(std::move(rule));
        it = std::prev(rules->git_push.end());
      }
      it->refs.branch_patterns.push_back(push.pattern);
    }
    return rules;
  };
  return source;
}

net::LeafCache::Stats SecretGrants::LeafStats() {
  std::lock_guard lock(mu_);
  return leaves_ != nullptr ? leaves_->stats() : net::LeafCache::Stats{};
}

absl::Status InstallGuestCa(runtime::AgentClient& agent, const std::string& ca_pem,
                            absl::Duration timeout) {
  proto::ExecRequest request;
  request.argv = {"/bin/sh", "-c", kInstallCaScript};
  request.user = "root";
  request.cwd = "/";
  request.stdin_open = true;
  request.timeout_ms = static_cast<uint64_t>(absl::ToInt64Milliseconds(timeout));
  constexpr absl::string_view kWhat = "installing abox's CA in the guest";
  absl::StatusOr<std::unique_ptr<runtime::Exec>> exec = agent.StartExec(request);
  if (!exec.ok()) {
    return absl::Status(exec.status().code(), absl::StrCat(kWhat, ": ", exec.status().message()));
  }
  absl::Status sent = (*exec)->WriteStdin(ca_pem);
  (*exec)->CloseStdin();
  std::string output;
  while (std::optional<runtime::Exec::Chunk> chunk = (*exec)->ReadOutput()) {
    if (output.size() < 2048) {
      output.append(chunk->data.substr(0, 2048 - output.size()));
    }
  }
  absl::StatusOr<proto::ExitInfo> exit = (*exec)->Wait();
  if (!exit.ok()) {
    return absl::Status(exit.status().code(), absl::StrCat(kWhat, ": ", exit.status().message()));
  }
  if (!sent.ok() || exit->timed_out || exit->ShellCode() != 0) {
    std::string shown;
    for (char c : output) {
      shown.push_back(absl::ascii_isprint(c) || c == ' ' ? c : ' ');
    }
    return absl::InternalError(absl::StrCat(kWhat, " failed (exit ", exit->ShellCode(),
                                            "): ", absl::StripAsciiWhitespace(shown)));
  }
  return absl::OkStatus();
}

}  // namespace abox::daemon
