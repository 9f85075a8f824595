#include "src/cli/egress_commands.h"

#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "src/cli/flags.h"
#include "src/cli/output.h"
#include "src/cli/terminal_text.h"
#include "src/client/answers.h"
#include "src/client/api_paths.h"

namespace abox::cli {
namespace {

struct Options {
  std::vector<std::string> args;  // [ID] RULE... / ID NAME / NAME
  bool global = false;
  bool json = false;
  bool all = false;
  bool once = false;
  bool always = false;
  bool allow_loopback = false;
  int limit = 50;
  std::string mode;
};

int Usage(const std::string& message) { return Fail(absl::InvalidArgumentError(message), 2); }

std::string TimeText(const std::optional<absl::Time>& t) {
  return t ? absl::FormatTime("%Y-%m-%d %H:%M:%S", *t, absl::LocalTimeZone()) : "";
}

std::string Clip(std::string text, size_t max) {
  if (text.size() > max) {
    text.resize(max - 3);
    text += "...";
  }
  return text;
}

// The daemon's warnings (a loopback rule added) go to stderr, JSON output or not.
void PrintWarnings(const api::EgressPolicy& p) {
  for (const std::string& warning : p.warnings) {
    std::fprintf(stderr, "warning: %s\n", warning.c_str());
  }
}

void PrintPolicy(const api::EgressPolicy& p, const std::string& scope) {
  std::string mode_text = p.rules.mode.value_or("(global's)");
  const std::vector<std::string>& allow = p.rules.allow;
  std::printf("%s: mode %s, %zu rule(s)%s\n", scope.c_str(), mode_text.c_str(), allow.size(),
              allow.empty() ? "" : ":");
  for (const std::string& rule : allow) {
    std::printf("  %s\n", rule.c_str());
  }
  if (const std::optional<api::EgressRules>& effective = p.effective) {
    const std::vector<std::string>& rules = effective->allow;
    std::printf("effective (global + sandbox): mode %s, %zu rule(s): %s\n",
                effective->mode.value_or("").c_str(), rules.size(),
                rules.empty() ? "(none)" : absl::StrJoin(rules, " ").c_str());
  }
}

// A policy answer: warnings on stderr, then verbatim with --json, else as text.
int PrintPolicyAnswer(const client::ApiResponse& r, absl::string_view request, bool json,
                      const std::string& scope) {
  absl::StatusOr<api::EgressPolicy> policy =
      client::DecodeAnswer(r, request, api::DecodeEgressPolicy);
  if (!policy.ok()) {
    return Fail(policy.status());
  }
  PrintWarnings(*policy);
  if (json) {
    PrintVerbatim(r.body);
  } else {
    PrintPolicy(*policy, scope);
  }
  return 0;
}

// "[ID] RULE..." -> the policy's path prefix and the rules.
bool ScopeAndRest(const Options& o, size_t min_rest, std::string* prefix,
                  std::vector<std::string>* rest, std::string* scope) {
  if (o.global) {
    *prefix = "/v1/egress";
    *rest = o.args;
    *scope = "global";
  } else {
    if (o.args.empty()) {
      return false;
    }
    *prefix = client::SandboxPath(o.args[0], "/egress");
    rest->assign(o.args.begin() + 1, o.args.end());
    *scope = absl::StrCat("sandbox ", o.args[0]);
  }
  return rest->size() >= min_rest;
}

int ChangeRules(const Options& o, bool add) {
  std::string prefix;
  std::vector<std::string> rules;
  std::string scope;
  if (!ScopeAndRest(o, 1, &prefix, &rules, &scope)) {
    return Usage(absl::StrCat("usage: abox egress ", add ? "add" : "rm",
                              " [ID|--global] RULE... (e.g. abox egress add web preset:pypi "
                              "api.github.com)"));
  }
  return WithApi([&](client::ApiClient& api) {
    api::EgressRuleChange body{.allow_loopback = o.allow_loopback};
    (add ? body.add : body.remove) = rules;
    absl::StatusOr<client::ApiResponse> r =
        api.Post(absl::StrCat(prefix, "/rules"), api::ToJson(body));
    if (!r.ok()) {
      return Fail(r.status());
    }
    return PrintPolicyAnswer(*r, "POST .../egress/rules", o.json, scope);
  });
}

int Policy(const Options& o) {
  std::string prefix;
  std::vector<std::string> rest;
  std::string scope;
  if (!ScopeAndRest(o, 0, &prefix, &rest, &scope) || !rest.empty()) {
    return Usage("usage: abox egress policy [ID|--global] [--mode none|allowlist|open|inherit]");
  }
  if (o.mode == "inherit" && o.global) {
    return Usage("--mode inherit is for a sandbox (it takes the global mode)");
  }
  return WithApi([&](client::ApiClient& api) {
    std::string path = absl::StrCat(prefix, "/policy");
    absl::StatusOr<client::ApiResponse> r = api.Get(path);
    if (r.ok() && !o.mode.empty()) {
      absl::StatusOr<api::EgressPolicy> current =
          client::DecodeAnswer(*r, "GET .../egress/policy", api::DecodeEgressPolicy);
      if (!current.ok()) {
        return Fail(current.status());
      }
      api::EgressPolicyUpdate body{.rules = {.allow = current->rules.allow}};
      if (o.mode != "inherit") {
        body.rules.mode = o.mode;
      }
      r = api.Put(path, api::ToJson(body));
    }
    if (!r.ok()) {
      return Fail(r.status());
    }
    absl::StatusOr<api::EgressPolicy> policy =
        client::DecodeAnswer(*r, "GET .../egress/policy", api::DecodeEgressPolicy);
    if (!policy.ok()) {
      return Fail(policy.status());
    }
    if (o.json) {
      PrintVerbatim(r->body);
    } else {
      PrintPolicy(*policy, scope);
    }
    return 0;
  });
}

int Log(const Options& o) {
  if (o.args.size() != 1) {
    return Usage("usage: abox egress log ID [-n N] [--json]");
  }
  return WithApi([&](client::ApiClient& api) {
    absl::StatusOr<client::ApiResponse> r = api.Get(client::WithQuery(
        client::SandboxPath(o.args[0], "/egress/log"), {{"limit", std::to_string(o.limit)}}));
    if (!r.ok()) {
      return Fail(r.status());
    }
    if (o.json) {
      PrintVerbatim(r->body);
      return 0;
    }
    absl::StatusOr<api::EgressLog> log =
        client::DecodeAnswer(*r, "GET .../egress/log", api::DecodeEgressLog);
    if (!log.ok()) {
      return Fail(log.status());
    }
    std::vector<std::vector<std::string>> rows = EgressLogRows(*log, static_cast<size_t>(o.limit));
    std::string footer = EgressLogFooter(*log);
    if (rows.empty()) {
      std::printf("no connections or lookups yet\n%s", footer.c_str());
      return 0;
    }
    // Names come from the guest (TLS SNI, Host, DNS questions): shown, never acted on.
    std::fputs(ForTerminal(stdout, FormatTable({"TIME", "KIND", "NAME", "ADDRESS:PORT", "VERDICT",
                                                "UP", "DOWN", "DURATION", "RULE / REASON"},
                                               rows))
                   .c_str(),
               stdout);
    std::fputs(footer.c_str(), stdout);
    return 0;
  });
}

// The queue's REASON column: a refusal's reason, or an agent's ask with its words.
constexpr size_t kReasonColumn = 70;

// `text` cut to `max` bytes on a UTF-8 character boundary, "..." marking a cut.
std::string Cut(const std::string& text, size_t max) {
  if (text.size() <= max) {
    return text;
  }
  size_t end = max - 3;
  while (end > 0 && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) {
    --end;
  }
  return text.substr(0, end) + "...";
}

int Queue(const Options& o) {
  if (!o.args.empty()) {
    return Usage("usage: abox egress queue [--all] [--json]");
  }
  return WithApi([&](client::ApiClient& api) {
    client::QueryParams query;
    if (o.all) {
      query.emplace_back("all", "true");
    }
    absl::StatusOr<client::ApiResponse> r = api.Get(client::WithQuery("/v1/egress/queue", query));
    if (!r.ok()) {
      return Fail(r.status());
    }
    if (o.json) {
      PrintVerbatim(r->body);
      return 0;
    }
    absl::StatusOr<api::EgressQueue> queue =
        client::DecodeAnswer(*r, "GET /v1/egress/queue", api::DecodeEgressQueue);
    if (!queue.ok()) {
      return Fail(queue.status());
    }
    std::vector<std::vector<std::string>> rows;
    absl::Time now = absl::Now();
    for (const api::EgressRequest& q : queue->requests) {
      rows.push_back({q.sandbox, q.name, q.port == 0 ? "(dns)" : std::to_string(q.port),
                      std::to_string(q.count),
                      q.last_seen ? FormatAge(now - *q.last_seen) + " ago" : "", q.state,
                      Cut(q.reason, kReasonColumn)});
    }
    // Sandbox ids are the daemon's own (hex), never the guest's text.
    std::string footer = EgressQueueFooter(*queue);
    if (rows.empty()) {
      std::printf("no names waiting for review\n%s", footer.c_str());
      return 0;
    }
    std::fputs(
        ForTerminal(
            stdout,
            FormatTable({"SANDBOX", "NAME", "PORT", "COUNT", "LAST SEEN", "STATE", "REASON"}, rows))
            .c_str(),
        stdout);
    if (!o.all) {
      std::printf(
          "\nallow: abox egress approve SANDBOX NAME [--once|--always]; "
          "keep out: abox egress deny SANDBOX NAME, abox egress ignore NAME\n");
    }
    std::fputs(footer.c_str(), stdout);
    return 0;
  });
}

int Approve(const Options& o) {
  if (o.args.size() != 2) {
    return Usage("usage: abox egress approve ID NAME[:PORT] [--once|--always]");
  }
  if (o.once && o.always) {
    return Usage("give --once or --always, not both");
  }
  return WithApi([&](client::ApiClient& api) {
    absl::StatusOr<client::ApiResponse> r =
        api.Post(client::SandboxPath(o.args[0], "/egress/approve"),
                 api::ToJson(api::EgressName{.name = o.args[1], .once = !o.always}));
    if (!r.ok()) {
      return Fail(r.status());
    }
    absl::StatusOr<api::EgressDecision> decision =
        client::DecodeAnswer(*r, "POST .../egress/approve", api::DecodeEgressDecision);
    if (!decision.ok()) {
      return Fail(decision.status());
    }
    if (!decision->note.empty()) {
      std::fprintf(stderr, "note: %s\n", decision->note.c_str());
    }
    if (o.json) {
      PrintVerbatim(r->body);
    } else if (!decision->rule.empty()) {
      std::printf("allowed: rule %s added to sandbox %s\n", decision->rule.c_str(),
                  o.args[0].c_str());
    } else {
      const api::EgressRequest& request = decision->request;
      std::printf("approved once: the next connection to %s:%lld (use --always for a rule)\n",
                  request.name.empty() ? o.args[1].c_str() : request.name.c_str(),
                  static_cast<long long>(request.once_port.value_or(0)));
    }
    return 0;
  });
}

int Deny(const Options& o) {
  if (o.args.size() != 2) {
    return Usage("usage: abox egress deny ID NAME");
  }
  return WithApi([&](client::ApiClient& api) {
    absl::StatusOr<client::ApiResponse> r =
        api.Post(client::SandboxPath(o.args[0], "/egress/deny"),
                 api::ToJson(api::EgressName{.name = o.args[1]}));
    if (!r.ok()) {
      return Fail(r.status());
    }
    if (o.json) {
      PrintVerbatim(r->body);
    } else {
      std::printf("denied: %s stays blocked for sandbox %s\n", o.args[1].c_str(),
                  o.args[0].c_str());
    }
    return 0;
  });
}

int Ignore(const Options& o) {
  if (o.args.size() != 1) {
    return Usage("usage: abox egress ignore NAME");
  }
  return WithApi([&](client::ApiClient& api) {
    absl::StatusOr<client::ApiResponse> r =
        api.Post("/v1/egress/ignore", api::ToJson(api::EgressName{.name = o.args[0]}));
    if (!r.ok()) {
      return Fail(r.status());
    }
    if (o.json) {
      PrintVerbatim(r->body);
      return 0;
    }
    absl::StatusOr<api::EgressIgnored> ignored =
        client::DecodeAnswer(*r, "POST /v1/egress/ignore", api::DecodeEgressIgnored);
    if (!ignored.ok()) {
      return Fail(ignored.status());
    }
    std::printf(
        "ignored: %s stays denied everywhere and is not asked about again "
        "(%lld request(s) left the queue)\n",
        o.args[0].c_str(), static_cast<long long>(ignored->requests_changed));
    return 0;
  });
}

}  // namespace

std::string EgressLogFooter(const api::EgressLog& log) {
  std::vector<std::string> parts;
  auto add = [&](int64_t n, const char* what) {
    if (n > 0) {
      parts.push_back(absl::StrCat(n, " ", what));
    }
  };
  add(log.dropped.queue, "refused names not queued (the review queue was full)");
  add(log.dropped.connections, "older connection rows");
  add(log.dropped.dns, "older lookup rows");
  add(log.dropped.events, "older events");
  if (parts.empty()) {
    return "";
  }
  return absl::StrCat("(this sandbox's limits dropped ", absl::StrJoin(parts, ", "),
                      "; every refusal is still denied)\n");
}

std::string EgressQueueFooter(const api::EgressQueue& queue) {
  int64_t cap = queue.queue_cap;
  std::string out;
  for (const api::EgressQueue::Full& f : queue.queue_full) {
    int64_t n = f.dropped;
    if (n <= 0) {
      continue;
    }
    absl::StrAppend(&out, "sandbox ", f.sandbox, ": ", n,
                    " refused name(s) were not queued: its queue was full (", cap,
                    " pending); they stay denied. Deny or ignore pending names to make room, "
                    "or see them in abox egress log\n");
  }
  return out;
}

std::vector<std::vector<std::string>> EgressLogRows(const api::EgressLog& log, size_t limit) {
  struct Row {
    absl::Time sort_key;  // rows without a time last
    std::vector<std::string> cells;
  };
  auto key = [](const std::optional<absl::Time>& t) { return t.value_or(absl::InfinitePast()); };
  std::vector<Row> rows;
  for (const api::EgressConnection& c : log.connections) {
    std::string where = absl::StrCat(c.address.empty() ? "-" : c.address, ":", c.port);
    std::string why = c.verdict == "allowed" ? c.matched_rule : c.reason;
    if (c.via_override) {
      why += " [test override]";
    }
    rows.push_back({key(c.time),
                    {TimeText(c.time), c.kind, c.name.value_or("-"), where, c.verdict,
                     HumanBytes(static_cast<uint64_t>(c.bytes_up)),
                     HumanBytes(static_cast<uint64_t>(c.bytes_down)),
                     absl::StrCat(c.duration_ms, "ms"), Clip(why, 60)}});
  }
  for (const api::EgressLookup& d : log.dns) {
    std::string why = d.verdict == "allowed" ? d.matched_rule : d.reason;
    rows.push_back({key(d.time),
                    {TimeText(d.time), "dns", d.name.value_or("-"),
                     d.answers.empty() ? "-" : Clip(absl::StrJoin(d.answers, ","), 40), d.verdict,
                     "", "", "", Clip(why, 60)}});
  }
  std::stable_sort(rows.begin(), rows.end(),
                   [](const Row& a, const Row& b) { return a.sort_key > b.sort_key; });
  std::vector<std::vector<std::string>> out;
  for (size_t i = 0; i < rows.size() && i < limit; ++i) {
    out.push_back(std::move(rows[i].cells));
  }
  return out;
}

void AddEgressCommands(CLI::App& app, Action* action) {
  CLI::App* egress = app.add_subcommand(
      "egress", "Outbound network of sandboxes: policies, the connection log, the review queue");
  egress->require_subcommand(1);
  auto add = [&](const char* name, const char* help, int (*run)(const Options&),
                 const std::function<void(CLI::App*, Options*)>& flags) {
    auto o = std::make_shared<Options>();
    CLI::App* cmd = egress->add_subcommand(name, help);
    flags(cmd, o.get());
    cmd->add_flag("--json", o->json, "Print the API's JSON answer");
    cmd->callback([o, run, action] { *action = [o, run] { return run(*o); }; });
  };
  auto scoped = [](const char* what) {
    return [what](CLI::App* cmd, Options* o) {
      cmd->add_option("args", o->args, what);
      cmd->add_flag("--global", o->global,
                    "The global policy (every sandbox's rules start "
                    "with it) instead of a sandbox's");
    };
  };
  add("log", "A sandbox's connections and DNS lookups, newest first", Log,
      [](CLI::App* cmd, Options* o) {
        cmd->add_option("id", o->args, "Sandbox id, name or unique id prefix")->required();
        cmd->add_option("-n,--limit", o->limit, "Show at most N entries (default 50)")
            ->check(CLI::Range(1, 10000));
      });
  add("queue", "Names the policy refused, waiting for review (with counts)", Queue,
      [](CLI::App* cmd, Options* o) {
        cmd->add_option("extra", o->args)->group("");
        cmd->add_flag("-a,--all", o->all, "Also show approved, denied and ignored names");
      });
  add(
      "add",
      "Allow rules: NAME (port 443), *.SUFFIX, NAME:80,443, preset:NAME (pypi, npm, github, "
      "debian, ubuntu, crates, go), ADDRESS:PORT (raw TCP)",
      [](const Options& o) { return ChangeRules(o, true); },
      [&](CLI::App* cmd, Options* o) {
        scoped("[ID] RULE...")(cmd, o);
        cmd->add_flag("--allow-loopback", o->allow_loopback,
                      "Admit loopback address rules (127.0.0.1:PORT, [::1]:PORT): the HOST's "
                      "own services, reachable from the sandbox (warns)");
      });
  add(
      "rm", "Remove rules", [](const Options& o) { return ChangeRules(o, false); },
      scoped("[ID] RULE..."));
  add("policy", "Show a policy, or set its mode (none, allowlist, open; inherit for a sandbox)",
      Policy, [&](CLI::App* cmd, Options* o) {
        scoped("[ID]")(cmd, o);
        cmd->add_option("--mode", o->mode,
                        "none: no network; allowlist: only the rules; open: any public "
                        "address (logged, private ranges refused); inherit: the global mode")
            ->check(CLI::IsMember({"none", "allowlist", "open", "inherit"}));
      });
  add("approve", "Allow a refused name: once (one connection, the default) or always (a rule)",
      Approve, [](CLI::App* cmd, Options* o) {
        cmd->add_option("args", o->args, "ID NAME[:PORT]")->expected(2)->required();
        cmd->add_flag("--once", o->once, "One connection (the default)");
        cmd->add_flag("--always", o->always,
                      "Add the rule NAME[:PORT] to the sandbox's policy (no port: 443; the port "
                      "the sandbox asked for is never filled in)");
      });
  add("deny", "Keep a refused name blocked for a sandbox and take it out of the queue", Deny,
      [](CLI::App* cmd, Options* o) {
        cmd->add_option("args", o->args, "ID NAME")->expected(2)->required();
      });
  add("ignore", "Keep a name blocked everywhere and never ask about it again", Ignore,
      [](CLI::App* cmd, Options* o) {
        cmd->add_option("name", o->args, "NAME")->expected(1)->required();
      });
}

}  // namespace abox::cli
