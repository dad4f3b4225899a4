// The worker side of an isolated job, `crucible worker --job reference|outputs|profile|timing|...`
// (started by `run` or `run-graph`), which writes its results to a report file (worker_report.h).
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "backend_env.h"
#include "timing_settings.h"

namespace crucible {

// Exit code of a worker that ran out of memory in a way it could catch (std::bad_alloc).
inline constexpr int kWorkerExitOom = 3;

// The options job's answer that its backend refuses the job's -c options: the start of its
// fail_to_compile result's error, the plugin's message after it (options_job.cpp).
inline constexpr std::string_view kOptionRefused = "option refused: ";
// Its answer that the backend cannot run on this machine at all: its unavailable_here() line.
inline constexpr std::string_view kBackendUnavailable = "unavailable here: ";

struct WorkerJob {
  // reference | outputs | profile | timing | counters | run-graph | cosim | load-env-probe
  std::string job;
  std::string graph;
  std::string suite;
  std::string model;
  int64_t batch_size = 0;
  std::vector<std::string> backends;  // outputs/profile: one; timing: all, eager first
  uint64_t seed = 0;
  int threads = 0;
  double tolerance = 1e-4;
  bool cosine = false;
  bool scaled_tolerance = false;  // atol relative to the outputs' scale (accuracy.h)
  // A folder of expected outputs (output_N.pb, an ONNX test case): the parent compares every
  // backend with them by |res - exp| <= atol + rtol * |exp| instead of with eager and fp64. These
  // four are the parent's alone: to_args() passes none of them to a worker.
  std::string expected;
  double rtol = 1e-3, atol = 1e-7;
  bool fp64_check = false;  // with `expected`: eager must also match the fp64 reference
  // reference/outputs/timing: the tensor file (tensor_file.h) the worker hands its tensors out in.
  std::string tensors;
  bool want_fp64 = true;    // reference: compute the fp64 reference too
  bool eager_once = false;  // reference: one eager run, no determinism check
  // timing: take turns with the parent over descriptor 3 (turn_channel.h), one backend per worker.
  bool turns = false;
  // timing and its reference: the seed of every timed call's inputs (call_input_set), drawn by
  // the parent per timing (0: the worker draws one).
  uint64_t secret = 0;
  // reference: besides input set A, eager's outputs (and fp64's) on the timing audit's set B
  // (timing_sets) and, at the elements sampled_elements(verify_secret, call, ...), on the inputs
  // of every call in call_sets.
  bool timing_sets = false;
  std::vector<uint64_t> call_sets;
  uint64_t verify_secret = 0;
  TimingSettings timing;  // the run's timing options (timing_settings.h)
  double budget_s = 0;    // timing: the worker's time limit, split among its backends (0: none)
  bool profile = false;   // run-graph: per-kernel timings
  std::string report;
  std::vector<std::string> plugin_paths;
  std::map<std::string, std::string> config;  // -c: see backend_config.h (run-graph: all)
  BackendEnv backend_env;  // applied while each backend's plugin loads (backend_env.h)

  // The argv (after the binary) that `crucible worker` parses back into this job.
  std::vector<std::string> to_args() const;
};

// VmHWM of /proc/self/status in MB: this process image's peak resident size since exec.
double own_peak_rss_mb();

// Runs a job in this process, writing results to job.report; returns the process exit code.
int run_worker_job(const WorkerJob& job);

// run-graph's child: loads job.backends[0] (a plugin path), compiles and runs job.graph, and
// writes run-graph's whole output and exit status as the report's reply (run_graph_job.cpp).
int run_graph_job(const WorkerJob& job);

}  // namespace crucible
