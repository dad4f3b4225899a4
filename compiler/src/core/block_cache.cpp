// Size-class cache of large blocks. Capacity comes from CRUCIBLE_ALLOC_CACHE_MB (default 4096; 0
// disables it, leaving large allocations to whatever malloc the launcher preloaded).
#include "crucible/core/block_cache.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstdlib>
#include <mutex>
#include <new>
#include <unordered_map>
#include <vector>

// Under AddressSanitizer a cached block is poisoned until it is handed out again: reusing freed
// memory would otherwise hide a use-after-free of a tensor from the sanitizer.
#if defined(__SANITIZE_ADDRESS__)
#define CRUCIBLE_BLOCK_CACHE_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CRUCIBLE_BLOCK_CACHE_ASAN 1
#endif
#endif
#ifdef CRUCIBLE_BLOCK_CACHE_ASAN
#include <sanitizer/asan_interface.h>
#define CRUCIBLE_POISON(p, n) ASAN_POISON_MEMORY_REGION(p, n)
#define CRUCIBLE_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION(p, n)
#else
#define CRUCIBLE_POISON(p, n) ((void)(p), (void)(n))
#define CRUCIBLE_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

namespace crucible {

namespace {

struct Cache {
  std::mutex mu;
  std::unordered_map<size_t, std::vector<void*>> free_blocks;
  size_t cached = 0;
  size_t capacity = 0;

  Cache() {
    size_t mb = 4096;
    if (const char* env = std::getenv("CRUCIBLE_ALLOC_CACHE_MB"))
      mb = std::strtoull(env, nullptr, 10);
    capacity = mb << 20;
  }
};

Cache& cache() {
  static Cache* c =
      new Cache();  // leaked on purpose: tensors may be freed during static destruction
  return *c;
}

// A large block's size class: its size rounded up to a half of its power of two (classes at 1,
// 1.5 and 2 times a power of two: at most 50% more address space, and pages past what a tensor
// writes are never touched). A training step's tensors come in hundreds of sizes; cached by exact
// size, each size kept the most blocks it ever had at once, and no block served a tensor a byte
// larger (densenet121's step at batch 4: eager's worker 1250 -> 909 MB resident). Powers of two
// (864 MB) could double a block's address space, which RLIMIT_AS, the memory limit where no
// cgroup can be made, counts.
size_t size_class(size_t bytes) {
  const int shift = std::max(0, static_cast<int>(std::bit_width(bytes)) - 2);
  const size_t step = size_t{1} << shift;
  return (bytes + step - 1) & ~(step - 1);
}

void* system_alloc(size_t bytes) {
  void* p = std::aligned_alloc(64, bytes);
  if (p == nullptr) throw std::bad_alloc();
  return p;
}

std::atomic<size_t> g_in_use{0};
std::atomic<size_t> g_peak{0};

void count_alloc(size_t bytes) {
  const size_t now = g_in_use.fetch_add(bytes, std::memory_order_relaxed) + bytes;
  size_t peak = g_peak.load(std::memory_order_relaxed);
  while (now > peak && !g_peak.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
  }
}

void* take(size_t bytes) {
  if (bytes < kBlockCacheMinBytes) return system_alloc(bytes);
  Cache& c = cache();
  // Off (CRUCIBLE_ALLOC_CACHE_MB=0), every size goes to malloc as asked.
  if (c.capacity == 0) return system_alloc(bytes);
  const size_t cls = size_class(bytes);
  {
    std::lock_guard lock(c.mu);
    auto it = c.free_blocks.find(cls);
    if (it != c.free_blocks.end() && !it->second.empty()) {
      void* p = it->second.back();
      it->second.pop_back();
      c.cached -= cls;
      CRUCIBLE_UNPOISON(p, bytes);  // the class's tail stays poisoned: no tensor may reach it
      return p;
    }
  }
  void* p = system_alloc(cls);
  CRUCIBLE_POISON(static_cast<char*>(p) + bytes, cls - bytes);
  return p;
}

}  // namespace

void* block_alloc(size_t bytes) {
  void* p = take(bytes);
  count_alloc(bytes);
  return p;
}

size_t storage_bytes_in_use() { return g_in_use.load(std::memory_order_relaxed); }
size_t storage_peak_bytes() { return g_peak.load(std::memory_order_relaxed); }
void storage_peak_reset() { g_peak.store(g_in_use.load(std::memory_order_relaxed)); }

void block_free(void* p, size_t bytes) {
  if (p == nullptr) return;
  g_in_use.fetch_sub(bytes, std::memory_order_relaxed);
  if (bytes >= kBlockCacheMinBytes && cache().capacity > 0) {
    const size_t cls = size_class(bytes);
    Cache& c = cache();
    std::lock_guard lock(c.mu);
    if (c.cached + cls <= c.capacity) {
      c.free_blocks[cls].push_back(p);
      c.cached += cls;
      CRUCIBLE_POISON(p, cls);
      return;
    }
  }
  std::free(p);
}

size_t block_cache_bytes() {
  Cache& c = cache();
  std::lock_guard lock(c.mu);
  return c.cached;
}

void block_cache_clear() {
  Cache& c = cache();
  std::lock_guard lock(c.mu);
  for (auto& [size, blocks] : c.free_blocks) {
    for (void* p : blocks) {
      CRUCIBLE_UNPOISON(p, size);
      std::free(p);
    }
  }
  c.free_blocks.clear();
  c.cached = 0;
}

}  // namespace crucible
