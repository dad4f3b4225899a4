// One step of the detector: a level change that starts at the newest baseline run and holds at
// the next, judged where the baseline is still short (a new store, a new environment, a level
// just reset), so a step there is reported or listed as absorbed, never taken in silently.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "detect_internal.h"

namespace crucible::reports::detail {

namespace {

// A short baseline's bar, in standard errors of a 2-run step over it (z = 3.5: about 1 in 2,000
// for normal noise, one side): a step past it, and past 2x the floor, is reported when it is the
// backend's own.
constexpr double kFound = 3.5;

// A short baseline's step that holds on 2 runs past 2.5 standard errors (about 1 in 160 for
// normal noise, one side) is a level that moved: if not reported, it is listed as absorbed, so
// no level change goes into a baseline unsaid.
constexpr double kListed = 2.5;

// The standard error of a 2-run step over a baseline of `runs` runs, for a noise `sigma`: the
// baseline's own error counts (one run of baseline wobbles as much as a run at the new level).
double step_error(const DetectorOptions& o, double sigma, size_t runs) {
  const double nb = static_cast<double>(std::min<size_t>(std::max<size_t>(runs, 1), o.window));
  return sigma * std::sqrt(0.5 + 1 / nb);
}

// Why a step found on a short baseline is not the backend's own change ("" when it is). Only a
// ratio can say. A ratio's move is its backend's move less the reference's; the machine bends a
// ratio when it moves both sides unevenly (this VM's modes moved eager -50% and codegen -35% at
// once), and such a bend is smaller than the reference's move; a move every series made at
// once (the machine's level, from every time) cancels and says nothing. So beyond the machine's
// move, the backend's own time must have moved the step's way by at least half of it, and the
// reference by at most twice it. A time alone moves with the machine (a store's first runs
// settle by tens of percent on every backend of a model), which a short baseline cannot tell
// apart.
std::string not_its_own(const SeriesPoint& before, const SeriesPoint& p, const SeriesPoint& i,
                        double step) {
  if (!std::isfinite(before.own_log) || !std::isfinite(p.own_log) || !std::isfinite(i.own_log))
    return "a time alone";
  const double own_moved = (p.own_log + i.own_log) / 2 - before.own_log;
  const double ref_moved = (p.reference_log + i.reference_log) / 2 - before.reference_log;
  // The model's own evidence first: the reference held (moved by at most half the step) and
  // the backend's time moved the step's way by at least half of it. The machine's level is a
  // median over every model, and this host's disturbances reach one model's workers at one run
  // and another's at the next (a +20% machine move at the run resnet18's eager held and its
  // faulty rose 10%): it says nothing against a step the model's own two sides show.
  if (own_moved * step > 0 && std::abs(own_moved) >= 0.5 * std::abs(step) &&
      std::abs(ref_moved) <= 0.5 * std::abs(step))
    return "";
  // Otherwise each side's move beyond the machine's at those runs: a move every series shared
  // is no evidence either way, it cancels in the ratio.
  double machine = (p.machine_log + i.machine_log) / 2 - before.machine_log;
  if (!std::isfinite(machine)) machine = 0;
  const double own = own_moved - machine;
  const double ref = ref_moved - machine;
  if (own * step <= 0 || std::abs(own) < 0.5 * std::abs(step))
    return fmt::format("its own time moved {:+.1f}% beyond the machine's {:+.1f}%", 100 * rel(own),
                       100 * rel(machine));
  if (std::abs(ref) > 2 * std::abs(step))
    return fmt::format("the reference moved {:+.1f}% beyond the machine's {:+.1f}%", 100 * rel(ref),
                       100 * rel(machine));
  return "";
}

}  // namespace

double short_baseline_bar(const DetectorOptions& o, double level, double sigma, size_t runs) {
  // Fewer than 3 runs of baseline cannot show that a series is noisy (a store's first runs on
  // an AMD VM moved a ratio 4.0% and kept it, on a series 2.8% noisy run to run): from 4.5% there.
  return std::max({2 * floor_at(o, level), kFound * step_error(o, sigma, runs),
                   runs < 3 ? std::log1p(0.045) : 0.0});
}

std::optional<Alert> step_at_newest_run(const std::vector<SeriesPoint>& s,
                                        const std::vector<size_t>& before, size_t p, size_t i,
                                        double sigma, double own_sigma, bool short_baseline,
                                        const DetectorOptions& o) {
  if (before.empty()) return std::nullopt;
  const double level = window_level(s, before, o.window);
  const double floor = floor_at(o, level);
  const double dp = log_median(s[p]) - level, di = log_median(s[i]) - level;
  // The full rule: each run past k x noise / sqrt 2. A short baseline: the two runs' mean past
  // kListed standard errors of the series' own noise (listed; reported past kFound of the
  // stand-in noise), and each run past the floor on that side.
  const double thr = short_baseline
                         ? std::max(2 * floor, kListed * step_error(o, own_sigma, before.size()))
                         : std::max(floor, o.k / std::sqrt(2.0) * sigma);
  const double each = short_baseline ? floor : thr;
  const double mean = (dp + di) / 2;
  if (!((dp > each && di > each) || (dp < -each && di < -each)) || std::abs(mean) <= thr)
    return std::nullopt;
  // Two runs of one level differ by noise x sqrt(2).
  if (std::abs(dp - di) > std::max(floor, o.k * sigma * std::sqrt(2.0))) return std::nullopt;
  const size_t n_ref = std::min<size_t>(before.size(), 3);
  const double pv =
      mann_whitney_p(pooled(s, {p, i}),
                     pooled(s, {before.end() - static_cast<std::ptrdiff_t>(n_ref), before.end()}));
  if (pv >= o.alpha) return std::nullopt;
  const double step = mean;
  Alert a{step > 0 ? "regression" : "improvement",
          s[p].run_id,
          s[i].run_id,
          2,
          rel(step),
          rel(thr),
          rel(sigma),
          pv,
          "2 runs at the new level"};
  if (!short_baseline) return a;
  const double report = short_baseline_bar(o, level, sigma, before.size());
  std::string why = not_its_own(s[before.back()], s[p], s[i], step);
  if (why.empty() && std::abs(step) < report) {
    why = fmt::format("below the {:.1f}% a baseline of {} runs reports", 100 * rel(report),
                      before.size());
  }
  if (why.empty()) {
    a.threshold = rel(report);
    a.note = fmt::format("short baseline ({} runs): 2 runs at the new level, {:.0f}x its noise",
                         before.size(), std::abs(step) / std::max(sigma, 1e-12));
    return a;
  }
  a.kind = "absorbed";
  a.note = fmt::format("absorbed into the baseline: {:+.1f}% at run {} ({})", 100 * rel(step),
                       s[p].run_id, why);
  return a;
}

}  // namespace crucible::reports::detail
