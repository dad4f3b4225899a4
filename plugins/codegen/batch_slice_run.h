// Runs one batch slice of a codegen program (codegen::BatchSlice): its packed convolutions on a
// few images at a time, the values made and used only inside it in slice-sized buffers.
#pragma once

#include <functional>
#include <memory>
#include <set>
#include <span>
#include <vector>

#include "crucible/codegen/program.h"
#include "crucible/core/tensor.h"
#include "crucible/ops/packed_conv.h"

namespace crucible::codegen {

struct BatchSliceContext {
  const Graph& graph;
  const std::vector<Step>& steps;
  std::span<const std::unique_ptr<PackedConv2d>> convs;  // per step
  std::span<const int> last_use;                         // per value (last_uses())
  const std::set<ValueId>& keep;                         // values intermediates() returns
  // Called before each call of a step and after it, with the share of the batch it ran.
  std::function<void(size_t step)> before;
  std::function<void(size_t step, double batch_share)> after;
};

// Runs steps [b.first, b.last] over the batch in slices of b.images. A value made inside that a
// later step reads, the caller keeps, or the graph returns is written into a whole-batch tensor
// in `env`; one only the slice's steps read lives per slice and is never in `env`. Values read
// from before the slice come from `env`, a slice at a time.
void run_batch_slice(const BatchSlice& b, const BatchSliceContext& c, std::vector<Tensor>& env);

}  // namespace crucible::codegen
