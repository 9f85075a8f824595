// ParseTemplate: .abox.toml's text to a ProjectTemplate. The file is untrusted (it comes with the
// repository), so every key is checked against a fixed list and every value is bounded.
#include "src/template/project_template.h"

#include <functional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "src/base/status_macros.h"
#include "src/template/template_values.h"
#include "src/template/toml_prescreen.h"

// Header-only and without exceptions, as src/cli/toml_check.cc: the parse result carries the
// error (house style: no exceptions), and no ABI has to match Debian's compiled libtomlplusplus.
#define TOML_HEADER_ONLY 1
#define TOML_EXCEPTIONS 0
// toml++ 3.3.0 asserts that a table header's key starts with a key character, but "[ .x]" breaks
// that and the parser then reports it as a parse error right after the assert. Untrusted input
// must not abort debug and fuzz builds (release builds define NDEBUG, which drops the asserts
// anyway). Found by template_parse_fuzz.
#define TOML_ASSERT(expr) static_cast<void>(0)
#include <toml++/toml.h>

namespace abox::tmpl {
namespace {

constexpr const char* kSizeForms =
    "write an integer number of MiB (2048) or a string with a unit: \"512MiB\", \"4GiB\" or "
    "\"1TiB\" (MB and GB are not accepted: they are ambiguous)";

// One key a table may hold: its name, what its value must be, and a line that shows it.
struct KeySpec {
  const char* name;
  const char* expected;
  const char* example;
};

const std::vector<KeySpec>& TopKeys() {
  static const auto* keys = new std::vector<KeySpec>{
      {"image", "a string (an image name)", "image = \"developer\""},
      {"preset", "a string (a preset name)", "preset = \"node\""},
      {"packages", "an array of strings (Debian package names)", "packages = [\"libpq-dev\"]"},
      {"setup", "an array of strings (shell commands)", "setup = [\"npm ci\"]"},
      {"resources", "a table", "[resources] on a line of its own, then cpus = 2"},
      {"egress", "a table", "[egress] on a line of its own, then allow = [\"api.example.com\"]"},
      {"setup_root", "an array of strings (shell commands run as root)",
       "setup_root = [\"apt-get install -y ./tools.deb\"]"},
  };
  return *keys;
}

const std::vector<KeySpec>& ResourceKeys() {
  static const auto* keys = new std::vector<KeySpec>{
      {"cpus", "an integer from 1 to 64", "cpus = 2"},
      {"memory", "an integer number of MiB or a size string", "memory = \"4GiB\""},
      {"disk", "an integer number of MiB or a size string", "disk = \"32GiB\""},
  };
  return *keys;
}

const std::vector<KeySpec>& EgressKeys() {
  static const auto* keys = new std::vector<KeySpec>{
      {"allow", "an array of strings (egress rules)", "allow = [\"api.example.com\"]"},
      {"setup_allow", "an array of strings (preset:NAME rules)", "setup_allow = [\"preset:npm\"]"},
  };
  return *keys;
}

const char* TypeName(toml::node_type type) {
  switch (type) {
    case toml::node_type::table:
      return "a table";
    case toml::node_type::array:
      return "an array";
    case toml::node_type::string:
      return "a string";
    case toml::node_type::integer:
      return "an integer";
    case toml::node_type::floating_point:
      return "a floating-point number";
    case toml::node_type::boolean:
      return "a boolean";
    case toml::node_type::date:
      return "a date";
    case toml::node_type::time:
      return "a time";
    case toml::node_type::date_time:
      return "a date-time";
    case toml::node_type::none:
      break;
  }
  return "nothing";
}

// Parses one template; `file_` starts every error.
class Parser final {
 public:
  explicit Parser(std::string_view file) : file_(file) {}

