#include "src/api/openapi_check.h"

#include <algorithm>
#include <optional>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "yaml-cpp/yaml.h"

namespace abox::api {
namespace {

// Nesting beyond this is refused rather than walked (the document is ours, but a recursion
// bound costs nothing).
constexpr int kMaxNesting = 100;

// The operations a path item may hold (OpenAPI 3.0 "Path Item Object"), and its other fields.
const std::set<std::string>& Methods() {
  static const auto* methods = new std::set<std::string>{"get",     "put",  "post",  "delete",
                                                         "options", "head", "patch", "trace"};
  return *methods;
}
const std::set<std::string>& PathItemFields() {
  static const auto* fields =
      new std::set<std::string>{"summary", "description", "servers", "parameters"};
  return *fields;
}

bool IsStatusCode(const std::string& code) {
  if (code == "default") {
    return true;
  }
  int value = 0;
  if (code.size() == 3 && code[0] >= '1' && code[0] <= '5' && code.substr(1) == "XX") {
    return true;
  }
  return code.size() == 3 && absl::SimpleAtoi(code, &value) && value >= 100 && value <= 599;
}

// The `{name}`s of a path pattern, in order; a problem for a malformed one.
std::vector<std::string> TemplateParams(const std::string& pattern, std::string* problem) {
  std::vector<std::string> names;
  for (absl::string_view segment : absl::StrSplit(pattern, '/')) {
    size_t open = segment.find('{');
    size_t close = segment.find('}');
    if (open == absl::string_view::npos && close == absl::string_view::npos) {
      continue;
    }
    if (open != 0 || close != segment.size() - 1 || segment.size() < 3) {
      *problem = absl::StrCat("path ", pattern, ": segment \"", segment,
                              "\" must be a whole `{name}` or have no braces");
      continue;
    }
    names.emplace_back(segment.substr(1, segment.size() - 2));
  }
  return names;
}

// Walks one document, collecting its operations and everything wrong with it.
class Checker final {
 public:
  explicit Checker(YAML::Node root) : root_(std::move(root)) {}

  void Run() {
    if (!root_.IsMap()) {
      Problem("the document is not a YAML mapping");
      return;
    }
    const std::string version = Get(root_, "openapi").Scalar();
    if (version.rfind("3.", 0) != 0) {
      Problem(absl::StrCat("`openapi: ", version, "` is not an OpenAPI 3 version (e.g. 3.0.3)"));
    }
    CheckRefs(root_, "", 0);
    const YAML::Node paths = Get(root_, "paths");
    if (!paths.IsMap()) {
      Problem("`paths:` is missing or not a mapping");
      return;
    }
    for (auto it = paths.begin(); it != paths.end(); ++it) {
      CheckPath(it->first.Scalar(), it->second);
    }
  }

  [[nodiscard]] const std::set<OpenApiOperation>& operations() const { return operations_; }
  [[nodiscard]] const std::vector<std::string>& problems() const { return problems_; }

 private:
  void Problem(std::string text) { problems_.push_back(std::move(text)); }

  // `node[key]` without yaml-cpp's habit of inserting into (or throwing on) what is no map.
  static YAML::Node Get(const YAML::Node& node, const std::string& key) {
    if (!node.IsMap()) {
      return YAML::Node(YAML::NodeType::Undefined);
    }
    for (auto it = node.begin(); it != node.end(); ++it) {
      if (it->first.IsScalar() && it->first.Scalar() == key) {
        return it->second;
      }
    }
    return YAML::Node(YAML::NodeType::Undefined);
  }

