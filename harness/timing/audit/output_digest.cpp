// A four-lane multiply-rotate hash over 8-byte words: several GB/s, so digesting a call's outputs
// costs little beside the call itself; outputs of megabytes are hashed in chunks on OpenMP's
// threads. Not cryptographic: it detects changes, not attackers forging collisions (a plugin that
// could forge them could also read the reference digests).
#include "output_digest.h"

#include <algorithm>
#include <cstring>

namespace crucible {

namespace {

constexpr uint64_t kP1 = 0x9E3779B185EBCA87ull;
constexpr uint64_t kP2 = 0xC2B2AE3D27D4EB4Full;

inline uint64_t rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }
inline uint64_t round(uint64_t acc, uint64_t word) { return rotl(acc + word * kP2, 31) * kP1; }
inline uint64_t mix(uint64_t h) {
  h ^= h >> 33;
  h *= kP2;
  h ^= h >> 29;
  h *= kP1;
  return h ^ (h >> 32);
}

uint64_t hash_bytes(const unsigned char* p, size_t n, uint64_t seed) {
  uint64_t lane[4] = {seed + kP1 + kP2, seed + kP2, seed, seed - kP1};
  size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    for (int l = 0; l < 4; ++l) {
      uint64_t w;
      std::memcpy(&w, p + i + 8 * l, 8);
      lane[l] = round(lane[l], w);
    }
  }
  uint64_t h = rotl(lane[0], 1) + rotl(lane[1], 7) + rotl(lane[2], 12) + rotl(lane[3], 18);
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    std::memcpy(&w, p + i, 8);
    h = round(h, w);
  }
  for (; i < n; ++i) h = round(h, p[i]);
  return mix(h ^ n);
}

// Past kParallelFrom bytes, kChunk-byte chunks are hashed on every thread and their hashes
// hashed in order: a 32 MB output of the tutorial's add_add_mul_add is digested once per timed
// call, and on one core that took about as long as the 2.8 ms call.
constexpr size_t kChunk = size_t{256} << 10;
constexpr size_t kParallelFrom = 4 * kChunk;

uint64_t hash_chunked(const unsigned char* p, size_t n, uint64_t seed) {
  if (n < kParallelFrom) return hash_bytes(p, n, seed);
  const auto chunks = static_cast<int64_t>((n + kChunk - 1) / kChunk);
  std::vector<uint64_t> part(static_cast<size_t>(chunks));
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < chunks; ++i) {
    const size_t at = static_cast<size_t>(i) * kChunk;
    part[static_cast<size_t>(i)] =
        hash_bytes(p + at, std::min(kChunk, n - at), seed + static_cast<uint64_t>(i));
  }
  return hash_bytes(reinterpret_cast<const unsigned char*>(part.data()),
                    part.size() * sizeof(uint64_t), seed ^ n);
}

}  // namespace

uint64_t digest(const Tensor& t) {
  uint64_t h = hash_bytes(nullptr, 0, static_cast<uint64_t>(t.dtype()));
  for (int64_t d : t.shape()) h = round(h, static_cast<uint64_t>(d));
  if (!t.defined() || t.numel() == 0) return mix(h);
  const Tensor c = t.contiguous();
  return hash_chunked(static_cast<const unsigned char*>(c.raw_data()), c.nbytes(), h);
}

uint64_t digest_bytes(const void* data, size_t n, uint64_t seed) {
  return hash_bytes(static_cast<const unsigned char*>(data), n, seed);
}

std::vector<uint64_t> digest_all(std::span<const Tensor> tensors) {
  std::vector<uint64_t> out;
  out.reserve(tensors.size());
  for (const Tensor& t : tensors) out.push_back(digest(t));
  return out;
}

}  // namespace crucible
