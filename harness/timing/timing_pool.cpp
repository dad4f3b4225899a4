// Pooling one backend's timings from several worker processes (see timing_pool.h).
#include "timing_pool.h"

#include <algorithm>

namespace crucible {

namespace {

void append(std::vector<double>& into, const std::vector<double>& more) {
  into.insert(into.end(), more.begin(), more.end());
}

}  // namespace

void pool_timing(reports::ResultRecord& into, const reports::ResultRecord& more) {
  if (into.status == reports::Status::kPass && more.status != reports::Status::kPass) {
    into.status = more.status;
    into.error = more.error;
    into.audit = more.audit;
  }
  append(into.samples_ms, more.samples_ms);
  append(into.instructions, more.instructions);
  append(into.cycles, more.cycles);
  append(into.page_faults, more.page_faults);
  append(into.cpu_ms, more.cpu_ms);
  into.calls_per_sample = std::max(into.calls_per_sample, more.calls_per_sample);
  if (into.counters_unavailable.empty()) into.counters_unavailable = more.counters_unavailable;
  // The pooled audit: the worst share of the worker's time, the least coverage of any process.
  if (more.audit_share)
    into.audit_share = std::max(into.audit_share.value_or(0), *more.audit_share);
  if (more.audit_coverage)
    into.audit_coverage = std::min(into.audit_coverage.value_or(1), *more.audit_coverage);
  if (into.disturbed_by.empty()) into.disturbed_by = more.disturbed_by;
  into.speedup_withheld = into.speedup_withheld || more.speedup_withheld;
  if (!into.noisy) {
    into.noisy = more.noisy;
    into.noise_reason = more.noise_reason;
    into.contention = more.contention;
  }
}

}  // namespace crucible
