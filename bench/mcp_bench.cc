#include "bench/mcp_bench.h"

#include <poll.h>
#include <unistd.h>

#include <chrono>
#include <optional>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "src/base/child_process.h"
#include "src/base/io.h"

namespace abox::bench {
namespace {

using Clock = std::chrono::steady_clock;

double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

// One abox-mcp process on pipes: JSON-RPC requests out, their answers back (notifications and
// other ids skipped).
class McpSession final {
 public:
  static absl::StatusOr<McpSession> Start(const std::string& bin) {
    McpSession s;
    absl::StatusOr<base::Pipe> in = base::MakePipe();
    absl::StatusOr<base::Pipe> out = base::MakePipe();
    if (!in.ok() || !out.ok()) {
      return absl::InternalError("pipe failed");
    }
    base::SpawnOptions options;
    options.argv = {bin};
    options.stdin_fd = in->read.get();
    options.stdout_fd = out->write.get();
    absl::StatusOr<base::ChildProcess> child = base::ChildProcess::Spawn(options);
    if (!child.ok()) {
      return child.status();
    }
    s.child_ = *std::move(child);
    s.to_ = std::move(in->write);
    s.from_ = std::move(out->read);
    return s;
  }

  // Sends `method` with `params` and returns the result (or the error as a status).
  absl::StatusOr<nlohmann::json> Call(const std::string& method, nlohmann::json params) {
    int64_t id = ++next_id_;
    std::string line =
        nlohmann::json{{"jsonrpc", "2.0"}, {"id", id}, {"method", method}, {"params", params}}
            .dump() +
        "\n";
    if (absl::Status s = base::WriteAll(to_.get(), line); !s.ok()) {
      return s;
    }
    for (;;) {
      absl::StatusOr<std::string> got = ReadLine();
      if (!got.ok()) {
        return got.status();
      }
      nlohmann::json message = nlohmann::json::parse(*got, nullptr, false);
      if (!message.is_object() || message.value("id", int64_t{-1}) != id) {
        continue;  // a notification (progress, log) or garbage
      }
      if (message.contains("error")) {
        return absl::InternalError(absl::StrCat(method, ": ", message["error"].dump()));
      }
      return message["result"];
    }
  }

  void Notify(const std::string& method) {
    (void)base::WriteAll(to_.get(),
                         nlohmann::json{{"jsonrpc", "2.0"}, {"method", method}}.dump() + "\n");
  }

  // Closes stdin (abox-mcp's end of session) and waits for it.
  void Stop() {
    to_.reset();
    if (child_.pid() > 0 && !child_.Wait(std::chrono::seconds(10)).ok()) {
      child_.KillAndReap();
    }
  }

 private:
  absl::StatusOr<std::string> ReadLine() {
    for (;;) {
      size_t nl = buffer_.find('\n');
      if (nl != std::string::npos) {
        std::string line = buffer_.substr(0, nl);
        buffer_.erase(0, nl + 1);
        return line;
      }
      pollfd p{from_.get(), POLLIN, 0};
      if (::poll(&p, 1, 60'000) <= 0) {
        return absl::DeadlineExceededError("abox-mcp did not answer within 60 s");
      }
      char chunk[65536];
      ssize_t n = ::read(from_.get(), chunk, sizeof(chunk));
      if (n <= 0) {
        return absl::UnavailableError("abox-mcp closed its stdout");
      }
      buffer_.append(chunk, static_cast<size_t>(n));
    }
  }

  base::ChildProcess child_;
  base::UniqueFd to_;
  base::UniqueFd from_;
  std::string buffer_;
  int64_t next_id_ = 0;
};

}  // namespace

McpBenchResult MeasureMcpAgainstCli(const std::string& abox_mcp, const std::string& abox,
                                    const BenchHome& home, const std::string& sandbox, int runs,
                                    const std::atomic<bool>& interrupted) {
  McpBenchResult result;
  if (::access(abox_mcp.c_str(), X_OK) != 0) {
    result.skip = absl::StrCat("no abox-mcp at ", abox_mcp);
    return result;
  }
  absl::StatusOr<McpSession> session = McpSession::Start(abox_mcp);
  if (!session.ok()) {
    result.skip = absl::StrCat("abox-mcp did not start: ", session.status().message());
    return result;
  }
  auto fail = [&](const absl::Status& s) {
    result.skip = std::string(s.message());
    session->Stop();
    return result;
  };
  absl::StatusOr<nlohmann::json> init =
      session->Call("initialize", {{"protocolVersion", "2025-11-25"},
                                   {"capabilities", nlohmann::json::object()},
                                   {"clientInfo", {{"name", "daemon_bench"}, {"version", "1"}}}});
  if (!init.ok()) {
    return fail(init.status());
  }
  session->Notify("notifications/initialized");
  absl::StatusOr<nlohmann::json> list = session->Call("tools/list", nlohmann::json::object());
  if (!list.ok()) {
    return fail(list.status());
  }
  result.tools = (*list)["tools"].size();
  result.tools_bytes = (*list)["tools"].dump().size();

  nlohmann::json exec = {{"name", "exec"},
                         {"arguments", {{"sandbox", sandbox}, {"argv", {"true"}}}}};
  for (int i = 0; i < 1 + runs && !interrupted.load(); ++i) {
    auto t0 = Clock::now();
    absl::StatusOr<nlohmann::json> r = session->Call("tools/call", exec);
    double mcp = Ms(Clock::now() - t0);
    if (!r.ok()) {
      return fail(r.status());
    }
    if (r->value("isError", false) || (*r)["structuredContent"].value("exit_code", -1) != 0) {
      return fail(absl::InternalError(absl::StrCat("exec over MCP failed: ", r->dump())));
    }
    absl::StatusOr<double> cli = TimeCli(home, {abox, "exec", sandbox, "--", "true"});
    if (!cli.ok()) {
      return fail(cli.status());
    }
    if (i > 0) {  // the first pair warms caches and connections
      result.mcp_ms.push_back(mcp);
      result.cli_ms.push_back(*cli);
    }
  }
  session->Stop();
  if (result.mcp_ms.empty()) {
    result.skip = "interrupted";
  }
  return result;
}

}  // namespace abox::bench