  // A local reference ("#/components/parameters/SandboxId", JSON Pointer escapes ~0 ~1).
  std::optional<YAML::Node> Resolve(const std::string& ref) const {
    if (ref.rfind("#/", 0) != 0) {
      return std::nullopt;
    }
    // Node::reset rebinds; Node::operator= would overwrite the referenced node in the tree.
    YAML::Node node;
    node.reset(root_);
    for (absl::string_view raw : absl::StrSplit(ref.substr(2), '/')) {
      std::string token = absl::StrReplaceAll(raw, {{"~1", "/"}, {"~0", "~"}});
      size_t index = 0;
      const YAML::Node& current = node;
      YAML::Node next =
          current.IsSequence() && absl::SimpleAtoi(token, &index) && index < current.size()
              ? current[index]
              : Get(current, token);
      if (!next.IsDefined()) {
        return std::nullopt;
      }
      node.reset(next);
    }
    return node;
  }

  // `node` itself, or what its `$ref` points to (nullopt when that does not resolve; the
  // document-wide walk reports it).
  std::optional<YAML::Node> Follow(const YAML::Node& node) const {
    const YAML::Node ref = Get(node, "$ref");
    if (!ref.IsDefined()) {
      return node;
    }
    return Resolve(ref.Scalar());
  }

  void CheckRefs(const YAML::Node& node, const std::string& where, int depth) {
    if (depth > kMaxNesting) {
      Problem(absl::StrCat(where, ": nested more than ", kMaxNesting, " levels deep"));
      return;
    }
    if (node.IsMap()) {
      for (auto it = node.begin(); it != node.end(); ++it) {
        const std::string key = it->first.Scalar();
        const std::string here = absl::StrCat(where, "/", key);
        if (key == "$ref") {
          if (!it->second.IsScalar() || !Resolve(it->second.Scalar()).has_value()) {
            Problem(absl::StrCat(here, ": \"", it->second.Scalar(),
                                 "\" does not resolve (only local #/... references do)"));
          }
          continue;
        }
        CheckRefs(it->second, here, depth + 1);
      }
    } else if (node.IsSequence()) {
      for (size_t i = 0; i < node.size(); ++i) {
        CheckRefs(node[i], absl::StrCat(where, "/", i), depth + 1);
      }
    }
  }

  // Adds the path parameters a `parameters:` list declares to `declared`.
  void CollectPathParams(const YAML::Node& list, const std::string& where,
                         std::set<std::string>* declared) {
    if (!list.IsDefined()) {
      return;
    }
    if (!list.IsSequence()) {
      Problem(absl::StrCat(where, ": `parameters` is not a list"));
      return;
    }
    for (size_t i = 0; i < list.size(); ++i) {
      std::optional<YAML::Node> param = Follow(list[i]);
      if (!param.has_value()) {
        continue;
      }
      const std::string name = Get(*param, "name").Scalar();
      const std::string in = Get(*param, "in").Scalar();
      if (name.empty() || in.empty()) {
        Problem(absl::StrCat(where, ": parameter ", i, " needs a `name` and an `in`"));
        continue;
      }
      if (in != "path") {
        continue;
      }
      if (absl::AsciiStrToLower(Get(*param, "required").Scalar()) != "true") {
        Problem(absl::StrCat(where, ": path parameter `", name, "` must be `required: true`"));
      }
      declared->insert(name);
    }
  }

  void CheckResponses(const YAML::Node& operation, const std::string& where) {
    const YAML::Node responses = Get(operation, "responses");
    if (!responses.IsMap() || responses.size() == 0) {
      Problem(absl::StrCat(where, ": no `responses` (add at least the success response)"));
      return;
    }
    for (auto it = responses.begin(); it != responses.end(); ++it) {
      const std::string code = it->first.Scalar();
      if (!IsStatusCode(code)) {
        Problem(absl::StrCat(where, ": response \"", code,
                             "\" is not a status code (200, 4XX or default)"));
      }
      std::optional<YAML::Node> response = Follow(it->second);
      if (response.has_value() && !Get(*response, "description").IsDefined()) {
        Problem(absl::StrCat(where, ": response ", code, " has no `description`"));
      }
    }
  }

