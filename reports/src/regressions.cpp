// `crucible regressions`: loads every series (suite, model, backend, mode) from the store in run
// order, runs the change detector on it and lists the alerts, each timing change with the kernels
// whose per-call time moved most between the last baseline run and the run that confirmed it.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

#include "crucible/core/quote.h"
#include "crucible/reports/detect.h"
#include "crucible/reports/store.h"
#include "kernel_moves.h"
#include "sqlite_db.h"

namespace crucible::reports {

namespace {

struct LoadedSeries {
  std::string suite, model, backend, mode;
  std::vector<SeriesPoint> points;
  std::vector<int64_t> result_ids;  // parallel to points
};

}  // namespace

Table Store::regressions(const RegressionQuery& q) {
  int64_t newest = 0;
  {
    Statement last(db_, "SELECT coalesce(max(id), 0) FROM runs");
    last.step();
    newest = last.int64(0);
  }
  const int64_t wanted = q.run != 0 ? q.run : newest;
  if (q.run != 0) {
    Statement exists(db_, "SELECT count(*) FROM runs WHERE id = ?");
    exists.bind(1, q.run);
    exists.step();
    if (exists.int64(0) == 0) {
      throw StoreError(fmt::format("{}: no run with id {}", path_.string(), q.run));
    }
  }
  // The environment a run measured in: what a code change does not change.
  Statement rows(
      db_,
      "SELECT x.suite, x.model, x.backend, x.mode, r.id, x.id, x.status, x.samples, x.noisy,"
      " 'cpu=' || coalesce(r.cpu_model, '') || ';cores=' || coalesce(r.cores, '') ||"
      " ';compiler=' || coalesce(r.compiler, '') || ';libraries=' || coalesce(r.libraries, '') ||"
      " ';threads=' || coalesce(r.threads, '') || ';launcher=' || r.launcher_json"
      " FROM results x JOIN runs r ON r.id = x.run_id"
      " WHERE (?1 = '' OR x.suite = ?1) AND (?2 = '' OR x.model = ?2) AND (?3 = '' OR x.backend = "
      "?3)"
      " ORDER BY x.suite, x.model, x.backend, x.mode, r.started_at, r.id");
  rows.bind(1, q.suite).bind(2, q.model).bind(3, q.backend);
  std::vector<LoadedSeries> series;
  while (rows.step()) {
    if (series.empty() || series.back().suite != rows.text(0) ||
        series.back().model != rows.text(1) || series.back().backend != rows.text(2) ||
        series.back().mode != rows.text(3)) {
      series.push_back({rows.text(0), rows.text(1), rows.text(2), rows.text(3), {}, {}});
    }
    SeriesPoint p;
    p.run_id = rows.int64(4);
    p.status = rows.text(6);
    p.samples = rows.doubles_blob(7);
    p.noisy = rows.int64(8) != 0;
    p.fingerprint = rows.text(9);
    series.back().points.push_back(std::move(p));
    series.back().result_ids.push_back(rows.int64(5));
  }

  std::map<std::tuple<std::string, std::string, std::string>, double> noise;
  for (const Calibration& c : calibrations()) {  // newest first: the first seen is kept
    if (std::isfinite(c.time_cv) && c.time_cv > 0)
      noise.emplace(std::tuple{c.suite, c.model, c.backend}, c.time_cv);
  }

  Table t;
  t.columns = {"kind",         "suite",         "model",     "backend", "mode",
               "change_pct",   "threshold_pct", "noise_pct", "p_value", "run",
               "confirmed_by", "runs",          "kernels",   "note"};
  for (const LoadedSeries& s : series) {
    // A series calibrated with `crucible calibrate` brings its measured run-to-run noise as a
    // floor: the detector trusts it over a few runs' own estimate.
    DetectorOptions opts;
    if (const auto c = noise.find({s.suite, s.model, s.backend});
        c != noise.end() && s.mode == "performance") {
      opts.prior_noise = std::log1p(c->second);
    }
    std::vector<std::string> not_judged;
    for (const Alert& a : detect_changes(s.points, opts, &not_judged)) {
      if (!q.all && a.confirmed_by != wanted) continue;
      const bool timing =
          a.kind == "regression" || a.kind == "improvement" || a.kind == "suspicious";
      std::string kernels;
      if (a.kind == "regression" || a.kind == "improvement") {
        // The last judged run before the change point, and the run that confirmed it.
        int64_t before = 0, after = 0;
        for (size_t i = 0; i < s.points.size(); ++i) {
          if (s.points[i].run_id < a.run_id && !s.points[i].samples.empty()) {
            before = s.result_ids[i];
          }
          if (s.points[i].run_id == a.confirmed_by) after = s.result_ids[i];
        }
        if (before != 0 && after != 0) kernels = moved_kernels(db_, before, after);
      }
      auto pct = [&](double v) { return timing ? Cell{100 * v} : Cell{}; };
      t.rows.push_back({a.kind, s.suite, s.model, s.backend, s.mode, pct(a.change),
                        pct(a.threshold), pct(a.noise), timing ? Cell{a.p_value} : Cell{}, a.run_id,
                        a.confirmed_by, static_cast<int64_t>(a.runs), kernels, a.note});
    }
    // Silence is not "no change" where nothing was judged: the run asked about (with --all, the
    // series' newest) is listed when its timing was not judged, and why.
    const int64_t target = q.all ? s.points.back().run_id : wanted;
    const auto at = std::find_if(s.points.begin(), s.points.end(),
                                 [&](const SeriesPoint& p) { return p.run_id == target; });
    const std::string why = at == s.points.end() ? "" : not_judged[at - s.points.begin()];
    if (!why.empty()) {
      t.rows.push_back({std::string("not_judged"), s.suite, s.model, s.backend, s.mode, Cell{},
                        Cell{}, Cell{}, Cell{}, target, target, int64_t{0}, std::string(), why});
    }
  }
  return t;
}

}  // namespace crucible::reports