  absl::StatusOr<ProjectTemplate> Parse(std::string_view text) {
    if (text.size() > kMaxTemplateBytes) {
      return absl::InvalidArgumentError(absl::StrCat(
          file_, " is ", text.size(), " bytes, more than a template may be (", kMaxTemplateBytes,
          "); a template names an image, packages and a few commands: move long scripts into a "
          "file in the repository and run that from setup"));
    }
    if (std::optional<UnsafeTomlSpot> spot = FindUnsafeTomlSpot(text)) {
      return absl::InvalidArgumentError(absl::StrCat(file_, " is not valid TOML (line ", spot->line,
                                                     ", column ", spot->column, ": ", spot->why,
                                                     "); fix it and try again"));
    }
    toml::parse_result result = toml::parse(text, file_);
    if (!result) {
      const toml::parse_error& error = result.error();
      return absl::InvalidArgumentError(
          absl::StrCat(file_, " is not valid TOML (line ", error.source().begin.line, ", column ",
                       error.source().begin.column, ": ", Printable(error.description(), 200),
                       "); fix the syntax (docs/templates.md shows the format) and try again"));
    }
    const toml::table& root = result.table();
    ProjectTemplate out;
    out.source = file_;
    ABOX_RETURN_IF_ERROR(CheckKeys(root, "", TopKeys()));
    for (auto&& [key, node] : root) {
      std::string_view name = key.str();
      if (name == "image") {
        ABOX_RETURN_IF_ERROR(ReadImage(node, &out));
      } else if (name == "preset") {
        ABOX_RETURN_IF_ERROR(ReadPreset(node, &out));
      } else if (name == "packages") {
        ABOX_RETURN_IF_ERROR(
            ReadList(node, "packages", TopKeys()[2], &out.packages,
                     [this](const toml::node& n, const std::string& path, const std::string& v) {
                       return CheckPackage(n, path, v);
                     }));
      } else if (name == "setup") {
        ABOX_RETURN_IF_ERROR(ReadList(node, "setup", TopKeys()[3], &out.setup, nullptr));
      } else if (name == "setup_root") {
        ABOX_RETURN_IF_ERROR(ReadList(node, "setup_root", TopKeys()[6], &out.setup_root, nullptr));
      } else if (name == "resources") {
        ABOX_RETURN_IF_ERROR(ReadResources(node, &out));
      } else if (name == "egress") {
        ABOX_RETURN_IF_ERROR(ReadEgress(node, &out));
      }
    }
    return out;
  }

 private:
  using Check =
      std::function<absl::Status(const toml::node&, const std::string&, const std::string&)>;

  // "<file>, line 3: <message>".
  absl::Status Error(const toml::source_region& where, const std::string& message) const {
    return absl::InvalidArgumentError(
        absl::StrCat(file_, ", line ", where.begin.line, ": ", message));
  }

  absl::Status WrongType(const toml::node& node, const std::string& path,
                         const KeySpec& spec) const {
    return Error(node.source(),
                 absl::StrCat(path, " must be ", spec.expected, ", not ", TypeName(node.type()),
                              "; write it like ", spec.example));
  }

  // Refuses keys `table` may not hold. `section` is "" for the top level, else "resources".
  absl::Status CheckKeys(const toml::table& table, const std::string& section,
                         const std::vector<KeySpec>& known) const {
    std::vector<std::string> names;
    for (const KeySpec& spec : known) {
      bool is_table = std::string_view(spec.expected) == "a table";
      names.push_back(is_table ? absl::StrCat("[", spec.name, "]") : std::string(spec.name));
    }
    for (auto&& [key, node] : table) {
      std::string_view name = key.str();
      bool found = false;
      for (const KeySpec& spec : known) {
        found = found || name == spec.name;
      }
      if (found) {
        continue;
      }
      if (section == "egress" && name == "mode") {
        return Error(key.source(),
                     "egress.mode is not something a template can set: a repository may not "
                     "choose open (or any other) egress mode for you; list the hosts it needs in "
                     "[egress] allow, or pass --egress yourself");
      }
      std::vector<std::string> plain;
      for (const KeySpec& spec : known) {
        plain.emplace_back(spec.name);
      }
      std::string nearest = NearestName(name, plain);
      std::string where = section.empty() ? "" : absl::StrCat(" in [", section, "]");
      return Error(
          key.source(),
          absl::StrCat(
              "unknown key '", Printable(name), "'", where,
              nearest.empty() ? "; the known keys"
                              : absl::StrCat("; did you mean '", nearest, "'? The known keys"),
              where, " are ", absl::StrJoin(names, ", "), "; fix the spelling or remove the key"));
    }
    return absl::OkStatus();
  }

