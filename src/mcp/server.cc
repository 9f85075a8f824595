#include "src/mcp/server.h"

#include <algorithm>
#include <array>
#include <utility>

#include "absl/strings/str_cat.h"
#include "src/mcp/errors.h"
#include "src/mcp/tool_args.h"

namespace abox::mcp {
namespace {

// MCP's logging levels (RFC 5424), least severe first.
constexpr std::array<absl::string_view, 8> kLogLevels = {
    "debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"};

std::optional<size_t> LogLevelIndex(absl::string_view level) {
  for (size_t i = 0; i < kLogLevels.size(); ++i) {
    if (kLogLevels[i] == level) {
      return i;
    }
  }
  return std::nullopt;
}

}  // namespace

void CallContext::Cancel() {
  std::lock_guard<std::mutex> lock(mu_);
  if (cancelled_.exchange(true)) {
    return;
  }
  for (auto& [key, fn] : hooks_) {
    fn();
  }
}

void CallContext::Progress(double progress, absl::string_view message) {
  if (progress_token_.is_null() || cancelled()) {
    return;
  }
  nlohmann::json params;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (sent_progress_ && progress <= last_progress_) {
      progress = last_progress_ + 0.001;
    }
    last_progress_ = progress;
    sent_progress_ = true;
    params = {{"progressToken", progress_token_}, {"progress", progress}};
    if (!message.empty()) {
      params["message"] = std::string(message);
    }
  }
  server_->SendFor(NotificationMessage("notifications/progress", std::move(params)), request_id_);
}

bool CallContext::ClientCanElicit() const {
  std::lock_guard<std::mutex> lock(server_->mu_);
  return server_->client_elicitation_;
}

absl::StatusOr<nlohmann::json> CallContext::AskClient(const std::string& method,
                                                      nlohmann::json params,
                                                      absl::Duration timeout) {
  auto pending = std::make_shared<Server::PendingRequest>();
  nlohmann::json id;
  {
    std::lock_guard<std::mutex> lock(server_->mu_);
    if (server_->shut_down_) {
      return absl::CancelledError("the session is ending");
    }
    id = absl::StrCat("abox-", ++server_->next_request_id_);
    server_->pending_[id.dump()] = pending;
  }
  auto settle = [&pending](absl::StatusOr<nlohmann::json> answer) {
    std::lock_guard<std::mutex> lock(pending->mu);
    if (!pending->answer) {
      pending->answer = std::move(answer);
    }
    pending->cv.notify_all();
  };
  absl::StatusOr<nlohmann::json> out = absl::DeadlineExceededError(absl::StrCat(
      "the client did not answer ", method, " within ", absl::FormatDuration(timeout)));
  {
    CancelHook hook(*this, [&] { settle(absl::CancelledError("the call was cancelled")); });
    server_->SendFor(
        {{"jsonrpc", "2.0"}, {"id", id}, {"method", method}, {"params", std::move(params)}},
        request_id_);
    std::unique_lock<std::mutex> lock(pending->mu);
    if (pending->cv.wait_for(lock, absl::ToChronoMilliseconds(timeout),
                             [&] { return pending->answer.has_value(); })) {
      out = *pending->answer;
    }
  }
  std::lock_guard<std::mutex> lock(server_->mu_);
  server_->pending_.erase(id.dump());
  return out;
}

CallContext::CancelHook::CancelHook(CallContext& context, std::function<void()> fn)
    : context_(context) {
  std::lock_guard<std::mutex> lock(context_.mu_);
  key_ = context_.next_key_++;
  if (context_.cancelled()) {
    fn();
    return;
  }
  context_.hooks_.emplace(key_, std::move(fn));
}

CallContext::CancelHook::~CancelHook() {
  std::lock_guard<std::mutex> lock(context_.mu_);
  context_.hooks_.erase(key_);
}

Server::Server(ServerInfo info, std::vector<Tool> tools, SendFn send)
    : info_(std::move(info)),
      tools_(std::move(tools)),
      send_([send = std::move(send)](const std::string& line, const Route& /*route*/) {
        send(line);
      }) {}

Server::Server(ServerInfo info, std::vector<Tool> tools, RoutedSendFn send)
    : info_(std::move(info)), tools_(std::move(tools)), send_(std::move(send)) {}

Server::~Server() { Shutdown(); }

void Server::Send(const nlohmann::json& message) {
  auto id = message.find("id");
  if (id != message.end()) {
    SendRouted(message, Route{*id, true});
  } else {
    SendRouted(message, Route{});
  }
}

void Server::SendFor(const nlohmann::json& message, const nlohmann::json& request_id) {
  SendRouted(message, Route{request_id, false});
}

void Server::SendRouted(const nlohmann::json& message, const Route& route) {
  std::string line = SerializeLine(message);
  line.push_back('\n');
  std::lock_guard<std::mutex> lock(send_mu_);
  send_(line, route);
}

