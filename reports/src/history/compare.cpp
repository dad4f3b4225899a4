// `crucible compare RUN_A RUN_B`: every series of two runs side by side. A backend with eager
// beside it in both runs is judged on its time over eager's median of the same run (a machine
// that moved moves both sides), any other (eager itself, or a run without eager) on its time.
// A change is called only when the U test on the samples is significant and the whole 95%
// interval of the change lies past max(1%, 4 x that measure's run-to-run noise in the store up to
// run B); a result the harness flagged noisy is shown but not judged. `judged_on` says which.
// Eager's own move, between two runs of one clean commit, environment and eager options, is said
// as the machine's: no code changed. Where `regressions` found a level change of a series
// between the two runs, the row says that (see history_verdicts).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <optional>
#include <tuple>

#include "crucible/reports/detect.h"
#include "crucible/reports/run_options.h"
#include "crucible/reports/store.h"
#include "judged_store.h"
#include "kernel_moves.h"
#include "run_fingerprint.h"
#include "sqlite_db.h"

namespace crucible::reports {

namespace {

// Each row's move on its time alone: its word and its change.
struct TimeMove {
  std::string word;
  double change = 0;
};

// The reference whose runs moved on every backend moved with the machine, not with a code change
// (on this 2-core VM a run can slow every backend 1.4-2.3x at once): eager's verdict says so
// when every other backend judged between the two runs moved its way on its time too. The others
// are judged over eager, where a uniform move cancels; but this VM's slow mode slows backends
// unevenly, so a ratio that moved with both sides, by less than half what eager's time did (in log
// units: eager -50% and codegen -35% moved their ratio +30%), is
// that bend, said as such (as `regressions` calls it a disturbed run); and one that moved because
// eager moved alone (a small resnet18: eager 0.6 -> 0.3 ms between A/A runs, codegen steady) says
// so.
void machine_wide_verdicts(Table& t, const std::vector<TimeMove>& moved) {
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
    std::optional<size_t> eager;
    for (size_t r : rows) {
      if (cell_text(t.rows[r][backend], false) == "eager") eager = r;
    }
    if (!eager || rows.size() < 2) continue;
    const TimeMove& e = moved[*eager];
    const bool machine = e.word == "slower" || e.word == "faster";
    bool all = machine;
    for (size_t r : rows) all = all && moved[r].word == e.word;
    if (all) t.rows[*eager][verdict] = "machine: " + e.word + " on every backend";
    const size_t change = t.column("change_pct"), judged_on = t.column("judged_on");
    for (size_t r : rows) {
      const std::string word = cell_text(t.rows[r][verdict], false);
      if (r == *eager || (word != "slower" && word != "faster")) continue;
      if (cell_text(t.rows[r][judged_on], false) != "time/eager") continue;
      // In log units, where a ratio's move is the difference of its sides' moves.
      const double ratio = std::log1p(std::get<double>(t.rows[r][change]) / 100);
      const double eager_move = std::log1p(e.change);
      if (moved[r].word == "same" && ratio * eager_move < 0 &&
          std::abs(eager_move) >= 0.5 * std::abs(ratio)) {
        // Eager moved (within its noise or past it) and this backend did not: the ratio moved
        // with eager alone.
        t.rows[r][verdict] = fmt::format(
            "eager moved alone: {} over eager (eager {:+.0f}%, this backend the same "
            "on its time)",
            word, 100 * e.change);
      } else if (machine && moved[r].word == e.word &&
                 std::abs(ratio) < 0.5 * std::abs(eager_move)) {
        t.rows[r][verdict] =
            fmt::format("machine: {} with it (eager {:+.0f}%, this backend {:+.0f}%)", word,
                        100 * e.change, 100 * moved[r].change);
      }
    }
  }
}

// What fixes the reference's code and machine in a run: the commit (eager ships in it), the
// environment the detector's fingerprint holds, and the -c options that reached eager.
struct ReferenceIdentity {
  std::string commit, environment;
  std::vector<std::string> options;
  bool operator==(const ReferenceIdentity&) const = default;
};

ReferenceIdentity reference_identity(sqlite3* db, int64_t run) {
  Statement q(db, std::string("SELECT coalesce(r.git_commit, ''), ") + detail::kRunFingerprintSql +
                      ", coalesce(r.command, '') FROM runs r WHERE r.id = ?");
  q.bind(1, run);
  if (!q.step()) return {};
  return {q.text(0), q.text(1), options_reaching(q.text(2), "eager")};
}

// The reference has nothing to be paired with: its time is judged alone, and this VM moves one
// model's eager worker by 20-50% between runs (a mode) with every other backend of the model
// steady. Where both runs built eager from one clean commit, in one environment, with the same
// options, a move past the noise cannot be a change of eager's code: it is said as the machine's.
void same_code_verdicts(Table& t, const ReferenceIdentity& a, const ReferenceIdentity& b) {
  if (a.commit.empty() || a.commit.find("-dirty") != std::string::npos || !(a == b)) return;
  const size_t backend = t.column("backend"), verdict = t.column("verdict"),
               judged_on = t.column("judged_on"), change = t.column("change_pct");
  for (auto& row : t.rows) {
    const std::string word = cell_text(row[verdict], false);
    if (word.rfind("eager moved alone: ", 0) == 0) {
      // A ratio that moved with eager alone: eager's move was the machine's, so is this.
      row[verdict] = "machine: " + word.substr(19) + ", eager with the same code";
      continue;
    }
    if (cell_text(row[backend], false) != "eager" || cell_text(row[judged_on], false) != "time" ||
        (word != "slower" && word != "faster"))
      continue;
    row[verdict] = fmt::format(
        "machine: {} {:+.0f}% with the same code (one commit, environment and eager options in "
        "both runs)",
        word, std::get<double>(row[change]));
  }
}

// A level change `regressions` found between the two runs: its kind, measure and size, the
// run it starts at and the run that confirmed it (the store's later runs may have).
struct FoundChange {
  std::string kind, measure;
  double change_pct = 0;
  int64_t run = 0, confirmed_by = 0;
};
using SeriesKeyTuple = std::tuple<std::string, std::string, std::string, std::string>;

// The changes of every series whose change point lies in (from, to], as the detector judged
// the store.
std::map<SeriesKeyTuple, FoundChange> changes_between(const detail::JudgedStore& judged,
                                                      int64_t from, int64_t to) {
  std::map<SeriesKeyTuple, FoundChange> out;
  for (size_t i = 0; i < judged.series.size(); ++i) {
    const SeriesKey& k = judged.series[i].key;
    const SeriesVerdict& sv = judged.verdict.series[i];
    for (const Alert& a : sv.alerts) {
      if ((a.kind != "regression" && a.kind != "improvement") || a.run_id <= from || a.run_id > to)
        continue;
      out[{k.suite, k.model, k.backend, k.mode}] = {a.kind, sv.measure, 100 * a.change, a.run_id,
                                                    a.confirmed_by};
    }
  }
  return out;
}

// Two runs alone cannot show a level that held; the store's history can. Where `regressions`
// found a change between the runs, the verdict is its verdict (the same series judged on the
// same measure), so the dashboard's reproduce command shows what the alert judged; B before A
// turns it around.
void history_verdicts(Table& t, const std::map<SeriesKeyTuple, FoundChange>& found, bool reversed) {
  const size_t suite = t.column("suite"), model = t.column("model"), backend = t.column("backend"),
               mode = t.column("mode"), verdict = t.column("verdict"),
               judged_on = t.column("judged_on");
  for (auto& row : t.rows) {
    const auto f = found.find({cell_text(row[suite], false), cell_text(row[model], false),
                               cell_text(row[backend], false), cell_text(row[mode], false)});
    const std::string was = cell_text(row[verdict], false);
    if (f == found.end() || was.rfind("status", 0) == 0 || was.rfind("fixed", 0) == 0 ||
        was.rfind("only in", 0) == 0)
      continue;
    const bool slower = (f->second.kind == "regression") != reversed;
    row[verdict] = fmt::format(
        "{}: the level change regressions found at run {} ({:+.1f}% on {}, confirmed by run {})",
        slower ? "slower" : "faster", f->second.run, f->second.change_pct, f->second.measure,
        f->second.confirmed_by);
    row[judged_on] = f->second.measure;
  }
}

// "slower", "faster" or "same" for a change with interval [lo, hi] and rank-test p, against the
// measure's run-to-run noise.
std::string word_for(double p, double lo, double hi, double noise) {
  const double bar = std::max(0.01, 4 * noise);
  // The interval, not only the point, past the bar: a change inside the noise is "same".
  if (p < 0.01 && lo > bar) return "slower";
  if (p < 0.01 && hi < -bar) return "faster";
  return "same";
}

// `samples` over the median of `reference` (a run's time over eager's).
std::vector<double> over(std::vector<double> samples, const std::vector<double>& reference) {
  const double m = summarize(reference).median;
  for (double& v : samples) v /= m;
  return samples;
}

// A series over its reference's median run by run (runs without the reference left out).
std::vector<SeriesPoint> over_reference(std::vector<SeriesPoint> pts,
                                        const std::vector<SeriesPoint>& ref) {
  std::map<int64_t, const SeriesPoint*> by_run;
  for (const SeriesPoint& p : ref) by_run[p.run_id] = &p;
  std::vector<SeriesPoint> out;
  for (SeriesPoint& p : pts) {
    const auto r = by_run.find(p.run_id);
    if (p.samples.empty() || r == by_run.end() || r->second->samples.empty()) continue;
    p.samples = over(std::move(p.samples), r->second->samples);
    p.noisy = p.noisy || r->second->noisy;
    out.push_back(std::move(p));
  }
  return out;
}

// A timing's move between two runs: relative, its 95% interval, the rank test's p and the
// measure's run-to-run noise in the store.
struct Change {
  double change = 0, lo = 0, hi = 0, p = 1, noise = 0;
  std::string word() const { return word_for(p, lo, hi, noise); }
};

// Run B's time against run A's, the noise from the series' history `own`.
Change time_change(const ResultRow& x, const ResultRow& y, const std::vector<SeriesPoint>& own) {
  const auto [lo, hi] = median_change_interval(x.samples_ms, y.samples_ms);
  return {y.stats.median / x.stats.median - 1, lo, hi, mann_whitney_p(x.samples_ms, y.samples_ms),
          series_noise(own)};
}

// The same over eager's median of each run (`ea`, `eb`): the speed-up's interval (all four sample
// sets resampled together, returned in `speedup`) is the same change seen from the other side.
Change ratio_change(const ResultRow& x, const ResultRow& y, const ResultRow& ea,
                    const ResultRow& eb, const std::vector<SeriesPoint>& own,
                    const std::vector<SeriesPoint>& eager_history,
                    std::pair<double, double>& speedup) {
  speedup = speedup_change_interval(ea.samples_ms, x.samples_ms, eb.samples_ms, y.samples_ms);
  const std::vector<double> qa = over(x.samples_ms, ea.samples_ms);
  const std::vector<double> qb = over(y.samples_ms, eb.samples_ms);
  return {summarize(qb).median / summarize(qa).median - 1, 1 / (1 + speedup.second) - 1,
          1 / (1 + speedup.first) - 1, mann_whitney_p(qa, qb),
          series_noise(over_reference(own, eager_history))};
}

// A timed result that can be a reference: passed, with samples.
bool timed_pass(const ResultRow& r) { return r.status == Status::kPass && !r.samples_ms.empty(); }

// One row's cells of a timing both runs have: on its time, and over eager's where `ea` and `eb`
// (eager's results in A and B) are given; `history(backend)` is that backend's series of the
// row's model up to run B.
struct TimedCells {
  Cell med_a, med_b, change, lo, hi, pv, noise, sp_change, sp_lo, sp_hi, judged_on, kernels;
  std::string verdict;
  TimeMove on_time;  // on its time alone (machine_wide_verdicts)
};

TimedCells timed_cells(sqlite3* db, const ResultRow& x, const ResultRow& y, const ResultRow* ea,
                       const ResultRow* eb,
                       const std::function<std::vector<SeriesPoint>(const std::string&)>& history) {
  TimedCells out;
  out.med_a = x.stats.median;
  out.med_b = y.stats.median;
  // On its time alone, for the machine's rule and for a series without eager beside it.
  const std::vector<SeriesPoint> own = history(x.backend);
  Change c = time_change(x, y, own);
  out.on_time = {c.word(), c.change};
  out.judged_on = std::string("time");
  const bool paired = ea != nullptr && eb != nullptr;
  if (paired) {
    std::pair<double, double> speedup;
    c = ratio_change(x, y, *ea, *eb, own, history("eager"), speedup);
    out.judged_on = std::string("time/eager");
    if (x.speedup && y.speedup) out.sp_change = 100 * (*y.speedup / *x.speedup - 1);
    if (std::isfinite(speedup.first)) {
      out.sp_lo = 100 * speedup.first;
      out.sp_hi = 100 * speedup.second;
    }
  }
  out.verdict =
      x.noisy || y.noisy || (paired && (ea->noisy || eb->noisy)) ? "noisy: not judged" : c.word();
  if (x.noisy || y.noisy) out.on_time.word = "noisy: not judged";
  out.change = 100 * c.change;
  out.lo = 100 * c.lo;
  out.hi = 100 * c.hi;
  out.pv = c.p;
  out.noise = 100 * c.noise;
  const std::string kernel_moves = moved_kernels(db, x.id, y.id);
  if (!kernel_moves.empty()) out.kernels = kernel_moves;
  return out;
}

Table comparison_table() {
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
               "judged_on",
               "kernels"};
  t.brief = {"model",       "backend",    "mode",    "status_b", "median_a_ms",
             "median_b_ms", "change_pct", "verdict", "judged_on"};
  t.under = {"kernels"};
  return t;
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

