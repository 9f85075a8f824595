// FormatTemplate: a ProjectTemplate back to .abox.toml text, in the order docs/templates.md
// shows the keys.
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "src/template/project_template.h"

namespace abox::tmpl {

std::string TomlString(std::string_view text) {
  std::string out = "\"";
  for (char c : text) {
    auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (u < 0x20 || u == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\u%04X", u);
      out += buf;
    } else {
      out += c;
    }
  }
  out += '"';
  return out;
}

namespace {

std::string Quoted(const std::string& text) { return TomlString(text); }

std::string List(const std::vector<std::string>& items) {
  std::vector<std::string> quoted;
  quoted.reserve(items.size());
  for (const std::string& item : items) {
    quoted.push_back(Quoted(item));
  }
  return absl::StrCat("[", absl::StrJoin(quoted, ", "), "]");
}

std::string Size(int64_t mib) {
  return mib % 1024 == 0 ? absl::StrCat("\"", mib / 1024, "GiB\"") : absl::StrCat(mib);
}

// A comment line: no line break may end the comment early and start a key.
std::string Comment(const std::string& text) {
  return absl::StrCat("# ", absl::StrReplaceAll(text, {{"\n", " "}, {"\r", " "}}), "\n");
}

}  // namespace

std::string FormatTemplate(const ProjectTemplate& t) {
  std::string out =
      Comment(absl::StrCat("abox project template (docs/templates.md); from ", t.source));
  if (!t.detected.empty()) {
    out += Comment(absl::StrCat("detected: ", absl::StrJoin(t.detected, ", ")));
  }
  for (const std::string& note : t.notes) {
    out += Comment(absl::StrCat("note: ", note));
  }
  if (t.image.has_value()) {
    absl::StrAppend(&out, "image = ", Quoted(*t.image), "\n");
  }
  if (t.preset.has_value()) {
    absl::StrAppend(&out, "preset = ", Quoted(*t.preset), "\n");
  }
  if (!t.packages.empty()) {
    absl::StrAppend(&out, "packages = ", List(t.packages), "\n");
  }
  if (!t.setup.empty()) {
    absl::StrAppend(&out, "setup = ", List(t.setup), "\n");
  }
  if (!t.setup_root.empty()) {
    absl::StrAppend(&out, "setup_root = ", List(t.setup_root), "\n");
  }
  if (t.cpus.has_value() || t.memory_mib.has_value() || t.disk_mib.has_value()) {
    out += "\n[resources]\n";
    if (t.cpus.has_value()) {
      absl::StrAppend(&out, "cpus = ", *t.cpus, "\n");
    }
    if (t.memory_mib.has_value()) {
      absl::StrAppend(&out, "memory = ", Size(*t.memory_mib), "\n");
    }
    if (t.disk_mib.has_value()) {
      absl::StrAppend(&out, "disk = ", Size(*t.disk_mib), "\n");
    }
  }
  if (!t.egress_allow.empty() || !t.setup_allow.empty()) {
    out += "\n[egress]\n";
    if (!t.egress_allow.empty()) {
      absl::StrAppend(&out, "allow = ", List(t.egress_allow), "\n");
    }
    if (!t.setup_allow.empty()) {
      absl::StrAppend(&out, "setup_allow = ", List(t.setup_allow), "\n");
    }
  }
  return out;
}

}  // namespace abox::tmpl
