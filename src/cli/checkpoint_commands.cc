#include "src/cli/checkpoint_commands.h"

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "src/api/checkpoint.h"
#include "src/api/sandbox.h"
#include "src/cli/flags.h"
#include "src/cli/output.h"
#include "src/cli/sandbox_format.h"
#include "src/cli/terminal_text.h"
#include "src/client/answers.h"
#include "src/client/api_paths.h"

namespace abox::cli {
namespace {

std::string CheckpointsTable(const std::vector<api::Checkpoint>& all, absl::Time now) {
  std::vector<std::vector<std::string>> rows;
  for (const api::Checkpoint& c : all) {
    rows.push_back({c.id, c.name == c.id ? "-" : c.name,
                    c.created_at ? FormatAge(now - *c.created_at) + " ago" : "-",
                    HumanBytes(static_cast<uint64_t>(c.bytes)), absl::StrCat(c.save_ms, " ms"),
                    c.workspace ? "yes" : "no"});
  }
  return FormatTable({"ID", "NAME", "CREATED", "SIZE", "PAUSED FOR", "WORKSPACE"}, rows);
}

int Create(const std::string& sandbox, const std::string& name, bool json) {
  return WithApi([&](client::ApiClient& api) {
    absl::StatusOr<client::ApiResponse> r = api.Post(client::SandboxPath(sandbox, "/checkpoints"),
                                                     api::ToJson(api::CheckpointCreate{name}));
    if (!r.ok()) {
      return Fail(r.status());
    }
    if (json) {
      PrintVerbatim(r->body);
      return 0;
    }
    absl::StatusOr<api::Checkpoint> c =
        client::DecodeAnswer(*r, "POST .../checkpoints", api::DecodeCheckpoint);
    if (!c.ok()) {
      return Fail(c.status());
    }
    std::printf(
        "%s\n",
        ForTerminal(stdout,
                    absl::StrCat(c->id, c->name == c->id ? "" : absl::StrCat(" (", c->name, ")"),
                                 ": ", HumanBytes(static_cast<uint64_t>(c->bytes)),
                                 ", sandbox paused for ", c->save_ms, " ms"))
            .c_str());
    return 0;
  });
}

int List(const std::string& sandbox, bool json) {
  return WithApi([&](client::ApiClient& api) {
    absl::StatusOr<client::ApiResponse> r = api.Get(client::SandboxPath(sandbox, "/checkpoints"));
    if (!r.ok()) {
      return Fail(r.status());
    }
    if (json) {
      PrintVerbatim(r->body);
      return 0;
    }
    absl::StatusOr<std::vector<api::Checkpoint>> all =
        client::DecodeAnswer(*r, "GET .../checkpoints", api::DecodeCheckpointList);
    if (!all.ok()) {
      return Fail(all.status());
    }
    if (all->empty()) {
      std::printf("no checkpoints (make one with `abox checkpoint %s`)\n", sandbox.c_str());
      return 0;
    }
    std::printf("%s", ForTerminal(stdout, CheckpointsTable(*all, absl::Now())).c_str());
    return 0;
  });
}

int Remove(const std::string& sandbox, const std::vector<std::string>& checkpoints) {
  return WithApi([&](client::ApiClient& api) {
    int code = 0;
    for (const std::string& c : checkpoints) {
      absl::Status s = api.Delete(client::SandboxPath(
                                      sandbox, absl::StrCat("/checkpoints/", client::UrlEscape(c))))
                           .status();
      if (!s.ok()) {
        code = Fail(s);
        continue;
      }
      std::printf("%s\n", ForTerminal(stdout, c).c_str());
    }
    return code;
  });
}

// Prints sandboxes as `abox ls` does, or the API's JSON.
int PrintSandboxes(const client::ApiResponse& r, bool json, bool list) {
  if (json) {
    PrintVerbatim(r.body);
    return 0;
  }
  absl::StatusOr<std::vector<api::Sandbox>> sandboxes =
      list ? client::DecodeAnswer(r, "POST .../fork", api::DecodeSandboxList)
           : client::DecodeAnswer(
                 r, "POST .../restore",
                 [](const nlohmann::json& v) -> absl::StatusOr<std::vector<api::Sandbox>> {
                   absl::StatusOr<api::Sandbox> one = api::DecodeSandbox(v);
                   if (!one.ok()) {
                     return one.status();
                   }
                   return std::vector<api::Sandbox>{*std::move(one)};
                 });
  if (!sandboxes.ok()) {
    return Fail(sandboxes.status());
  }
  std::printf("%s", ForTerminal(stdout, SandboxTable(*sandboxes, absl::Now())).c_str());
  return 0;
}

}  // namespace

void AddCheckpointCommands(CLI::App& app, Action* action) {
  struct Options {
    std::string sandbox;
    std::string name;
    std::string checkpoint;
    std::vector<std::string> checkpoints;
    int count = 1;
    bool json = false;
  };
  auto o = std::make_shared<Options>();

  auto* ck = app.add_subcommand(
      "checkpoint",
      "Save a running sandbox (processes, memory, files, workspace state) while it keeps running; "
      "`abox restore` goes back to it, `abox fork` branches from it");
  ck->add_option("id", o->sandbox, "Sandbox id, name or unique id prefix");
  ck->add_option("--name", o->name, "A name for the checkpoint (else its id names it)");
  ck->add_flag("--json", o->json, "Print the API's JSON");
  ck->require_subcommand(0, 1);
  ck->callback([=] {
    if (ck->get_subcommands().empty()) {
      *action = [=] {
        if (o->sandbox.empty()) {
          return Fail(absl::InvalidArgumentError(
              "name the sandbox: abox checkpoint ID [--name N] (or abox checkpoint ls|rm ID ...)"));
        }
        return Create(o->sandbox, o->name, o->json);
      };
    }
  });
  auto* ls = ck->add_subcommand("ls", "List a sandbox's checkpoints with their size");
  ls->add_option("id", o->sandbox, "Sandbox id, name or unique id prefix")->required();
  ls->add_flag("--json", o->json, "Print the API's JSON");
  ls->callback([=] { *action = [=] { return List(o->sandbox, o->json); }; });
  auto* rm = ck->add_subcommand(
      "rm", "Remove checkpoints (refused while a fork's or restored sandbox's disk stands on one)");
  rm->add_option("id", o->sandbox, "Sandbox id, name or unique id prefix")->required();
  rm->add_option("checkpoint", o->checkpoints, "Checkpoint ids, names or unique id prefixes")
      ->required();
  rm->callback([=] { *action = [=] { return Remove(o->sandbox, o->checkpoints); }; });

  auto* restore = app.add_subcommand(
      "restore",
      "Put a sandbox back as it was at a checkpoint: processes, files and the workspace base "
      "(running commands end as interrupted); a stopped or failed sandbox runs again");
  restore->add_option("id", o->sandbox, "Sandbox id, name or unique id prefix")->required();
  restore->add_option("checkpoint", o->checkpoint, "Checkpoint id, name or unique id prefix")
      ->required();
  restore->add_flag("--json", o->json, "Print the API's JSON");
  restore->callback([=] {
    *action = [=] {
      return WithApi([&](client::ApiClient& api) {
        absl::StatusOr<client::ApiResponse> r =
            api.Post(client::SandboxPath(o->sandbox, "/restore"),
                     api::ToJson(api::RestoreRequest{o->checkpoint}));
        return r.ok() ? PrintSandboxes(*r, o->json, /*list=*/false) : Fail(r.status());
      });
    };
  });

  auto* fork = app.add_subcommand(
      "fork",
      "Make new sandboxes from a running one (through a checkpoint): each starts where it was, "
      "with its own disk, identity, egress policy copy and workspace state");
  fork->add_option("id", o->sandbox, "Sandbox id, name or unique id prefix")->required();
  fork->add_option("-n,--count", o->count, "How many (1-32)")
      ->check(CLI::Range(1, static_cast<int>(api::kMaxForkCount)));
  fork->add_option("--name", o->name, "Name them PREFIX-1, PREFIX-2, ...");
  fork->add_flag("--json", o->json, "Print the API's JSON");
  fork->callback([=] {
    *action = [=] {
      return WithApi([&](client::ApiClient& api) {
        absl::StatusOr<client::ApiResponse> r =
            api.Post(client::SandboxPath(o->sandbox, "/fork"),
                     api::ToJson(api::ForkRequest{.count = o->count, .name_prefix = o->name}));
        return r.ok() ? PrintSandboxes(*r, o->json, /*list=*/true) : Fail(r.status());
      });
    };
  });
}

}  // namespace abox::cli
