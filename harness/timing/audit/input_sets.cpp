// The timing audit's input sets (see input_sets.h).
#include "input_sets.h"

#include <sys/random.h>

#if defined(__AVX2__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>

#include "crucible/core/rng.h"

namespace crucible {

namespace {
constexpr uint64_t kSecondSetStream = 0x5e7b;  // derive_seed(seed, this): input set B
constexpr uint64_t kCallStream = 0x9b0be;      // derive_seed(secret, this + call): its inputs
// Per input: a rotation, 8 swaps and the key of its elements' shrinking.
constexpr uint64_t kDraws = 18;
constexpr size_t kSlotAlignment = 64;

// A 32-bit mixer (Wellons' lowbias32): cheap enough per element that the loop vectorizes.
inline uint32_t mix32(uint32_t x) {
  x ^= x >> 16;
  x *= 0x7feb352dU;
  x ^= x >> 15;
  x *= 0x846ca68bU;
  x ^= x >> 16;
  return x;
}

// Copies `n` elements to `to`, element i's magnitude bits lowered by a secret amount under 2^-5
// of the leading bit (under 3.2% of the value) where they exceed it and are finite (zeros,
// subnormals, infinities and NaN stay); the amount is drawn for position `at` + i. No borrow
// reaches the sign. One pass: the copy a rotation makes anyway.
template <typename Bits, int kMantissa>
void copy_shrunk(const Bits* from, Bits* to, size_t n, size_t at, uint32_t key) {
  constexpr Bits kSign = Bits{1} << (8 * sizeof(Bits) - 1);
  constexpr auto kInf = static_cast<Bits>(static_cast<Bits>(~kSign) >> kMantissa << kMantissa);
  constexpr int kDrop = kMantissa - 5;  // the amount's bits
  for (size_t i = 0; i < n; ++i) {
    const uint32_t h = mix32(static_cast<uint32_t>(at + i) ^ key);
    Bits amount;
    if constexpr (kDrop <= 32) {
      amount = static_cast<Bits>(h >> (32 - kDrop));
    } else {
      amount = static_cast<Bits>(static_cast<Bits>(h) << (kDrop - 32));
    }
    const Bits v = from[i];
    const auto mag = static_cast<Bits>(v & static_cast<Bits>(~kSign));
    to[i] = mag > amount && mag < kInf ? static_cast<Bits>(v - amount) : v;
  }
}

// copy_shrunk for f32 with non-temporal stores: a write that skips the caches also skips reading
// the line it replaces, a third of the traffic of a copy larger than the caches.
void stream_shrunk_f32(const uint32_t* from, uint32_t* to, size_t n, size_t at, uint32_t key) {
#if defined(__AVX2__)
  constexpr int kDrop = 23 - 5;
  size_t i = 0;
  const size_t head = std::min(n, (32 - reinterpret_cast<uintptr_t>(to) % 32) % 32 / 4);
  copy_shrunk<uint32_t, 23>(from, to, head, at, key);
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256i vkey = _mm256_set1_epi32(static_cast<int>(key));
  const __m256i magnitude = _mm256_set1_epi32(0x7fffffff);
  const __m256i inf = _mm256_set1_epi32(0x7f800000);
  for (i = head; i + 8 <= n; i += 8) {
    __m256i x = _mm256_add_epi32(_mm256_set1_epi32(static_cast<int>(at + i)), lane);
    x = _mm256_xor_si256(x, vkey);
    x = _mm256_xor_si256(x, _mm256_srli_epi32(x, 16));
    x = _mm256_mullo_epi32(x, _mm256_set1_epi32(0x7feb352d));
    x = _mm256_xor_si256(x, _mm256_srli_epi32(x, 15));
    x = _mm256_mullo_epi32(x, _mm256_set1_epi32(static_cast<int>(0x846ca68bU)));
    x = _mm256_xor_si256(x, _mm256_srli_epi32(x, 16));
    const __m256i amount = _mm256_srli_epi32(x, 32 - kDrop);
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(from + i));
    const __m256i mag = _mm256_and_si256(v, magnitude);
    // Both sides of each comparison are below 2^31: signed compares are exact.
    const __m256i lower =
        _mm256_and_si256(_mm256_cmpgt_epi32(mag, amount), _mm256_cmpgt_epi32(inf, mag));
    _mm256_stream_si256(reinterpret_cast<__m256i*>(to + i),
                        _mm256_sub_epi32(v, _mm256_and_si256(lower, amount)));
  }
  copy_shrunk<uint32_t, 23>(from + i, to + i, n - i, at + i, key);
  _mm_sfence();
#else
  copy_shrunk<uint32_t, 23>(from, to, n, at, key);
#endif
}

// Elements [first, first + n) of `from` to `to` + `at` elements, floats shrunk (copy_shrunk);
// `stream`: past the caches where that is made.
void copy_part(DType dtype, const unsigned char* from, unsigned char* to, size_t first, size_t n,
               size_t at, uint32_t key, bool stream) {
  const size_t size = dtype_size(dtype);
  const unsigned char* src = from + first * size;
  unsigned char* dst = to + at * size;
  switch (dtype) {
    case DType::kBF16:
      return copy_shrunk<uint16_t, 7>(reinterpret_cast<const uint16_t*>(src),
                                      reinterpret_cast<uint16_t*>(dst), n, at, key);
    case DType::kF32:
      if (stream)
        return stream_shrunk_f32(reinterpret_cast<const uint32_t*>(src),
                                 reinterpret_cast<uint32_t*>(dst), n, at, key);
      return copy_shrunk<uint32_t, 23>(reinterpret_cast<const uint32_t*>(src),
                                       reinterpret_cast<uint32_t*>(dst), n, at, key);
    case DType::kF64:
      return copy_shrunk<uint64_t, 52>(reinterpret_cast<const uint64_t*>(src),
                                       reinterpret_cast<uint64_t*>(dst), n, at, key);
    default:
      std::memcpy(dst, src, n * size);
  }
}

// Elements [lo, hi) of input `k` of a call (draws from `seed`) out of `src` (contiguous) into
// `to`: rotated by a secret offset, its floats shrunk. Writers of disjoint ranges may run at once.
void fill_range(const Tensor& src, uint64_t seed, size_t k, unsigned char* to, size_t lo, size_t hi,
                bool stream) {
  const auto n = static_cast<uint64_t>(src.numel());
  const auto* from = static_cast<const unsigned char*>(src.raw_data());
  const auto key = static_cast<uint32_t>(random_bits(seed, kDraws * k + kDraws - 1));
  const size_t at = n < 2 ? 0 : random_bits(seed, kDraws * k) % n;
  // Position d holds element (d + at) mod n: [0, n - at) from `at` on, the rest from 0.
  const size_t wrap = n - at;
  if (lo < std::min(hi, wrap))
    copy_part(src.dtype(), from, to, at + lo, std::min(hi, wrap) - lo, lo, key, stream);
  if (std::max(lo, wrap) < hi)
    copy_part(src.dtype(), from, to, std::max(lo, wrap) - wrap, hi - std::max(lo, wrap),
              std::max(lo, wrap), key, stream);
}

// Then 8 pairs of its elements swapped, once its whole range is written.
void swap_pairs(const Tensor& src, uint64_t seed, size_t k, unsigned char* to) {
  const auto n = static_cast<uint64_t>(src.numel());
  if (n < 2) return;
  // The swaps tell apart two calls whose rotations met on an input the shrinking leaves alone
  // (integers, booleans): with n^9 contents, 3000 calls on 64 elements met none.
  const size_t size = src.nbytes() / n;
  unsigned char tmp[16];
  for (uint64_t w = 1; w < kDraws - 1 && size <= sizeof tmp; w += 2) {
    const size_t p = random_bits(seed, kDraws * k + w) % n;
    const size_t q = random_bits(seed, kDraws * k + w + 1) % n;
    std::memcpy(tmp, to + p * size, size);
    std::memcpy(to + p * size, to + q * size, size);
    std::memcpy(to + q * size, tmp, size);
  }
}

void fill_input(const Tensor& src, uint64_t seed, size_t k, unsigned char* to) {
  fill_range(src, seed, k, to, 0, static_cast<size_t>(src.numel()), false);
  swap_pairs(src, seed, k, to);
}
}  // namespace

