// The timing audit's input sets (see input_sets.h).
#include "input_sets.h"

#include <cstring>
#include <string>

#include "crucible/core/rng.h"

namespace crucible {

namespace {
constexpr uint64_t kSecondSetStream = 0x5e7b;  // derive_seed(seed, this): input set B
constexpr uint64_t kFreshStream = 0x9b0be;     // derive_seed(secret, this + j): fresh set j
constexpr size_t kDrawFreshBelowBytes = size_t{1} << 20;
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

std::vector<Tensor> fresh_input_set(const Graph& varied, const std::vector<Tensor>& set_b,
                                    uint64_t secret, uint64_t j) {
  const uint64_t seed = derive_seed(secret, kFreshStream + j);
  size_t bytes = 0;
  for (const Tensor& t : set_b) bytes += t.nbytes();
  if (bytes < kDrawFreshBelowBytes) return make_inputs(varied, seed);
  std::vector<Tensor> out;
  for (size_t k = 0; k < set_b.size(); ++k) {
    const Tensor src = set_b[k].contiguous();
    Tensor t = Tensor::empty(src.dtype(), src.shape());
    const auto n = static_cast<uint64_t>(src.numel());
    if (n < 2) {
      t.copy_from(src);
    } else {
      const size_t size = src.nbytes() / n, at = 1 + random_bits(seed, k) % (n - 1);
      const auto* from = static_cast<const unsigned char*>(src.raw_data());
      auto* to = static_cast<unsigned char*>(t.raw_data());
      std::memcpy(to, from + at * size, (n - at) * size);
      std::memcpy(to + (n - at) * size, from, at * size);
    }
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace crucible
