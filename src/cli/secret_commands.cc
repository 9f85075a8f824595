#include "src/cli/secret_commands.h"

#include <termios.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "src/api/secret.h"
#include "src/base/io.h"
#include "src/cli/flags.h"
#include "src/cli/output.h"
#include "src/cli/terminal_text.h"
#include "src/client/answers.h"
#include "src/client/api_paths.h"

namespace abox::cli {
namespace {

struct SetOptions {
  std::string name;
  std::vector<std::string> hosts;
  std::string header;
  std::string format;
  bool allow_query = false;
  std::string from_env;
  std::string from_file;
  bool from_stdin = false;
  bool from_command = false;
  std::vector<std::string> command;
  std::string vault;  // PATH#KEY
  std::string vault_mount = "secret";
  std::string vault_addr;
  bool json = false;
};

// Wipes a string's bytes before it goes (best effort: the CLI is short-lived).
void Wipe(std::string& s) {
  volatile char* p = s.data();
  for (size_t i = 0; i < s.size(); ++i) {
    p[i] = 0;
  }
  s.clear();
}

void StripOneNewline(std::string& value) {
  if (absl::EndsWith(value, "\r\n")) {
    value.resize(value.size() - 2);
  } else if (absl::EndsWith(value, "\n")) {
    value.pop_back();
  }
}

// A line from the terminal without echo, or all of a piped stdin.
absl::StatusOr<std::string> ReadStdin(const std::string& name) {
  if (::isatty(STDIN_FILENO) != 0) {
    std::fprintf(stderr, "value of %s (not shown): ", name.c_str());
    std::fflush(stderr);
    termios old{};
    bool restore = ::tcgetattr(STDIN_FILENO, &old) == 0;
    if (restore) {
      termios quiet = old;
      quiet.c_lflag &= ~static_cast<tcflag_t>(ECHO);
      ::tcsetattr(STDIN_FILENO, TCSAFLUSH, &quiet);
    }
    std::string line;
    for (int c = std::fgetc(stdin); c != EOF && c != '\n'; c = std::fgetc(stdin)) {
      line.push_back(static_cast<char>(c));
    }
    if (restore) {
      ::tcsetattr(STDIN_FILENO, TCSAFLUSH, &old);
    }
    std::fprintf(stderr, "\n");
    return line;
  }
  absl::StatusOr<std::string> all = base::ReadAllFd(STDIN_FILENO, api::kMaxSecretValueBytes + 2);
  if (all.ok()) {
    StripOneNewline(*all);
  }
  return all;
}

}  // namespace

absl::StatusOr<std::optional<std::string>> ReadSecretValue(const std::string& name,
                                                           const std::string& from_env,
                                                           const std::string& from_file,
                                                           bool from_stdin) {
  if (!from_env.empty()) {
    const char* v = std::getenv(from_env.c_str());  // NOLINT(concurrency-mt-unsafe)
    if (v == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("$", from_env, " is not set in this shell: export it first"));
    }
    return std::string(v);
  }
  if (!from_file.empty()) {
    absl::StatusOr<std::string> v = base::ReadFile(from_file, api::kMaxSecretValueBytes + 2);
    if (!v.ok()) {
      return absl::Status(v.status().code(),
                          absl::StrCat("reading ", from_file, ": ", v.status().message()));
    }
    StripOneNewline(*v);
    return *v;
  }
  if (from_stdin) {
    return ReadStdin(name);
  }
  return std::nullopt;
}

void WipeString(std::string& s) { Wipe(s); }

namespace {

// The value of a stored secret from the one source given; nullopt for a command or Vault one.
absl::StatusOr<std::optional<std::string>> ReadValue(const SetOptions& o) {
  return ReadSecretValue(o.name, o.from_env, o.from_file, o.from_stdin);
}

absl::StatusOr<nlohmann::json> SourceJson(const SetOptions& o) {
  int given = (o.from_env.empty() ? 0 : 1) + (o.from_file.empty() ? 0 : 1) +
              (o.from_stdin ? 1 : 0) + (o.from_command ? 1 : 0) + (o.vault.empty() ? 0 : 1);
  if (given != 1) {
    return absl::InvalidArgumentError(
        "give the value's source, exactly one of --from-env VAR, --from-file F, --stdin, "
        "--from-command -- CMD ARGS..., --vault PATH#KEY");
  }
  if (o.from_command) {
    if (o.command.empty()) {
      return absl::InvalidArgumentError(
          "--from-command needs the command after --, e.g. --from-command -- op read "
          "op://Private/github/token");
    }
    return nlohmann::json{{"kind", "command"}, {"argv", o.command}};
  }
  if (!o.command.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("unexpected arguments after the name: ", absl::StrJoin(o.command, " "),
                     " (a command source needs --from-command)"));
  }
  if (!o.vault.empty()) {
    size_t hash = o.vault.rfind('#');
    if (hash == std::string::npos || hash == 0 || hash + 1 == o.vault.size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--vault takes PATH#KEY (the KV v2 secret and its field), e.g. ci/github#token; got ",
          o.vault));
    }
    return nlohmann::json{{"kind", "vault"},
                          {"addr", o.vault_addr},
                          {"mount", o.vault_mount},
                          {"path", o.vault.substr(0, hash)},
                          {"key", o.vault.substr(hash + 1)}};
  }
  return nlohmann::json{{"kind", "stored"}};
}

