// A bounded cache of per-shape plans (oneDNN primitives, their layouts and reorders) for the
// kernels that build one per problem shape: creating a plan costs far more than a small call.
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <mutex>

namespace crucible {

template <typename Key, typename Plan, typename Map = std::map<Key, std::shared_ptr<const Plan>>>
class PlanCache {
 public:
  explicit PlanCache(size_t max_entries) : max_entries_(max_entries) {}

  // The plan kept for `key`, else `build()`'s (which may be null: "no plan", kept too). It is
  // built outside the lock: two threads may race to build the same plan, which is harmless. Past
  // max_entries the cache starts over, so shape-polymorphic workloads do not grow it forever.
  template <typename Build>
  std::shared_ptr<const Plan> get(const Key& key, Build&& build) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (auto it = plans_.find(key); it != plans_.end()) return it->second;
    }
    std::shared_ptr<const Plan> plan = build();
    std::lock_guard<std::mutex> lock(mutex_);
    if (plans_.size() >= max_entries_) plans_.clear();
    return plans_.emplace(key, std::move(plan)).first->second;
  }

 private:
  std::mutex mutex_;
  Map plans_;
  size_t max_entries_;
};

}  // namespace crucible
