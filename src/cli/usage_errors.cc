#include "src/cli/usage_errors.h"

#include <algorithm>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "src/cli/output.h"

namespace abox::cli {
namespace {

constexpr int kUsageExit = 2;

// A flag as compared: without its leading dashes and "=VALUE".
std::string_view Core(std::string_view flag) {
  while (!flag.empty() && flag.front() == '-') {
    flag.remove_prefix(1);
  }
  return flag.substr(0, flag.find('='));
}

bool LooksLikeFlag(std::string_view arg) { return arg.size() > 1 && arg.front() == '-'; }

// Every way to spell a flag of `app`: "--memory", "-e", "--no-stdin", "-h", "--help".
std::vector<std::string> FlagSpellings(const CLI::App& app) {
  std::vector<std::string> out;
  for (const CLI::Option* opt : app.get_options()) {
    for (const std::string& name : opt->get_lnames()) {
      out.push_back("--" + name);
    }
    for (const std::string& name : opt->get_snames()) {
      out.push_back("-" + name);
    }
  }
  return out;
}

// The subcommands of `app` by name.
std::vector<std::string> SubcommandNames(const CLI::App& app) {
  std::vector<std::string> out;
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
    if (!sub->get_name().empty()) {
      out.push_back(sub->get_name());
    }
  }
  return out;
}

// The app (of `app` and the subcommands it parsed) left holding arguments it could not place,
// the deepest first; nullptr when none is.
const CLI::App* AppWithExtras(const CLI::App& app) {
  for (const CLI::App* sub : app.get_subcommands()) {
    if (const CLI::App* found = AppWithExtras(*sub)) {
      return found;
    }
  }
  return app.remaining_size(false) > 0 ? &app : nullptr;
}

// "abox run: " before an error about `abox run`; nothing for abox itself ("abox: error: " is
// there already).
std::string Prefix(const CLI::App& app) {
  return app.get_parent() == nullptr ? "" : absl::StrCat(CommandPath(app), ": ");
}

std::string DidYouMean(const std::string& nearest) {
  return nearest.empty() ? "" : absl::StrCat("; did you mean ", nearest, "?");
}

}  // namespace

int EditDistance(std::string_view a, std::string_view b) {
  // d[i][j]: distance between a[0, i) and b[0, j).
  std::vector<std::vector<int>> d(a.size() + 1, std::vector<int>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) {
    d[i][0] = static_cast<int>(i);
  }
  for (size_t j = 0; j <= b.size(); ++j) {
    d[0][j] = static_cast<int>(j);
  }
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j) {
      int cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[a.size()][b.size()];
}

std::string NearestSpelling(std::string_view typed, const std::vector<std::string>& candidates) {
  std::string_view core = Core(typed);
  if (core.empty()) {
    return "";
  }
  std::string best;
  int best_distance = 3;                     // more than 2 edits is not a typo
  std::vector<const std::string*> extended;  // candidates `typed` is a prefix of
  for (const std::string& candidate : candidates) {
    std::string_view other = Core(candidate);
    int d = EditDistance(core, other);
    if (d < best_distance && d * 3 <= static_cast<int>(std::max(core.size(), other.size()))) {
      best = candidate;
      best_distance = d;
    }
    if (core.size() >= 3 && other.substr(0, core.size()) == core) {
      extended.push_back(&candidate);
    }
  }
  if (best.empty() && extended.size() == 1) {
    best = *extended.front();
  }
  return best;
}

std::string CommandPath(const CLI::App& app) {
  std::vector<std::string> names;
  for (const CLI::App* a = &app; a != nullptr; a = a->get_parent()) {
    names.push_back(a->get_parent() == nullptr ? "abox" : a->get_name());
  }
  std::reverse(names.begin(), names.end());
  std::string out;
  for (const std::string& name : names) {
    absl::StrAppend(&out, out.empty() ? "" : " ", name);
  }
  return out;
}

absl::Status UnknownFlag(const CLI::App& app, std::string_view arg) {
  std::string path = CommandPath(app);
  std::string flag(arg.substr(0, arg.find('=')));
  return absl::InvalidArgumentError(absl::StrCat(
      Prefix(app), "unknown flag ", flag, DidYouMean(NearestSpelling(arg, FlagSpellings(app))),
      " (`", path, " --help` lists the flags)"));
}

absl::Status CheckCommandStart(const CLI::App& app, const std::vector<std::string>& remaining) {
  // CLI11 stops at the first argument that is not an option (the command line's first word) and
  // hands back that word, everything after it, and every unknown flag before it.
  if (!remaining.empty() && LooksLikeFlag(remaining.front())) {
    return UnknownFlag(app, remaining.front());
  }
  return absl::OkStatus();
}

std::vector<std::string> CommandLine(std::vector<std::string> words, bool had_separator,
                                     const std::vector<std::string>& tail) {
  if (!had_separator) {
    return words;
  }
  if (words.empty()) {
    return tail;
  }
  words.emplace_back("--");
  words.insert(words.end(), tail.begin(), tail.end());
  return words;
}

namespace {

// Prints what is wrong with the arguments CLI11 could not place and returns the exit code;
// nullopt when none of them is an unknown flag or command.
std::optional<int> ExplainExtras(const CLI::App& app) {
  const CLI::App* where = AppWithExtras(app);
  if (where == nullptr) {
    return std::nullopt;
  }
  std::vector<std::string> extras = where->remaining(false);
  if (where->get_prefix_command()) {
    // Its extras are its command line, after any unknown flag: only one in front is wrong.
    if (absl::Status s = CheckCommandStart(*where, extras); !s.ok()) {
      PrintError(s);
      return kUsageExit;
    }
    return std::nullopt;
  }
  if (auto flag = std::find_if(extras.begin(), extras.end(), LooksLikeFlag); flag != extras.end()) {
    PrintError(UnknownFlag(*where, *flag));
    return kUsageExit;
  }
  std::vector<std::string> commands = SubcommandNames(*where);
  if (!commands.empty() && where->get_subcommands().empty()) {
    std::string path = CommandPath(*where);
    PrintError(absl::InvalidArgumentError(
        absl::StrCat(Prefix(*where), "unknown command '", extras.front(), "'",
                     DidYouMean(NearestSpelling(extras.front(), commands)), " (`", path,
                     " --help` lists the commands)")));
    return kUsageExit;
  }
  return std::nullopt;
}

}  // namespace

std::optional<int> ParseCommandLine(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
    return std::nullopt;
  } catch (const CLI::Success& e) {  // --help, --version
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // An unknown flag or command is the likelier cause of any error it comes with (`abox inspect
    // --jsno` also lacks its id): say that first.
    if (std::optional<int> code = ExplainExtras(app)) {
      return code;
    }
    return app.exit(e);
  }
}

}  // namespace abox::cli
