#include "src/net/intercept_http.h"

#include <algorithm>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "src/net/egress_connection.h"
#include "src/net/host_name.h"
#include "src/net/pkt_line.h"

namespace abox::net {
namespace {

enum class GitService : uint8_t { kUploadPack, kReceivePack };

struct GitRequest {
  GitService service = GitService::kUploadPack;
  std::string repo;  // the path before the git suffix: no leading '/', no ".git"
  bool rpc = false;  // the service itself (its body is the protocol), not info/refs
};

int HexValue(char c) {
  if (absl::ascii_isdigit(static_cast<unsigned char>(c))) {
    return c - '0';
  }
  char l = absl::ascii_tolower(static_cast<unsigned char>(c));
  return l >= 'a' && l <= 'f' ? l - 'a' + 10 : -1;
}

// The forge decodes %XX before routing: so must the proxy, or "git%2Dreceive-pack" would be a
// push it does not check.
std::string PercentDecode(absl::string_view text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '%' && i + 2 < text.size() && HexValue(text[i + 1]) >= 0 &&
        HexValue(text[i + 2]) >= 0) {
      out.push_back(static_cast<char>(HexValue(text[i + 1]) * 16 + HexValue(text[i + 2])));
      i += 2;
    } else {
      out.push_back(text[i]);
    }
  }
  return out;
}

absl::string_view RepoKey(absl::string_view repo) {
  absl::ConsumeSuffix(&repo, ".git");
  return repo;
}

bool SameRepo(absl::string_view a, absl::string_view b) {
  return absl::EqualsIgnoreCase(RepoKey(a), RepoKey(b));
}

bool ConsumeSuffixIgnoringCase(absl::string_view* text, absl::string_view suffix) {
  if (!absl::EndsWithIgnoreCase(*text, suffix)) {
    return false;
  }
  text->remove_suffix(suffix.size());
  return true;
}

// The smart-HTTP request `target` makes, if any (gitprotocol-http(5)): info/refs with a
// service, or a POST to the service. Matched loosely (any case, trailing '/', encoded bytes) so
// that what a forge could route to a push is treated as one.
std::optional<GitRequest> ClassifyGitRequest(absl::string_view target) {
  if (!absl::StartsWith(target, "/")) {  // absolute-form: http://authority/path
    size_t scheme = target.find("://");
    if (scheme == absl::string_view::npos) {
      return std::nullopt;
    }
    target.remove_prefix(scheme + 3);
    size_t slash = target.find('/');
    if (slash == absl::string_view::npos) {
      return std::nullopt;
    }
    target.remove_prefix(slash);
  }
  size_t question = target.find('?');
  absl::string_view query =
      question == absl::string_view::npos ? absl::string_view() : target.substr(question + 1);
  std::string decoded = PercentDecode(target.substr(0, question));
  absl::string_view path = absl::StripSuffix(decoded, "/");
  GitRequest request;
  if (ConsumeSuffixIgnoringCase(&path, "/info/refs")) {
    std::optional<GitService> service;
    for (absl::string_view param : absl::StrSplit(query, '&')) {
      std::string p = PercentDecode(param);
      if (absl::EqualsIgnoreCase(p, "service=git-receive-pack")) {
        service = GitService::kReceivePack;
      } else if (absl::EqualsIgnoreCase(p, "service=git-upload-pack") && !service) {
        service = GitService::kUploadPack;
      }
    }
    if (!service) {
      return std::nullopt;
    }
    request.service = *service;
  } else if (ConsumeSuffixIgnoringCase(&path, "/git-receive-pack")) {
    request.service = GitService::kReceivePack;
    request.rpc = true;
  } else if (ConsumeSuffixIgnoringCase(&path, "/git-upload-pack")) {
    request.service = GitService::kUploadPack;
    request.rpc = true;
  } else {
    return std::nullopt;
  }
  absl::ConsumePrefix(&path, "/");
  request.repo = std::string(RepoKey(path));
  return request;
}

const HttpHeader* FindHeader(const HttpRequestHead& head, absl::string_view name) {
  for (const HttpHeader& h : head.headers) {
    if (absl::EqualsIgnoreCase(h.name, name)) {
      return &h;
    }
  }
  return nullptr;
}

const SecretTable::Entry* FindSecret(const InterceptRules& rules, absl::string_view name) {
  if (rules.secrets == nullptr) {
    return nullptr;
  }
  for (const SecretTable::Entry& e : rules.secrets->entries()) {
    if (e.binding.name == name) {
      return &e;
    }
  }
  return nullptr;
}

bool IsRepoChar(char c) {
  return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.' ||
         c == '/';
}

}  // namespace

