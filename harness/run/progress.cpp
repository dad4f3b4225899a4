// The run's progress lines: what landed, where the run is, and the time left by finished models.
#include "progress.h"

#include <fmt/format.h>

#include <algorithm>

#include "crucible/core/quote.h"

namespace crucible {

namespace {
double seconds(Progress::Clock::duration d) { return std::chrono::duration<double>(d).count(); }
}  // namespace

Progress::Progress(size_t models, size_t jobs_per_model, Clock::time_point start)
    : models_(models), jobs_(models * jobs_per_model), start_(start), model_start_(start) {}

std::string Progress::done(const reports::ResultRecord& r, const std::string& what,
                           Clock::time_point now) {
  ++done_;
  const std::optional<double> left = seconds_left(now);
  return fmt::format(
      "[{:>3}/{}] {}/{} {} {}: {}  (elapsed {:.1f} s, {})\n", done_, jobs_,
      escape_controls(r.suite), escape_controls(r.model), escape_controls(r.backend),
      what.empty() ? r.mode : what, reports::status_name(r.status), seconds(now - start_),
      left ? fmt::format("ETA {:.1f} s", *left) : std::string("ETA after the first model"));
}

void Progress::model_finished(Clock::time_point now) {
  ++models_done_;
  model_start_ = now;
}

std::optional<double> Progress::seconds_left(Clock::time_point now) const {
  if (models_done_ == 0) return std::nullopt;
  const double per_model = seconds(model_start_ - start_) / static_cast<double>(models_done_);
  const double left =
      per_model * static_cast<double>(models_ - models_done_) - seconds(now - model_start_);
  return std::max(left, 0.0);
}

}  // namespace crucible
