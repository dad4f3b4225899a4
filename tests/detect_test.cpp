// The regression detector against a year of synthetic nightly history with known answers: steps
// of 2%, 5% and 20% planted in 180 series of three noise levels (with disturbed runs, half of them
// flagged noisy as the harness's contention figures would, and preempted samples), pure-noise
// series, and environment changes that move every level. Checks the bars: steps >= 5%
// found within 3 runs, >= 95% of 2% steps on series with CV <= 1%, at most 1 false alert per
// 1,000 comparisons, environment changes annotated and never alerted.
#include "crucible/reports/detect.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>

#include "synthetic_history.h"

namespace crucible::reports {
namespace {

TEST(Detector, MannWhitneyMatchesKnownValues) {
  EXPECT_EQ(mann_whitney_p({}, {1, 2}), 1);
  EXPECT_GT(mann_whitney_p({1, 2, 3, 4, 5}, {1, 2, 3, 4, 5}), 0.9);
  // Fully separated samples of 10 and 10: exact two-sided p = 1.08e-5; the normal
  // approximation with continuity correction gives 1.8e-4.
  std::vector<double> a, b;
  for (int i = 0; i < 10; ++i) {
    a.push_back(i);
    b.push_back(100 + i);
  }
  EXPECT_NEAR(mann_whitney_p(a, b), 1.8e-4, 0.3e-4);
  EXPECT_EQ(mann_whitney_p({7, 7, 7}, {7, 7, 7}), 1);  // all tied: no evidence
}

TEST(Detector, AccuracyAndEnvironmentAreSaidNotMeasured) {
  std::vector<SeriesPoint> s;
  for (int r = 0; r < 4; ++r) {
    SeriesPoint p;
    p.run_id = r + 1;
    p.fingerprint = "e";
    p.status = r == 2 ? reports::Status::kFailAccuracy : reports::Status::kPass;
    s.push_back(p);
  }
  const auto alerts = detect_changes(s);
  ASSERT_EQ(alerts.size(), 1u);
  EXPECT_EQ(alerts[0].kind, "status");
  EXPECT_EQ(alerts[0].run_id, 3);
  EXPECT_EQ(alerts[0].note, "pass -> fail_accuracy");
}

TEST(Detector, YearOfSyntheticHistoryMeetsTheBars) {
  const std::vector<synthetic::Series> all = synthetic::year(20261125);
  std::vector<std::vector<Alert>> alerts;
  for (const auto& s : all) alerts.push_back(detect_changes(s.points));
  const synthetic::Score sc = synthetic::score(all, alerts);
  std::printf("%s\n", sc.str().c_str());
  sc.expect_bars(all.size());
  for (const Alert& al : alerts[0]) {
    if (al.kind == "environment") {
      EXPECT_EQ(al.note.rfind("a new baseline starts: compiler gcc-1", 0), 0u) << al.note;
    }
  }
}

}  // namespace
}  // namespace crucible::reports
