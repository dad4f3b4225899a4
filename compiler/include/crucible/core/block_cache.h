// A process-wide cache of large freed storage blocks, reused by size class (block_cache.cpp), so
// that op-by-op execution does not pay fresh page faults for every output (as PyTorch's caching
// allocators avoid).
#pragma once

#include <cstddef>

namespace crucible {

// Blocks of at least this many bytes go through the cache; smaller ones go straight to malloc.
inline constexpr size_t kBlockCacheMinBytes = size_t{64} << 10;

// 64-byte-aligned memory of `bytes` (already rounded by the caller to a multiple of 64).
void* block_alloc(size_t bytes);
void block_free(void* p, size_t bytes);

// Bytes currently held in the cache (freed but not returned to the system).
size_t block_cache_bytes();
// Returns every cached block to the system.
void block_cache_clear();

// Bytes of tensor storage in use (allocated by block_alloc, in its 64-byte multiples, and not yet
// freed), and the most in use at once since the last reset: a backend's working-set peak, free of
// the allocator's caching and of process overheads that RSS includes (as torch's
// max_memory_allocated).
size_t storage_bytes_in_use();
size_t storage_peak_bytes();
void storage_peak_reset();  // peak := in use now

}  // namespace crucible