  // A string value: not empty, at most `max` bytes, no NUL.
  absl::StatusOr<std::string> ReadString(const toml::node& node, const std::string& path,
                                         const KeySpec& spec, size_t max) const {
    const toml::value<std::string>* value = node.as_string();
    if (value == nullptr) {
      return WrongType(node, path, spec);
    }
    const std::string& text = value->get();
    if (text.empty()) {
      return Error(node.source(), absl::StrCat(path, " is an empty string; give it a value (",
                                               spec.example, ") or remove the line"));
    }
    if (text.size() > max) {
      return Error(node.source(),
                   absl::StrCat(path, " is ", text.size(), " bytes long, more than the ", max,
                                " allowed; shorten it"));
    }
    if (text.find('\0') != std::string::npos) {
      return Error(node.source(),
                   absl::StrCat(path, " contains a NUL character (\\u0000); remove it"));
    }
    return text;
  }

  absl::Status ReadList(const toml::node& node, const std::string& path, const KeySpec& spec,
                        std::vector<std::string>* out, const Check& check) const {
    const toml::array* array = node.as_array();
    if (array == nullptr) {
      return WrongType(node, path, spec);
    }
    if (array->size() > kMaxListEntries) {
      return Error(node.source(),
                   absl::StrCat(path, " has ", array->size(), " entries, more than the ",
                                kMaxListEntries, " allowed; combine or drop some"));
    }
    KeySpec element{spec.name, "a string", spec.example};
    for (size_t i = 0; i < array->size(); ++i) {
      const toml::node& item = *array->get(i);
      std::string item_path = absl::StrCat(path, "[", i, "]");
      absl::StatusOr<std::string> text = ReadString(item, item_path, element, kMaxStringBytes);
      if (!text.ok()) {
        return text.status();
      }
      if (check) {
        ABOX_RETURN_IF_ERROR(check(item, item_path, *text));
      }
      out->push_back(*std::move(text));
    }
    return absl::OkStatus();
  }

  absl::Status ReadImage(const toml::node& node, ProjectTemplate* out) const {
    absl::StatusOr<std::string> image = ReadString(node, "image", TopKeys()[0], kMaxStringBytes);
    if (!image.ok()) {
      return image.status();
    }
    if (!IsImageName(*image)) {
      return Error(node.source(),
                   absl::StrCat("image = \"", Printable(*image),
                                "\" is not an image name: 1 to "
                                "64 characters of a-z, 0-9, '.', '_' and '-', starting with a "
                                "letter or digit; `abox image ls` lists the images"));
    }
    out->image = *std::move(image);
    return absl::OkStatus();
  }

  absl::Status ReadPreset(const toml::node& node, ProjectTemplate* out) const {
    absl::StatusOr<std::string> preset = ReadString(node, "preset", TopKeys()[1], kMaxStringBytes);
    if (!preset.ok()) {
      return preset.status();
    }
    if (!IsKnownPreset(*preset)) {
      std::string nearest = NearestName(*preset, KnownPresets());
      return Error(
          node.source(),
          absl::StrCat("preset = \"", Printable(*preset), "\" is not a known preset",
                       nearest.empty()
                           ? "; the presets are"
                           : absl::StrCat("; did you mean \"", nearest, "\"? The presets are"),
                       " ", absl::StrJoin(KnownPresets(), ", "), "; pick one or remove the line"));
    }
    out->preset = *std::move(preset);
    return absl::OkStatus();
  }

  absl::Status CheckPackage(const toml::node& node, const std::string& path,
                            const std::string& name) const {
    if (IsPackageName(name)) {
      return absl::OkStatus();
    }
    return Error(node.source(),
                 absl::StrCat(path, " = \"", Printable(name),
                              "\" is not a Debian package name: "
                              "at least 2 characters of a-z, 0-9, '+', '-' and '.', starting "
                              "with a letter or digit; fix the name (`apt-cache search` finds "
                              "it)"));
  }

  absl::Status ReadResources(const toml::node& node, ProjectTemplate* out) const {
    const toml::table* table = node.as_table();
    if (table == nullptr) {
      return WrongType(node, "resources", TopKeys()[4]);
    }
    ABOX_RETURN_IF_ERROR(CheckKeys(*table, "resources", ResourceKeys()));
    if (const toml::node* cpus = table->get("cpus")) {
      const toml::value<int64_t>* value = cpus->as_integer();
      if (value == nullptr) {
        return WrongType(*cpus, "resources.cpus", ResourceKeys()[0]);
      }
      if (value->get() < kMinCpus || value->get() > kMaxCpus) {
        return Error(cpus->source(), absl::StrCat("resources.cpus = ", value->get(),
                                                  " is out of range: it must "
                                                  "be from ",
                                                  kMinCpus, " to ", kMaxCpus));
      }
      out->cpus = value->get();
    }
    if (const toml::node* memory = table->get("memory")) {
      absl::StatusOr<int64_t> mib =
          ReadSize(*memory, "resources.memory", ResourceKeys()[1], kMinMemoryMib, kMaxMemoryMib);
      if (!mib.ok()) {
        return mib.status();
      }
      out->memory_mib = *mib;
    }
    if (const toml::node* disk = table->get("disk")) {
      absl::StatusOr<int64_t> mib =
          ReadSize(*disk, "resources.disk", ResourceKeys()[2], kMinDiskMib, kMaxDiskMib);
      if (!mib.ok()) {
        return mib.status();
      }
      out->disk_mib = *mib;
    }
    return absl::OkStatus();
  }

