// clamp's rule for NaN bounds, shared by the eager kernel and codegen's emitter so the two cannot
// drift: PyTorch 1.13's semantics, the oracle the project is checked against.
#pragma once

#include <cmath>
#include <limits>
#include <optional>

namespace crucible {

// PyTorch 1.13: a lone NaN bound is no bound (clamp_min / clamp_max compare with it, and every
// comparison with NaN is false), while both bounds given with either one NaN make every element
// NaN (min(max(x, lo), hi) with NaN propagation). min > max gives max everywhere, NaN x stays NaN.
inline bool clamp_is_all_nan(std::optional<double> lo, std::optional<double> hi) {
  return lo && hi && (std::isnan(*lo) || std::isnan(*hi));
}

// The bound a clamp applies (absent or NaN: none, as -inf / +inf), when not clamp_is_all_nan.
inline double clamp_lower(std::optional<double> lo) {
  return lo && !std::isnan(*lo) ? *lo : -std::numeric_limits<double>::infinity();
}
inline double clamp_upper(std::optional<double> hi) {
  return hi && !std::isnan(*hi) ? *hi : std::numeric_limits<double>::infinity();
}

}  // namespace crucible
