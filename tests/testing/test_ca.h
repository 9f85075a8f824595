// A throwaway TLS CA and one leaf for the e2e tests' fake upstreams (openssl on the host): the
// daemon trusts the CA with --test-upstream-ca and reaches the names through
// --test-resolver-override, so it verifies a real certificate chain for a name, as it would a
// real provider's.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace abox::testing {

// Writes ca.pem (and ca.key), leaf.pem and leaf.key, a leaf for `names` signed by the CA, into
// `dir`. False when openssl failed.
inline bool MakeTestCa(const std::filesystem::path& dir, const std::vector<std::string>& names) {
  std::vector<std::string> sans;
  for (const std::string& n : names) {
    sans.push_back("DNS:" + n);
  }
  std::ofstream(dir / "ext.cnf") << "subjectAltName=" << absl::StrJoin(sans, ",") << "\n";
  std::string script = absl::StrCat(
      "cd '", dir.string(),
      "' && openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=abox-test-ca "
      "-addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign "
      "-keyout ca.key -out ca.pem && openssl req -newkey rsa:2048 -nodes -subj /CN=",
      names.front(),
      " -keyout leaf.key -out leaf.csr && openssl x509 -req -in leaf.csr -CA ca.pem "
      "-CAkey ca.key -CAcreateserial -days 1 -extfile ext.cnf -out leaf.pem");
  return std::system(absl::StrCat("sh -ec \"", script, "\" >/dev/null 2>&1").c_str()) ==
         0;  // NOLINT
}

}  // namespace abox::testing
