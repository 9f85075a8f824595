#include "bench/snapshot_api.h"

#include <sys/socket.h>
#include <sys/time.h>

#include <cstdio>
#include <regex>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "nlohmann/json.hpp"
#include "src/base/io.h"

namespace abox::bench {

using http::httptest::HttpTestClient;
using http::httptest::Response;

namespace {

void Warn(const std::string& what) { std::fprintf(stderr, "snapshot_bench: %s\n", what.c_str()); }

}  // namespace

std::unique_ptr<HttpTestClient> SlowConnect(const BenchHome& home, int seconds) {
  auto c = Connect(home);
  if (c == nullptr) {
    return nullptr;
  }
  timeval tv{.tv_sec = seconds, .tv_usec = 0};
  if (::setsockopt(c->fd(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) != 0) {
    return nullptr;
  }
  return c;
}

Response SlowCall(const BenchHome& home, const std::string& method, const std::string& target,
                  const std::string& body) {
  auto c = SlowConnect(home);
  if (c == nullptr) {
    return {};
  }
  auto r = c->Request(method, target, body);
  if (!r.ok()) {
    Warn(absl::StrCat(method, " ", target, ": ", r.status().message()));
    return {};
  }
  return *r;
}

bool RunTrue(const BenchHome& home, const std::string& sandbox) {
  const std::string base = absl::StrCat("/v1/sandboxes/", sandbox, "/execs");
  Response started = SlowCall(home, "POST", base, R"({"argv":["true"]})");
  if (started.status != 201) {
    Warn(absl::StrCat("POST ", base, " answered ", started.status, ": ", started.body));
    return false;
  }
  std::string exec = started.Json().value("id", "");
  Response output = SlowCall(home, "GET", absl::StrCat(base, "/", exec, "/output"));
  std::vector<std::string> lines = absl::StrSplit(output.body, '\n', absl::SkipEmpty());
  nlohmann::json exit =
      lines.empty() ? nlohmann::json() : nlohmann::json::parse(lines.back(), nullptr, false);
  if (output.status != 200 || !exit.is_object() || exit.value("type", "") != "exit" ||
      !exit["exec"].is_object() || exit["exec"].value("exit_code", -1) != 0) {
    Warn(absl::StrCat("`true` in ", sandbox, " did not exit 0: ", output.body));
    return false;
  }
  return true;
}

ReadyInfo ReadReady(const BenchHome& home, const std::string& sandbox) {
  ReadyInfo info;
  auto c = Connect(home);  // the event is in the history already: the short timeout is plenty
  if (c == nullptr ||
      !c->Send("GET", absl::StrCat("/v1/events?since=0&sandbox=", sandbox), "").ok() ||
      !c->ReadHeader().ok()) {
    return info;
  }
  auto text = c->ReadUntil(R"("started_from":")");
  if (!text.ok()) {
    return info;
  }
  // The payload's keys are sorted; started_from is the last one the ready step writes.
  static const std::regex boot_re(R"re("boot_ms":(\d+))re");
  static const std::regex from_re(R"re("started_from":"(\w+)")re");
  static const std::regex note_re(R"re("snapshot_note":"((?:[^"\\]|\\.)*)")re");
  std::smatch m;
  if (std::regex_search(*text, m, boot_re)) {
    (void)absl::SimpleAtoi(m[1].str(), &info.boot_ms);
  }
  if (std::regex_search(*text, m, from_re)) {
    info.started_from = m[1].str();
  }
  if (std::regex_search(*text, m, note_re)) {
    info.note = m[1].str();
  }
  return info;
}

std::optional<std::pair<double, double>> PssRss(int64_t pid) {
  auto text = abox::base::ReadFile(absl::StrCat("/proc/", pid, "/smaps_rollup"), 1 << 16);
  if (!text.ok()) {
    return std::nullopt;
  }
  double pss = -1;
  double rss = -1;
  for (absl::string_view line : absl::StrSplit(*text, '\n')) {
    std::vector<absl::string_view> f = absl::StrSplit(line, ' ', absl::SkipEmpty());
    if (f.size() >= 2 && f[0] == "Pss:") {
      (void)absl::SimpleAtod(f[1], &pss);
    } else if (f.size() >= 2 && f[0] == "Rss:") {
      (void)absl::SimpleAtod(f[1], &rss);
    }
  }
  if (pss < 0 || rss < 0) {
    return std::nullopt;
  }
  return std::make_pair(pss, rss);
}

std::string TemplateLine(const BenchHome& home) {
  auto log = abox::base::ReadFile(home.log(), 16 << 20);
  static const std::regex line_re(R"re(golden template (\S+) (made|loaded) in (\d+) ms)re");
  if (!log.ok()) {
    return "";
  }
  for (absl::string_view line : absl::StrSplit(*log, '\n')) {
    std::smatch m;
    std::string text(line);
    if (absl::StrContains(line, "golden template") && std::regex_search(text, m, line_re)) {
      return absl::StrCat(m[2].str(), " in ", m[3].str(), " ms (", m[1].str(), ")");
    }
  }
  return "";
}

}  // namespace abox::bench
