// The exec resource (/v1/sandboxes/{id}/execs): the request bodies (ExecCreate, the PTY size of
// .../resize, the signal of .../signal), the Exec object, its output chunks and the lines of
// its output stream, each with its codec. The wire names of their fields are spelled here only.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "nlohmann/json.hpp"

namespace abox::api {

// POST /v1/sandboxes/{id}/execs.
struct ExecCreate {
  std::vector<std::string> argv;
  std::string shell;
  std::map<std::string, std::string> env;
  std::string cwd;
  std::string user = "agent";
  int64_t timeout_ms = 0;
  bool stdin_open = false;                         // "stdin"
  std::optional<std::pair<int64_t, int64_t>> pty;  // rows, cols
  bool kill_on_disconnect = false;
  bool sync = true;  // sync the bound workspace in first (no-op without one)
  // When the command ends, every process it left running is killed (proto::ExecRequest).
  bool kill_leftovers = false;

  friend bool operator==(const ExecCreate&, const ExecCreate&) = default;
};
// The request body: argv or shell, and the other fields where they differ from the defaults.
[[nodiscard]] nlohmann::json ToJson(const ExecCreate& create);
[[nodiscard]] absl::StatusOr<ExecCreate> DecodeExecCreate(absl::string_view body);

// {"rows": R, "cols": C} (POST .../resize).
[[nodiscard]] nlohmann::json PtySizeToJson(int64_t rows, int64_t cols);
[[nodiscard]] absl::StatusOr<std::pair<int64_t, int64_t>> DecodePtySize(absl::string_view body);
// {"signal": 15 | "TERM" | "SIGTERM"} (POST .../signal): the signal number.
[[nodiscard]] nlohmann::json SignalRequestToJson(absl::string_view signal_name);
[[nodiscard]] absl::StatusOr<int> DecodeSignalRequest(absl::string_view body);
// "TERM" / "SIGTERM" / "15" → 15; kInvalidArgument otherwise.
[[nodiscard]] absl::StatusOr<int> ParseSignal(absl::string_view text);

// One piece of an exec's output.
struct OutputChunk {
  int64_t seq = 0;
  std::string stream;  // stdout | stderr
  std::string data;    // bytes: on the wire "data" when valid UTF-8, else "data_b64"

  friend bool operator==(const OutputChunk&, const OutputChunk&) = default;
};
[[nodiscard]] nlohmann::json ToJson(const OutputChunk& chunk);
[[nodiscard]] absl::StatusOr<OutputChunk> DecodeOutputChunk(const nlohmann::json& value);

// An exec as the API shows it.
struct Exec {
  std::string id;
  std::string sandbox_id;
  std::vector<std::string> argv;  // either argv ...
  std::string shell;              // ... or a shell command line (sent when argv is empty)
  std::map<std::string, std::string> env;
  std::string cwd;
  std::string user;
  bool pty = false;
  int64_t timeout_ms = 0;
  std::string state;  // running | exited | failed | interrupted
  // How it ended: sent only when state is not "running".
  std::optional<int64_t> exit_code;
  std::optional<int64_t> signal;
  bool timed_out = false;
  std::string error;
  // Processes the guest's OOM killer ended while it ran (counted VM-wide, docs/protocol.md);
  // sent once it ended, 0 when none or unknown.
  int64_t oom_kills = 0;
  std::optional<absl::Time> started_at;
  std::optional<absl::Time> finished_at;
  int64_t output_bytes = 0;
  bool output_truncated = false;
  std::optional<std::vector<OutputChunk>> output;  // with ?output=true
  bool output_omitted = false;  // in lists with output=true: over the response's budget

  friend bool operator==(const Exec&, const Exec&) = default;
};
[[nodiscard]] nlohmann::json ToJson(const Exec& exec);
// Tolerant of unknown fields; a known field of the wrong type is an error naming it.
[[nodiscard]] absl::StatusOr<Exec> DecodeExec(const nlohmann::json& value);

// The memory to suggest to a sandbox whose command ran out of it: twice `memory_mib` (4096
// when it is not known, i.e. 0), at most the largest a sandbox may have (262144).
[[nodiscard]] int64_t SuggestedMemoryMib(int64_t memory_mib);
// What the guest's OOM killer did during an ended exec, as a sentence for a person or a model
// ("" when it did nothing): "the command was killed for lack of memory (...)" when the command
// itself died by SIGKILL (and not by its timeout), else "the OOM killer ended N processes during
// this command (...)". The parenthesis holds "the sandbox has M MiB; " when `memory_mib` is
// known (> 0), then `remedy`, e.g. "give it more with --memory MIB, e.g. abox create --memory
// 1024". Shared by the CLI and abox-mcp so both say the same.
[[nodiscard]] std::string OomSentence(const Exec& exec, int64_t memory_mib,
                                      absl::string_view remedy);

// GET .../execs: {"execs": [...]}.
[[nodiscard]] nlohmann::json ExecListToJson(const std::vector<Exec>& execs);
[[nodiscard]] absl::StatusOr<std::vector<Exec>> DecodeExecList(const nlohmann::json& value);

// A line of GET .../output (NDJSON, or the data of an SSE event named by `type`).
struct OutputLine {
  enum class Type { kOutput, kTruncated, kExit, kOther };
  Type type = Type::kOther;
  std::string type_name;  // as sent (kOther: a type this client does not know)
  OutputChunk chunk;      // kOutput: the chunk; kTruncated: seq, the first seq still kept
  Exec exec;              // kExit: the ended exec

  // {"type": "output", "seq", "stream", "data" | "data_b64"}.
  [[nodiscard]] static OutputLine Output(OutputChunk chunk);
  // {"type": "truncated", "seq": S}: output before S was dropped.
  [[nodiscard]] static OutputLine Truncated(int64_t first_kept_seq);
  // {"type": "exit", "exec": {...}}: the last line.
  [[nodiscard]] static OutputLine Exit(Exec exec);
};
[[nodiscard]] nlohmann::json ToJson(const OutputLine& line);
[[nodiscard]] absl::StatusOr<OutputLine> DecodeOutputLine(const nlohmann::json& value);

}  // namespace abox::api
