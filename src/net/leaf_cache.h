// Leaf certificates and their server SSL_CTX per intercepted host, kept in an LRU so the proxy
// signs a certificate and builds a context once per host, not per connection.
//
// Thread-safe. A miss issues outside the lock (two threads missing the same host both issue;
// the second result replaces the first, both are valid). An entry is re-issued when it is within
// `renew_before` of its notAfter by the injected clock, so a long-running aboxd never presents an
// expired leaf. Hosts are normalised (NormalizeHostName) before lookup: "API.Example.com." and
// "api.example.com" share an entry.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "src/net/intercept_ca.h"

namespace abox::net {

// A server-side SSL_CTX presenting `leaf` (the proxy's end of a terminated connection):
// TLS 1.2 and 1.3 only, no renegotiation; ALPN picks "http/1.1" when the client offers it and
// negotiates none otherwise (the proxy speaks HTTP/1.1 only). A caller wanting other ALPN
// replaces the callback with SSL_CTX_set_alpn_select_cb before sharing the context. Safe to
// share between threads once made (SSL_new per connection).
[[nodiscard]] absl::StatusOr<SslCtxPtr> MakeInterceptServerContext(const InterceptLeaf& leaf);

class LeafCache final {
 public:
  struct Options {
    size_t capacity = 256;
    absl::Duration renew_before = absl::Hours(24);
    std::function<absl::Time()> now = [] { return absl::Now(); };
  };

  // What the proxy needs to terminate TLS for one host.
  struct Entry {
    InterceptLeaf leaf;
    SslCtxPtr server_ctx;  // MakeInterceptServerContext(leaf); SSL_new per connection
  };

  struct Stats {
    uint64_t hits = 0;
    uint64_t misses = 0;    // absent, or renewed (counted in `renewals` too)
    uint64_t renewals = 0;  // present but within renew_before of notAfter
    uint64_t evictions = 0;
    size_t size = 0;
  };

  // `ca` must outlive the cache. capacity >= 1.
  LeafCache(const InterceptCa& ca, Options options);
  LeafCache(const LeafCache&) = delete;
  LeafCache& operator=(const LeafCache&) = delete;

  // The entry for `host`, issued on a miss. InvalidArgument as InterceptCa::IssueLeaf.
  [[nodiscard]] absl::StatusOr<std::shared_ptr<const Entry>> Get(absl::string_view host);

  // Counters since construction (for the hit-rate benchmark).
  [[nodiscard]] Stats stats() const;

 private:
  struct Slot {
    std::shared_ptr<const Entry> entry;
    std::list<std::string>::iterator lru;  // position in lru_
  };

  const InterceptCa& ca_;
  const Options options_;
  mutable std::mutex mu_;
  std::list<std::string> lru_;  // most recently used first
  std::unordered_map<std::string, Slot> slots_;
  Stats stats_;
};

}  // namespace abox::net