Graph with_varied_inputs(const Graph& g) {
  Graph copy = g;
  for (ValueId id : copy.inputs()) {
    Value& v = copy.mutable_value(id);
    const std::string& kind = v.init.kind;
    if (is_floating(v.type.dtype) && kind != "randn" && kind != "uniform") v.init = {};
  }
  return copy;
}

std::vector<Tensor> second_input_set(const Graph& varied, uint64_t seed) {
  return make_inputs(varied, derive_seed(seed, kSecondSetStream));
}

void fill_call_inputs(const std::vector<Tensor>& set_b, uint64_t secret, uint64_t call,
                      std::vector<Tensor>& into) {
  const uint64_t seed = derive_seed(secret, kCallStream + call);
  if (into.empty()) {
    for (const Tensor& t : set_b) into.push_back(Tensor::empty(t.dtype(), t.shape()));
  }
  for (size_t k = 0; k < set_b.size(); ++k) {
    fill_input(set_b[k].contiguous(), seed, k, static_cast<unsigned char*>(into[k].raw_data()));
  }
}

std::vector<Tensor> call_input_set(const std::vector<Tensor>& set_b, uint64_t secret,
                                   uint64_t call) {
  std::vector<Tensor> out;
  fill_call_inputs(set_b, secret, call, out);
  return out;
}

