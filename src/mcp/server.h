// The MCP server core: lifecycle (initialize, ping, logging/setLevel), tools/list and
// tools/call, cancellation and progress, over JSON-RPC lines (json_rpc.h). Knows nothing of
// aboxd: the tools are given to it (tools.h builds abox's).
//
// Threads: HandleLine() is called by one reader thread (HandleMessage() may be called from
// several) and answers everything but tools/call at
// once; each tools/call runs on its own worker thread, so a long call never blocks ping or
// notifications/cancelled. Every message goes out through the one `send` function, under a
// mutex. Trust boundary: every line from the client is untrusted (json_rpc.h parses it).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "nlohmann/json.hpp"
#include "src/mcp/json_rpc.h"

namespace abox::mcp {

class Server;

// What a running tools/call may ask of the server: whether it was cancelled, hooks that run
// when it is, and progress notifications (only when the request carried _meta.progressToken).
// Thread-safe.
class CallContext final {
 public:
  CallContext(Server* server, nlohmann::json progress_token, nlohmann::json request_id = nullptr)
      : server_(server),
        progress_token_(std::move(progress_token)),
        request_id_(std::move(request_id)) {}
  CallContext(const CallContext&) = delete;
  CallContext& operator=(const CallContext&) = delete;

  [[nodiscard]] bool cancelled() const { return cancelled_.load(); }
  // Marks the call cancelled and runs the hooks registered now (each once).
  void Cancel();

  // Sends notifications/progress when the request asked for it; a `progress` not above the last
  // one sent is raised just above it, so the values always increase.
  void Progress(double progress, absl::string_view message);

  // Whether the client declared it answers elicitation/create (asks its user for input).
  [[nodiscard]] bool ClientCanElicit() const;
  // Sends the request `method` to the client on this call's behalf (routed with the call) and
  // waits for the answer: its result, kCancelled when the call is cancelled or the server shuts
  // down, kUnknown when the client answered with an error, kDeadlineExceeded after `timeout`.
  [[nodiscard]] absl::StatusOr<nlohmann::json> AskClient(const std::string& method,
                                                         nlohmann::json params,
                                                         absl::Duration timeout);

  // Runs `fn` when the call is cancelled while the hook lives (at once if it already was).
  class CancelHook final {
   public:
    CancelHook(CallContext& context, std::function<void()> fn);
    ~CancelHook();
    CancelHook(const CancelHook&) = delete;
    CancelHook& operator=(const CancelHook&) = delete;

   private:
    CallContext& context_;
    int64_t key_;
  };

 private:
  Server* server_;
  nlohmann::json progress_token_;
  nlohmann::json request_id_;  // the tools/call's id: its progress belongs to that request
  std::atomic<bool> cancelled_{false};
  std::mutex mu_;  // guards the members below; hooks run under it
  std::map<int64_t, std::function<void()>> hooks_;
  int64_t next_key_ = 0;
  double last_progress_ = 0;
  bool sent_progress_ = false;
};

// A tool: its tools/list entry and what runs it. `run` returns the structured result (an
// object), or a status that becomes an isError result (errors.h).
struct Tool {
  std::string name;
  std::string title;
  std::string description;
  nlohmann::json input_schema;
  nlohmann::json output_schema;
  nlohmann::json annotations;
  std::function<absl::StatusOr<nlohmann::json>(const nlohmann::json& args, CallContext& ctx)> run;
};

struct ServerInfo {
  std::string name = "abox";
  std::string version;
  std::string instructions;
};

// Tool calls running at once at most (each has a thread); more are refused with an error.
inline constexpr size_t kMaxCallsInFlight = 32;

// Protocol revisions this server speaks, newest first.
inline constexpr const char* kProtocolVersions[] = {"2025-11-25", "2025-06-18"};

// Which request an outgoing message belongs to, for transports with a channel per request
// (Streamable HTTP answers each POST on its own response): `request_id` is the id of the request
// it answers or reports progress on (null for none, e.g. a log message or an answer to a message
// without a readable id); `final` when it is that request's answer.
struct Route {
  nlohmann::json request_id;
  bool final = false;
};

class Server final {
 public:
  // Gets each message as one line ending in '\n'.
  using SendFn = std::function<void(const std::string& line)>;
  using RoutedSendFn = std::function<void(const std::string& line, const Route& route)>;

  Server(ServerInfo info, std::vector<Tool> tools, SendFn send);
  Server(ServerInfo info, std::vector<Tool> tools, RoutedSendFn send);
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;
  // Calls Shutdown().
  ~Server();

  // Handles one line from the client (answers it, or starts a tools/call worker).
  void HandleLine(const LineReader::Line& line);
  // Handles one parsed message, as HandleLine does after parsing.
  void HandleMessage(const Incoming& in);
  // Reads lines from `reader` until end of input, then Shutdown().
  void Serve(LineReader& reader);
  // Cancels every call in flight and waits for their workers. Idempotent.
  void Shutdown();

  // Sends a notifications/message at `level` when the client's logging/setLevel admits it.
  void Log(absl::string_view level, absl::string_view text);
  // Sends one message (serialized as one line). A message with an id is routed as the answer
  // to that request.
  void Send(const nlohmann::json& message);
  // Sends a notification that belongs to the request `request_id` (progress).
  void SendFor(const nlohmann::json& message, const nlohmann::json& request_id);

  // The tools/call result for `result` (structuredContent and the same JSON as text) or for an
  // error status (isError).
  [[nodiscard]] static nlohmann::json CallResult(const absl::StatusOr<nlohmann::json>& result);

 private:
  void HandleRequest(const Incoming& in);
  void HandleNotification(const Incoming& in);
  [[nodiscard]] nlohmann::json Initialize(const nlohmann::json& params) const;
  [[nodiscard]] nlohmann::json ListTools() const;
  void StartCall(const Incoming& in);
  void ReapFinished();
  void SendRouted(const nlohmann::json& message, const Route& route);
  void HandleResponse(const Incoming& in);

  // A request of ours to the client (CallContext::AskClient) waiting for its answer.
  struct PendingRequest {
    std::mutex mu;
    std::condition_variable cv;
    std::optional<absl::StatusOr<nlohmann::json>> answer;  // guarded by mu
  };
  friend class CallContext;

  ServerInfo info_;
  std::vector<Tool> tools_;
  RoutedSendFn send_;
  std::mutex send_mu_;

  std::mutex mu_;         // guards the members below
  size_t log_level_ = 1;  // index into kLogLevels (log_level.h): "info"
  std::map<std::string, std::shared_ptr<CallContext>> calls_;  // by id.dump()
  std::list<std::thread> workers_;
  std::vector<std::thread::id> finished_;
  bool shut_down_ = false;
  bool client_elicitation_ = false;  // the client's initialize declared elicitation
  std::map<std::string, std::shared_ptr<PendingRequest>> pending_;  // by id.dump()
  int64_t next_request_id_ = 0;
};

}  // namespace abox::mcp
