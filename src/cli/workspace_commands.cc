#include "src/cli/workspace_commands.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "src/api/wire.h"
#include "src/api/workspace.h"
#include "src/cli/diff_format.h"
#include "src/cli/output.h"
#include "src/cli/terminal_text.h"
#include "src/client/answers.h"
#include "src/client/api_paths.h"

namespace abox::cli {
namespace {

struct Options {
  std::string id;
  std::vector<std::string> paths;
  bool json = false;
  bool stat = false;
  bool dry_run = false;
  bool markers = false;
  bool allow_exec_files = false;
  bool force = false;
  std::string to;
};

void PrintSyncReport(const api::SyncReport& r) {
  if (!r.changed) {
    std::printf("up to date (%lld files)\n", static_cast<long long>(r.total_files));
  } else {
    std::printf("synced %lld changed, %lld deleted of %lld files (%s, %s on the wire) in %lld ms\n",
                static_cast<long long>(r.files), static_cast<long long>(r.deleted),
                static_cast<long long>(r.total_files),
                HumanBytes(static_cast<uint64_t>(r.bytes)).c_str(),
                HumanBytes(static_cast<uint64_t>(r.archive_bytes)).c_str(),
                static_cast<long long>(r.duration_ms));
  }
  if (!r.excluded.empty()) {
    std::printf("left out (secret-looking): %s\n", absl::StrJoin(r.excluded, ", ").c_str());
  }
  for (const std::string& note : r.notes) {
    std::printf("note: %s\n", note.c_str());
  }
}

int Sync(const Options& o) {
  return WithApi([&](client::ApiClient& api) {
    absl::StatusOr<client::ApiResponse> r = api.Post(client::SandboxPath(o.id, "/sync"), nullptr);
    if (!r.ok()) {
      return Fail(r.status());
    }
    if (o.json) {
      PrintVerbatim(r->body);
      return 0;
    }
    absl::StatusOr<api::SyncReport> report =
        client::DecodeAnswer(*r, "POST /v1/sandboxes/{id}/sync", api::DecodeSyncReport);
    if (!report.ok()) {
      return Fail(report.status());
    }
    PrintSyncReport(*report);
    return 0;
  });
}

int Diff(const Options& o) {
  return WithApi([&](client::ApiClient& api) {
    client::QueryParams query;
    for (const std::string& p : o.paths) {
      query.emplace_back("path", p);
    }
    // Patches even for --stat: which files hold control characters is read from them.
    absl::StatusOr<client::ApiResponse> r =
        api.Get(client::WithQuery(client::SandboxPath(o.id, "/diff"), query));
    if (!r.ok()) {
      return Fail(r.status());
    }
    absl::StatusOr<api::Diff> diff =
        client::DecodeAnswer(*r, "GET /v1/sandboxes/{id}/diff", api::DecodeDiff);
    if (!diff.ok()) {
      return Fail(diff.status());
    }
    std::vector<std::string> control = MarkControlCharacters(*diff);
    if (o.json) {
      if (o.stat) {
        for (api::FileDiff& f : diff->files) {
          f.patch.clear();
        }
      }
      PrintVerbatim(api::Dump(api::ToJson(*diff)));
      return 0;
    }
    bool terminal = IsTerminal(stdout);
    std::string text = FormatDiff(*diff, o.stat, terminal);
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
    if (!control.empty() && !o.stat) {
      std::fprintf(stderr, "abox: %s hold%s control characters%s: %s\n",
                   control.size() == 1 ? "1 file" : absl::StrCat(control.size(), " files").c_str(),
                   control.size() == 1 ? "s" : "",
                   terminal ? " (shown as \\xHH or \\u00HH; the files hold the raw bytes)" : "",
                   ShowControlCharacters(absl::StrJoin(control, ", ")).c_str());
    }
    if (int64_t ignored = diff->ignored; ignored > 0 && !o.stat) {
      std::fprintf(stderr,
                   "abox: %lld new file(s) in the sandbox are ignored by .gitignore or "
                   "the secret excludes and are not shown\n",
                   static_cast<long long>(ignored));
    }
    return 0;
  });
}

void PrintPlan(const api::ApplyResult& r, bool dry_run) {
  std::vector<std::vector<std::string>> rows;
  for (const api::PlannedChange& c : r.changes) {
    rows.push_back({c.action, c.path, c.reason});
  }
  if (rows.empty()) {
    std::printf("nothing to apply\n");
    return;
  }
  std::fputs(ForTerminal(stdout, FormatTable({"ACTION", "PATH", "WHY"}, rows)).c_str(), stdout);
  const std::string& artifact = r.artifact;
  if (dry_run) {
    std::printf("dry run: nothing was written\n");
  } else if (!artifact.empty()) {
    std::printf("backup: %s (undo with: abox undo %s)\n", artifact.c_str(), artifact.c_str());
  }
}

// The answer of an apply or pull: verbatim with --json, else its plan.
int PrintApplyAnswer(const absl::StatusOr<client::ApiResponse>& r, bool json, bool dry_run,
                     absl::string_view request) {
  if (!r.ok()) {
    return Fail(r.status());
  }
  if (json) {
    PrintVerbatim(r->body);
    return 0;
  }
  absl::StatusOr<api::ApplyResult> result =
      client::DecodeAnswer(*r, request, api::DecodeApplyResult);
  if (!result.ok()) {
    return Fail(result.status());
  }
  PrintPlan(*result, dry_run);
  return 0;
}

int Apply(const Options& o) {
  return WithApi([&](client::ApiClient& api) {
    api::ApplyRequest body{.paths = o.paths,
                           .dry_run = o.dry_run,
                           .markers = o.markers,
                           .allow_exec_files = o.allow_exec_files};
    absl::StatusOr<client::ApiResponse> r =
        api.Post(client::SandboxPath(o.id, "/apply"), api::ToJson(body));
    return PrintApplyAnswer(r, o.json, o.dry_run, "POST /v1/sandboxes/{id}/apply");
  });
}

int Pull(const Options& o) {
  return WithApi([&](client::ApiClient& api) {
    api::PullRequest body{.paths = o.paths, .force = o.force};
    if (!o.to.empty()) {
      std::error_code ec;
      std::filesystem::path to = std::filesystem::absolute(o.to, ec);
      body.to = ec ? o.to : to.lexically_normal().string();
    }
    absl::StatusOr<client::ApiResponse> r =
        api.Post(client::SandboxPath(o.id, "/pull"), api::ToJson(body));
    return PrintApplyAnswer(r, o.json, false, "POST /v1/sandboxes/{id}/pull");
  });
}

int Undo(const Options& o) {
  return WithApi([&](client::ApiClient& api) {
    absl::StatusOr<client::ApiResponse> r =
        api.Post(absl::StrCat("/v1/artifacts/", client::UrlEscape(o.id), "/undo"),
                 api::UndoRequestToJson(o.force));
    if (!r.ok()) {
      return Fail(r.status());
    }
    if (o.json) {
      PrintVerbatim(r->body);
      return 0;
    }
    absl::StatusOr<api::UndoResult> undone =
        client::DecodeAnswer(*r, "POST /v1/artifacts/{id}/undo", api::DecodeUndoResult);
    if (!undone.ok()) {
      return Fail(undone.status());
    }
    std::printf("restored %lld file(s) as they were before %s\n",
                static_cast<long long>(undone->files), o.id.c_str());
    return 0;
  });
}

int Artifacts(const Options& o) {
  return WithApi([&](client::ApiClient& api) {
    absl::StatusOr<client::ApiResponse> r = api.Get("/v1/artifacts");
    if (!r.ok()) {
      return Fail(r.status());
    }
    if (o.json) {
      PrintVerbatim(r->body);
      return 0;
    }
    absl::StatusOr<std::vector<api::Artifact>> list =
        client::DecodeAnswer(*r, "GET /v1/artifacts", api::DecodeArtifactList);
    if (!list.ok()) {
      return Fail(list.status());
    }
    std::vector<std::vector<std::string>> rows;
    for (const api::Artifact& a : *list) {
      rows.push_back({a.id, a.kind, a.state, std::to_string(a.files), a.sandbox, a.host_root});
    }
    std::fputs(
        FormatTable({"ARTIFACT", "KIND", "STATE", "FILES", "SANDBOX", "HOST DIR"}, rows).c_str(),
        stdout);
    return 0;
  });
}

}  // namespace

void AddWorkspaceCommands(CLI::App& app, Action* action) {
  auto add = [&](const char* name, const char* help, int (*run)(const Options&),
                 const std::function<void(CLI::App*, Options*)>& flags) {
    auto o = std::make_shared<Options>();
    CLI::App* cmd = app.add_subcommand(name, help);
    flags(cmd, o.get());
    cmd->add_flag("--json", o->json, "Print the API's JSON answer");
    cmd->callback([o, run, action] { *action = [o, run] { return run(*o); }; });
  };
  auto id = [](CLI::App* cmd, Options* o) {
    cmd->add_option("id", o->id, "Sandbox id, name or unique id prefix")->required();
  };
  add("sync", "Send the bound host directory's changes into the sandbox now (exec does it too)",
      Sync, id);
  add("diff", "Show the agent's changes: the sandbox's workspace against what was last synced in",
      Diff, [&](CLI::App* cmd, Options* o) {
        id(cmd, o);
        cmd->add_option("paths", o->paths, "Only these files or directories");
        cmd->add_flag("--stat", o->stat,
                      "A summary: changed lines per file, flagging files that hold control "
                      "characters");
      });
  add("apply",
      "Write the agent's changes into the host directory (three-way merge per file, every "
      "touched file backed up; undo with abox undo)",
      Apply, [&](CLI::App* cmd, Options* o) {
        id(cmd, o);
        cmd->add_option("paths", o->paths, "Only these files or directories");
        cmd->add_flag("-n,--dry-run", o->dry_run, "Show what would be written; write nothing");
        cmd->add_flag("--markers", o->markers,
                      "Write conflicting files with conflict markers instead of refusing");
        cmd->add_flag("--allow-exec-files", o->allow_exec_files,
                      "Also apply files that make code run elsewhere (CI workflows, Makefile, "
                      "package.json, editor tasks, hooks)");
      });
  add("pull",
      "Copy chosen files out of the sandbox's workspace (refuses to overwrite host changes made "
      "since the last sync unless --force)",
      Pull, [&](CLI::App* cmd, Options* o) {
        id(cmd, o);
        cmd->add_option("paths", o->paths, "Files or directories to copy")->required();
        cmd->add_option("--to", o->to, "Copy into this directory instead of the bound one");
        cmd->add_flag("-f,--force", o->force,
                      "Overwrite host files changed since the last sync, and remove what the "
                      "host added in a directory the sandbox replaced with a file (backed up)");
      });
  add("undo", "Restore the host files an apply or pull changed, exactly as they were", Undo,
      [&](CLI::App* cmd, Options* o) {
        cmd->add_option("artifact", o->id, "Artifact id (abox artifacts lists them)")->required();
        cmd->add_flag("-f,--force", o->force,
                      "Restore even files changed on the host since the apply");
      });
  add("artifacts", "List the backups applies and pulls made (newest first)", Artifacts,
      [](CLI::App*, Options*) {});
}

}  // namespace abox::cli
