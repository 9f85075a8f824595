// Sanitizing a repository's .git/config before it goes into the guest: the full-history
// repository git_snapshot.h builds gets the host's config so that remotes and settings work
// there, but the host's config can carry credentials (helpers, tokens in URLs, auth headers)
// and can run host programs (hooks, fsmonitor, ssh commands); an agent in the guest must see
// neither.
//
// Trust: the config is the user's own file, but it is parsed strictly, as git does (section
// headers, quoting, escapes, continuations, comments): anything git would not parse is an error
// rather than a guess, because a misparsed line could hide a secret from the filter. The
// caller then sends MinimalGitConfig() instead, so git still works in the guest without the
// remotes and settings.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace abox::workspace {

// `config` with every credential-bearing and host-program setting removed; everything else is
// kept byte for byte (comments too). Each removal leaves a `# abox: ...` comment saying why.
// Removed:
//   - [credential] and [credential "<url>"] sections, [includeIf ...] sections, include.path;
//   - core.hooksPath, core.fsmonitor, core.sshCommand, core.askPass, core.worktree;
//   - http[.<url>].extraHeader, cookieFile, sslKey, sslCert, sslCertPasswordProtected;
//   - sendemail[.<identity>].smtpPass, and any key whose name contains "token", "password" or
//     "secret" (tools such as hub and glab keep tokens in git config);
//   - credentials in URLs: remote.<name>.url / pushurl, submodule.<name>.url,
//     url.<base>.insteadOf / pushInsteadOf and the <base> / <url> of [url] and [http]
//     headers (see StripUrlCredentials); userinfo in http.proxy and remote.<name>.proxy.
// `removed` (if set) receives one entry per removal, "section.key" in git's lowercase form
// (e.g. "credential.helper", "remote.url"), or "url.<base>" / "http.<url>" for a header, never
// a value or a URL. kInvalidArgument with a line number for input git would reject.
[[nodiscard]] absl::StatusOr<std::string> SanitizeGitConfig(
    absl::string_view config, std::vector<std::string>* removed = nullptr);

// The fallback config for a repository whose own config could not be sanitized: enough for
// git to open a non-bare SHA-1 repository (no remotes, no branches' upstreams).
[[nodiscard]] std::string MinimalGitConfig();

// `url` without the credentials in it. For scheme URLs (`scheme://userinfo@host/...`): the
// whole userinfo goes for http, https, ftp, ftps and other schemes (tokens often sit in the user
// part), only the ":password" part for ssh, git+ssh and ssh+git (the user name selects the
// account and is not a secret). scp-like `user@host:path` and local paths are returned
// unchanged. With `schemeless_authority` (proxies: `user:pass@proxy:8080`), a URL without a
// scheme is read as an authority and its userinfo removed too.
[[nodiscard]] std::string StripUrlCredentials(absl::string_view url,
                                              bool schemeless_authority = false);

}  // namespace abox::workspace
