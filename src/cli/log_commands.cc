#include "src/cli/log_commands.h"

#include <unistd.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "src/api/event.h"
#include "src/api/exec.h"
#include "src/api/wire.h"
#include "src/base/io.h"
#include "src/cli/flags.h"
#include "src/cli/sandbox_format.h"
#include "src/cli/terminal_text.h"
#include "src/client/answers.h"
#include "src/client/api_paths.h"

namespace abox::cli {
namespace {

constexpr int kDefaultExecs = 20;
constexpr int kConsoleTailBytes = 64 << 10;

struct LogsOptions {
  std::string id;
  bool console = false;
  bool execs = false;
  int lines = 0;  // -n: 0 = the defaults
};

// Prints each exec of the history, oldest first: a header line, then its kept output (stdout to
// stdout, stderr to stderr, so that redirections separate them as they did when it ran).
int PrintExecs(client::ApiClient& api, const LogsOptions& o) {
  int limit = o.lines > 0 ? o.lines : kDefaultExecs;
  absl::StatusOr<client::ApiResponse> r = api.Get(client::WithQuery(
      client::SandboxPath(o.id, "/execs"), {{"output", "true"}, {"limit", std::to_string(limit)}}));
  if (!r.ok()) {
    return Fail(r.status());
  }
  absl::StatusOr<std::vector<api::Exec>> execs =
      client::DecodeAnswer(*r, "GET /v1/sandboxes/{id}/execs", api::DecodeExecList);
  if (!execs.ok()) {
    return Fail(execs.status());
  }
  if (execs->empty()) {
    std::printf("==> no execs in sandbox %s\n", o.id.c_str());
    return 0;
  }
  for (auto it = execs->rbegin(); it != execs->rend(); ++it) {  // the API lists newest first
    std::printf("%s\n", ForTerminal(stdout, ExecHeader(*it)).c_str());
    std::fflush(stdout);
    if (it->output_truncated) {
      std::printf("[older output of this exec was not kept]\n");
    }
    bool ends_with_newline = true;
    if (it->output) {
      for (const api::OutputChunk& chunk : *it->output) {
        const std::string& bytes = chunk.data;
        if (bytes.empty()) {
          continue;
        }
        bool to_stderr = chunk.stream == "stderr";
        // Kept output is for reading, not replaying: on a terminal its control characters are
        // shown, so that the history cannot hide lines from whoever reviews what ran.
        (void)base::WriteAll(to_stderr ? STDERR_FILENO : STDOUT_FILENO,
                             ForTerminal(to_stderr ? stderr : stdout, bytes));
        ends_with_newline = bytes.back() == '\n';
      }
    }
    if (!ends_with_newline) {
      std::printf("\n");
    }
  }
  return 0;
}

int PrintConsole(client::ApiClient& api, const LogsOptions& o, bool with_header) {
  absl::StatusOr<client::ApiResponse> r = api.Get(client::WithQuery(
      client::SandboxPath(o.id, "/console"), {{"tail", std::to_string(kConsoleTailBytes)}}));
  if (!r.ok()) {
    return Fail(r.status());
  }
  // The console is the guest's (kernel and agent messages, anything guest root writes there): on
  // a terminal its control characters are shown, not obeyed.
  std::string text =
      ForTerminal(stdout, o.lines > 0 ? LastLines(r->body, o.lines) : std::move(r->body));
  if (with_header) {
    std::printf("==> console log of sandbox %s (kernel and guest agent)\n", o.id.c_str());
  }
  std::fflush(stdout);
  (void)base::WriteAll(STDOUT_FILENO, text);
  if (!text.empty() && text.back() != '\n') {
    std::printf("\n");
  }
  return 0;
}

int Logs(const LogsOptions& o) {
  absl::StatusOr<std::unique_ptr<client::ApiClient>> api = ConnectToDaemon();
  if (!api.ok()) {
    return Fail(api.status());
  }
  bool both = o.console == o.execs;  // neither flag: both
  if (both || o.execs) {
    if (int code = PrintExecs(**api, o); code != 0) {
      return code;
    }
  }
  if (both || o.console) {
    return PrintConsole(**api, o, both);
  }
  return 0;
}

struct EventsOptions {
  int64_t since = -1;
  std::string sandbox;
  bool json = false;
};

int Events(const EventsOptions& o) {
  client::QueryParams query;
  if (o.since >= 0) {
    query.emplace_back("since", std::to_string(o.since));
  }
  if (!o.sandbox.empty()) {
    query.emplace_back("sandbox", o.sandbox);
  }
  absl::StatusOr<std::unique_ptr<client::ApiClient>> api = ConnectToDaemon();
  if (!api.ok()) {
    return Fail(api.status());
  }
  absl::Status decode_error;
  absl::Status streamed =
      (*api)->StreamSse(client::WithQuery("/v1/events", query), [&](const client::SseEvent& e) {
        std::string line;
        if (o.json) {
          line = JsonForTerminal(stdout, e.data);
        } else {
          absl::StatusOr<nlohmann::json> data = api::ParseAnswer(e.data);
          absl::StatusOr<api::Event> event =
              data.ok() && data->is_object() ? api::DecodeEvent(*data) : api::Event{};
          if (!event.ok()) {
            decode_error = client::AnswerError(event.status(), "GET /v1/events");
            return false;
          }
          if (!data.ok() || !data->is_object()) {
            event->payload = e.data;  // not an event object: shown as it came
          }
          if (event->type.empty()) {
            event->type = e.event;
          }
          line = ForTerminal(stdout, EventLine(*event));
        }
        line += '\n';
        // A reader that went away (`abox events | head`) ends the stream.
        return base::WriteAll(STDOUT_FILENO, line).ok();
      });
  if (!decode_error.ok()) {
    return Fail(decode_error);
  }
  if (!streamed.ok()) {
    return Fail(streamed);
  }
  return 0;
}

}  // namespace

void AddLogCommands(CLI::App& app, Action* action) {
  auto logs = std::make_shared<LogsOptions>();
  auto* logs_cmd = app.add_subcommand(
      "logs", "Show a sandbox's exec history with each exec's kept output, then its console log");
  logs_cmd->add_option("id", logs->id, "Sandbox id, name or unique id prefix")->required();
  logs_cmd->add_flag("--console", logs->console,
                     "Only the serial console log (kernel and guest agent messages; the last "
                     "64 KiB)");
  logs_cmd->add_flag("--execs", logs->execs,
                     "Only the exec history: a header per exec (id, start time, command, how it "
                     "ended) followed by its output");
  logs_cmd
      ->add_option("-n,--tail", logs->lines,
                   "Only the last N execs (default 20) and the last N console lines")
      ->check(CLI::Range(1, 1000));
  logs_cmd->callback([logs, action] { *action = [logs] { return Logs(*logs); }; });

  auto events = std::make_shared<EventsOptions>();
  auto* events_cmd = app.add_subcommand(
      "events",
      "Follow lifecycle events (created, ready, exec_started, exec_finished, failed, stopped, "
      "removed) until Ctrl-C");
  events_cmd
      ->add_option("--since", events->since,
                   "First replay the kept events after sequence number N (0 = all kept)")
      ->check(CLI::NonNegativeNumber);
  events_cmd->add_option("--sandbox", events->sandbox, "Only events of this sandbox");
  events_cmd->add_flag("--json", events->json, "Print each event as the API's JSON, one per line");
  events_cmd->footer(
      "Each line: time (UTC), type, sandbox id, and the event's details. A `missed` event says "
      "that older events were dropped before they could be replayed.");
  events_cmd->callback([events, action] { *action = [events] { return Events(*events); }; });
}

}  // namespace abox::cli
