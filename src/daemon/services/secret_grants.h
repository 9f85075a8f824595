// What each sandbox was given of the user's secrets (issue 15), and what follows from it:
//  - at create, the request's `secrets` and `git_push` are checked (the secrets exist, the
//    variables and push rules are well formed) and each secret gets a placeholder of its own
//    for this sandbox (secrets::NewPlaceholder), recorded in store::GrantRepo;
//  - every command in the sandbox gets the placeholders in its environment, and the variables
//    that point TLS clients at the bundle holding abox's interception CA (GrantEnv);
//  - the guest's trust store gets that CA (a create step, InstallGuestCa);
//  - commands whose argv, environment or stdin carry a stored secret's real value are refused
//    before they reach the VM (CheckNoValues), and so are workspace syncs that would send a
//    file holding one (SyncCheck).
// The proxy side (which connections are terminated, the values swapped in) reads the same
// grants through InterceptFor.
//
// Thread-safe.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "src/api/sandbox.h"
#include "src/base/host_layout.h"
#include "src/daemon/services/secret_service.h"
#include "src/net/egress_intercept.h"
#include "src/net/intercept_ca.h"
#include "src/net/leak_detector.h"
#include "src/net/policy.h"
#include "src/runtime/agent_client.h"
#include "src/store/grant_repo.h"
#include "src/workspace/sync.h"

namespace abox::daemon {

// Where the guest keeps abox's CA, and the bundle (the system one, with it appended) that the
// usual variables name.
inline constexpr char kGuestCaFile[] = "/usr/local/share/ca-certificates/abox-egress.crt";
inline constexpr char kGuestCaBundle[] = "/etc/ssl/certs/ca-certificates.crt";

// One `git_push` entry: "HOST[:PORT]/OWNER/REPO:BRANCH-PATTERN".
struct GitPushGrant {
  std::string host;  // lowercase DNS name
  uint16_t port = 443;
  std::string repo;     // "owner/repo" (a trailing ".git" dropped)
  std::string pattern;  // net::ValidateBranchPattern
  std::string text;     // as given
};
// InvalidArgument saying what is wrong and showing the form.
[[nodiscard]] absl::StatusOr<GitPushGrant> ParseGitPushGrant(absl::string_view text);

// A secret of a sandbox, with the spec as it is now (for hosts and header).
struct GrantedSecret {
  store::SandboxSecretRow row;
  secrets::SecretSpec spec;
};

class SecretGrants final {
 public:
  // `upstream_ca_files`: tests only (aboxd --test-upstream-ca).
  SecretGrants(SecretService& secrets, store::GrantRepo& repo, base::HostLayout layout,
               std::vector<std::string> upstream_ca_files = {});

  // Asked at create for each model API a request names (issue 16): an error (no key set up)
  // refuses the create. Unset: every API is accepted.
  void set_models_check(std::function<absl::Status(const std::string& api)> check) {
    models_check_ = std::move(check);
  }

  // Checks a create request's secrets, pushes and model APIs and draws their placeholders and
  // broker token (nothing is stored: Record does that once the sandbox has a record).
  // 400-style errors name the field.
  [[nodiscard]] absl::StatusOr<store::SandboxGrants> Prepare(const api::SandboxCreate& request);
  // The egress rules the grants need: every host a given secret is bound to and every push
  // host (so `--secret GH_TOKEN` alone lets the sandbox reach the secret's hosts).
  [[nodiscard]] absl::StatusOr<std::vector<net::Rule>> RulesFor(const store::SandboxGrants& grants);
  [[nodiscard]] absl::Status Record(const std::string& sandbox_id,
                                    const store::SandboxGrants& grants);
  // What the sandbox was given (cached; empty when nothing).
  [[nodiscard]] absl::StatusOr<store::SandboxGrants> Of(const std::string& sandbox_id);
  // Its secrets with their specs now. A secret removed since is left out (its placeholder is
  // then just a string).
  [[nodiscard]] absl::StatusOr<std::vector<GrantedSecret>> SecretsOf(const std::string& sandbox_id);
  // The sandboxes given `name` (not removed).
  [[nodiscard]] absl::StatusOr<std::vector<std::string>> UsersOf(const std::string& name);
  void Forget(const std::string& sandbox_id);

  // Variables every command of the sandbox gets: each secret's placeholder, and when it has
  // secrets or pushes, the CA bundle variables; for model APIs, ModelEnv. Empty when it was
  // given nothing.
  [[nodiscard]] absl::StatusOr<std::map<std::string, std::string>> Env(
      const std::string& sandbox_id);

  // The install CA ($ABOX_HOME/ca), made on first need.
  [[nodiscard]] absl::StatusOr<const net::InterceptCa*> Ca();

  // PermissionDenied naming the secret (never the value) when `text` holds a stored secret's
  // real value in any encoding the leak detector knows. `what`: "the command's argv", ...
  [[nodiscard]] absl::Status CheckNoValues(absl::string_view what, absl::string_view text);
  // The check a workspace sync into `sandbox_id` runs over each file it would send (see
  // workspace::SyncIn): PermissionDenied naming the file and the secret (never the value) when
  // the file holds a stored secret's real value. Null when no secret is stored.
  [[nodiscard]] absl::StatusOr<workspace::ContentCheckFn> SyncCheck(const std::string& sandbox_id);
  // The patterns of every stored secret's value (rebuilt when a secret changes); null when
  // there are none.
  [[nodiscard]] absl::StatusOr<std::shared_ptr<const net::LeakPatterns>> ValuePatterns();
  // A secret was set or removed: values and specs are read again.
  void SecretsChanged();

  // What the sandbox's egress proxy needs to terminate TLS for its secrets' hosts and push
  // hosts and swap values in; null when it was given nothing. Specs and values are read per
  // connection (a rotated or removed secret takes effect at the next one).
  [[nodiscard]] absl::StatusOr<std::shared_ptr<const net::InterceptSource>> InterceptFor(
      const std::string& sandbox_id);
  // Leaf-certificate cache counters (benchmarks).
  [[nodiscard]] net::LeafCache::Stats LeafStats();

 private:
  SecretService* secrets_;
  store::GrantRepo* repo_;
  base::HostLayout layout_;
  std::mutex mu_;
  std::map<std::string, store::SandboxGrants> cache_;
  std::unique_ptr<net::InterceptCa> ca_;
  bool patterns_valid_ = false;
  std::shared_ptr<const net::LeakPatterns> patterns_;
  std::vector<std::string> upstream_ca_files_;
  std::shared_ptr<net::LeafCache> leaves_;
  std::shared_ptr<const net::UpstreamTrust> trust_;
  std::function<absl::Status(const std::string& api)> models_check_;
};

// Appends abox's CA to the guest's system bundle and keeps it at kGuestCaFile, as root over the
// agent channel (once: a guest that has it already is left as it is). `shell`: tests with a
// fake VMM, whose "guest" is this host, pass a harmless one.
[[nodiscard]] absl::Status InstallGuestCa(runtime::AgentClient& agent, const std::string& ca_pem,
                                          absl::Duration timeout = absl::Seconds(20));

}  // namespace abox::daemon
