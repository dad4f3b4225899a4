// Which runs of packed convolutions run a slice of the batch at a time (depth first), so that an
// inverted-residual block's expanded activations stay in the cache instead of going to DRAM.
#include <fmt/format.h>

#include <algorithm>

#include "passes.h"

namespace crucible::codegen {

namespace {

// Below this many FLOPs per byte of activations a convolution waits on memory, not on its FMAs:
// the FMA peak over the DRAM triad here is 454 / 50-94 GB/s, 5-9. A depthwise 3x3 does 2.25, a
// MobileNetV2 expand or projection 7-10; ResNet's 1x1s 25, its 3x3s over 100 (slicing those
// only shrank oneDNN's problems: resnet18 105 -> 120 ms).
constexpr double kMemoryBoundFlopsPerByte = 8.0;

// The activation bytes one step reads and writes (input, output, residual), f32.
double activation_bytes(const Graph& g, const Step& s) {
  return 4.0 * static_cast<double>(g.value(s.inputs[0]).type.numel() +
                                   g.value(s.outputs[0]).type.numel() * (s.residual >= 0 ? 2 : 1));
}

// The images of one step's slice: as many as fit `budget` with its input, output and residual,
// at least one; 0 for a step that cannot be sliced (not a packed convolution over a batch).
int64_t step_images(const Graph& g, const Step& s, double budget) {
  if (s.kind != Step::Kind::kPackedConv) return 0;
  const TensorType& x = g.value(s.inputs[0]).type;
  const TensorType& y = g.value(s.outputs[0]).type;
  const int64_t n = x.shape[0];
  if (n < 2 || y.shape.empty() || y.shape[0] != n) return 0;
  const double per_image = activation_bytes(g, s) / static_cast<double>(n);
  return std::clamp<int64_t>(static_cast<int64_t>(budget / per_image), 1, n);
}

}  // namespace

std::vector<BatchSlice> plan_batch_slices(const Graph& g, const std::vector<Step>& steps,
                                          double budget_bytes) {
  const size_t n = steps.size();
  std::vector<int64_t> images(n), batch(n);
  std::vector<bool> memory_bound(n);
  for (size_t i = 0; i < n; ++i) {
    images[i] = step_images(g, steps[i], budget_bytes);
    batch[i] = images[i] > 0 ? g.value(steps[i].inputs[0]).type.shape[0] : 0;
    memory_bound[i] = images[i] > 0 && step_cost(g, steps[i]).flops <
                                           kMemoryBoundFlopsPerByte * activation_bytes(g, steps[i]);
  }
  auto wants = [&](size_t i) { return images[i] > 0 && 2 * images[i] <= batch[i]; };
  // Step i reads step i-1's output, over the same batch (the chain a block is).
  auto chained = [&](size_t i) {
    return i > 0 && images[i] > 0 && images[i - 1] > 0 &&
           steps[i].inputs[0] == steps[i - 1].outputs[0] && batch[i] == batch[i - 1];
  };
  std::vector<BatchSlice> out;
  std::vector<bool> waits;  // per run: whether a step in it waits on memory
  bool open = false;        // the last run may still grow
  for (size_t i = 0; i < n; ++i) {
    const bool after_run = open && out.back().last + 1 == i && chained(i);
    if (wants(i)) {
      if (after_run) {
        out.back().last = i;
        out.back().images = std::min(out.back().images, images[i]);
      } else if (chained(i) && (out.empty() || out.back().last + 1 < i)) {
        out.push_back({i - 1, i, images[i]});  // its producer (an expand) heads it
        waits.push_back(false);
      } else {
        out.push_back({i, i, images[i]});
        waits.push_back(false);
      }
      waits.back() = waits.back() || memory_bound[i];
      open = true;
      continue;
    }
    // A step that fits whole ends the run it reads from (a projection after a strided depthwise).
    if (after_run) out.back().last = i;
    open = false;
  }
  // Runs of compute-bound steps alone (ResNet's) gain nothing: slicing only shrinks problems.
  std::vector<BatchSlice> kept;
  for (size_t r = 0; r < out.size(); ++r) {
    if (waits[r] && out[r].last > out[r].first) kept.push_back(out[r]);
  }
  return kept;
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
