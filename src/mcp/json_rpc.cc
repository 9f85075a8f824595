#include "src/mcp/json_rpc.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "src/base/io.h"

namespace abox::mcp {
namespace {

bool IsValidId(const nlohmann::json& id) { return id.is_string() || id.is_number_integer(); }

Malformed Bad(int code, std::string message, nlohmann::json id = nullptr) {
  return Malformed{code, std::move(message), std::move(id)};
}

}  // namespace

ParsedLine ParseLine(absl::string_view line) {
  ParsedLine out;
  nlohmann::json msg = nlohmann::json::parse(line.begin(), line.end(), nullptr, false);
  if (msg.is_discarded()) {
    out.error = Bad(kParseError, "Parse error: the line is not JSON");
    return out;
  }
  if (msg.is_array()) {
    out.error = Bad(kInvalidRequest, "Invalid Request: JSON-RPC batches are not supported");
    return out;
  }
  if (!msg.is_object()) {
    out.error = Bad(kInvalidRequest, "Invalid Request: a message is a JSON object");
    return out;
  }
  nlohmann::json id = nullptr;
  bool has_id = msg.contains("id");
  if (has_id) {
    id = msg["id"];
    if (!IsValidId(id)) {
      out.error = Bad(kInvalidRequest, "Invalid Request: id must be a string or an integer");
      return out;
    }
  }
  auto version = msg.find("jsonrpc");
  if (version == msg.end() || !version->is_string() || *version != "2.0") {
    out.error = Bad(kInvalidRequest, "Invalid Request: \"jsonrpc\" must be \"2.0\"", id);
    return out;
  }
  Incoming in;
  in.id = id;
  auto method = msg.find("method");
  if (method == msg.end()) {
    if (has_id && (msg.contains("result") || msg.contains("error"))) {
      in.kind = Incoming::Kind::kResponse;
      if (auto error = msg.find("error"); error != msg.end()) {
        in.error = error->is_null() ? nlohmann::json::object() : *error;
      } else {
        in.result = msg["result"];
        if (in.result.is_null()) {
          in.result = nlohmann::json::object();
        }
      }
      out.message = std::move(in);
      return out;
    }
    out.error = Bad(kInvalidRequest, "Invalid Request: no \"method\"", id);
    return out;
  }
  if (!method->is_string()) {
    out.error = Bad(kInvalidRequest, "Invalid Request: \"method\" must be a string", id);
    return out;
  }
  in.method = method->get<std::string>();
  auto params = msg.find("params");
  if (params != msg.end() && !params->is_null()) {
    if (!params->is_object()) {
      out.error = Bad(kInvalidParams, "Invalid params: \"params\" must be an object", id);
      return out;
    }
    in.params = *params;
  }
  in.kind = has_id ? Incoming::Kind::kRequest : Incoming::Kind::kNotification;
  out.message = std::move(in);
  return out;
}

nlohmann::json ResultMessage(const nlohmann::json& id, nlohmann::json result) {
  return {{"jsonrpc", "2.0"}, {"id", id}, {"result", std::move(result)}};
}

nlohmann::json ErrorMessage(const nlohmann::json& id, int code, absl::string_view message) {
  return {{"jsonrpc", "2.0"},
          {"id", id},
          {"error", {{"code", code}, {"message", std::string(message)}}}};
}

nlohmann::json NotificationMessage(absl::string_view method, nlohmann::json params) {
  return {{"jsonrpc", "2.0"}, {"method", std::string(method)}, {"params", std::move(params)}};
}

std::string SerializeLine(const nlohmann::json& message) {
  return message.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::optional<LineReader::Line> LineReader::Next() {
  while (true) {
    size_t nl = buffer_.find('\n', scanned_);
    if (nl != std::string::npos) {
      Line line;
      if (discarding_ || nl > max_line_) {  // arrived whole in one read, or in pieces
        discarding_ = false;
        line.too_long = true;
      } else {
        line.text = buffer_.substr(0, nl);
        if (!line.text.empty() && line.text.back() == '\r') {
          line.text.pop_back();
        }
      }
      buffer_.erase(0, nl + 1);
      scanned_ = 0;
      return line;
    }
    scanned_ = buffer_.size();
    if (buffer_.size() > max_line_) {
      discarding_ = true;  // keep reading to its newline, holding nothing of it
      buffer_.clear();
      scanned_ = 0;
    }
    if (eof_) {
      if (discarding_) {
        discarding_ = false;
        return Line{"", true};
      }
      if (buffer_.empty()) {
        return std::nullopt;
      }
      Line last{std::move(buffer_), false};
      buffer_.clear();
      scanned_ = 0;
      return last;
    }
    char chunk[65536];
    absl::StatusOr<size_t> n = base::ReadSome(fd_, chunk, sizeof(chunk));
    if (!n.ok() || *n == 0) {
      eof_ = true;
      continue;
    }
    buffer_.append(chunk, *n);
  }
}

}  // namespace abox::mcp
