// Top-level op times from PyTorch's legacy profiler (see jit_profile.h). Its events are push/pop
// ranges per thread; the method's own range ("forward") is a frame, and an op nested in another
// (an aten call inside a prim op's dispatch) is counted in its parent only, so the times add up
// to the run.
#include "jit_profile.h"

#include <torch/csrc/autograd/profiler_legacy.h>

#include <string_view>
#include <utility>
#include <vector>

namespace crucible::libtorch {

torch::autograd::profiler::thread_event_lists profile_events(const std::function<void()>& fn) {
  namespace prof = torch::autograd::profiler;
  prof::enableProfilerLegacy(
      torch::profiler::impl::ProfilerConfig(torch::profiler::impl::ProfilerState::CPU));
  try {
    fn();
  } catch (...) {
    prof::disableProfilerLegacy();
    throw;
  }
  return prof::disableProfilerLegacy();
}

std::vector<OpTime> profile_ops(const std::function<void()>& fn) {
  namespace prof = torch::autograd::profiler;
  const prof::thread_event_lists events = profile_events(fn);
  std::vector<OpTime> out;
  for (const auto& list : events) {
    // Open ranges; a method's own range ("forward") is a frame, not an op: its children count.
    std::vector<std::pair<const prof::LegacyEvent*, bool>> open;
    int counted_open = 0;
    for (const prof::LegacyEvent& e : list) {
      if (e.kind() == prof::EventKind::PushRange) {
        const bool op = std::string_view(e.name()) != "forward";
        open.push_back({&e, op});
        counted_open += op ? 1 : 0;
      } else if (e.kind() == prof::EventKind::PopRange && !open.empty()) {
        const auto [start, op] = open.back();
        open.pop_back();
        if (!op) continue;
        if (--counted_open == 0)
          out.push_back({start->name(), static_cast<int64_t>(start->cpuElapsedUs(e) * 1000)});
      }
    }
  }
  return out;
}

}  // namespace crucible::libtorch