absl::Status ValidateInterceptRules(const InterceptRules& rules) {
  for (const GitPushRule& rule : rules.git_push) {
    std::string what =
        absl::StrCat("git push rule ", QuoteForLog(rule.host), "/", QuoteForLog(rule.repo), ": ");
    absl::StatusOr<std::string> host = NormalizeHostName(rule.host);
    if (!host.ok() || *host != rule.host) {
      return absl::InvalidArgumentError(
          absl::StrCat(what,
                       "the host must be a normalised host name (lower case, no dot at the "
                       "end)"));
    }
    if (rule.port == 0) {
      return absl::InvalidArgumentError(absl::StrCat(what, "port 0"));
    }
    absl::string_view repo = rule.repo;
    if (repo.empty() || repo.front() == '/' || repo.back() == '/' ||
        !absl::StrContains(repo, '/') || absl::StrContains(repo, "//") ||
        absl::StrContains(repo, "..") || !std::all_of(repo.begin(), repo.end(), IsRepoChar)) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, "the repo must be OWNER/REPO (letters, digits, - _ . /)"));
    }
    for (const std::string& pattern : rule.refs.branch_patterns) {
      if (absl::Status s = ValidateBranchPattern(pattern); !s.ok()) {
        return absl::InvalidArgumentError(absl::StrCat(what, s.message()));
      }
    }
    if (!rule.token_secret.empty() && FindSecret(rules, rule.token_secret) == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, "its token secret '", QuoteForLog(rule.token_secret), "' is not defined"));
    }
  }
  return absl::OkStatus();
}

// The checks on one request's body: secrets' placeholders (leaks), and for a push its ref
// updates, with the request held until they are known.
class InterceptedHttp::BodyChecks final : public RequestBodyInspector {
 public:
  BodyChecks(InterceptedHttp& owner, const GitPushRule* push)
      : owner_(owner), push_(push), decided_(push == nullptr) {
    if (owner.leaks_ != nullptr) {
      body_.emplace(owner.leaks_);
      framing_.emplace(owner.leaks_);
    }
  }

  absl::Status OnBody(absl::string_view data) override {
    if (body_) {
      if (std::optional<Leak> leak = body_->Feed(data)) {
        return RefuseLeak(*leak, "the request body");
      }
    }
    if (decided_) {
      return absl::OkStatus();
    }
    absl::StatusOr<bool> done = commands_.Feed(data);
    if (!done.ok()) {
      std::string why = absl::StrCat("abox: refused a git push to ", owner_.host_, "/", push_->repo,
                                     ": ", done.status().message());
      owner_.report_.git_refusal = why;
      return absl::InvalidArgumentError(why);
    }
    return *done ? CheckUpdates() : absl::OkStatus();
  }

  absl::Status OnFraming(absl::string_view bytes) override {
    if (framing_) {
      if (std::optional<Leak> leak = framing_->Feed(bytes)) {
        return RefuseLeak(*leak, "the chunk extensions or trailers of the request body");
      }
    }
    return absl::OkStatus();
  }

  absl::Status OnEnd() override {
    if (decided_) {
      return absl::OkStatus();
    }
    std::string why = absl::StrCat("abox: refused a git push to ", owner_.host_, "/", push_->repo,
                                   ": the request ended before its list of ref updates");
    owner_.report_.git_refusal = why;
    return absl::InvalidArgumentError(why);
  }

  bool holding() const override { return !decided_; }

 private:
  absl::Status RefuseLeak(const Leak& leak, absl::string_view where) {
    std::string hosts;
    if (const SecretTable::Entry* e = FindSecret(*owner_.rules_, leak.name)) {
      hosts = absl::StrJoin(e->binding.hosts, ", ");
    }
    std::string how = leak.encoding == "raw" ? "" : absl::StrCat(" (", leak.encoding, ")");
    return owner_.Refuse(
        SecretRefusal{SecretRefusal::Kind::kLeak, leak.name, std::string(where),
                      absl::StrCat("abox: blocked a request to ", owner_.host_, ":", owner_.port_,
                                   ": it carries the placeholder of secret '", leak.name, "'", how,
                                   " in ", where, ", but that secret is bound to ", hosts,
                                   " only (a possible exfiltration attempt; it was logged)")});
  }

  absl::Status CheckUpdates() {
    std::vector<RefRefusal> refusals = CheckRefUpdates(push_->refs, commands_.updates());
    if (refusals.empty()) {
      decided_ = true;
      return absl::OkStatus();
    }
    std::vector<std::string> texts;
    for (const RefRefusal& r : refusals) {
      texts.push_back(RefusalText(r));
    }
    owner_.git_reply_ =
        BuildReceivePackRefusal(commands_.updates(), refusals, commands_.capabilities());
    owner_.report_.git_refusal = absl::StrJoin(texts, "; ");
    return absl::PermissionDeniedError(*owner_.report_.git_refusal);
  }

