// A median time against its roofline: achieved rates and the fraction of the bound, the one
// place every table, export and chart takes them from.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <utility>

#include "crucible/reports/records.h"

namespace crucible::reports {

MemoryCeiling memory_ceiling(const Roofline& r, double bytes) {
  const std::pair<const char*, const CacheCeiling*> caches[] = {
      {"L1", &r.l1}, {"L2", &r.l2}, {"L3", &r.l3}};
  // Bytes that fit a level can stream from it or from any larger one: the ceiling is the best of
  // them (a level measured on a busy moment can read below the one after it). From DRAM up, the
  // last level that holds the bytes is the smallest.
  MemoryCeiling fit{"DRAM", r.triad_gbs};
  double best = r.triad_gbs;
  for (int i = 2; i >= 0; --i) {
    const CacheCeiling& c = *caches[i].second;
    if (c.gbs <= 0 || c.bytes <= 0) continue;
    best = std::max(best, c.gbs);
    if (bytes <= c.bytes) fit = {caches[i].first, best};
  }
  return fit;
}

std::optional<RooflineFigures> roofline_figures(const Roofline& r, double median_ms) {
  if (!(median_ms > 0) || !std::isfinite(median_ms)) return std::nullopt;
  const MemoryCeiling level = memory_ceiling(r, r.min_bytes);
  const double compute_ms = r.peak_gflops > 0 ? r.flops / (r.peak_gflops * 1e6) : 0;
  const double memory_ms = level.gbs > 0 ? r.min_bytes / (level.gbs * 1e6) : 0;
  if (compute_ms <= 0 && memory_ms <= 0) return std::nullopt;
  RooflineFigures f;
  f.gflops = r.flops / (median_ms * 1e6);
  f.gbs = r.min_bytes / (median_ms * 1e6);
  f.bound_ms = std::max(compute_ms, memory_ms);
  f.memory_bound = memory_ms > compute_ms;
  f.level = level;
  f.fraction = f.bound_ms / median_ms;
  return f;
}

std::string beyond_the_machine(const Roofline& r, double median_ms) {
  const auto f = roofline_figures(r, median_ms);
  if (!f) return "";
  // Graph FLOPs count a direct convolution's multiplies; Winograd F(4x4,3x3) does a quarter of
  // them, so an honest convolution at 80% of the FMA peak shows 3.2x it in graph FLOP/s.
  constexpr double kFlopMargin = 6.0;
  // Bytes just over a level's size mostly sit in it, and the level above streams them 2-3x
  // faster; reads alone outrun the triad's two reads and a write by up to 1.5x.
  constexpr double kByteMargin = 4.0;
  if (r.peak_gflops > 0 && f->gflops > kFlopMargin * r.peak_gflops) {
    return fmt::format(
        "faster than the machine computes: {:.1f} GFLOP/s of the graph's work, {:.1f}x the FMA "
        "peak of {:.1f} GFLOP/s measured beside it",
        f->gflops, f->gflops / r.peak_gflops, r.peak_gflops);
  }
  const double ceiling = f->level.gbs;
  if (ceiling > 0 && f->gbs > kByteMargin * ceiling) {
    return fmt::format(
        "faster than memory moves: {:.1f} GB/s of compulsory bytes, {:.1f}x the {} triad of "
        "{:.1f} GB/s measured beside it",
        f->gbs, f->gbs / ceiling, f->level.name, ceiling);
  }
  return "";
}

}  // namespace crucible::reports
