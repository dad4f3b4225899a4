// Depth-first execution of a batch slice: each step on the first images, then each on the next,
// so an inverted-residual block's expanded activations are written and read while in the cache.
#include "batch_slice_run.h"

#include <algorithm>
#include <map>

namespace crucible::codegen {

void run_batch_slice(const BatchSlice& b, const BatchSliceContext& c, std::vector<Tensor>& env) {
  const Graph& g = c.graph;
  const int64_t batch = g.value(c.steps[b.first].inputs[0]).type.shape[0];
  std::set<ValueId> made;
  for (size_t i = b.first; i <= b.last; ++i) made.insert(c.steps[i].outputs[0]);
  // A value made here that outlives the slice's steps is a whole-batch tensor in env.
  auto whole = [&](ValueId v) {
    return !made.contains(v) || c.last_use[v] > static_cast<int>(b.last) || c.keep.contains(v);
  };
  for (size_t i = b.first; i <= b.last; ++i) {
    const Step& s = c.steps[i];
    for (ValueId v : s.inputs) {
      if (!made.contains(v) && !env[v].is_contiguous()) env[v] = env[v].contiguous();
    }
    const TensorType& y = g.value(s.outputs[0]).type;
    if (whole(s.outputs[0])) env[s.outputs[0]] = Tensor::empty(y.dtype, y.shape);
  }
  auto per_image = [&](ValueId v) { return g.value(v).type.numel() / batch; };
  auto sliced = [](Shape shape, int64_t images) {
    shape[0] = images;
    return shape;
  };
  std::map<ValueId, Tensor> part;  // this slice's values that never leave it
  for (int64_t n0 = 0; n0 < batch; n0 += b.images) {
    const int64_t n = std::min(b.images, batch - n0);
    auto at = [&](ValueId v) -> float* {
      if (whole(v)) return env[v].data<float>() + n0 * per_image(v);
      return part.at(v).data<float>();
    };
    for (size_t i = b.first; i <= b.last; ++i) {
      const Step& s = c.steps[i];
      const ValueId y = s.outputs[0];
      if (!whole(y)) {
        // Exact-size blocks come back last-freed first: the one the slice's previous value left,
        // still in the cache.
        part[y] = Tensor::empty(DType::kF32, sliced(g.value(y).type.shape, n));
      }
      c.before(i);
      c.convs[i]->run(at(s.inputs[0]), sliced(g.value(s.inputs[0]).type.shape, n), at(y),
                      s.residual >= 0 ? at(s.residual) : nullptr);
      c.after(i, static_cast<double>(n) / static_cast<double>(batch));
      for (ValueId v : s.inputs) {
        if (!whole(v) && c.last_use[v] == static_cast<int>(i)) part.erase(v);
      }
      if (!whole(y) && c.last_use[y] <= static_cast<int>(i)) part.erase(y);
    }
  }
}

}  // namespace crucible::codegen
