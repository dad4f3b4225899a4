// `crucible compare RUN_A RUN_B`: every series of two runs side by side. A timing change is
// called only when the U test on the raw samples is significant and the whole 95% interval of the
// median's change lies past max(1%, 4 x the series' run-to-run noise measured in the store up to
// run B); a result the harness flagged noisy is shown but not judged.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

#include "crucible/reports/detect.h"
#include "crucible/reports/store.h"
#include "kernel_moves.h"
#include "sqlite_db.h"

namespace crucible::reports {

namespace {

// A model that ran slower (faster) on eager and on every other backend judged between the two
// runs moved with the machine, not with a code change (on this 2-core VM a run can slow every
// backend 1.4-2.3x at once): those verdicts say so; the speed-up columns tell what moved
// against eager.
void machine_wide_verdicts(Table& t) {
  const size_t suite = t.column("suite"), model = t.column("model"), backend = t.column("backend"),
               mode = t.column("mode"), verdict = t.column("verdict");
  std::map<std::tuple<std::string, std::string, std::string>, std::vector<size_t>> groups;
  for (size_t r = 0; r < t.rows.size(); ++r) {
    const auto& row = t.rows[r];
    groups[{cell_text(row[suite], false), cell_text(row[model], false),
            cell_text(row[mode], false)}]
        .push_back(r);
  }
  for (const auto& [key, rows] : groups) {
    std::string word;
    for (size_t r : rows) {
      if (cell_text(t.rows[r][backend], false) == "eager")
        word = cell_text(t.rows[r][verdict], false);
    }
    if (word != "slower" && word != "faster") continue;
    bool all = rows.size() > 1;
    for (size_t r : rows) all = all && cell_text(t.rows[r][verdict], false) == word;
    if (!all) continue;
    for (size_t r : rows) t.rows[r][verdict] = word + " on every backend: the machine";
  }
}

}  // namespace

Table Store::compare(int64_t a, int64_t b) {
  run(a);  // each must exist
  run(b);
  using Key = std::tuple<std::string, std::string, std::string, std::string>;
  std::map<Key, ResultRow> ra, rb;
  for (ResultRow& r : results(a)) ra[{r.suite, r.model, r.backend, r.mode}] = std::move(r);
  for (ResultRow& r : results(b)) rb[{r.suite, r.model, r.backend, r.mode}] = std::move(r);
  std::map<Key, int> keys;
  for (const auto& [k, r] : ra) keys[k] = 0;
  for (const auto& [k, r] : rb) keys[k] = 0;

  // Each series' timed history up to run b, for its noise.
  Statement hist(db_,
                 "SELECT x.samples, x.noisy FROM results x JOIN runs r ON r.id = x.run_id"
                 " WHERE x.suite = ? AND x.model = ? AND x.backend = ? AND x.mode = ? AND"
                 " r.id <= ? AND x.status = 'pass' ORDER BY r.started_at, r.id");
  auto noise_of_series = [&](const Key& k) {
    hist.reset();
    hist.bind(1, std::get<0>(k)).bind(2, std::get<1>(k)).bind(3, std::get<2>(k));
    hist.bind(4, std::get<3>(k)).bind(5, b);
    std::vector<SeriesPoint> pts;
    while (hist.step()) {
      SeriesPoint p;
      p.samples = hist.doubles_blob(0);
      p.noisy = hist.int64(1) != 0;
      pts.push_back(std::move(p));
    }
    return series_noise(pts);
  };

  Table t;
  t.columns = {"suite",
               "model",
               "backend",
               "mode",
               "status_a",
               "status_b",
               "median_a_ms",
               "median_b_ms",
               "change_pct",
               "ci_low_pct",
               "ci_high_pct",
               "p_value",
               "noise_pct",
               "speedup_a",
               "speedup_b",
               "speedup_change_pct",
               "speedup_ci_low_pct",
               "speedup_ci_high_pct",
               "verdict",
               "kernels"};
  t.brief = {"model",       "backend",     "mode",       "status_b",
             "median_a_ms", "median_b_ms", "change_pct", "verdict"};
  t.under = {"kernels"};
  auto opt = [](const std::optional<double>& v) { return v ? Cell{*v} : Cell{}; };
  for (const auto& [k, unused] : keys) {
    const auto ia = ra.find(k), ib = rb.find(k);
    const ResultRow* x = ia == ra.end() ? nullptr : &ia->second;
    const ResultRow* y = ib == rb.end() ? nullptr : &ib->second;
    std::vector<Cell> row = {std::get<0>(k),
                             std::get<1>(k),
                             std::get<2>(k),
                             std::get<3>(k),
                             x ? Cell{std::string(status_name(x->status))} : Cell{},
                             y ? Cell{std::string(status_name(y->status))} : Cell{}};
    std::string verdict;
    Cell med_a, med_b, change, lo, hi, pv, noise, kernels, sp_change, sp_lo, sp_hi;
    if (!x || !y) {
      verdict = x ? "only in A" : "only in B";
    } else if (x->status != y->status) {
      verdict =
          y->status == Status::kPass
              ? fmt::format("fixed: {} -> pass", status_name(x->status))
              : fmt::format("status: {} -> {}", status_name(x->status), status_name(y->status));
    } else if (!x->samples_ms.empty() && !y->samples_ms.empty()) {
      const double ma = x->stats.median, mb = y->stats.median;
      const double c = mb / ma - 1, p = mann_whitney_p(x->samples_ms, y->samples_ms);
      const auto [l, h] = median_change_interval(x->samples_ms, y->samples_ms);
      const double n = noise_of_series(k);
      const double bar = std::max(0.01, 4 * n);
      // The interval, not only the point, past the bar: a change inside the noise is "same".
      if (x->noisy || y->noisy) {
        verdict = "noisy: not judged";
      } else if (p < 0.01 && l > bar) {
        verdict = "slower";
      } else if (p < 0.01 && h < -bar) {
        verdict = "faster";
      } else {
        verdict = "same";
      }
      med_a = ma;
      med_b = mb;
      change = 100 * c;
      lo = 100 * l;
      hi = 100 * h;
      pv = p;
      noise = 100 * n;
      const std::string moved = moved_kernels(db_, x->id, y->id);
      if (!moved.empty()) kernels = moved;
      // The speed-up's own change, with the noise of eager's samples in both runs too.
      const Key ek{std::get<0>(k), std::get<1>(k), "eager", std::get<3>(k)};
      const auto ea = ra.find(ek), eb = rb.find(ek);
      if (x->speedup && y->speedup && std::get<2>(k) != "eager" && ea != ra.end() &&
          eb != rb.end()) {
        const auto [sl, sh] = speedup_change_interval(ea->second.samples_ms, x->samples_ms,
                                                      eb->second.samples_ms, y->samples_ms);
        sp_change = 100 * (*y->speedup / *x->speedup - 1);
        if (std::isfinite(sl)) {
          sp_lo = 100 * sl;
          sp_hi = 100 * sh;
        }
      }
    } else {
      verdict = "same";
    }
    row.insert(row.end(),
               {med_a, med_b, change, lo, hi, pv, noise, x ? opt(x->speedup) : Cell{},
                y ? opt(y->speedup) : Cell{}, sp_change, sp_lo, sp_hi, verdict, kernels});
    t.rows.push_back(std::move(row));
  }
  machine_wide_verdicts(t);
  return t;
}

}  // namespace crucible::reports