std::string HostsText(const nlohmann::json& spec) {
  std::vector<std::string> hosts;
  if (spec.contains("hosts") && spec["hosts"].is_array()) {
    for (const auto& h : spec["hosts"]) {
      hosts.push_back(h.is_string() ? h.get<std::string>() : "?");
    }
  }
  return absl::StrJoin(hosts, ",");
}

std::string WhereText(const api::Secret& s) {
  if (s.source == "stored") {
    return s.stored_in;
  }
  if (s.source == "command" && s.spec["source"].contains("argv") &&
      s.spec["source"]["argv"].is_array() && !s.spec["source"]["argv"].empty()) {
    return absl::StrCat("command ", s.spec["source"]["argv"][0].get<std::string>());
  }
  if (s.source == "vault") {
    return absl::StrCat("vault ", s.spec["source"].value("mount", ""), "/",
                        s.spec["source"].value("path", ""), "#", s.spec["source"].value("key", ""));
  }
  return s.source;
}

std::string HeaderText(const nlohmann::json& spec) {
  return absl::StrCat(spec.value("header", ""), ": ", spec.value("format", ""),
                      spec.value("allow_query", false) ? " (and the query)" : "");
}

int Set(SetOptions o) {
  absl::StatusOr<nlohmann::json> source = SourceJson(o);
  if (!source.ok()) {
    return Fail(source.status(), 2);
  }
  nlohmann::json spec = {{"name", o.name}, {"source", *source}};
  std::vector<std::string> hosts;
  for (const std::string& h : o.hosts) {
    for (absl::string_view part : absl::StrSplit(h, ',', absl::SkipEmpty())) {
      hosts.emplace_back(part);
    }
  }
  spec["hosts"] = hosts;
  if (!o.header.empty()) {
    spec["header"] = o.header;
  }
  if (!o.format.empty()) {
    spec["format"] = o.format;
  }
  spec["allow_query"] = o.allow_query;
  absl::StatusOr<std::optional<std::string>> value = ReadValue(o);
  if (!value.ok()) {
    return Fail(value.status(), 2);
  }
  api::SecretSet set{.spec = spec};
  if (*value) {
    set.value = std::move(**value);
    Wipe(**value);
  }
  nlohmann::json body = api::ToJson(set);
  if (set.value) {
    Wipe(*set.value);
  }
  return WithApi([&](client::ApiClient& api) {
    absl::StatusOr<client::ApiResponse> r = api.Post("/v1/secrets", body);
    if (body.contains("value")) {
      Wipe(body["value"].get_ref<std::string&>());
    }
    if (!r.ok()) {
      return Fail(r.status());
    }
    if (o.json) {
      PrintVerbatim(r->body);
      return 0;
    }
    absl::StatusOr<api::Secret> s = client::DecodeAnswer(*r, "POST /v1/secrets", api::DecodeSecret);
    if (!s.ok()) {
      return Fail(s.status());
    }
    std::printf("%s\n",
                ForTerminal(stdout, absl::StrCat("secret ", s->name, " set: for ",
                                                 HostsText(s->spec), ", as ", HeaderText(s->spec),
                                                 "; value from ", WhereText(*s)))
                    .c_str());
    return 0;
  });
}