  InterceptedHttp& owner_;
  const GitPushRule* push_;  // null: not a push
  bool decided_;
  ReceivePackCommandReader commands_;
  std::optional<LeakDetector> body_;
  std::optional<LeakDetector> framing_;
};

absl::StatusOr<std::unique_ptr<InterceptedHttp>> InterceptedHttp::Create(
    std::shared_ptr<const InterceptRules> rules, std::string host, uint16_t port) {
  if (rules == nullptr || host.empty()) {
    return absl::InvalidArgumentError("intercepted HTTP needs rules and a destination host");
  }
  if (absl::Status s = ValidateInterceptRules(*rules); !s.ok()) {
    return s;
  }
  std::unique_ptr<InterceptedHttp> http(
      new InterceptedHttp(std::move(rules), std::move(host), port));
  const InterceptRules& r = *http->rules_;
  std::vector<ScrubPair> pairs;
  auto hide = [&](const SecretBinding& b) {
    // Two secrets with one value: the first placeholder stands for it.
    if (std::none_of(pairs.begin(), pairs.end(),
                     [&](const ScrubPair& p) { return p.value == b.value; })) {
      pairs.push_back({b.value, b.placeholder});
    }
  };
  for (const GitPushRule& rule : r.git_push) {
    if (absl::EqualsIgnoreCase(rule.host, http->host_) && rule.port == port) {
      http->push_rules_.push_back(&rule);
      if (const SecretTable::Entry* e = FindSecret(r, rule.token_secret)) {
        hide(e->binding);
      }
    }
  }
  if (r.secrets != nullptr) {
    for (const SecretTable::Entry& e : r.secrets->entries()) {
      if (SecretTable::BoundTo(e, http->host_, port)) {
        hide(e.binding);
      }
    }
    std::vector<Needle> needles = r.secrets->LeakNeedlesFor(http->host_, port);
    if (!needles.empty()) {
      absl::StatusOr<std::shared_ptr<const LeakPatterns>> patterns =
          LeakPatterns::Create(std::move(needles));
      if (!patterns.ok()) {
        return patterns.status();
      }
      http->leaks_ = *std::move(patterns);
    }
  }
  if (!pairs.empty()) {
    absl::StatusOr<ValueScrubber> scrubber = ValueScrubber::Create(std::move(pairs));
    if (!scrubber.ok()) {
      return scrubber.status();
    }
    http->scrubber_ = *std::move(scrubber);
  }
  return http;
}

InterceptedHttp::InterceptedHttp(std::shared_ptr<const InterceptRules> rules, std::string host,
                                 uint16_t port)
    : rules_(std::move(rules)),
      host_(std::move(host)),
      port_(port),
      requests_([this](const HttpRequestHead& head, absl::string_view raw) {
        return OnRequest(head, raw);
      }),
      responses_([this](const HttpResponseHead&, const PendingRequest&) { return scrubber_; }) {}

InterceptedHttp::~InterceptedHttp() = default;

absl::Status InterceptedHttp::Refuse(SecretRefusal refusal) {
  absl::Status status = absl::PermissionDeniedError(refusal.message);
  report_.leak = std::move(refusal);
  return status;
}

absl::StatusOr<std::string> InterceptedHttp::SwapHead(const HttpRequestHead& head,
                                                      absl::string_view raw) {
  if (rules_->secrets == nullptr) {
    return std::string(raw);
  }
  HttpRequestHead edited = head;
  if (head.minor_version == 0 && scrubber_ && scrubber_->changes_length()) {
    // A response whose length the scrubbing changes reaches an HTTP/1.0 client as ending at
    // close (it cannot read chunked): the upstream must close after it.
    std::erase_if(edited.headers, [](const HttpHeader& h) {
      return absl::EqualsIgnoreCase(h.name, "connection") ||
             absl::EqualsIgnoreCase(h.name, "keep-alive");
    });
    edited.headers.push_back({"Connection", "close"});
  }
  absl::StatusOr<SwapOutcome> swap = SwapSecrets(*rules_->secrets, edited, host_, port_);
  if (!swap.ok()) {
    return swap.status();
  }
  if (swap->refusal) {
    return Refuse(*std::move(swap->refusal));
  }
  for (std::string& name : swap->swapped) {
    if (std::find(report_.swapped.begin(), report_.swapped.end(), name) == report_.swapped.end()) {
      report_.swapped.push_back(std::move(name));
    }
  }
  return std::move(swap->head);
}

