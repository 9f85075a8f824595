#include "src/image/kernel_modules.h"

#include <archive.h>
#include <archive_entry.h>

#include <memory>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "src/base/io.h"

namespace abox::image {
namespace {

bool SafeRelativePath(absl::string_view p) {
  if (p.empty() || p[0] == '/') {
    return false;
  }
  for (absl::string_view part : absl::StrSplit(p, '/')) {
    if (part == "..") {
      return false;
    }
  }
  return true;
}

enum class Mark { kNone, kVisiting, kDone };

struct Resolver {
  const ModuleIndex& index;
  std::map<std::string, Mark> marks;
  std::vector<ModuleToLoad> out;

  absl::Status Visit(const std::string& name, const std::string& needed_by) {
    if (index.builtin.count(name) != 0) {
      return absl::OkStatus();
    }
    Mark& mark = marks[name];
    if (mark == Mark::kDone) {
      return absl::OkStatus();
    }
    if (mark == Mark::kVisiting) {
      return absl::FailedPreconditionError(
          absl::StrCat("kernel module dependency cycle through ", name));
    }
    auto path = index.path.find(name);
    if (path == index.path.end()) {
      return absl::NotFoundError(
          absl::StrCat("kernel module ", name, needed_by.empty() ? "" : " (needed by ", needed_by,
                       needed_by.empty() ? "" : ")", " is neither built in nor in modules.dep"));
    }
    mark = Mark::kVisiting;
    if (auto deps = index.deps.find(name); deps != index.deps.end()) {
      for (const std::string& dep : deps->second) {
        if (absl::Status s = Visit(dep, name); !s.ok()) {
          return s;
        }
      }
    }
    marks[name] = Mark::kDone;
    out.push_back({name, path->second});
    return absl::OkStatus();
  }
};

}  // namespace

std::string NormalizeModuleName(absl::string_view p) {
  if (size_t slash = p.rfind('/'); slash != absl::string_view::npos) {
    p.remove_prefix(slash + 1);
  }
  for (absl::string_view ext : {".xz", ".zst", ".gz"}) {
    if (absl::ConsumeSuffix(&p, ext)) {
      break;
    }
  }
  absl::ConsumeSuffix(&p, ".ko");
  std::string name(p);
  for (char& c : name) {
    if (c == '-') {
      c = '_';
    }
  }
  return name;
}

absl::StatusOr<ModuleIndex> ParseModuleIndex(absl::string_view modules_dep,
                                             absl::string_view modules_builtin) {
  ModuleIndex index;
  int line_no = 0;
  for (absl::string_view line : absl::StrSplit(modules_dep, '\n')) {
    ++line_no;
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || line[0] == '#') {
      continue;
    }
    size_t colon = line.find(':');
    if (colon == absl::string_view::npos) {
      return absl::InvalidArgumentError(absl::StrCat("modules.dep line ", line_no, ": no ':'"));
    }
    absl::string_view path = line.substr(0, colon);
    if (!SafeRelativePath(path)) {
      return absl::InvalidArgumentError(
          absl::StrCat("modules.dep line ", line_no, ": unsafe path ", path));
    }
    std::string name = NormalizeModuleName(path);
    index.path[name] = std::string(path);
    std::vector<std::string>& deps = index.deps[name];
    for (absl::string_view dep :
         absl::StrSplit(line.substr(colon + 1), ' ', absl::SkipWhitespace())) {
      deps.push_back(NormalizeModuleName(dep));
    }
  }
  for (absl::string_view line : absl::StrSplit(modules_builtin, '\n')) {
    line = absl::StripAsciiWhitespace(line);
    if (!line.empty()) {
      index.builtin.insert(NormalizeModuleName(line));
    }
  }
  return index;
}

absl::StatusOr<std::vector<ModuleToLoad>> ResolveModuleLoadOrder(
    const ModuleIndex& index, const std::vector<WantedModule>& wanted) {
  Resolver r{index, {}, {}};
  for (const WantedModule& w : wanted) {
    std::string name = NormalizeModuleName(w.name);
    if (!w.required && index.builtin.count(name) == 0 && index.path.count(name) == 0) {
      continue;
    }
    if (absl::Status s = r.Visit(name, ""); !s.ok()) {
      return s;
    }
  }
  return std::move(r.out);
}

absl::StatusOr<std::string> ReadModuleFile(const std::filesystem::path& path, size_t limit) {
  if (absl::EndsWith(path.string(), ".ko")) {
    return base::ReadFile(path.string(), limit);
  }
  std::unique_ptr<archive, int (*)(archive*)> a(archive_read_new(), archive_read_free);
  archive_read_support_filter_all(a.get());
  archive_read_support_format_raw(a.get());
  archive_entry* entry = nullptr;
  if (archive_read_open_filename(a.get(), path.c_str(), 1 << 16) != ARCHIVE_OK ||
      archive_read_next_header(a.get(), &entry) != ARCHIVE_OK) {
    return absl::DataLossError(
        absl::StrCat("cannot decompress ", path.string(), ": ", archive_error_string(a.get())));
  }
  if (archive_filter_code(a.get(), 0) == ARCHIVE_FILTER_NONE) {
    return absl::DataLossError(
        absl::StrCat(path.string(), " is not compressed although its name says so"));
  }
  std::string out;
  char buf[1 << 16];
  for (;;) {
    la_ssize_t n = archive_read_data(a.get(), buf, sizeof(buf));
    if (n < 0) {
      return absl::DataLossError(
          absl::StrCat("cannot decompress ", path.string(), ": ", archive_error_string(a.get())));
    }
    if (n == 0) {
      break;
    }
    out.append(buf, static_cast<size_t>(n));
    if (out.size() > limit) {
      return absl::ResourceExhaustedError(absl::StrCat(path.string(), " is larger than ", limit));
    }
  }
  return out;
}

}  // namespace abox::image
