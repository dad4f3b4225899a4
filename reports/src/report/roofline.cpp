// A median time against its roofline: achieved rates and the fraction of the bound, the one
// place every table, export and chart takes them from.
#include <fmt/format.h>

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

std::string beyond_the_machine(const Roofline& r, double median_ms) {
  const auto f = roofline_figures(r, median_ms);
  if (!f) return "";
  // Graph FLOPs count a direct convolution's multiplies; Winograd F(4x4,3x3) does a quarter of
  // them, so an honest convolution at 80% of the FMA peak shows 3.2x it in graph FLOP/s.
  constexpr double kFlopMargin = 6.0;
  // The fastest level the compulsory bytes could stream from: the threads' L2 when they fit there
  // (L1 is about 2-3x faster than the L2 triad), else DRAM (with L3 about 3x faster).
  constexpr double kByteMargin = 4.0;
  if (r.peak_gflops > 0 && f->gflops > kFlopMargin * r.peak_gflops) {
    return fmt::format(
        "faster than the machine computes: {:.1f} GFLOP/s of the graph's work, {:.1f}x the FMA "
        "peak of {:.1f} GFLOP/s measured beside it",
        f->gflops, f->gflops / r.peak_gflops, r.peak_gflops);
  }
  const bool fits_cache = r.cache_gbs > 0 && r.cache_bytes > 0 && r.min_bytes <= r.cache_bytes;
  const double ceiling = fits_cache ? r.cache_gbs : r.triad_gbs;
  if (ceiling > 0 && f->gbs > kByteMargin * ceiling) {
    return fmt::format(
        "faster than memory moves: {:.1f} GB/s of compulsory bytes, {:.1f}x the {} triad of "
        "{:.1f} GB/s measured beside it",
        f->gbs, f->gbs / ceiling, fits_cache ? "L2" : "DRAM", ceiling);
  }
  return "";
}

}  // namespace crucible::reports