void Server::Log(absl::string_view level, absl::string_view text) {
  std::optional<size_t> index = LogLevelIndex(level);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!index || *index < log_level_) {
      return;
    }
  }
  Send(NotificationMessage(
      "notifications/message",
      {{"level", std::string(level)}, {"logger", "abox-mcp"}, {"data", std::string(text)}}));
}

void Server::Serve(LineReader& reader) {
  while (std::optional<LineReader::Line> line = reader.Next()) {
    HandleLine(*line);
  }
  Shutdown();
}

void Server::HandleLine(const LineReader::Line& line) {
  if (line.too_long) {
    Send(ErrorMessage(
        nullptr, kInvalidRequest,
        absl::StrCat("Invalid Request: the line is longer than ", kMaxLineBytes, " bytes")));
    return;
  }
  if (line.text.find_first_not_of(" \t\r") == std::string::npos) {
    return;  // blank lines carry nothing
  }
  ParsedLine parsed = ParseLine(line.text);
  if (parsed.error) {
    Send(ErrorMessage(parsed.error->id, parsed.error->code, parsed.error->message));
    return;
  }
  HandleMessage(*parsed.message);
}

void Server::HandleMessage(const Incoming& in) {
  ReapFinished();
  switch (in.kind) {
    case Incoming::Kind::kRequest:
      HandleRequest(in);
      return;
    case Incoming::Kind::kNotification:
      HandleNotification(in);
      return;
    case Incoming::Kind::kResponse:
      HandleResponse(in);
      return;
  }
}

void Server::HandleResponse(const Incoming& in) {
  std::shared_ptr<PendingRequest> pending;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = pending_.find(in.id.dump());
    if (it == pending_.end()) {
      return;  // an answer nobody waits for (late, or made up): dropped
    }
    pending = it->second;
  }
  absl::StatusOr<nlohmann::json> answer = in.result;
  if (!in.error.is_null()) {
    std::string text =
        in.error.is_object() && in.error.contains("message") && in.error["message"].is_string()
            ? in.error["message"].get<std::string>()
            : in.error.dump();
    answer = absl::UnknownError(
        absl::StrCat("the client answered with an error: ", text.substr(0, 300)));
  }
  std::lock_guard<std::mutex> lock(pending->mu);
  if (!pending->answer) {
    pending->answer = std::move(answer);
  }
  pending->cv.notify_all();
}

void Server::HandleRequest(const Incoming& in) {
  const nlohmann::json& params = in.params;
  if (in.method == "initialize") {
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto caps = params.is_object() ? params.find("capabilities") : params.end();
      client_elicitation_ = caps != params.end() && caps->is_object() &&
                            caps->contains("elicitation") && (*caps)["elicitation"].is_object();
    }
    Send(ResultMessage(in.id, Initialize(params)));
  } else if (in.method == "ping") {
    Send(ResultMessage(in.id, nlohmann::json::object()));
  } else if (in.method == "tools/list") {
    Send(ResultMessage(in.id, ListTools()));
  } else if (in.method == "tools/call") {
    StartCall(in);
  } else if (in.method == "logging/setLevel") {
    auto level = params.is_object() ? params.find("level") : params.end();
    std::optional<size_t> index;
    if (level != params.end() && level->is_string()) {
      index = LogLevelIndex(level->get<std::string>());
    }
    if (!index) {
      Send(ErrorAnswer(in.id,
                       absl::InvalidArgumentError(
                           "Invalid params: \"level\" must be one of debug, info, notice, warning, "
                           "error, critical, alert, emergency")));
      return;
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      log_level_ = *index;
    }
    Send(ResultMessage(in.id, nlohmann::json::object()));
  } else {
    // At once, never silence: dual-era clients probe with methods of later revisions
    // (server/discover) and fall back on this error.
    Send(ErrorAnswer(in.id,
                     absl::UnimplementedError(absl::StrCat("Method not found: ", in.method))));
  }
}

void Server::HandleNotification(const Incoming& in) {
  if (in.method == "notifications/cancelled") {
    auto id = in.params.is_object() ? in.params.find("requestId") : in.params.end();
    if (id == in.params.end()) {
      return;
    }
    std::shared_ptr<CallContext> call;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = calls_.find(id->dump());
      if (it != calls_.end()) {
        call = it->second;
      }
    }
    if (call) {
      call->Cancel();
    }
  }
  // notifications/initialized and any other notification: nothing to do, never an answer.
}

nlohmann::json Server::Initialize(const nlohmann::json& params) const {
  std::string version = kProtocolVersions[0];
  auto asked = params.is_object() ? params.find("protocolVersion") : params.end();
  if (asked != params.end() && asked->is_string()) {
    for (const char* supported : kProtocolVersions) {
      if (*asked == supported) {
        version = supported;
      }
    }
  }
  return {{"protocolVersion", version},
          {"capabilities",
           {{"tools", {{"listChanged", false}}}, {"logging", nlohmann::json::object()}}},
          {"serverInfo",
           {{"name", info_.name}, {"title", "abox sandboxes"}, {"version", info_.version}}},
          {"instructions", info_.instructions}};
}