  void CheckPath(const std::string& pattern, const YAML::Node& item) {
    if (pattern.empty() || pattern[0] != '/') {
      Problem(absl::StrCat("path \"", pattern, "\" does not start with /"));
    }
    if (!item.IsMap()) {
      Problem(absl::StrCat("path ", pattern, ": not a mapping of operations"));
      return;
    }
    std::string template_problem;
    const std::vector<std::string> in_pattern = TemplateParams(pattern, &template_problem);
    if (!template_problem.empty()) {
      Problem(template_problem);
    }
    std::set<std::string> path_level;
    CollectPathParams(Get(item, "parameters"), absl::StrCat("path ", pattern), &path_level);
    for (auto it = item.begin(); it != item.end(); ++it) {
      const std::string key = it->first.Scalar();
      if (Methods().count(key) == 0) {
        if (PathItemFields().count(key) == 0 && key.rfind("x-", 0) != 0) {
          Problem(absl::StrCat("path ", pattern, ": `", key,
                               "` is neither an HTTP method nor a path item field"));
        }
        continue;
      }
      const OpenApiOperation op{absl::AsciiStrToUpper(key), pattern};
      const std::string where = op.ToString();
      if (!it->second.IsMap()) {
        Problem(absl::StrCat(where, ": not a mapping"));
        continue;
      }
      std::set<std::string> declared = path_level;
      CollectPathParams(Get(it->second, "parameters"), where, &declared);
      for (const std::string& name : in_pattern) {
        if (declared.count(name) == 0) {
          Problem(absl::StrCat(where, ": path parameter {", name,
                               "} is not declared; add it to the path's or the operation's "
                               "`parameters` (in: path, required: true)"));
        }
      }
      for (const std::string& name : declared) {
        if (std::find(in_pattern.begin(), in_pattern.end(), name) == in_pattern.end()) {
          Problem(absl::StrCat(where, ": declares path parameter `", name,
                               "`, which its path does not have"));
        }
      }
      CheckResponses(it->second, where);
      if (op.method != "HEAD") {
        operations_.insert(op);
      }
    }
  }

  YAML::Node root_;
  std::set<OpenApiOperation> operations_;
  std::vector<std::string> problems_;
};

}  // namespace

absl::StatusOr<std::set<OpenApiOperation>> OpenApiOperations(absl::string_view yaml) {
  // yaml-cpp reports errors by throwing; nothing thrown leaves this function.
  try {
    Checker checker(YAML::Load(std::string(yaml)));
    checker.Run();
    if (!checker.problems().empty()) {
      return absl::InvalidArgumentError(absl::StrCat("the OpenAPI document has ",
                                                     checker.problems().size(), " problem(s):\n  ",
                                                     absl::StrJoin(checker.problems(), "\n  ")));
    }
    return checker.operations();
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("the OpenAPI document is not valid YAML: ", e.what()));
  }
}

std::string DiffOperations(const std::set<OpenApiOperation>& spec,
                           const std::vector<std::pair<std::string, std::string>>& routes) {
  std::set<OpenApiOperation> served;
  for (const auto& [method, pattern] : routes) {
    OpenApiOperation op{absl::AsciiStrToUpper(method), pattern};
    if (op.method != "HEAD") {
      served.insert(std::move(op));
    }
  }
  std::vector<std::string> undocumented;
  for (const OpenApiOperation& op : served) {
    if (spec.count(op) == 0) {
      undocumented.push_back(op.ToString());
    }
  }
  std::vector<std::string> unserved;
  for (const OpenApiOperation& op : spec) {
    if (op.method != "HEAD" && served.count(op) == 0) {
      unserved.push_back(op.ToString());
    }
  }
  std::string out;
  if (!undocumented.empty()) {
    absl::StrAppend(&out, "missing in spec (served, not documented):\n    ",
                    absl::StrJoin(undocumented, "\n    "), "\n");
  }
  if (!unserved.empty()) {
    absl::StrAppend(&out, "missing in server (documented, not served):\n    ",
                    absl::StrJoin(unserved, "\n    "), "\n");
  }
  return out;
}

}  // namespace abox::api
