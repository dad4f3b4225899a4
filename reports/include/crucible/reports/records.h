// The records the harness hands to the store: a run with its environment, and one result per
// (model, backend, mode) with its samples, accuracy per output and per-kernel timings.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
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
  uint64_t seed = 0;     // of every input and parameter recipe (--seed)
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
  KernelTiming() = default;
  KernelTiming(std::string name_, int64_t calls_, int64_t total_ns_,
               std::optional<double> instructions_ = std::nullopt)
      : name(std::move(name_)), calls(calls_), total_ns(total_ns_), instructions(instructions_) {}

  std::string name;
  int64_t calls = 0;
  int64_t total_ns = 0;
  // Simulated instructions per graph call, the kernel's calls included (--counters cachegrind).
  std::optional<double> instructions;
  // What the kernel's calls computed and moved in all (its ops' cost rules), when the backend
  // said which ops each kernel ran: with total_ns, its achieved GFLOP/s and GB/s.
  std::optional<double> flops, bytes;
};

// One cache level of the roofline: the STREAM triad's bandwidth on arrays held there by every
// timed thread at once, and how many bytes that level holds for those threads together (0:
// unknown).
struct CacheCeiling {
  double gbs = 0;
  double bytes = 0;
};

// A result beside its physical limit: what the graph must compute and move per call (from the
// ops' cost rules) and the ceilings the timing worker measured on its own threads.
struct Roofline {
  double flops = 0;        // per graph call
  double min_bytes = 0;    // compulsory bytes per call: inputs and parameters once, outputs once
  double peak_gflops = 0;  // f32 FMA peak
  double triad_gbs = 0;    // STREAM triad from DRAM
  // The cache levels: bytes that fit one are bound by its bandwidth, not DRAM's (a graph called
  // again and again finds its weights and inputs where the last call left them).
  CacheCeiling l1, l2, l3;
};

// The memory level that bounds moving `bytes` per call: the smallest measured cache that holds
// them, else DRAM. `name` is "L1", "L2", "L3" or "DRAM"; gbs 0 when nothing was measured.
struct MemoryCeiling {
  const char* name = "DRAM";
  double gbs = 0;
};
MemoryCeiling memory_ceiling(const Roofline& r, double bytes);

// The figures a median time gives against a roofline.
struct RooflineFigures {
  double gflops = 0;    // achieved
  double gbs = 0;       // achieved, on the compulsory bytes
  double bound_ms = 0;  // the slower of flops at peak and bytes at their level's bandwidth
  double fraction = 0;  // bound_ms / median: 1 is the machine's limit
  bool memory_bound = false;
  MemoryCeiling level;  // where the compulsory bytes fit
};
std::optional<RooflineFigures> roofline_figures(const Roofline& r, double median_ms);
// "" for a median the machine can reach; else why it cannot: the graph's FLOPs at over 6x the
// measured FMA peak, or its compulsory bytes at over 4x the triad of the smallest level they fit
// in. The margins leave room for fast algorithms (Winograd), for bytes that fit one level but
// mostly sit in the faster one above it, and for reads alone outrunning the triad's mix.
std::string beyond_the_machine(const Roofline& r, double median_ms);

// How much the machine disturbed a timed result, measured around its samples.
struct Contention {
  double run_delay = 0;  // fraction of sample time the worker's threads waited for a CPU
  double other_cpu = 0;  // CPU time of other processes, as a fraction of all cores, while timing
  double steal = 0;      // hypervisor steal time, as a fraction of all cores, while timing
  int64_t involuntary_switches = 0;  // of the worker's threads, during the samples
  double canary_before_ms = 0;       // the noise canary in the worker, before and after timing
  double canary_after_ms = 0;
  double triad_before_gbs = 0;  // STREAM-triad bandwidth in the worker, before and after timing
  double triad_after_gbs = 0;
  // What the graph's values (inputs, parameters, every node's result) hold, in MB: the bandwidth
  // figures matter only for a graph that streams from beyond the cores' private caches.
  double working_set_mb = 0;
};

struct ResultRecord {
  std::string suite;
  std::string model;
  std::string backend;
  std::string backend_version;  // what the plugin's info() said ("" when it never loaded)
  std::string mode;             // accuracy | performance
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
  // Accuracy: passed the rule, but some output's RMSE against fp64 is over the rule's multiplier
  // times eager's.
  bool pass_suspicious = false;

