// Which elements of a timed call's outputs are verified, and gathering them (see output_sample.h).
#include "output_sample.h"

#include <algorithm>
#include <cstring>

#include "crucible/core/rng.h"

namespace crucible {

namespace {
constexpr uint64_t kSampleStream = 0x5a3b1e;  // derive_seed(secret, this + call)
}  // namespace

std::vector<int64_t> sampled_elements(uint64_t secret, uint64_t call, size_t output,
                                      int64_t numel) {
  std::vector<int64_t> at;
  if (numel <= kSampledElements) {
    for (int64_t e = 0; e < numel; ++e) at.push_back(e);
    return at;
  }
  const uint64_t seed = derive_seed(secret, kSampleStream + call);
  for (int64_t k = 0; k < kSampledElements; ++k) {
    const uint64_t bits = random_bits(seed, output * kSampledElements + static_cast<uint64_t>(k));
    at.push_back(static_cast<int64_t>(bits % static_cast<uint64_t>(numel)));
  }
  std::sort(at.begin(), at.end());
  return at;
}

Tensor gather_elements(const Tensor& t, std::span<const int64_t> at) {
  const Tensor c = t.contiguous();
  const size_t size = dtype_size(c.dtype());
  Tensor out = Tensor::empty(c.dtype(), {static_cast<int64_t>(at.size())});
  const auto* from = static_cast<const unsigned char*>(c.raw_data());
  auto* to = static_cast<unsigned char*>(out.raw_data());
  for (size_t k = 0; k < at.size(); ++k) std::memcpy(to + k * size, from + at[k] * size, size);
  return out;
}

}  // namespace crucible
