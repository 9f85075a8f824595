// The plaintext HTTP/1.1 of one proxied connection, both directions, as the egress proxy sees
// it after terminating TLS for a host a secret is bound to (or on a plain-HTTP connection to
// any host):
//
//   guest -> upstream: every request must name the verified host; placeholders in its head are
//     swapped for the real values where their bindings allow (SwapSecrets), and a placeholder
//     of a secret not bound to the host, in the head or (in any encoding the LeakDetector
//     knows) in the body, chunk extensions or trailers, stops the connection as a leak. On a
//     git-push host, a push (`POST .../git-receive-pack`) is held until its ref-update list has
//     been read and every update passes the repo's RefPolicy, so a refused push reaches the
//     forge not at all; pushes to other repos are refused at once; git requests for an allowed
//     repo get the token (`Authorization: Basic x-access-token:<token>`) unless they carry
//     their own Authorization.
//   upstream -> guest: responses are followed (HttpResponseStream) and the real values of the
//     secrets bound to the host are replaced by their placeholders in heads and bodies.
//
// The shape fits Splice: FeedUp is filter_up, RefusalReply is refusal_reply, FeedDown and
// FinishDown filter the other direction. Thread-safe: FeedUp runs on one thread while FeedDown
// runs on another (one lock; no I/O under it).
//
// Trust boundary: the guest's bytes are hostile and the upstream's untrusted; memory is
// bounded per connection (a head, a held push of at most kMaxHeldRequestSize, the scrubbers'
// and detectors' tails, the queue of requests awaiting responses). Real values appear in no
// message, report or reply.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "src/net/git_ref_policy.h"
#include "src/net/http_request_head.h"
#include "src/net/http_request_stream.h"
#include "src/net/http_response_stream.h"
#include "src/net/leak_detector.h"
#include "src/net/secret_swap.h"
#include "src/net/value_scrubber.h"

namespace abox::net {

// `abox create --git-push HOST/OWNER/REPO:BRANCH-PATTERN`: pushes to one repo on one host.
struct GitPushRule {
  std::string host;  // a host name as the proxy verifies it
  uint16_t port = 443;
  // "owner/repo" (or "group/sub/repo"): the URL path before /info/refs, /git-upload-pack or
  // /git-receive-pack, with or without ".git", compared ignoring ASCII case (as forges do).
  std::string repo;
  RefPolicy refs;
  // The SecretTable entry whose value is the token git requests for the repo are sent with;
  // empty: none is added (the guest's own Authorization, if any, goes through).
  std::string token_secret;
};

struct InterceptRules {
  std::shared_ptr<const SecretTable> secrets;  // null: no secrets
  std::vector<GitPushRule> git_push;
};

// InvalidArgument naming the rule when a git-push host or repo is malformed, a branch pattern
// is not one (ValidateBranchPattern), or a token secret is not in the table.
[[nodiscard]] absl::Status ValidateInterceptRules(const InterceptRules& rules);

// What happened on one connection, for the egress log. Names only, never values.
struct InterceptReport {
  std::vector<std::string> swapped;        // secrets swapped into request heads (each once)
  std::optional<SecretRefusal> leak;       // the secret refusal that stopped the connection
  std::optional<std::string> git_refusal;  // why a push was refused
  uint64_t requests = 0;                   // request heads accepted
  uint64_t responses = 0;                  // final responses followed
  uint64_t scrubbed = 0;                   // values replaced in responses
  uint64_t tokens_added = 0;               // git requests the push token was added to
};

class InterceptedHttp final {
 public:
  // `host`:`port` is the destination the proxy verified (SNI, Host and the resolved address
  // agree; for plain HTTP, the host the policy allowed). InvalidArgument for bad rules.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<InterceptedHttp>> Create(
      std::shared_ptr<const InterceptRules> rules, std::string host, uint16_t port);

  InterceptedHttp(const InterceptedHttp&) = delete;
  InterceptedHttp& operator=(const InterceptedHttp&) = delete;
  ~InterceptedHttp();

  // Guest -> upstream: appends what may go upstream to `*out`. An error stops this direction:
  // PermissionDenied for what the policy refuses (a leak, a refused push, another host),
  // InvalidArgument for framing the proxy cannot follow. Every later call returns it again.
  [[nodiscard]] absl::Status FeedUp(absl::string_view in, std::string* out);
  // The response the guest gets after FeedUp refused: for a push refused by ref, the git
  // answer that makes `git push` print each ref's reason; otherwise 403 (policy) or 400
  // (framing) with the reason as text (git shows it as "remote: ..."). Never a value.
  std::string RefusalReply(const absl::Status& why) const;
  // Upstream -> guest: appends the scrubbed bytes to `*out`. InvalidArgument on a response the
  // proxy cannot follow (the connection should be reset: the guest already has a prefix).
  [[nodiscard]] absl::Status FeedDown(absl::string_view in, std::string* out);
  // The upstream closed its side: appends what a body ending at close held back.
  // InvalidArgument when it closed in the middle of a response.
  [[nodiscard]] absl::Status FinishDown(std::string* out);

  InterceptReport report() const;

 private:
  class BodyChecks;

  InterceptedHttp(std::shared_ptr<const InterceptRules> rules, std::string host, uint16_t port);

  absl::StatusOr<RequestDecision> OnRequest(const HttpRequestHead& head, absl::string_view raw);
  // Swaps secrets into `head` (rewritten for an HTTP/1.0 client when needed): the head to send.
  absl::StatusOr<std::string> SwapHead(const HttpRequestHead& head, absl::string_view raw);
  // The refusal of a secret, recorded for the report.
  absl::Status Refuse(SecretRefusal refusal);

  const std::shared_ptr<const InterceptRules> rules_;
  const std::string host_;
  const uint16_t port_;
  std::vector<const GitPushRule*> push_rules_;  // those for host_:port_
  std::shared_ptr<const LeakPatterns> leaks_;   // null: no secret must be watched for
  std::optional<ValueScrubber> scrubber_;       // null: no value to hide in responses

  mutable std::mutex mu_;
  HttpRequestStream requests_;
  HttpResponseStream responses_;
  InterceptReport report_;
  std::string git_reply_;  // the body of the git answer to a refused push
};

}  // namespace abox::net