  // An integer (MiB) or a size string, within [min, max] MiB.
  absl::StatusOr<int64_t> ReadSize(const toml::node& node, const std::string& path,
                                   const KeySpec& spec, int64_t min, int64_t max) const {
    std::optional<int64_t> mib;
    std::string shown;
    if (const toml::value<int64_t>* value = node.as_integer()) {
      mib = value->get();
      shown = absl::StrCat(value->get());
    } else if (const toml::value<std::string>* value = node.as_string()) {
      shown = absl::StrCat("\"", Printable(value->get()), "\"");
      mib = ParseSizeMib(value->get());
      if (!mib.has_value()) {
        return Error(node.source(),
                     absl::StrCat(path, " = ", shown, " is not a size; ", kSizeForms));
      }
    } else {
      return Error(node.source(), absl::StrCat(path, " must be ", spec.expected, ", not ",
                                               TypeName(node.type()), "; ", kSizeForms));
    }
    if (*mib < min || *mib > max) {
      return Error(node.source(),
                   absl::StrCat(path, " = ", shown, " is out of range: it must be from ", min,
                                " MiB to ", max, " MiB"));
    }
    return *mib;
  }

  absl::Status ReadEgress(const toml::node& node, ProjectTemplate* out) const {
    const toml::table* table = node.as_table();
    if (table == nullptr) {
      return WrongType(node, "egress", TopKeys()[5]);
    }
    ABOX_RETURN_IF_ERROR(CheckKeys(*table, "egress", EgressKeys()));
    if (const toml::node* allow = table->get("allow")) {
      ABOX_RETURN_IF_ERROR(
          ReadList(*allow, "egress.allow", EgressKeys()[0], &out->egress_allow,
                   [this](const toml::node& n, const std::string& path, const std::string& rule) {
                     return CheckAllowRule(n, path, rule);
                   }));
    }
    if (const toml::node* setup_allow = table->get("setup_allow")) {
      ABOX_RETURN_IF_ERROR(ReadList(
          *setup_allow, "egress.setup_allow", EgressKeys()[1], &out->setup_allow,
          [this](const toml::node& n, const std::string& path, const std::string& rule) {
            if (IsPresetRule(rule)) {
              return absl::OkStatus();
            }
            return Error(n.source(),
                         absl::StrCat(path, " = \"", Printable(rule),
                                      "\" is not preset:NAME; "
                                      "setup_allow opens only package presets while setup runs "
                                      "(e.g. \"preset:npm\"); put other hosts in [egress] allow, "
                                      "which the person running abox must accept"));
          }));
    }
    return absl::OkStatus();
  }

  absl::Status CheckAllowRule(const toml::node& node, const std::string& path,
                              const std::string& rule) const {
    if (IsOpenEgressRule(rule)) {
      return Error(node.source(),
                   absl::StrCat(path, " = \"", Printable(rule),
                                "\" asks for open egress; a "
                                "template cannot open egress to every host: list the hosts the "
                                "project needs, or pass --egress open yourself"));
    }
    for (char c : rule) {
      auto u = static_cast<unsigned char>(c);
      if (u <= 0x20 || u == 0x7f) {
        return Error(node.source(),
                     absl::StrCat(path, " = \"", Printable(rule),
                                  "\" holds a space or control "
                                  "character, which no egress rule has; write one rule per "
                                  "entry, like \"api.example.com\" or \"preset:pypi\""));
      }
    }
    return absl::OkStatus();
  }

  std::string file_;
};

}  // namespace

absl::StatusOr<ProjectTemplate> ParseTemplate(std::string_view file_name, std::string_view text) {
  return Parser(file_name).Parse(text);
}

}  // namespace abox::tmpl
