// libFuzzer target: the request target (path + query) is untrusted. SplitTarget, PercentDecode
// and Router::Find must never crash, and a matched capture is never ".", ".." or has a '/'.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "src/http/request.h"
#include "src/http/router.h"

namespace {

void Check(bool condition) {
  if (!condition) {
    std::abort();
  }
}

const abox::http::Router& TestRouter() {
  static const abox::http::Router* router = [] {
    auto* r = new abox::http::Router();
    auto noop = [](abox::http::Request&, abox::http::Responder&) {};
    Check(r->Add("GET", "/v1/sandboxes", noop).ok());
    Check(r->Add("GET", "/v1/sandboxes/{id}", noop).ok());
    Check(r->Add("POST", "/v1/sandboxes/{id}/execs", noop).ok());
    Check(r->Add("GET", "/v1/sandboxes/{id}/execs/{exec}", noop).ok());
    Check(r->Add("GET", "/v1/sandboxes/search", noop).ok());
    return r;
  }();
  return *router;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  absl::string_view target(reinterpret_cast<const char*>(data), size);
  std::string path;
  std::vector<std::pair<std::string, std::string>> query;
  if (!abox::http::SplitTarget(target, &path, &query).ok()) {
    return 0;
  }
  Check(!path.empty() && path.front() == '/');
  for (const char* method : {"GET", "POST", "HEAD"}) {
    absl::StatusOr<abox::http::Router::Match> match = TestRouter().Find(method, path);
    if (!match.ok()) {
      continue;
    }
    for (const auto& [name, value] : match->params) {
      Check(!value.empty() && value != "." && value != "..");
      Check(value.find('/') == std::string::npos && value.find('\0') == std::string::npos);
    }
  }
  return 0;
}