  // Performance only. samples_ms and the counters are per graph call: each sample timed
  // calls_per_sample calls back to back (the last count: a backend whose calls changed speed
  // after the warm-up has its count chosen again, see timing_job.cpp).
  int64_t calls_per_sample = 0;
  double timer_overhead_ns = 0;  // cost of one clock read pair, measured in the worker
  std::string audit;             // how the timed outputs were checked against the checked outputs
  std::optional<double> audit_share;     // the audit's share of the timing worker's time
  std::optional<double> audit_coverage;  // timed calls whose outputs were checked / timed calls
  std::string disturbed_by;  // backends whose threads ran while this one was timed ("" for none)
  // No speed-up may be computed from this timing (judge_turns): the parent's clock and the timing
  // worker's disagreed past latency in most samples (a clock that runs fast, or vCPUs taken away),
  // or another process stopped and continued the worker. Not stored; its noise_reason says why.
  bool speedup_withheld = false;
  std::vector<double> instructions, cycles, page_faults;  // per call, parallel to samples_ms
  // Per call, parallel to samples_ms: the timing worker's CPU time (every thread's), in ms.
  std::vector<double> cpu_ms;
  std::string counters_unavailable;  // counters the kernel refused, and why ("" when all counted)
  // Per call, from Valgrind's cache simulator (--counters cachegrind): instructions, D1 misses
  // (reads and writes) and last-level misses, on calls run alone on one thread after the timing.
  std::vector<double> sim_instructions, sim_d1_misses, sim_ll_misses;
  std::optional<Contention> contention;
  bool noisy = false;
  std::string noise_reason;          // which contention figure passed its threshold
  int attempts = 1;                  // timing attempts (more than one under --retry-noisy)
  std::optional<Roofline> roofline;  // performance results whose graph's cost is known
};

// The audit text of a result timed under --no-audit.
inline constexpr std::string_view kAuditOff = "off (--no-audit)";

// A performance result timed under --no-audit: shown as such, never averaged with audited ones.
inline bool unaudited(const ResultRecord& r) {
  return r.mode == "performance" && r.audit == kAuditOff;
}

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

// A run's description with its suites, backends and mode (comma-separated lists), as begin_run
// takes it; the tag and environment are the caller's to add.
inline RunInfo make_run_info(std::string suites, std::string backends, std::string mode) {
  RunInfo info;
  info.suites = std::move(suites);
  info.backends = std::move(backends);
  info.mode = std::move(mode);
  return info;
}

// A/A calibration of one series (suite, model, backend): the same build timed `runs` times.
struct Calibration {
  std::string suite, model, backend;
  int runs = 0;
  std::string run_ids;                    // comma-separated
  double median_ms = 0;                   // median of the runs' medians
  double time_cv = 0;                     // CV of the runs' medians: the run-to-run noise
  double within_run_cv = 0;               // median of the runs' own sample CVs
  std::optional<double> instructions_cv;  // of the runs' instruction medians, when counted
  std::optional<double> speedup_median, speedup_min, speedup_max;
  int noisy_runs = 0;
};

// One minification (crucible minify, or run --bisect): what it found and what it cost.
struct ReproRecord {
  std::optional<int64_t> run_id;  // the run whose failure it minified (run --bisect)
  std::string suite, model, backend, backend_version;
  std::string config;   // the backend's -c options, "k=v k=v"
  std::string outcome;  // minimized | no_failure | flaky | other_failure | not_reproduced
  std::string signature, message;
  int nodes_before = 0, nodes_after = 0, compute_nodes = 0;
  int oracle_calls = 0, cache_hits = 0, flipped = 0;
  int original_failures = 0, replays_ok = 0, replays = 0;
  double wall_s = 0;
  std::string path;            // the repro directory ("" when none was written)
  std::string culprit_kernel;  // codegen: the generated kernel the failure was bisected to
  std::string culprit_pass;    // codegen: the passes whose "off" loses it, comma-separated
};

// Summary statistics of a sample vector (NaN fields when empty).
struct SampleStats {
  int64_t n = 0;
  double median = 0, mean = 0, stdev = 0, min = 0, max = 0;
  double p10 = 0, p90 = 0;  // nearest-rank percentiles
  double cv = 0;            // stdev / mean (0 for a single sample)
};
SampleStats summarize(const std::vector<double>& samples);
// The median of `values` (the mean of the middle two for an even count; NaN when empty): the one
// median every summary, detector and timing rule takes.
double median(std::vector<double> values);

}  // namespace crucible::reports
