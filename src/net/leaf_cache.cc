#include "src/net/leaf_cache.h"

#include <cstdlib>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "src/base/status_macros.h"
#include "src/net/host_name.h"

namespace abox::net {

LeafCache::LeafCache(const InterceptCa& ca, Options options)
    : ca_(ca), options_(std::move(options)) {
  if (options_.capacity == 0 || !options_.now) {
    std::abort();  // A caller's bug: the cache could hold nothing, or has no clock.
  }
}

absl::StatusOr<std::shared_ptr<const LeafCache::Entry>> LeafCache::Get(absl::string_view host) {
  auto normalized = NormalizeHostName(host);
  if (!normalized.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("no interception certificate for ",
                                                   QuoteForLog(host), ": ",
                                                   normalized.status().message()));
  }
  const std::string& key = *normalized;
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
