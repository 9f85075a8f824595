#include "src/cli/toml_check.h"

#include <cstdio>

#include "absl/strings/str_cat.h"
#include "src/template/project_template.h"

// Header-only and without exceptions: the parse result carries the error (house style: no
// exceptions), and no ABI has to match Debian's compiled libtomlplusplus.
#define TOML_HEADER_ONLY 1
#define TOML_EXCEPTIONS 0
#include <toml++/toml.h>

namespace abox::cli {
namespace {

absl::StatusOr<toml::table> Parse(std::string_view file, std::string_view text) {
  toml::parse_result result = toml::parse(text, file);
  if (!result) {
    const toml::parse_error& error = result.error();
    return absl::InvalidArgumentError(absl::StrCat(
        std::string(file), " is not valid TOML (line ", error.source().begin.line, ", column ",
        error.source().begin.column, ": ", std::string(error.description()),
        "); fix it or move it away, then run this again. Nothing was written"));
  }
  return std::move(result).table();
}

}  // namespace

absl::Status CheckToml(std::string_view file, std::string_view text) {
  return Parse(file, text).status();
}

absl::StatusOr<std::optional<TomlServer>> ReadTomlServer(std::string_view file,
                                                         std::string_view text,
                                                         const std::string& name) {
  absl::StatusOr<toml::table> table = Parse(file, text);
  if (!table.ok()) {
    return table.status();
  }
  toml::node_view<toml::node> server = (*table)["mcp_servers"][name];
  if (!server.is_table()) {
    return std::nullopt;
  }
  TomlServer out;
  out.command = server["command"].value_or(std::string());
  if (const toml::array* args = server["args"].as_array()) {
    for (const toml::node& arg : *args) {
      out.args.push_back(arg.value_or(std::string()));
    }
  }
  return out;
}

std::string TomlString(std::string_view text) { return tmpl::TomlString(text); }

}  // namespace abox::cli
