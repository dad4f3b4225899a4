// The timing audit's input sets (see input_sets.h).
#include "input_sets.h"

#include <sys/random.h>

#include <chrono>
#include <cstring>
#include <string>

#include "crucible/core/rng.h"

namespace crucible {

namespace {
constexpr uint64_t kSecondSetStream = 0x5e7b;  // derive_seed(seed, this): input set B
constexpr uint64_t kCallStream = 0x9b0be;      // derive_seed(secret, this + call): its inputs
constexpr uint64_t kDraws = 17;                // per input: a rotation and 8 swaps
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
    const Tensor src = set_b[k].contiguous();
    Tensor& t = into[k];
    const auto n = static_cast<uint64_t>(src.numel());
    if (n < 2) {
      t.copy_from(src);
      continue;
    }
    const size_t size = src.nbytes() / n, at = random_bits(seed, kDraws * k) % n;
    const auto* from = static_cast<const unsigned char*>(src.raw_data());
    auto* to = static_cast<unsigned char*>(t.raw_data());
    std::memcpy(to, from + at * size, (n - at) * size);
    std::memcpy(to + (n - at) * size, from, at * size);
    // The swaps tell apart two calls whose rotations met (n of them on a small input): with n^9
    // contents, 3000 calls on 64 elements met none.
    unsigned char tmp[16];
    for (uint64_t w = 1; w < kDraws && size <= sizeof tmp; w += 2) {
      const size_t p = random_bits(seed, kDraws * k + w) % n;
      const size_t q = random_bits(seed, kDraws * k + w + 1) % n;
      std::memcpy(tmp, to + p * size, size);
      std::memcpy(to + p * size, to + q * size, size);
      std::memcpy(to + q * size, tmp, size);
    }
  }
}

std::vector<Tensor> call_input_set(const std::vector<Tensor>& set_b, uint64_t secret,
                                   uint64_t call) {
  std::vector<Tensor> out;
  fill_call_inputs(set_b, secret, call, out);
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