absl::StatusOr<RequestDecision> InterceptedHttp::OnRequest(const HttpRequestHead& head,
                                                           absl::string_view raw) {
  const HttpDestination& d = head.destination;
  // A Host without a port reads as port 80 whatever the connection's port is.
  if (d.host != host_ || (d.port != port_ && d.port != 80)) {
    return absl::PermissionDeniedError(
        absl::StrCat("this connection was allowed for ", host_, ":", port_,
                     "; a request on it for ", QuoteForLog(d.host), ":", d.port,
                     " is refused (send requests for another host on a new connection)"));
  }
  absl::StatusOr<std::string> bytes = SwapHead(head, raw);
  if (!bytes.ok()) {
    return bytes.status();
  }
  RequestDecision decision;
  decision.head = *std::move(bytes);
  const GitPushRule* push = nullptr;
  if (std::optional<GitRequest> git =
          push_rules_.empty() ? std::nullopt : ClassifyGitRequest(head.target)) {
    const GitPushRule* rule = nullptr;
    for (const GitPushRule* r : push_rules_) {
      if (SameRepo(r->repo, git->repo)) {
        rule = r;
      }
    }
    if (git->service == GitService::kReceivePack && rule == nullptr) {
      std::vector<std::string> allowed;
      for (const GitPushRule* r : push_rules_) {
        allowed.push_back(absl::StrCat(host_, "/", r->repo));
      }
      std::string why = absl::StrCat("abox: push to ", host_, "/", QuoteForLog(git->repo),
                                     " refused: this sandbox may push to ",
                                     absl::StrJoin(allowed, ", "), " only");
      report_.git_refusal = why;
      return absl::PermissionDeniedError(why);
    }
    if (git->service == GitService::kReceivePack && FindHeader(head, "content-encoding")) {
      std::string why = absl::StrCat("abox: push to ", host_, "/", rule->repo,
                                     " refused: a compressed push cannot be checked");
      report_.git_refusal = why;
      return absl::PermissionDeniedError(why);
    }
    if (rule != nullptr && !rule->token_secret.empty() &&
        FindHeader(head, "authorization") == nullptr) {
      const SecretTable::Entry* token = FindSecret(*rules_, rule->token_secret);
      decision.head.insert(
          decision.head.size() - 2,
          absl::StrCat("Authorization: Basic ",
                       absl::Base64Escape(absl::StrCat("x-access-token:", token->binding.value)),
                       "\r\n"));
      ++report_.tokens_added;
    }
    if (git->service == GitService::kReceivePack && git->rpc) {
      push = rule;
    }
  }
  if (push != nullptr || leaks_ != nullptr) {
    decision.inspector = std::make_unique<BodyChecks>(*this, push);
  }
  if (!responses_.ExpectResponse(
          {.is_head = head.method == "HEAD", .minor_version = head.minor_version})) {
    return absl::PermissionDeniedError(absl::StrCat(
        "more than ", kMaxPendingResponses, " requests on this connection await responses"));
  }
  return decision;
}

absl::Status InterceptedHttp::FeedUp(absl::string_view in, std::string* out) {
  std::lock_guard<std::mutex> lock(mu_);
  return requests_.Feed(in, out);
}

std::string InterceptedHttp::RefusalReply(const absl::Status& why) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (!git_reply_.empty()) {
    return absl::StrCat(
        "HTTP/1.1 200 OK\r\nContent-Type: application/x-git-receive-pack-result\r\n"
        "Cache-Control: no-cache\r\nContent-Length: ",
        git_reply_.size(), "\r\nConnection: close\r\n\r\n", git_reply_);
  }
  absl::string_view message = why.message();
  std::string body =
      absl::StrCat(absl::StartsWith(message, "abox: ") ? "" : "abox: ", message, "\n");
  return absl::IsPermissionDenied(why) ? HttpErrorResponse(403, "Forbidden", body)
                                       : HttpErrorResponse(400, "Bad Request", body);
}

absl::Status InterceptedHttp::FeedDown(absl::string_view in, std::string* out) {
  std::lock_guard<std::mutex> lock(mu_);
  return responses_.Feed(in, out);
}

absl::Status InterceptedHttp::FinishDown(std::string* out) {
  std::lock_guard<std::mutex> lock(mu_);
  return responses_.Finish(out);
}

InterceptReport InterceptedHttp::report() const {
  std::lock_guard<std::mutex> lock(mu_);
  InterceptReport report = report_;
  report.requests = requests_.requests();
  report.responses = responses_.responses();
  report.scrubbed = responses_.replacements();
  return report;
}

}  // namespace abox::net
