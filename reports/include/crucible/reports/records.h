// The records the harness hands to the store: a run with its environment, and one result per
// (model, backend, mode) with its samples, accuracy per output and per-kernel timings.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "crucible/reports/status.h"

namespace crucible::reports {

struct RunEnvironment {
  std::string hostname;
  std::string os;
  std::string cpu_model;
  int cores = 0;           // logical CPUs online
  std::string isa_flags;   // e.g. "avx2 fma"
  std::string compiler;    // compiler that built crucible
  std::string libraries;   // "oneDNN 2.6.3; SQLite 3.40.1; ..."
  std::string git_commit;  // of the crucible checkout, "" when unknown
  int threads = 0;         // OpenMP threads per worker
  std::map<std::string, std::string>
      launcher;          // numactl cores/membind, OMP/KMP variables, allocator, ...
  double canary_ms = 0;  // the noise canary: a fixed reference loop timed before the run
  std::string command;   // the command line
};

struct RunInfo {
  std::string tag;
  std::string suites;    // comma-separated
  std::string backends;  // comma-separated
  std::string mode;      // accuracy | performance | both
  RunEnvironment env;
};

struct OutputAccuracy {
  int index = 0;
  std::string dtype;
  std::string shape;
  double max_abs_err = 0;
  double max_rel_err = 0;
  int64_t mismatches = 0;
  int64_t first_mismatch = -1;  // linear index, -1 when none
  double rmse_vs_fp64 = 0;
  double rmse_eager_vs_fp64 = 0;
  double cosine = 1;
  bool passed = false;
};

struct KernelTiming {
  std::string name;
  int64_t calls = 0;
  int64_t total_ns = 0;
};

struct ResultRecord {
  std::string suite;
  std::string model;
  std::string backend;
  std::string mode;  // accuracy | performance
  int64_t batch_size = 0;
  Status status = Status::kFailToRun;  // until the job says otherwise
  std::string error;
  std::vector<double> samples_ms;  // every timed repeat, in order
  std::optional<double> speedup;
  std::optional<double> compile_s;       // cold (fresh cache)
  std::optional<double> compile_warm_s;  // warm (cache populated)
  std::optional<double> peak_rss_mb;
  std::optional<double> memory_ratio;  // eager peak / backend peak
  std::vector<OutputAccuracy> accuracy;
  std::vector<KernelTiming> kernels;
};

// A result with its identity filled in and nothing else: the start of every ResultRecord.
inline ResultRecord make_result(std::string suite, std::string model, std::string backend,
                                std::string mode, int64_t batch_size) {
  ResultRecord r;
  r.suite = std::move(suite);
  r.model = std::move(model);
  r.backend = std::move(backend);
  r.mode = std::move(mode);
  r.batch_size = batch_size;
  return r;
}

// Summary statistics of a sample vector (NaN fields when empty).
struct SampleStats {
  int64_t n = 0;
  double median = 0, mean = 0, stdev = 0, min = 0, max = 0;
};
SampleStats summarize(const std::vector<double>& samples);

}  // namespace crucible::reports
