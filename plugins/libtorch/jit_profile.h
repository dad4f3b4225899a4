// Per-op timings of a TorchScript run (-c mode=jit with profiling): PyTorch's own profiler records
// every op the frozen module runs; the top-level ones (what the optimized graph calls, e.g.
// prim::mkldnn_convolution, aten::clamp_min) are the kernels crucible stores.
#pragma once

#include <torch/csrc/autograd/profiler_legacy.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace crucible::libtorch {

struct OpTime {
  std::string name;
  int64_t ns = 0;
};

// Runs `fn` under PyTorch's legacy CPU profiler; every outermost op it ran, in order, with its
// time.
std::vector<OpTime> profile_ops(const std::function<void()>& fn);

// Runs `fn` under that profiler and returns its events (every range, nested ones included).
torch::autograd::profiler::thread_event_lists profile_events(const std::function<void()>& fn);

}  // namespace crucible::libtorch
