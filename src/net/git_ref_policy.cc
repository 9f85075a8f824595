#include "src/net/git_ref_policy.h"

#include <cstdint>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/strip.h"
#include "src/net/host_name.h"

namespace abox::net {
namespace {

constexpr absl::string_view kHeads = "refs/heads/";
constexpr absl::string_view kTags = "refs/tags/";

enum class Token : uint8_t { kChar, kStar, kDoubleStar };

}  // namespace

absl::Status ValidateBranchPattern(absl::string_view pattern) {
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat("branch pattern '", QuoteForLog(pattern), "': ", why));
  };
  if (pattern.empty()) {
    return bad("empty (use '**' for any branch)");
  }
  if (absl::StartsWith(pattern, "refs/")) {
    return bad("write the branch part only (without refs/heads/), e.g. 'agent/*'");
  }
  if (absl::StrContains(pattern, "***")) {
    return bad("'***' means nothing: use '*' (one level) or '**' (any depth)");
  }
  // With each '*' standing for some characters, it must be a ref name git accepts.
  if (!IsValidRefName(absl::StrCat(kHeads, absl::StrReplaceAll(pattern, {{"*", "x"}})))) {
    return bad("not a valid branch name (see git check-ref-format)");
  }
  return absl::OkStatus();
}

bool BranchGlobMatches(absl::string_view pattern, absl::string_view branch) {
  std::vector<Token> tokens;
  std::vector<char> chars;
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] != '*') {
      tokens.push_back(Token::kChar);
      chars.push_back(pattern[i]);
    } else if (i + 1 < pattern.size() && pattern[i + 1] == '*') {
      tokens.push_back(Token::kDoubleStar);
      chars.push_back('*');
      ++i;
    } else {
      tokens.push_back(Token::kStar);
      chars.push_back('*');
    }
  }
  // next[j]: tokens[i+1..] match branch[j..]; row[j]: tokens[i..] match branch[j..].
  size_t n = branch.size();
  std::vector<char> next(n + 1, 0);
  next[n] = 1;
  std::vector<char> row(n + 1, 0);
  for (size_t i = tokens.size(); i-- > 0;) {
    for (size_t j = n + 1; j-- > 0;) {
      bool more = j < n;
      switch (tokens[i]) {
        case Token::kChar:
          row[j] = more && branch[j] == chars[i] && next[j + 1];
          break;
        case Token::kStar:
          row[j] = next[j] || (more && branch[j] != '/' && row[j + 1]);
          break;
        case Token::kDoubleStar:
          row[j] = next[j] || (more && row[j + 1]);
          break;
      }
    }
    next.swap(row);
  }
  return next[0] != 0;
}

std::vector<RefRefusal> CheckRefUpdates(const RefPolicy& policy,
                                        const std::vector<RefUpdate>& updates) {
  std::vector<RefRefusal> refusals;
  for (const RefUpdate& u : updates) {
    std::string reason;
    absl::string_view ref = u.refname;
    if (u.is_delete()) {
      reason = "deleting refs is not allowed from the sandbox";
    } else if (absl::ConsumePrefix(&ref, kHeads)) {
      bool matched = false;
      for (const std::string& p : policy.branch_patterns) {
        matched = matched || BranchGlobMatches(p, ref);
      }
      if (!matched) {
        reason = policy.branch_patterns.empty()
                     ? "this sandbox may not push branches"
                     : absl::StrCat("this sandbox may push only to branches matching ",
                                    absl::StrJoin(policy.branch_patterns, ", "));
      }
    } else if (absl::StartsWith(ref, kTags)) {
      if (!policy.allow_tags) {
        reason = "this sandbox may not push tags";
      } else if (!u.is_create()) {
        reason = "an existing tag may not be moved";
      }
    } else {
      reason = "only branches (refs/heads/...) may be pushed";
    }
    if (!reason.empty()) {
      refusals.push_back({u.refname, std::move(reason)});
    }
  }
  return refusals;
}

}  // namespace abox::net
