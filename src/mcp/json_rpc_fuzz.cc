// libFuzzer target: every line from an MCP client is untrusted. The server must never crash,
// throw or send anything but one JSON-RPC message per line, whatever the bytes; tool
// arguments that reach a tool have passed its schema.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "src/mcp/server.h"
#include "src/mcp/tool_args.h"

namespace {

void Check(bool condition) {
  if (!condition) {
    std::abort();
  }
}

std::vector<abox::mcp::Tool> Tools() {
  using abox::mcp::CallContext;
  nlohmann::json schema = abox::mcp::ObjectSchema({{"text", abox::mcp::Prop("string", "t")},
                                                   {"n", abox::mcp::IntProp("n", 0, 10)},
                                                   {"l", abox::mcp::StringListProp("l")}},
                                                  {"text"});
  return {abox::mcp::Tool{
      "echo", "Echo", "Returns its text.", schema, nullptr, nullptr,
      [](const nlohmann::json& args, CallContext&) -> absl::StatusOr<nlohmann::json> {
        Check(args["text"].is_string());
        return nlohmann::json{{"text", args["text"]}};
      }}};
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string input(reinterpret_cast<const char*>(data), size);
  {
    abox::mcp::Server server(abox::mcp::ServerInfo{"abox", "0", "i"}, Tools(),
                             [](const std::string& line) {
                               Check(!line.empty() && line.back() == '\n');
                               Check(line.find('\n') == line.size() - 1);
                               nlohmann::json m = nlohmann::json::parse(line, nullptr, false);
                               Check(m.is_object() && m["jsonrpc"] == "2.0");
                             });
    for (absl::string_view line : absl::StrSplit(input, '\n')) {
      server.HandleLine(abox::mcp::LineReader::Line{std::string(line), false});
    }
    server.Shutdown();
  }
  return 0;
}
