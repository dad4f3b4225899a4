// A median time against its roofline: achieved rates and the fraction of the bound, the one
// place every table, export and chart takes them from.
#include <algorithm>
#include <cmath>

#include "crucible/reports/records.h"

namespace crucible::reports {

std::optional<RooflineFigures> roofline_figures(const Roofline& r, double median_ms) {
  if (!(median_ms > 0) || !std::isfinite(median_ms)) return std::nullopt;
  const double compute_ms = r.peak_gflops > 0 ? r.flops / (r.peak_gflops * 1e6) : 0;
  const double memory_ms = r.triad_gbs > 0 ? r.min_bytes / (r.triad_gbs * 1e6) : 0;
  if (compute_ms <= 0 && memory_ms <= 0) return std::nullopt;
  RooflineFigures f;
  f.gflops = r.flops / (median_ms * 1e6);
  f.gbs = r.min_bytes / (median_ms * 1e6);
  f.bound_ms = std::max(compute_ms, memory_ms);
  f.memory_bound = memory_ms > compute_ms;
  f.fraction = f.bound_ms / median_ms;
  return f;
}

}  // namespace crucible::reports