CallInputLayout::CallInputLayout(const std::vector<Tensor>& set_b) {
  for (const Tensor& t : set_b) {
    offsets_.push_back(slot_bytes_);
    slot_bytes_ += (t.nbytes() + kSlotAlignment - 1) / kSlotAlignment * kSlotAlignment;
  }
}

int64_t CallInputLayout::max_calls() const {
  return std::clamp<int64_t>(
      static_cast<int64_t>(kMaxCallInputBytes / std::max<size_t>(slot_bytes_, 1)), 1,
      kMaxCallsPerSample);
}

void CallInputLayout::fill(const std::vector<Tensor>& set_b, uint64_t secret, uint64_t first_call,
                           int64_t calls, std::byte* block, FillWay way) const {
  std::vector<Tensor> contiguous;
  contiguous.reserve(set_b.size());
  for (const Tensor& t : set_b) contiguous.push_back(t.contiguous());
  const auto seed_of = [&](int64_t i) {
    return derive_seed(secret, kCallStream + first_call + static_cast<uint64_t>(i));
  };
  // Writer w takes bytes [w, w + 1) x total / writers of the block, at 64-byte boundaries (an
  // element's boundary too: slots and inputs start at one); each input's part of it, rotated.
  const size_t total = slot_bytes_ * static_cast<size_t>(std::max<int64_t>(calls, 0));
  const int writers = std::clamp<int>(way.threads, 1, 64);
  const auto write_share = [&](int w) {
    const size_t b0 = total * static_cast<size_t>(w) / writers / kSlotAlignment * kSlotAlignment;
    const size_t b1 = w + 1 == writers ? total
                                       : total * static_cast<size_t>(w + 1) / writers /
                                             kSlotAlignment * kSlotAlignment;
    for (int64_t i = 0; i < calls; ++i) {
      for (size_t k = 0; k < contiguous.size(); ++k) {
        const size_t p0 = static_cast<size_t>(i) * slot_bytes_ + offsets_[k];
        const size_t p1 = p0 + contiguous[k].nbytes();
        if (p1 <= b0 || p0 >= b1 || p0 == p1) continue;
        const size_t size = dtype_size(contiguous[k].dtype());
        const size_t lo = (std::max(b0, p0) - p0) / size;
        const size_t hi = (std::min(b1, p1) - p0) / size;
        fill_range(contiguous[k], seed_of(i), k, reinterpret_cast<unsigned char*>(block + p0), lo,
                   hi, way.past_caches);
      }
    }
  };
  std::vector<std::thread> helpers;
  for (int w = 1; w < writers; ++w) helpers.emplace_back(write_share, w);
  write_share(0);
  for (std::thread& t : helpers) t.join();
  for (int64_t i = 0; i < calls; ++i) {
    for (size_t k = 0; k < contiguous.size(); ++k) {
      swap_pairs(contiguous[k], seed_of(i), k,
                 reinterpret_cast<unsigned char*>(block + static_cast<size_t>(i) * slot_bytes_ +
                                                  offsets_[k]));
    }
  }
}

std::vector<Tensor> CallInputLayout::views(const std::vector<Tensor>& set_b,
                                           const std::shared_ptr<Storage>& block, int64_t i) const {
  std::vector<Tensor> out;
  for (size_t k = 0; k < set_b.size(); ++k) {
    out.push_back(Tensor::over(block, static_cast<size_t>(i) * slot_bytes_ + offsets_[k],
                               set_b[k].dtype(), set_b[k].shape()));
  }
  return out;
}

uint64_t os_secret() {
  uint64_t v = 0;
  if (getrandom(&v, sizeof v, 0) != sizeof v) {
    v = static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  }
  return v;
}

}  // namespace crucible
