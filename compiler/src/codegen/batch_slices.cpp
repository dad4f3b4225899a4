// Which runs of packed convolutions run a slice of the batch at a time (depth first), so that an
// inverted-residual block's expanded activations stay in the cache instead of going to DRAM.
#include <fmt/format.h>

#include <algorithm>

#include "passes.h"

namespace crucible::codegen {

namespace {

// The images of one step's slice: as many as fit `budget` with its input, output and residual,
// at least one; 0 for a step that cannot be sliced (not a packed convolution over a batch).
int64_t step_images(const Graph& g, const Step& s, double budget) {
  if (s.kind != Step::Kind::kPackedConv) return 0;
  const TensorType& x = g.value(s.inputs[0]).type;
  const TensorType& y = g.value(s.outputs[0]).type;
  const int64_t n = x.shape[0];
  if (n < 2 || y.shape.empty() || y.shape[0] != n) return 0;
  const double per_image =
      static_cast<double>(x.numel() + y.numel() * (s.residual >= 0 ? 2 : 1)) * 4.0 / n;
  return std::clamp<int64_t>(static_cast<int64_t>(budget / per_image), 1, n);
}

}  // namespace

std::vector<BatchSlice> plan_batch_slices(const Graph& g, const std::vector<Step>& steps,
                                          double budget_bytes) {
  const size_t n = steps.size();
  std::vector<int64_t> images(n), batch(n);
  for (size_t i = 0; i < n; ++i) {
    images[i] = step_images(g, steps[i], budget_bytes);
    batch[i] = images[i] > 0 ? g.value(steps[i].inputs[0]).type.shape[0] : 0;
  }
  auto wants = [&](size_t i) { return images[i] > 0 && 2 * images[i] <= batch[i]; };
  // Step i reads step i-1's output, over the same batch (the chain a block is).
  auto chained = [&](size_t i) {
    return i > 0 && images[i] > 0 && images[i - 1] > 0 &&
           steps[i].inputs[0] == steps[i - 1].outputs[0] && batch[i] == batch[i - 1];
  };
  std::vector<BatchSlice> out;
  bool open = false;  // the last run may still grow
  for (size_t i = 0; i < n; ++i) {
    const bool after_run = open && out.back().last + 1 == i && chained(i);
    if (wants(i)) {
      if (after_run) {
        out.back().last = i;
        out.back().images = std::min(out.back().images, images[i]);
      } else if (chained(i) && (out.empty() || out.back().last + 1 < i)) {
        out.push_back({i - 1, i, images[i]});  // its producer (an expand) heads it
      } else {
        out.push_back({i, i, images[i]});
      }
      open = true;
      continue;
    }
    // A step that fits whole ends the run it reads from (a projection after a strided depthwise).
    if (after_run) out.back().last = i;
    open = false;
  }
  std::erase_if(out, [](const BatchSlice& b) { return b.last == b.first; });
  return out;
}

std::string print_batch_slices(const Graph& g, const std::vector<Step>& steps,
                               const std::vector<BatchSlice>& slices) {
  std::string out;
  for (const BatchSlice& b : slices) {
    out += fmt::format("steps {}-{}: {} of {} images at a time ({} to {})\n", b.first, b.last,
                       b.images, g.value(steps[b.first].inputs[0]).type.shape[0],
                       steps[b.first].name, steps[b.last].name);
  }
  return out.empty() ? "none\n" : out;
}

}  // namespace crucible::codegen
