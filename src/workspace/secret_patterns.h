// Secret-looking files that never go into a workspace by default (.env, private keys, cloud and
// registry credentials), as a small gitignore-like matcher with a configurable pattern list.
// The default list is data beside its reasons in secret_patterns.cc.
//
// Pattern syntax (a subset of gitignore, with fnmatch(3) globs: '*', '?', '[...]', '\' escapes;
// '*' never crosses '/', and a leading '*' matches a leading '.'):
//   - A trailing '/' makes a directory pattern: it matches only a directory, and excludes
//     everything under it (`.ssh/`).
//   - A pattern without another '/' matches the name of any path component, at any depth
//     (`*.pem` excludes `a/b/key.pem`; `.env` also excludes everything under a directory
//     named `.env`).
//   - A pattern with an inner '/' matches that many whole components ending at a component
//     boundary, at any depth: `.docker/config.json` excludes `.docker/config.json` and
//     `home/.docker/config.json` but not `x.docker/config.json`. (Any depth rather than
//     root-anchored because a tree that holds a copied home directory holds the same secrets.)
//   - A leading '/' anchors the pattern to the workspace root (`/config/master.key`).
//   - Not supported, refused with an explanation: '!' negation (use `remove`), '**'.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace abox::workspace {

// Secrets found by content rather than by name. A file set walk (file_set.cc) reads the first
// kSecretContentProbeBytes of each regular file that no pattern excluded and for which
// ShouldProbeSecretContent is true, and leaves the file out when SecretContentReason says why;
// the reason is what the exclusion lists in place of a pattern.
inline constexpr size_t kSecretContentProbeBytes = 64 << 10;

// Whether a regular file at `rel` of `size` bytes is worth reading for SecretContentReason:
// only what a content rule can match (today: `.json` files up to 1 MiB; a service-account key
// is about 2 KiB), so a sync does not read every file of the tree.
[[nodiscard]] bool ShouldProbeSecretContent(absl::string_view rel, uint64_t size);

// Why the file whose content starts with `head` (its first kSecretContentProbeBytes, or all of
// a shorter file) is a secret, or nullopt. Today: a Google Cloud service-account key, a JSON
// object with "type": "service_account". Looks only at the bytes given; never allocates in
// proportion to more than them.
[[nodiscard]] std::optional<std::string> SecretContentReason(absl::string_view head);

// One default pattern and why it is there.
struct SecretPattern {
  const char* pattern;
  const char* reason;
};

// The built-in list, in a stable order.
[[nodiscard]] const std::vector<SecretPattern>& DefaultSecretPatterns();

// The effective exclude list: the defaults minus `remove`, plus `add`. Immutable and
// thread-safe once created.
class ExcludeRules final {
 public:
  // `remove` takes exact default patterns out (kInvalidArgument naming the defaults for any
  // other string); `add` appends patterns, each validated (kInvalidArgument naming the pattern
  // and the rule). Duplicates are kept once.
  [[nodiscard]] static absl::StatusOr<ExcludeRules> Create(const std::vector<std::string>& add,
                                                           const std::vector<std::string>& remove);

  // The pattern that excludes `rel_path` (a valid relative path; `is_dir` says whether its last
  // component is a directory), or nullopt when it may be synced. The first matching pattern in
  // patterns() order wins.
  [[nodiscard]] std::optional<std::string> Match(absl::string_view rel_path, bool is_dir) const;

  // A copy that also excludes each path of `paths` exactly (a file, not a directory), Match
  // returning its reason: the files a content rule caught (SecretContentReason), so the same
  // rules leave them out of what git carries too.
  [[nodiscard]] ExcludeRules WithExactPaths(std::map<std::string, std::string> paths) const;

  // The effective patterns as given (defaults first, then additions).
  [[nodiscard]] const std::vector<std::string>& patterns() const { return patterns_; }
  // The exact paths of WithExactPaths, with their reasons.
  [[nodiscard]] const std::map<std::string, std::string, std::less<>>& exact_paths() const {
    return exact_;
  }

 private:
  struct Compiled {
    std::string glob;                     // without leading/trailing '/'
    std::vector<std::string> components;  // glob split on '/'
    bool dir_only = false;
    bool anchored = false;
  };

  ExcludeRules(std::vector<std::string> patterns, std::vector<Compiled> compiled)
      : patterns_(std::move(patterns)), compiled_(std::move(compiled)) {}

  std::vector<std::string> patterns_;
  std::vector<Compiled> compiled_;  // parallel to patterns_
  std::map<std::string, std::string, std::less<>> exact_;
};

}  // namespace abox::workspace
