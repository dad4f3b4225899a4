// A run's progress line on stderr, one per result as it lands: its place in the run, the time
// elapsed and the time left, estimated from the models finished so far.
#pragma once

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>

#include "crucible/reports/records.h"

namespace crucible {

class Progress {
 public:
  using Clock = std::chrono::steady_clock;

  Progress(size_t models, size_t jobs_per_model, Clock::time_point start = Clock::now());

  // The line for a result that just landed (`what` names its job when it is not the mode).
  std::string done(const reports::ResultRecord& r, const std::string& what = "",
                   Clock::time_point now = Clock::now());
  // Every job of the current model has ended.
  void model_finished(Clock::time_point now = Clock::now());
  // Seconds left: the mean time of a finished model for each model not finished, less the time
  // the current one has run. None before a model has finished: a model's jobs differ by two
  // orders of magnitude (an accuracy check against a timing), so extrapolating from its first
  // results was 0.13x-1.86x the real time left.
  std::optional<double> seconds_left(Clock::time_point now) const;

 private:
  size_t models_, jobs_;
  size_t done_ = 0, models_done_ = 0;
  Clock::time_point start_, model_start_;
};

}  // namespace crucible