  // Each series' timed history up to run b, by run: for the noise of its time and of its time
  // over eager's.
  Statement hist(db_,
                 "SELECT r.id, x.samples, x.noisy FROM results x JOIN runs r ON r.id = x.run_id"
                 " WHERE x.suite = ? AND x.model = ? AND x.backend = ? AND x.mode = ? AND"
                 " r.id <= ? AND x.status = 'pass' ORDER BY r.started_at, r.id");
  auto history = [&](const Key& k, const std::string& backend) {
    hist.reset();
    hist.bind(1, std::get<0>(k)).bind(2, std::get<1>(k)).bind(3, backend);
    hist.bind(4, std::get<3>(k)).bind(5, b);
    std::vector<SeriesPoint> pts;
    while (hist.step()) {
      SeriesPoint p;
      p.run_id = hist.int64(0);
      p.samples = hist.doubles_blob(1);
      p.noisy = hist.int64(2) != 0;
      pts.push_back(std::move(p));
    }
    return pts;
  };
  Table t = comparison_table();
  std::vector<TimeMove> moved;  // each row's on its time alone (machine_wide_verdicts)
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
    TimedCells c;
    if (!x || !y) {
      c.verdict = x ? "only in A" : "only in B";
    } else if (x->status != y->status) {
      c.verdict =
          y->status == Status::kPass
              ? fmt::format("fixed: {} -> pass", status_name(x->status))
              : fmt::format("status: {} -> {}", status_name(x->status), status_name(y->status));
    } else if (!x->samples_ms.empty() && !y->samples_ms.empty()) {
      const Key ek{std::get<0>(k), std::get<1>(k), "eager", std::get<3>(k)};
      const auto ea = ra.find(ek), eb = rb.find(ek);
      const bool paired = std::get<2>(k) != "eager" && ea != ra.end() && eb != rb.end() &&
                          timed_pass(ea->second) && timed_pass(eb->second);
      c = timed_cells(db_, *x, *y, paired ? &ea->second : nullptr, paired ? &eb->second : nullptr,
                      [&](const std::string& backend) { return history(k, backend); });
    } else {
      c.verdict = "same";
    }
    moved.push_back(c.on_time);
    row.insert(row.end(), {c.med_a, c.med_b, c.change, c.lo, c.hi, c.pv, c.noise,
                           x ? opt(x->speedup) : Cell{}, y ? opt(y->speedup) : Cell{}, c.sp_change,
                           c.sp_lo, c.sp_hi, c.verdict, c.judged_on, c.kernels});
    t.rows.push_back(std::move(row));
  }
  machine_wide_verdicts(t, moved);
  same_code_verdicts(t, reference_identity(db_, a), reference_identity(db_, b));
  history_verdicts(t,
                   changes_between(detail::judge_store(db_, calibrations(), RegressionQuery{}),
                                   std::min(a, b), std::max(a, b)),
                   a > b);
  return t;
}

}  // namespace crucible::reports
