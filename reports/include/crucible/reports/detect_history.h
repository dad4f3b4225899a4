// The detector across a whole history, as named steps: pair each backend's time with the
// reference backend's in the same run, find machine-wide shifts, judge every series, and decide
// whose change each alert is. `crucible regressions` and the nightly use judge_history().
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "crucible/reports/detect.h"

namespace crucible::reports {

struct SeriesKey {
  std::string suite, model, backend, mode;
};

// One (suite, model, backend, mode) run after run, oldest first.
struct HistorySeries {
  SeriesKey key;
  std::vector<SeriesPoint> points;
  double prior_noise = 0;  // calibrated run-to-run noise of its time (log units), 0: none
  // "time", or a count per call: "instructions" from Valgrind's simulator, "pmu_instructions"
  // from the CPU's counters where it has them; counts are judged alone with
  // HistoryOptions::instructions, never paired, never noisy nor part of a machine-wide event.
  std::string measure = "time";
};

struct HistoryOptions {
  std::string reference = "eager";  // the backend others are timed against; "": none
  DetectorOptions detector;
  // Instruction counts repeat exactly for a fixed command line and environment, but another one
  // lays the heap out differently and moves a call's bookkeeping by up to ~1,100 instructions:
  // a floor of 0.3% and of 5,000 instructions per call, 3 runs of baseline, one run to confirm,
  // and no rank test (identical samples carry no sampling noise to test against).
  DetectorOptions instructions{0.003, 5000, 4.0, 1.0, 3, 20, 0, 0.10, 1, {}};
  // A machine-wide shift: at least `event_models` models moved on every backend judged at that
  // run, or at least `event_fraction` of the judged series (and 4) moved the same way.
  int event_models = 2;
  double event_fraction = 0.5;
};

// Many series moving together at one run: the machine, not a code change.
struct EnvironmentEvent {
  int64_t run_id = 0;          // the first run at the new level
  int64_t confirmed_by = 0;    // the run by which the series that made it had confirmed it
  int moved = 0;               // series whose level moved there, the same way
  int judged = 0;              // series judged at that run
  double change = 0;           // the movers' median relative change
  std::vector<size_t> series;  // indices (into the history) of the series it starts a level for
  std::string note;
};

// What the history says of one series.
struct SeriesVerdict {
  std::string measure;  // "time", or "time/<reference>" where the series is judged as a ratio
  std::vector<Alert> alerts;
  std::vector<std::string> not_judged;  // parallel to the series' points (see detect_changes)
  DetectionFloor floor;                 // of the measure it is judged on, after its newest run
};

struct HistoryVerdict {
  std::vector<SeriesVerdict> series;  // parallel to the history
  std::vector<EnvironmentEvent> events;
};

// Step 1. Each series' time over the reference's in the same run, parallel to `all`: point k of
// series i is its point k with samples / the reference's median there (no samples where the
// reference did not time that run; noisy when either was). Empty for the reference itself, for
// series not in performance mode, and where no series of the reference shares the model.
std::vector<std::vector<SeriesPoint>> pair_with_reference(const std::vector<HistorySeries>& all,
                                                          const std::string& reference);

// Step 1b. A disturbed machine does not slow every backend alike (memory-bound code suffers
// more), so a ratio bends when the machine moves. A run where the ratio moved past the smallest
// bar the judge holds a run to (opts.k x its noise where the machine was quiet / sqrt 3), both
// its sides moved the same way past it, and the ratio by less than half what the reference did
// (each move against the runs before it) is set aside (noisy, with the reason): the machine's.
void set_aside_disturbed_runs(const std::vector<HistorySeries>& all,
                              std::vector<std::vector<SeriesPoint>>& ratio,
                              const std::string& reference, const DetectorOptions& opts);

// Step 2. Machine-wide shifts, from each series' absolute alerts (parallel to `all`) and which of
// its runs were judged.
std::vector<EnvironmentEvent> find_environment_events(
    const std::vector<HistorySeries>& all, const std::vector<std::vector<Alert>>& alerts,
    const std::vector<std::vector<std::string>>& not_judged, const HistoryOptions& opts);

// Steps 1-4: pair (setting disturbed runs aside), find events, judge each series (its ratio where
// it has one, its time with the events' level breaks otherwise), and attribute: a ratio change is
// the reference's own when the reference moved the other way and the backend itself did not; the
// reference's time changes are said only where a paired ratio moved with them (or nothing is paired
// with it).
HistoryVerdict judge_history(const std::vector<HistorySeries>& all, const HistoryOptions& opts);

}  // namespace crucible::reports
