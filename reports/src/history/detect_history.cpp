// The detector across a history (see detect_history.h): ratios to the reference first, because
// a machine-wide shift moves both sides of a ratio and cancels; events for the shifts the
// absolute times still show; attribution so a change of the reference is not called a change of
// every backend timed against it.
#include "crucible/reports/detect_history.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <tuple>

#include "crucible/reports/records.h"
#include "detect_internal.h"

namespace crucible::reports {

using detail::log_median;
using detail::rel;

namespace {

bool same_model(const SeriesKey& a, const SeriesKey& b) {
  return a.suite == b.suite && a.model == b.model && a.mode == b.mode;
}

bool is_change(const Alert& a) { return a.kind == "regression" || a.kind == "improvement"; }

bool timed(const SeriesPoint& p) { return !p.samples.empty() && !p.noisy; }

// Each run id's position among every run of the history: "the next run" across series.
std::map<int64_t, int> run_ranks(const std::vector<HistorySeries>& all) {
  std::set<int64_t> ids;
  for (const HistorySeries& s : all) {
    for (const SeriesPoint& p : s.points) ids.insert(p.run_id);
  }
  std::map<int64_t, int> rank;
  for (int64_t id : ids) rank.emplace(id, static_cast<int>(rank.size()));
  return rank;
}

// The index of the reference's series for each series of `all` (-1: none).
std::vector<int> reference_of(const std::vector<HistorySeries>& all, const std::string& reference) {
  std::vector<int> out(all.size(), -1);
  for (size_t i = 0; i < all.size(); ++i) {
    if (all[i].measure != "time") continue;
    for (size_t j = 0; j < all.size() && !reference.empty(); ++j) {
      if (all[j].key.backend == reference && all[j].measure == "time" &&
          same_model(all[i].key, all[j].key)) {
        out[i] = static_cast<int>(j);
      }
    }
  }
  return out;
}

// How far the level of `s` moved at the change (first run `from`, confirmed at `to`): the median
// log level of its timed runs in [from, to] less that of up to 4 timed runs before. 0: unknown.
double level_shift(const std::vector<SeriesPoint>& s, int64_t from, int64_t to) {
  std::vector<double> before, after;
  for (const SeriesPoint& p : s) {
    if (!timed(p)) continue;
    if (p.run_id < from) before.push_back(log_median(p));
    if (p.run_id >= from && p.run_id <= to) after.push_back(log_median(p));
  }
  if (before.empty() || after.empty()) return 0;
  before.erase(before.begin(), before.end() - std::min<size_t>(before.size(), 4));
  return median(after) - median(before);
}

}  // namespace

std::vector<std::vector<SeriesPoint>> pair_with_reference(const std::vector<HistorySeries>& all,
                                                          const std::string& reference) {
  const std::vector<int> ref = reference_of(all, reference);
  std::vector<std::vector<SeriesPoint>> out(all.size());
  for (size_t i = 0; i < all.size(); ++i) {
    if (ref[i] < 0 || all[i].key.backend == reference || all[i].key.mode != "performance") continue;
    std::map<int64_t, const SeriesPoint*> by_run;
    for (const SeriesPoint& p : all[static_cast<size_t>(ref[i])].points) by_run[p.run_id] = &p;
    bool any = false;
    std::vector<SeriesPoint> ratio = all[i].points;
    for (SeriesPoint& p : ratio) {
      const auto r = by_run.find(p.run_id);
      if (p.samples.empty()) continue;
      if (r == by_run.end() || r->second->samples.empty()) {
        p.samples.clear();  // no reference beside it: this run has no ratio
        continue;
      }
      const double m = median(r->second->samples);
      p.own_log = log_median(p);
      p.reference_log = std::log(m);
      for (double& v : p.samples) v /= m;
      p.noisy = p.noisy || r->second->noisy;
      any = true;
    }
    if (any) out[i] = std::move(ratio);
  }
  return out;
}

namespace {

// Each timed point's move against the runs before it, by run id: its log level less the median
// of up to 5 timed points before it, and less the point just before; the smaller of the two
// when they agree in sign, else 0 (a run back at the level after a disturbed one did not move;
// a run after a lasting shift did not either). NaN for the first 3, with too little before them.
std::map<int64_t, double> moves_by_run(const std::vector<SeriesPoint>& s) {
  std::map<int64_t, double> out;
  std::vector<double> before;
  for (const SeriesPoint& p : s) {
    if (!timed(p)) continue;
    const double l = log_median(p);
    if (before.size() < 3) {
      out[p.run_id] = std::nan("");
    } else {
      const double a = l - median(before), b = l - before.back();
      out[p.run_id] = (a > 0) != (b > 0) ? 0.0 : std::abs(a) < std::abs(b) ? a : b;
    }
    before.push_back(l);
    if (before.size() > 5) before.erase(before.begin());
  }
  return out;
}

}  // namespace

void set_aside_disturbed_runs(const std::vector<HistorySeries>& all,
                              std::vector<std::vector<SeriesPoint>>& ratio,
                              const std::string& reference, const DetectorOptions& o) {
  const std::vector<int> ref = reference_of(all, reference);
  for (size_t i = 0; i < all.size(); ++i) {
    if (ratio[i].empty() || ref[i] < 0) continue;
    const auto theirs = moves_by_run(all[static_cast<size_t>(ref[i])].points);
    const auto own = moves_by_run(all[i].points);
    const auto ratio_moves = moves_by_run(ratio[i]);
    // The ratio's noise where the machine was quiet: its moves in the runs where the reference
    // moved least (the half below the median). The disturbed runs would inflate its whole noise
    // past the distortion they cause.
    std::vector<std::pair<double, double>> tq;
    for (const auto& [run, q] : ratio_moves) {
      const auto t = theirs.find(run);
      if (t != theirs.end() && std::isfinite(t->second) && std::isfinite(q))
        tq.push_back({std::abs(t->second), std::abs(q)});
    }
    std::sort(tq.begin(), tq.end());
    std::vector<double> quiet;
    for (size_t k = 0; k < (tq.size() + 1) / 2; ++k) quiet.push_back(tq[k].second);
    const double sigma =
        quiet.size() >= 3 ? 1.4826 * median(quiet) : std::log1p(series_noise(ratio[i]));
    // The smallest bar the judge holds a run to (a change over 3 runs).
    const double bar = std::max(std::log1p(o.floor), o.k * sigma / std::sqrt(3.0));
    for (SeriesPoint& p : ratio[i]) {
      const auto t = theirs.find(p.run_id), m = own.find(p.run_id), q = ratio_moves.find(p.run_id);
      if (!timed(p) || t == theirs.end() || m == own.end() || q == ratio_moves.end()) continue;
      // The ratio moved past the bar, both sides moved the same way past it too (false for
      // NaN), and the ratio by less than half what the reference did: the bend a disturbance
      // leaves, not a step of the backend's own riding on a wobble of the machine.
      const double moved = std::abs(q->second);
      if (!(moved > bar && std::abs(t->second) > bar && std::abs(m->second) > bar)) continue;
      if ((t->second > 0) != (m->second > 0) || !(moved < 0.5 * std::abs(t->second))) continue;
      p.noisy = true;
      p.set_aside = fmt::format(
          "a disturbed run: {} {:+.0f}% and this backend {:+.0f}% at once, the ratio {:+.1f}%",
          reference, 100 * rel(t->second), 100 * rel(m->second), 100 * rel(q->second));
    }
  }
}

namespace {

// Every series' move at each run, by run id: its log level less that of its previous run with
// samples in the same environment (runs set aside as noisy count: how far the machine bent a
// series is what they show).
using RunMoves = std::map<int64_t, std::vector<double>>;

RunMoves moves_at_runs(const std::vector<const std::vector<SeriesPoint>*>& series) {
  RunMoves moves;
  for (const std::vector<SeriesPoint>* s : series) {
    const SeriesPoint* last = nullptr;
    for (const SeriesPoint& p : *s) {
      if (p.samples.empty()) continue;
      if (last != nullptr && last->fingerprint == p.fingerprint)
        moves[p.run_id].push_back(log_median(p) - log_median(*last));
      last = &p;
    }
  }
  return moves;
}

// Runs where at least 4 series moved: few series say nothing of the machine.
constexpr size_t kMinMovers = 4;

// Step 1c. The machine's level by run: the running sum of every time's median move.
std::map<int64_t, double> machine_level(const RunMoves& moves) {
  std::map<int64_t, double> level;
  double at = 0;
  for (const auto& [run, m] : moves) {
    if (m.size() < kMinMovers) continue;
    at += median(m);
    level[run] = at;
  }
  return level;
}

std::vector<double> sizes(const std::vector<double>& moves) {
  std::vector<double> out;
  out.reserve(moves.size());
  for (double v : moves) out.push_back(std::abs(v));
  return out;
}

// Step 1d. Each ratio point's run_spread: 1.4826 x the median |move| of every ratio at its run
// (0 where fewer than 4 moved), and its machine_log from the times' level.
void mark_ratio_runs(std::vector<std::vector<SeriesPoint>>& ratio, const RunMoves& moves,
                     const std::map<int64_t, double>& machine) {
  for (std::vector<SeriesPoint>& r : ratio) {
    for (SeriesPoint& p : r) {
      const auto m = moves.find(p.run_id);
      p.run_spread = m != moves.end() && m->second.size() >= kMinMovers
                         ? 1.4826 * median(sizes(m->second))
                         : 0;
      // The machine's level before any move was seen is the first one's base: 0.
      const auto l = machine.upper_bound(p.run_id);
      p.machine_log = l == machine.begin() ? 0 : std::prev(l)->second;
    }
  }
}

// How far a run bent the ratios: the 75th percentile of every ratio's |move| there, 0 where
// fewer than 4 moved. A shift bends some ratios and leaves others, so the median would call half
// of the bends "beyond".
double bend_at(const RunMoves& moves, int64_t run) {
  const auto m = moves.find(run);
  if (m == moves.end() || m->second.size() < kMinMovers) return 0;
  std::vector<double> size = sizes(m->second);
  std::sort(size.begin(), size.end());
  return size[(3 * size.size()) / 4];
}

}  // namespace

namespace {

using ModelKey = std::tuple<std::string, std::string, std::string>;  // suite, model, mode

ModelKey model_of(const HistorySeries& s) { return {s.key.suite, s.key.model, s.key.mode}; }

// The models that moved as a whole at one run: at least 2 of the series judged there (`seen`)
// among `movers`, two thirds of the model's judged series, and none of `against` (the series
// that moved the other way).
std::set<ModelKey> models_moved_whole(const std::vector<HistorySeries>& all,
                                      const std::set<size_t>& seen,
                                      const std::vector<size_t>& movers,
                                      const std::set<size_t>& against) {
  std::map<ModelKey, int> judged, moved;
  std::set<ModelKey> split;
  for (size_t i : seen) ++judged[model_of(all[i])];
  for (size_t i : movers) ++moved[model_of(all[i])];
  for (size_t i : against) split.insert(model_of(all[i]));
  std::set<ModelKey> whole;
  for (const auto& [model, n] : moved) {
    if (n >= 2 && 3 * n >= 2 * judged[model] && !split.contains(model)) whole.insert(model);
  }
  return whole;
}

}  // namespace

std::vector<EnvironmentEvent> find_environment_events(
    const std::vector<HistorySeries>& all, const std::vector<std::vector<Alert>>& alerts,
    const std::vector<std::vector<std::string>>& not_judged, const HistoryOptions& o) {
  const std::map<int64_t, int> rank = run_ranks(all);
  std::vector<int64_t> run_at(rank.size());
  for (const auto& [id, r] : rank) run_at[static_cast<size_t>(r)] = id;
  std::vector<std::set<size_t>> judged(rank.size());
  for (size_t i = 0; i < all.size(); ++i) {
    if (all[i].measure != "time") continue;  // the machine does not move instruction counts
    for (size_t k = 0; k < all[i].points.size(); ++k) {
      const SeriesPoint& p = all[i].points[k];
      if (timed(p) && not_judged[i][k].empty()) judged[rank.at(p.run_id)].insert(i);
    }
  }
  struct Move {
    size_t series;
    const Alert* alert;
  };
  std::vector<std::vector<Move>> moves(rank.size());
  for (size_t i = 0; i < all.size(); ++i) {
    for (const Alert& a : alerts[i]) {
      if (is_change(a) && all[i].measure == "time")
        moves[static_cast<size_t>(rank.at(a.run_id))].push_back({i, &a});
    }
  }
  std::vector<EnvironmentEvent> events;
  std::set<const Alert*> used;
  for (size_t r = 0; r < rank.size(); ++r) {
    // The movers of this run, and those of the next run for series this run did not judge (a
    // noisy run there puts their first judged run at the new level one later).
    std::vector<Move> here;
    for (const Move& m : moves[r]) here.push_back(m);
    if (r + 1 < rank.size()) {
      for (const Move& m : moves[r + 1]) {
        if (!judged[r].contains(m.series)) here.push_back(m);
      }
    }
    std::set<size_t> seen = judged[r];
    for (const Move& m : here) seen.insert(m.series);
    std::set<std::string> seen_backends;
    for (size_t i : seen) seen_backends.insert(all[i].key.backend);
    for (int sign : {+1, -1}) {
      std::vector<Move> same;
      std::set<size_t> other;
      for (const Move& m : here) {
        if (used.contains(m.alert)) continue;
        if ((m.alert->change > 0) == (sign > 0)) {
          same.push_back(m);
        } else {
          other.insert(m.series);
        }
      }
      if (same.empty()) continue;
      std::vector<size_t> movers;
      for (const Move& m : same) movers.push_back(m.series);
      const std::set<ModelKey> whole = models_moved_whole(all, seen, movers, other);
      std::set<std::string> models, backends;
      for (const Move& m : same) {
        models.insert(all[m.series].key.model);
        backends.insert(all[m.series].key.backend);
      }
      const bool widespread =
          static_cast<double>(same.size()) >=
              std::max(4.0, o.event_fraction * static_cast<double>(seen.size())) &&
          models.size() >= 2 && (seen_backends.size() < 2 || backends.size() >= 2);
      if (static_cast<int>(whole.size()) < o.event_models && !widespread) continue;
      EnvironmentEvent ev;
      ev.run_id = run_at[r];
      ev.moved = static_cast<int>(same.size());
      ev.judged = static_cast<int>(seen.size());
      std::vector<double> changes;
      std::set<size_t> members;
      for (const Move& m : same) {
        changes.push_back(m.alert->change);
        ev.confirmed_by = std::max(ev.confirmed_by, m.alert->confirmed_by);
        members.insert(m.series);
        used.insert(m.alert);
      }
      for (size_t i = 0; i < all.size(); ++i) {
        if (whole.contains(model_of(all[i]))) members.insert(i);
      }
      ev.series.assign(members.begin(), members.end());
      ev.change = median(changes);
      ev.note = fmt::format(
          "{} of {} series judged here moved together ({:.0f}%; {} models on every backend), "
          "median {:+.1f}%: the machine, not the code; a new level starts",
          ev.moved, ev.judged, 100.0 * ev.moved / std::max(ev.judged, 1), whole.size(),
          100 * ev.change);
      events.push_back(std::move(ev));
    }
  }
  return events;
}

namespace {

std::vector<Alert> judge_points(const std::vector<SeriesPoint>& points, DetectorOptions d,
                                double prior, std::vector<int64_t> breaks,
                                std::vector<std::string>* not_judged, DetectionFloor* floor) {
  d.prior_noise = std::max(d.prior_noise, prior);
  d.level_breaks = std::move(breaks);
  return detect_changes(points, d, not_judged, floor);
}

// A series on its own measure: a time with its calibrated noise and the events' level breaks; a
// count with the count options and no run noisy (contention adds no instructions to a call).
std::vector<Alert> judge_own(const HistorySeries& s, const HistoryOptions& o,
                             std::vector<int64_t> breaks, std::vector<std::string>* not_judged,
                             DetectionFloor* floor) {
  if (s.measure == "time") {
    return judge_points(s.points, o.detector, s.prior_noise, std::move(breaks), not_judged, floor);
  }
  std::vector<SeriesPoint> counted = s.points;
  for (SeriesPoint& p : counted) p.noisy = false;
  return judge_points(counted, o.instructions, 0, {}, not_judged, floor);
}

// Two alerts one run apart or less, across series (by the history's run ranks).
struct Nearness {
  std::map<int64_t, int> rank;
  bool operator()(const Alert& a, const Alert& b) const {
    return std::abs(rank.at(a.run_id) - rank.at(b.run_id)) <= 1;
  }
  bool moved(const std::vector<Alert>& alerts, const Alert& a, int sign) const {
    return std::any_of(alerts.begin(), alerts.end(), [&](const Alert& b) {
      return is_change(b) && (*this)(a, b) && (b.change > 0 ? 1 : -1) == sign;
    });
  }
};

struct Attribution {
  std::vector<std::vector<bool>> drop;    // per series, per ratio alert: the reference's doing
  std::set<const Alert*> reference_kept;  // the reference's own alerts that stand for those
};

// Step 4. A ratio change is the reference's own when the reference moved against every backend
// of the model: two thirds of the other paired backends' ratios moved the same way at the same
// run or, with no other backend, the reference's own time moved the other way and the
// backend's did not. The reference's alert near it then stands for it.
Attribution attribute_to_reference(const std::vector<std::vector<SeriesPoint>>& ratio,
                                   const std::vector<std::vector<Alert>>& rat,
                                   const std::vector<std::vector<Alert>>& abs,
                                   const std::vector<int>& ref, const Nearness& near) {
  const size_t n = ratio.size();
  Attribution at;
  at.drop.resize(n);
  for (size_t i = 0; i < n; ++i) {
    at.drop[i].assign(rat[i].size(), false);
    if (ref[i] < 0) continue;
    const size_t r = static_cast<size_t>(ref[i]);
    for (size_t a = 0; a < rat[i].size(); ++a) {
      const Alert& al = rat[i][a];
      if (!is_change(al)) continue;
      const int sign = al.change > 0 ? 1 : -1;
      int peers = 0, agree = 0;
      for (size_t j = 0; j < n; ++j) {
        if (j == i || ref[j] != ref[i] || ratio[j].empty()) continue;
        ++peers;
        agree += near.moved(rat[j], al, sign) ? 1 : 0;
      }
      const bool theirs = peers > 0
                              ? 3 * agree >= 2 * peers && agree > 0
                              : near.moved(abs[r], al, -sign) && !near.moved(abs[i], al, sign);
      if (!theirs) continue;
      at.drop[i][a] = true;
      for (const Alert& b : abs[r]) {
        if (is_change(b) && near(al, b) && (b.change > 0 ? 1 : -1) == -sign)
          at.reference_kept.insert(&b);
      }
    }
  }
  return at;
}

// Step 3b. A ratio change that starts at a machine-wide shift (its run, or up to 2 later with
// no judged run of the ratio between) is the shift's, listed `with_event` with the event's size
// beside its own, unless it is far past how much that run bent the ratios (3 x bend_at): a code
// change that landed on the night the machine moved.
void hold_changes_at_events(const std::vector<EnvironmentEvent>& events,
                            const std::vector<std::vector<SeriesPoint>>& ratio,
                            const RunMoves& moves, std::vector<std::vector<Alert>>& rat,
                            const std::map<int64_t, int>& rank) {
  for (size_t i = 0; i < rat.size(); ++i) {
    for (Alert& al : rat[i]) {
      if (!is_change(al) && al.kind != "absorbed") continue;
      // At the event's run, or up to 2 runs later where the ratio was set aside (or not timed)
      // from the event's run on: a disturbed run puts a bend's first judged run later.
      const auto ev = std::find_if(events.begin(), events.end(), [&](const EnvironmentEvent& e) {
        const int d = rank.at(al.run_id) - rank.at(e.run_id);
        return d == 0 || (d > 0 && d <= 2 &&
                          std::none_of(ratio[i].begin(), ratio[i].end(), [&](const SeriesPoint& p) {
                            return timed(p) && rank.at(p.run_id) >= rank.at(e.run_id) &&
                                   rank.at(p.run_id) < rank.at(al.run_id);
                          }));
      });
      if (ev == events.end()) continue;
      // How far that run bent the ratios: the shift's run, or the alert's if more.
      const double spread = std::max(bend_at(moves, ev->run_id), bend_at(moves, al.run_id));
      const double step = std::log1p(al.change);
      const bool beyond = spread > 0 && std::abs(step) > 3 * spread;
      const std::string beside = fmt::format(
          "at the machine-wide shift of run {} (times moved {:+.1f}%; ratios {:.1f}% at once)",
          ev->run_id, 100 * ev->change, 100 * rel(spread));
      if (beyond || al.kind == "absorbed") {
        al.note += "; " + beside;
        continue;
      }
      al.note = fmt::format("{:+.1f}% {}: the machine's, not judged a change of the code",
                            100 * al.change, beside);
      al.kind = "with_event";
    }
  }
}

// What a paired series is told: its ratio's alerts (less the reference's doing, each with its
// time's own move), and on runs without the reference beside it, its time's.
SeriesVerdict paired_verdict(const std::vector<SeriesPoint>& pts,
                             const std::vector<SeriesPoint>& ratio, const std::vector<Alert>& rat,
                             const std::vector<bool>& drop, const std::vector<std::string>& rat_nj,
                             const std::vector<Alert>& abs, const std::vector<std::string>& abs_nj,
                             const std::string& reference) {
  SeriesVerdict out;
  out.measure = "time/" + reference;
  for (size_t a = 0; a < rat.size(); ++a) {
    if (drop[a]) continue;
    Alert al = rat[a];
    if (is_change(al)) {
      al.note += fmt::format("; {} {:+.1f}%, time itself {:+.1f}%", out.measure, 100 * al.change,
                             100 * rel(level_shift(pts, al.run_id, al.confirmed_by)));
    }
    out.alerts.push_back(std::move(al));
  }
  std::set<int64_t> unpaired;
  for (size_t k = 0; k < pts.size(); ++k) {
    if (ratio[k].samples.empty() && !pts[k].samples.empty()) unpaired.insert(pts[k].run_id);
  }
  for (const Alert& al : abs) {
    if ((is_change(al) || al.kind == "suspicious" || al.kind == "absorbed") &&
        unpaired.contains(al.run_id)) {
      out.alerts.push_back(al);
    }
  }
  out.not_judged = rat_nj;
  for (size_t k = 0; k < pts.size(); ++k) {
    if (unpaired.contains(pts[k].run_id)) out.not_judged[k] = abs_nj[k];
  }
  return out;
}

}  // namespace

HistoryVerdict judge_history(const std::vector<HistorySeries>& all, const HistoryOptions& o) {
  const size_t n = all.size();
  // Absolute times (and counts) first, to find the machine-wide shifts; then the times again
  // with their level breaks.
  std::vector<std::vector<Alert>> abs(n);
  std::vector<std::vector<std::string>> abs_nj(n);
  std::vector<DetectionFloor> abs_floor(n), rat_floor(n);
  for (size_t i = 0; i < n; ++i) abs[i] = judge_own(all[i], o, {}, &abs_nj[i], &abs_floor[i]);
  HistoryVerdict v;
  v.events = find_environment_events(all, abs, abs_nj, o);
  std::vector<std::vector<int64_t>> breaks(n);
  for (const EnvironmentEvent& ev : v.events) {
    for (size_t i : ev.series) breaks[i].push_back(ev.run_id);
  }
  for (size_t i = 0; i < n; ++i) {
    if (!breaks[i].empty()) abs[i] = judge_own(all[i], o, breaks[i], &abs_nj[i], &abs_floor[i]);
  }
  // Ratios: the primary series wherever a reference ran beside the backend. A calibrated noise
  // of the backend's time stays a floor for its ratio: calibration is how an owner says a series
  // is noisier than a few runs show.
  std::vector<std::vector<SeriesPoint>> ratio = pair_with_reference(all, o.reference);
  set_aside_disturbed_runs(all, ratio, o.reference, o.detector);
  // What the machine did at each run, from every time, and how far each run bent every ratio.
  std::vector<const std::vector<SeriesPoint>*> times, ratios;
  for (size_t i = 0; i < n; ++i) {
    if (all[i].measure == "time") times.push_back(&all[i].points);
    if (!ratio[i].empty()) ratios.push_back(&ratio[i]);
  }
  const RunMoves ratio_moves = moves_at_runs(ratios);
  mark_ratio_runs(ratio, ratio_moves, machine_level(moves_at_runs(times)));
  std::vector<std::vector<Alert>> rat(n);
  std::vector<std::vector<std::string>> rat_nj(n);
  for (size_t i = 0; i < n; ++i) {
    if (!ratio[i].empty())
      rat[i] =
          judge_points(ratio[i], o.detector, all[i].prior_noise, {}, &rat_nj[i], &rat_floor[i]);
  }
  const std::map<int64_t, int> rank = run_ranks(all);
  hold_changes_at_events(v.events, ratio, ratio_moves, rat, rank);
  const std::vector<int> ref = reference_of(all, o.reference);
  const Attribution at = attribute_to_reference(ratio, rat, abs, ref, Nearness{rank});
  v.series.resize(n);
  for (size_t i = 0; i < n; ++i) {
    SeriesVerdict& out = v.series[i];
    if (!ratio[i].empty()) {
      out = paired_verdict(all[i].points, ratio[i], rat[i], at.drop[i], rat_nj[i], abs[i],
                           abs_nj[i], o.reference);
      out.floor = rat_floor[i];
    } else {
      out.measure = all[i].measure;
      out.floor = abs_floor[i];
      out.not_judged = abs_nj[i];
      // The reference's own time: said where a paired ratio moved with it, or nothing paired
      // with it ran then; otherwise every backend of the model moved with it (the machine).
      std::set<int64_t> paired_runs;
      for (size_t j = 0; j < n; ++j) {
        if (j == i || ref[j] != static_cast<int>(i)) continue;
        for (const SeriesPoint& p : ratio[j]) {
          if (!p.samples.empty()) paired_runs.insert(p.run_id);
        }
      }
      for (const Alert& al : abs[i]) {
        const bool drowned =
            is_change(al) && !at.reference_kept.contains(&al) && paired_runs.contains(al.run_id);
        // A step a short baseline took in at a machine-wide shift it was part of: the event's row
        // says it for every series.
        const bool the_event =
            al.kind == "absorbed" &&
            std::any_of(v.events.begin(), v.events.end(), [&](const EnvironmentEvent& e) {
              return std::abs(rank.at(e.run_id) - rank.at(al.run_id)) <= 1 &&
                     std::find(e.series.begin(), e.series.end(), i) != e.series.end();
            });
        if (!drowned && !the_event) out.alerts.push_back(al);
      }
    }
    std::stable_sort(out.alerts.begin(), out.alerts.end(),
                     [](const Alert& a, const Alert& b) { return a.run_id < b.run_id; });
  }
  return v;
}

}  // namespace crucible::reports
