// The run's progress lines: the ETA waits for a finished model and then counts whole models, so
// a run whose timing jobs dwarf its accuracy checks is not promised an early end.
#include <gtest/gtest.h>

#include "progress.h"

namespace crucible {
namespace {

using std::chrono::seconds;

reports::ResultRecord result(const std::string& mode) {
  auto r = reports::make_result("suite", "m", "codegen", mode, 1);
  r.status = reports::Status::kPass;
  return r;
}

// Four models of 4 jobs each: two accuracy checks of 1 s, then two timings of 9 s (20 s a model).
TEST(RunProgress, TheTimeLeftCountsWholeModels) {
  const Progress::Clock::time_point t0{};
  Progress p(4, 4, t0);
  // After the first check, 1 job in 16 took 1 s: the old per-job rate promised 15 s for the 59
  // that were left. No estimate is given until a model has ended.
  const std::string first = p.done(result("accuracy"), "", t0 + seconds(1));
  EXPECT_NE(first.find("[  1/16] suite/m codegen accuracy: pass  (elapsed 1.0 s, ETA after the "
                       "first model)"),
            std::string::npos)
      << first;
  EXPECT_FALSE(p.seconds_left(t0 + seconds(1)));
  p.done(result("accuracy"), "", t0 + seconds(2));
  p.done(result("performance"), "", t0 + seconds(11));
  p.done(result("performance"), "", t0 + seconds(20));
  p.model_finished(t0 + seconds(20));
  ASSERT_TRUE(p.seconds_left(t0 + seconds(20)));
  EXPECT_DOUBLE_EQ(*p.seconds_left(t0 + seconds(20)), 60.0);
  // 1 s into the second model, whose checks are done: 59 s are left, not 3 jobs' 15 s.
  const std::string line = p.done(result("accuracy"), "", t0 + seconds(21));
  EXPECT_NE(line.find("(elapsed 21.0 s, ETA 59.0 s)"), std::string::npos) << line;
  // A model slower than the mean so far never makes the time left negative.
  EXPECT_DOUBLE_EQ(*p.seconds_left(t0 + seconds(200)), 0.0);
  for (int m = 2; m <= 4; ++m) p.model_finished(t0 + seconds(20 * m));
  EXPECT_DOUBLE_EQ(*p.seconds_left(t0 + seconds(80)), 0.0);
}

// Odd bytes in a model or backend name are escaped on the line, as every console line does.
TEST(RunProgress, NamesAreEscaped) {
  Progress p(1, 1);
  auto r = result("accuracy");
  r.model = "a\nb";
  const std::string line = p.done(r);
  EXPECT_EQ(line.find('\n'), line.size() - 1) << line;
}

}  // namespace
}  // namespace crucible
