// `crucible regressions`: loads every series (suite, model, backend, mode) from the store in run
// order, judges the history (detect_history.h: ratios to the reference, machine-wide events,
// change points) and lists the alerts, each timing change with its commit range and the kernels
// whose per-call time moved most between the last run at the old level and the confirming run.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <tuple>

#include "crucible/core/quote.h"
#include "crucible/reports/detect_history.h"
#include "crucible/reports/store.h"
#include "judged_store.h"
#include "kernel_moves.h"
#include "run_fingerprint.h"
#include "sqlite_db.h"

namespace crucible::reports {

namespace {

using detail::JudgedStore;

// Collect: every series of the store in run order, the results' ids beside its points.
JudgedStore load_series(sqlite3* db, const RegressionQuery& q) {
  // The environment a run measured in: what a code change does not change. Every backend of a
  // model is loaded even when one is asked about: the others are its reference.
  Statement rows(
      db, std::string("SELECT x.suite, x.model, x.backend, x.mode, r.id, x.id, x.status, x.samples,"
                      " x.noisy, ") +
              detail::kRunFingerprintSql +
              ", coalesce(r.git_commit, ''), x.sim_instructions, x.instructions"
              " FROM results x JOIN runs r ON r.id = x.run_id"
              " WHERE (?1 = '' OR x.suite = ?1) AND (?2 = '' OR x.model = ?2)"
              " ORDER BY x.suite, x.model, x.backend, x.mode, r.started_at, r.id");
  rows.bind(1, q.suite).bind(2, q.model);
  JudgedStore out;
  // Per row, in load order: simulated instructions per call, and the PMU's.
  std::vector<std::vector<double>> simulated, counted_by_pmu;
  while (rows.step()) {
    if (out.series.empty() || out.series.back().key.suite != rows.text(0) ||
        out.series.back().key.model != rows.text(1) ||
        out.series.back().key.backend != rows.text(2) ||
        out.series.back().key.mode != rows.text(3)) {
      out.series.push_back({{rows.text(0), rows.text(1), rows.text(2), rows.text(3)}, {}, 0});
      out.result_ids.emplace_back();
    }
    SeriesPoint p;
    p.run_id = rows.int64(4);
    p.status = stored_status(rows.text(6), fmt::format("result {}", rows.int64(5)));
    p.samples = rows.doubles_blob(7);
    p.noisy = rows.int64(8) != 0;
    p.fingerprint = rows.text(9);
    p.commit = rows.text(10);
    out.series.back().points.push_back(std::move(p));
    out.result_ids.back().push_back(rows.int64(5));
    simulated.push_back(rows.doubles_blob(11));
    counted_by_pmu.push_back(rows.doubles_blob(12));
  }
  // Where a series was counted, its instructions per call are series of their own (the same
  // points, the counts as samples): the PMU's where the machine has one, `instructions` from
  // --counters cachegrind; never mixed, since the two count different things.
  const size_t timed = out.series.size();
  for (const auto& [measure, counts] :
       {std::pair{"pmu_instructions", &counted_by_pmu}, std::pair{"instructions", &simulated}}) {
    for (size_t i = 0, at = 0; i < timed; ++i) {
      HistorySeries counted = out.series[i];
      counted.measure = measure;
      counted.prior_noise = 0;
      bool any = false;
      for (SeriesPoint& p : counted.points) {
        p.samples = (*counts)[at++];
        any = any || !p.samples.empty();
      }
      if (!any) continue;
      out.series.push_back(std::move(counted));
      out.result_ids.push_back(out.result_ids[i]);
    }
  }
  return out;
}

// 10 hex digits, with a dirty tree's mark kept: no bisect can go back to that.
std::string short_commit(const std::string& c) {
  if (c.empty()) return "?";
  return c.substr(0, 10) + (c.find("-dirty") != std::string::npos ? "-dirty" : "");
}

// "last commit at the old level..first at the new": what `crucible bisect` is given. The old
// level of a timing change is its last judged run before; of a status change, its last run.
std::string commit_range(const std::vector<SeriesPoint>& pts, int64_t first_new, bool timing) {
  std::string before, after;
  for (const SeriesPoint& p : pts) {
    if (p.run_id < first_new && (!timing || (!p.samples.empty() && !p.noisy))) before = p.commit;
    if (p.run_id == first_new) after = p.commit;
  }
  if (before.empty() && after.empty()) return "";
  return short_commit(before) + ".." + short_commit(after);
}

// A series' detection floor at its newest run, as a row of the regressions table.
std::vector<Cell> floor_row(const HistorySeries& s, const SeriesVerdict& sv) {
  const int64_t newest = s.points.back().run_id;
  const DetectionFloor& f = sv.floor;
  return {std::string("floor"),
          s.key.suite,
          s.key.model,
          s.key.backend,
          s.key.mode,
          sv.measure,
          Cell{},
          Cell{100 * f.step},
          Cell{100 * f.noise},
          Cell{},
          newest,
          newest,
          int64_t{0},
          std::string(),
          std::string(),
          fmt::format("detection floor {:.1f}%: the smallest step this series can show "
                      "(run-to-run noise {:.2f}%{})",
                      100 * f.step, 100 * f.noise,
                      f.short_baseline > 0
                          ? fmt::format(", on a short baseline of {} runs", f.short_baseline)
                          : "")};
}

// (suite, model, backend, run) of every accuracy series' status change: a run whose accuracy
// failed skips that backend's timing, whose own "pass -> skipped" says nothing more.
std::set<std::tuple<std::string, std::string, std::string, int64_t>> accuracy_status_changes(
    const std::vector<HistorySeries>& series, const HistoryVerdict& verdict) {
  std::set<std::tuple<std::string, std::string, std::string, int64_t>> out;
  for (size_t si = 0; si < series.size(); ++si) {
    const SeriesKey& k = series[si].key;
    if (k.mode != "accuracy") continue;
    for (const Alert& a : verdict.series[si].alerts) {
      if (a.kind == "status") out.insert({k.suite, k.model, k.backend, a.run_id});
    }
  }
  return out;
}

}  // namespace

JudgedStore detail::judge_store(sqlite3* db, const std::vector<Calibration>& calibrations,
                                const RegressionQuery& q) {
  JudgedStore loaded = load_series(db, q);
  // A series calibrated with `crucible calibrate` brings its measured run-to-run noise as a
  // floor for its time: the detector trusts it over a few runs' own estimate.
  std::map<std::tuple<std::string, std::string, std::string>, double> noise;
  for (const Calibration& c : calibrations) {  // newest first: the first seen is kept
    if (std::isfinite(c.time_cv) && c.time_cv > 0)
      noise.emplace(std::tuple{c.suite, c.model, c.backend}, c.time_cv);
  }
  for (HistorySeries& s : loaded.series) {
    const auto c = noise.find({s.key.suite, s.key.model, s.key.backend});
    if (c != noise.end() && s.key.mode == "performance" && s.measure == "time")
      s.prior_noise = std::log1p(c->second);
  }
  HistoryOptions opts;
  opts.reference = q.reference;
  loaded.verdict = judge_history(loaded.series, opts);
  return loaded;
}

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
  const JudgedStore loaded = detail::judge_store(db_, calibrations(), q);
  const HistoryVerdict& verdict = loaded.verdict;