int List(bool json) {
  return WithApi([&](client::ApiClient& api) {
    absl::StatusOr<client::ApiResponse> r = api.Get("/v1/secrets");
    if (!r.ok()) {
      return Fail(r.status());
    }
    if (json) {
      PrintVerbatim(r->body);
      return 0;
    }
    absl::StatusOr<std::vector<api::Secret>> all =
        client::DecodeAnswer(*r, "GET /v1/secrets", api::DecodeSecretList);
    if (!all.ok()) {
      return Fail(all.status());
    }
    if (all->empty()) {
      std::printf("no secrets (add one with `abox secret set NAME --host HOST --stdin`)\n");
      return 0;
    }
    std::vector<std::vector<std::string>> rows;
    absl::Time now = absl::Now();
    for (const api::Secret& s : *all) {
      rows.push_back({s.name, HostsText(s.spec), HeaderText(s.spec), WhereText(s),
                      s.used_by.empty() ? "-" : absl::StrJoin(s.used_by, ","),
                      s.updated_at ? FormatAge(now - *s.updated_at) + " ago" : "-"});
    }
    std::printf("%s", ForTerminal(stdout, FormatTable({"NAME", "HOSTS", "SENT AS", "VALUE FROM",
                                                       "USED BY", "UPDATED"},
                                                      rows))
                          .c_str());
    return 0;
  });
}

int Remove(const std::vector<std::string>& names) {
  return WithApi([&](client::ApiClient& api) {
    int code = 0;
    for (const std::string& n : names) {
      absl::Status s = api.Delete(absl::StrCat("/v1/secrets/", client::UrlEscape(n))).status();
      if (!s.ok()) {
        code = Fail(s);
        continue;
      }
      std::printf("%s\n", ForTerminal(stdout, n).c_str());
    }
    return code;
  });
}

}  // namespace

void AddSecretCommands(CLI::App& app, Action* action) {
  auto* secret = app.add_subcommand(
      "secret",
      "Secrets that never enter a VM: the guest sees a placeholder, swapped for the value only "
      "on the way to the hosts it is bound to");
  secret->require_subcommand(1);

  auto o = std::make_shared<SetOptions>();
  auto* set = secret->add_subcommand(
      "set",
      "Add or replace a secret (its value from the environment, a file, stdin, a "
      "command or Vault: never from argv)");
  set->add_option("name", o->name, "Secret name, like an environment variable: GH_TOKEN")
      ->required();
  set->add_option("command", o->command, "With --from-command: the command and its arguments");
  set->add_option("--host", o->hosts,
                  "Hosts the value may go to (comma-separated or repeated): api.github.com, "
                  "*.example.com (subdomains), host:8443")
      ->required()
      ->allow_extra_args(false);
  set->add_option("--header", o->header,
                  "The request header that carries it (default "
                  "Authorization)");
  set->add_option("--format", o->format,
                  "How that header is written, {} for the secret (default 'Bearer {}'): shown by "
                  "abox secret ls as what to send; the proxy swaps the placeholder wherever it "
                  "is in the header");
  set->add_flag("--allow-query", o->allow_query,
                "Also swap it in URL queries (off: queries "
                "end up in logs)");
  set->add_option("--from-env", o->from_env, "Read the value from this environment variable");
  set->add_option("--from-file", o->from_file,
                  "Read the value from this file (one trailing newline is dropped)");
  set->add_flag("--stdin", o->from_stdin,
                "Read the value from stdin (asked for, not shown, on a terminal)");
  set->add_flag("--from-command", o->from_command,
                "Run a command for the value on each use (e.g. a password manager's CLI): "
                "give it after --, e.g. --from-command -- op read op://Private/gh/token");
  set->add_option("--vault", o->vault,
                  "Read the value from HashiCorp Vault KV v2 on each use: PATH#KEY (aboxd's "
                  "VAULT_ADDR and VAULT_TOKEN)");
  set->add_option("--vault-mount", o->vault_mount, "The KV v2 mount")->capture_default_str();
  set->add_option("--vault-addr", o->vault_addr, "Vault's address (default: aboxd's $VAULT_ADDR)");
  set->add_flag("--json", o->json, "Print the API's JSON");
  set->footer(
      "Example: printf %s \"$GITHUB_TOKEN\" | abox secret set GH_TOKEN --host api.github.com "
      "--stdin");
  set->callback([=] { *action = [=] { return Set(*o); }; });

  auto json = std::make_shared<bool>(false);
  auto* ls = secret->add_subcommand("ls",
                                    "List secrets: names, hosts, how they are sent and "
                                    "where values come from (never values)");
  ls->add_flag("--json", *json, "Print the API's JSON");
  ls->callback([=] { *action = [=] { return List(*json); }; });

  auto names = std::make_shared<std::vector<std::string>>();
  auto* rm = secret->add_subcommand("rm", "Remove secrets and their stored values");
  rm->add_option("name", *names, "Secret names")->required();
  rm->callback([=] { *action = [=] { return Remove(*names); }; });
}

}  // namespace abox::cli