nlohmann::json Server::ListTools() const {
  nlohmann::json tools = nlohmann::json::array();
  for (const Tool& tool : tools_) {
    nlohmann::json entry = {{"name", tool.name},
                            {"title", tool.title},
                            {"description", tool.description},
                            {"inputSchema", tool.input_schema}};
    if (!tool.output_schema.is_null()) {
      entry["outputSchema"] = tool.output_schema;
    }
    if (!tool.annotations.is_null()) {
      entry["annotations"] = tool.annotations;
    }
    tools.push_back(std::move(entry));
  }
  return {{"tools", std::move(tools)}};
}

nlohmann::json Server::CallResult(const absl::StatusOr<nlohmann::json>& result) {
  if (!result.ok()) {
    return ToolErrorResult(result.status());
  }
  return {
      {"content", nlohmann::json::array({{{"type", "text"}, {"text", SerializeLine(*result)}}})},
      {"structuredContent", *result},
      {"isError", false}};
}

void Server::StartCall(const Incoming& in) {
  const nlohmann::json& params = in.params;
  auto name = params.is_object() ? params.find("name") : params.end();
  if (name == params.end() || !name->is_string()) {
    Send(ErrorAnswer(
        in.id, absl::InvalidArgumentError("Invalid params: tools/call needs a string \"name\"")));
    return;
  }
  auto tool =
      std::find_if(tools_.begin(), tools_.end(), [&](const Tool& t) { return *name == t.name; });
  if (tool == tools_.end()) {
    Send(ErrorAnswer(in.id, absl::InvalidArgumentError(absl::StrCat(
                                "Invalid params: unknown tool \"", name->get<std::string>(),
                                "\" (tools/list names the tools)"))));
    return;
  }
  nlohmann::json args = nlohmann::json::object();
  auto given = params.find("arguments");
  if (given != params.end() && !given->is_null()) {
    if (!given->is_object()) {
      Send(ErrorAnswer(
          in.id, absl::InvalidArgumentError("Invalid params: \"arguments\" must be an object")));
      return;
    }
    args = *given;
  }
  nlohmann::json token = nullptr;
  auto meta = params.find("_meta");
  if (meta != params.end() && meta->is_object()) {
    auto t = meta->find("progressToken");
    if (t != meta->end() && (t->is_string() || t->is_number_integer())) {
      token = *t;
    }
  }
  auto context = std::make_shared<CallContext>(this, std::move(token), in.id);
  std::string key = in.id.dump();
  std::lock_guard<std::mutex> lock(mu_);
  if (shut_down_) {
    return;
  }
  if (calls_.size() >= kMaxCallsInFlight) {
    Send(ErrorAnswer(
        in.id, absl::ResourceExhaustedError(absl::StrCat(
                   kMaxCallsInFlight, " tool calls are already running; wait for one to end"))));
    return;
  }
  if (calls_.count(key) != 0) {
    Send(ErrorMessage(in.id, kInvalidRequest, "Invalid Request: this id is already in use"));
    return;
  }
  calls_[key] = context;
  nlohmann::json id = in.id;
  const Tool* run = &*tool;
  workers_.emplace_back([this, run, args = std::move(args), id, key, context] {
    absl::Status valid = CheckArguments(run->input_schema, args);
    absl::StatusOr<nlohmann::json> result =
        valid.ok() ? run->run(args, *context) : absl::StatusOr<nlohmann::json>(valid);
    // A cancelled request gets no answer (the client has stopped waiting for it).
    if (!context->cancelled()) {
      Send(ResultMessage(id, CallResult(result)));
    }
    std::lock_guard<std::mutex> done(mu_);
    calls_.erase(key);
    finished_.push_back(std::this_thread::get_id());
  });
}

void Server::ReapFinished() {
  std::list<std::thread> done;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (std::thread::id id : finished_) {
      auto it = std::find_if(workers_.begin(), workers_.end(),
                             [&](const std::thread& t) { return t.get_id() == id; });
      if (it != workers_.end()) {
        done.splice(done.end(), workers_, it);
      }
    }
    finished_.clear();
  }
  for (std::thread& t : done) {
    t.join();
  }
}

void Server::Shutdown() {
  std::list<std::thread> workers;
  std::vector<std::shared_ptr<CallContext>> calls;
  {
    std::lock_guard<std::mutex> lock(mu_);
    shut_down_ = true;
    for (auto& [key, call] : calls_) {
      calls.push_back(call);
    }
    workers.swap(workers_);
    finished_.clear();
  }
  // Outside mu_: a cancel hook may wait on aboxd (signalling a command), and finishing workers
  // take mu_.
  for (const auto& call : calls) {
    call->Cancel();
  }
  for (std::thread& t : workers) {
    t.join();
  }
}

}  // namespace abox::mcp
