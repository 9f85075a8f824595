#include "src/net/leaf_cache.h"

#include <openssl/ssl.h>

#include <cstdlib>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "src/base/status_macros.h"

namespace abox::net {
namespace {

// ALPN: http/1.1 when offered, else none (the client then speaks HTTP/1.1 or gives up).
int SelectHttp11(SSL* /*ssl*/, const unsigned char** out, unsigned char* out_len,
                 const unsigned char* in, unsigned int in_len, void* /*arg*/) {
  static constexpr unsigned char kHttp11[] = {8, 'h', 't', 't', 'p', '/', '1', '.', '1'};
  unsigned char* selected = nullptr;
  if (SSL_select_next_proto(&selected, out_len, kHttp11, sizeof(kHttp11), in, in_len) ==
      OPENSSL_NPN_NEGOTIATED) {
    *out = selected;
    return SSL_TLSEXT_ERR_OK;
  }
  return SSL_TLSEXT_ERR_NOACK;
}

}  // namespace

absl::StatusOr<SslCtxPtr> MakeInterceptServerContext(const InterceptLeaf& leaf) {
  SslCtxPtr ctx(SSL_CTX_new(TLS_server_method()));
  if (!ctx) {
    return OpenSslError("SSL_CTX_new");
  }
  // TLS 1.0/1.1 are obsolete (RFC 8996); renegotiation could change what the proxy checked.
  if (SSL_CTX_set_min_proto_version(ctx.get(), TLS1_2_VERSION) != 1) {
    return OpenSslError("SSL_CTX_set_min_proto_version");
  }
  SSL_CTX_set_options(ctx.get(), SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE);
  if (SSL_CTX_use_certificate(ctx.get(), leaf.cert.get()) != 1 ||
      SSL_CTX_use_PrivateKey(ctx.get(), leaf.key.get()) != 1 ||
      SSL_CTX_check_private_key(ctx.get()) != 1) {
    return OpenSslError(absl::StrCat("server certificate for ", leaf.host));
  }
  SSL_CTX_set_alpn_select_cb(ctx.get(), SelectHttp11, nullptr);
  return ctx;
}

LeafCache::LeafCache(const InterceptCa& ca, Options options)
    : ca_(ca), options_(std::move(options)) {
  if (options_.capacity == 0 || !options_.now) {
    std::abort();  // A caller's bug: the cache could hold nothing, or has no clock.
  }
}

absl::StatusOr<std::shared_ptr<const LeafCache::Entry>> LeafCache::Get(absl::string_view host) {
  ABOX_ASSIGN_OR_RETURN(const std::string key, NormalizeCertificateHost(host));
  const absl::Time now = options_.now();
  {
    std::lock_guard lock(mu_);
    auto it = slots_.find(key);
    if (it != slots_.end()) {
      if (it->second.entry->leaf.not_after - options_.renew_before > now) {
        ++stats_.hits;
        lru_.splice(lru_.begin(), lru_, it->second.lru);
        return it->second.entry;
      }
      ++stats_.renewals;
    }
    ++stats_.misses;
  }

  auto entry = std::make_shared<Entry>();
  ABOX_ASSIGN_OR_RETURN(entry->leaf, ca_.IssueLeaf(key, now));
  ABOX_ASSIGN_OR_RETURN(entry->server_ctx, MakeInterceptServerContext(entry->leaf));

  std::lock_guard lock(mu_);
  auto it = slots_.find(key);
  if (it != slots_.end()) {
    it->second.entry = entry;
    lru_.splice(lru_.begin(), lru_, it->second.lru);
  } else {
    lru_.push_front(key);
    slots_.emplace(key, Slot{entry, lru_.begin()});
    while (slots_.size() > options_.capacity) {
      slots_.erase(lru_.back());
      lru_.pop_back();
      ++stats_.evictions;
    }
  }
  return std::shared_ptr<const Entry>(std::move(entry));
}

LeafCache::Stats LeafCache::stats() const {
  std::lock_guard lock(mu_);
  Stats out = stats_;
  out.size = slots_.size();
  return out;
}

}  // namespace abox::net
