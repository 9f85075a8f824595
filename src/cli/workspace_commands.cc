#include "src/cli/workspace_commands.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "src/cli/diff_format.h"
#include "src/cli/output.h"
#include "src/cli/terminal_text.h"
#include "src/client/api_paths.h"
#include "src/client/json_fields.h"

namespace abox::cli {
namespace {

using client::JsonBool;
using client::JsonInt;
using client::JsonMember;
using client::JsonString;

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

void PrintSyncReport(const nlohmann::json& r) {
  if (!JsonBool(r, "changed")) {
    std::printf("up to date (%lld files)\n",
                static_cast<long long>(JsonInt(r, "total_files").value_or(0)));
  } else {
    std::printf("synced %lld changed, %lld deleted of %lld files (%s, %s on the wire) in %lld ms\n",
                static_cast<long long>(JsonInt(r, "files").value_or(0)),
                static_cast<long long>(JsonInt(r, "deleted").value_or(0)),
                static_cast<long long>(JsonInt(r, "total_files").value_or(0)),
                HumanBytes(static_cast<uint64_t>(JsonInt(r, "bytes").value_or(0))).c_str(),
                HumanBytes(static_cast<uint64_t>(JsonInt(r, "archive_bytes").value_or(0))).c_str(),
                static_cast<long long>(JsonInt(r, "duration_ms").value_or(0)));
  }
  std::vector<std::string> excluded = JsonStrings(r, "excluded");
  if (!excluded.empty()) {
    std::printf("left out (secret-looking): %s\n", absl::StrJoin(excluded, ", ").c_str());
  }
  for (const std::string& note : JsonStrings(r, "notes")) {
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
    } else {
      PrintSyncReport(r->json);
    }
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
    std::vector<std::string> control = MarkControlCharacters(r->json);
    if (o.json) {
      if (nlohmann::json* files =
              r->json.is_object() && r->json.contains("files") ? &r->json["files"] : nullptr;
          o.stat && files != nullptr && files->is_array()) {
        for (nlohmann::json& f : *files) {
          if (f.is_object()) {
            f.erase("patch");
          }
        }
      }
      PrintVerbatim(client::DumpJson(r->json));
      return 0;
    }
    bool terminal = IsTerminal(stdout);
    std::string text = FormatDiff(r->json, o.stat, terminal);
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
    if (!control.empty() && !o.stat) {
      std::fprintf(stderr, "abox: %s hold%s control characters%s: %s\n",
                   control.size() == 1 ? "1 file" : absl::StrCat(control.size(), " files").c_str(),
                   control.size() == 1 ? "s" : "",
                   terminal ? " (shown as \\xHH or \\u00HH; the files hold the raw bytes)" : "",
                   ShowControlCharacters(absl::StrJoin(control, ", ")).c_str());
    }
    if (int64_t ignored = JsonInt(r->json, "ignored").value_or(0); ignored > 0 && !o.stat) {
      std::fprintf(stderr,
                   "abox: %lld new file(s) in the sandbox are ignored by .gitignore or "
                   "the secret excludes and are not shown\n",
                   static_cast<long long>(ignored));
    }
    return 0;
  });
}

void PrintPlan(const nlohmann::json& r, bool dry_run) {
  const nlohmann::json* changes = JsonMember(r, "changes");
  std::vector<std::vector<std::string>> rows;
  if (changes != nullptr && changes->is_array()) {
    for (const nlohmann::json& c : *changes) {
      rows.push_back({JsonString(c, "action"), JsonString(c, "path"), JsonString(c, "reason")});
    }
  }
  if (rows.empty()) {
    std::printf("nothing to apply\n");
    return;
  }
  std::fputs(ForTerminal(stdout, FormatTable({"ACTION", "PATH", "WHY"}, rows)).c_str(), stdout);
  std::string artifact = JsonString(r, "artifact");
  if (dry_run) {
    std::printf("dry run: nothing was written\n");
  } else if (!artifact.empty()) {
    std::printf("backup: %s (undo with: abox undo %s)\n", artifact.c_str(), artifact.c_str());
  }
}

int Apply(const Options& o) {
  return WithApi([&](client::ApiClient& api) {
    nlohmann::json body = {{"dry_run", o.dry_run},
                           {"conflicts", o.markers ? "markers" : "refuse"},
                           {"allow_exec_files", o.allow_exec_files}};
    if (!o.paths.empty()) {
      body["paths"] = o.paths;
    }
    absl::StatusOr<client::ApiResponse> r = api.Post(client::SandboxPath(o.id, "/apply"), body);
    if (!r.ok()) {
      return Fail(r.status());
    }
    if (o.json) {
      PrintVerbatim(r->body);
    } else {
      PrintPlan(r->json, o.dry_run);
    }
    return 0;
  });
}

int Pull(const Options& o) {
  return WithApi([&](client::ApiClient& api) {
    nlohmann::json body = {{"paths", o.paths}, {"force", o.force}};
    if (!o.to.empty()) {
      std::error_code ec;
      std::filesystem::path to = std::filesystem::absolute(o.to, ec);
      body["to"] = ec ? o.to : to.lexically_normal().string();
    }
    absl::StatusOr<client::ApiResponse> r = api.Post(client::SandboxPath(o.id, "/pull"), body);
    if (!r.ok()) {
      return Fail(r.status());
    }
    if (o.json) {
      PrintVerbatim(r->body);
    } else {
      PrintPlan(r->json, false);
    }
    return 0;
  });
}

int Undo(const Options& o) {
  return WithApi([&](client::ApiClient& api) {
    absl::StatusOr<client::ApiResponse> r =
        api.Post(absl::StrCat("/v1/artifacts/", client::UrlEscape(o.id), "/undo"),
                 nlohmann::json{{"force", o.force}});
    if (!r.ok()) {
      return Fail(r.status());
    }
    if (o.json) {
      PrintVerbatim(r->body);
    } else {
      std::printf("restored %lld file(s) as they were before %s\n",
                  static_cast<long long>(JsonInt(r->json, "files").value_or(0)), o.id.c_str());
    }
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
    std::vector<std::vector<std::string>> rows;
    if (const nlohmann::json* list = JsonMember(r->json, "artifacts");
        list != nullptr && list->is_array()) {
      for (const nlohmann::json& a : *list) {
        rows.push_back({JsonString(a, "id"), JsonString(a, "kind"), JsonString(a, "state"),
                        std::to_string(JsonInt(a, "files").value_or(0)), JsonString(a, "sandbox"),
                        JsonString(a, "host_root")});
      }
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
        cmd->add_flag("-f,--force", o->force, "Overwrite host files changed since the last sync");
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