  Table t;
  t.columns = {"kind",       "suite",         "model",     "backend", "mode", "measure",
               "change_pct", "threshold_pct", "noise_pct", "p_value", "run",  "confirmed_by",
               "runs",       "commits",       "kernels",   "note"};
  t.brief = {"kind", "suite", "model", "backend", "measure", "change_pct", "run", "commits"};
  t.under = {"note", "kernels"};
  for (const EnvironmentEvent& ev : verdict.events) {
    if (!q.all && ev.confirmed_by != wanted) continue;
    if (!q.backend.empty()) continue;  // the machine's, not one backend's
    t.rows.push_back({std::string("environment_event"), std::string("*"), std::string("*"),
                      std::string("*"), std::string("*"), std::string("time"),
                      Cell{100 * ev.change}, Cell{}, Cell{}, Cell{}, ev.run_id, ev.confirmed_by,
                      int64_t{ev.moved}, std::string(), std::string(), ev.note});
  }
  const std::set<std::tuple<std::string, std::string, std::string, int64_t>> failed_accuracy =
      accuracy_status_changes(loaded.series, verdict);
  for (size_t si = 0; si < loaded.series.size(); ++si) {
    const HistorySeries& s = loaded.series[si];
    const SeriesVerdict& sv = verdict.series[si];
    if (!q.backend.empty() && s.key.backend != q.backend) continue;
    for (const Alert& a : sv.alerts) {
      if (!q.all && a.confirmed_by != wanted) continue;
      // A timing skipped because the same run's accuracy failed is that failure, listed once.
      if (a.kind == "status" && s.key.mode == "performance" &&
          a.note == fmt::format("pass -> {}", status_name(Status::kSkipped)) &&
          failed_accuracy.contains({s.key.suite, s.key.model, s.key.backend, a.run_id}))
        continue;
      const bool timing = a.kind == "regression" || a.kind == "improvement" ||
                          a.kind == "suspicious" || a.kind == "absorbed" || a.kind == "with_event";
      std::string kernels, commits;
      if (a.kind == "regression" || a.kind == "improvement") {
        // The last judged run before the change point, and the run that confirmed it.
        int64_t before = 0, after = 0;
        for (size_t i = 0; i < s.points.size(); ++i) {
          if (s.points[i].run_id < a.run_id && !s.points[i].samples.empty()) {
            before = loaded.result_ids[si][i];
          }
          if (s.points[i].run_id == a.confirmed_by) after = loaded.result_ids[si][i];
        }
        if (before != 0 && after != 0) kernels = moved_kernels(db_, before, after);
      }
      if (a.kind != "environment") commits = commit_range(s.points, a.run_id, timing);
      auto pct = [&](double v) { return timing ? Cell{100 * v} : Cell{}; };
      t.rows.push_back({a.kind, s.key.suite, s.key.model, s.key.backend, s.key.mode,
                        timing ? sv.measure : std::string(), pct(a.change), pct(a.threshold),
                        pct(a.noise), timing ? Cell{a.p_value} : Cell{}, a.run_id, a.confirmed_by,
                        static_cast<int64_t>(a.runs), commits, kernels, a.note});
    }
    // With --all, the smallest step each judged series can show now (its detection floor).
    if (q.all && std::isfinite(sv.floor.step)) t.rows.push_back(floor_row(s, sv));
    // Silence is not "no change" where nothing was judged: the run asked about (with --all, the
    // series' newest) is listed when its timing was not judged, and why.
    const int64_t target = q.all ? s.points.back().run_id : wanted;
    const auto at = std::find_if(s.points.begin(), s.points.end(),
                                 [&](const SeriesPoint& p) { return p.run_id == target; });
    const std::string why = at == s.points.end() ? "" : sv.not_judged[at - s.points.begin()];
    if (!why.empty()) {
      t.rows.push_back({std::string("not_judged"), s.key.suite, s.key.model, s.key.backend,
                        s.key.mode, sv.measure, Cell{}, Cell{}, Cell{}, Cell{}, target, target,
                        int64_t{0}, std::string(), std::string(), why});
    }
  }
  return t;
}

}  // namespace crucible::reports
