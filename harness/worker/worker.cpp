// The worker jobs. Accuracy is two: the reference (eager twice, fp64) in a worker that loads no
// plugin, the backend's outputs in another; the parent compares (accuracy_check.h). Profile: cold
// and warm compile, warm-up, a profiled pass for kernel timings. Timing is in timing_job.cpp.
#include "worker.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <omp.h>
#include <sys/resource.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <new>
#include <optional>
#include <random>

#include "accuracy.h"
#include "accuracy_verdict.h"
#include "comparison_ties.h"
#include "crucible/core/openmp_threads.h"
#include "crucible/ir/gradients.h"
#include "crucible/ir/text_format.h"
#include "crucible/ir/transforms.h"
#include "crucible/ops/interpreter.h"
#include "crucible/plugin_loader.h"
#include "input_sets.h"
#include "output_sample.h"
#include "perf_counters.h"
#include "tensor_file.h"
#include "worker_session.h"

namespace crucible {

double own_peak_rss_mb() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::strtod(line.c_str() + 6, nullptr) / 1024.0;
  }
  rusage self{};
  getrusage(RUSAGE_SELF, &self);
  return static_cast<double>(self.ru_maxrss) / 1024.0;
}

namespace {

using Clock = std::chrono::steady_clock;
using reports::Status;
double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

std::vector<std::string> flag(const std::string& name, const std::string& value) {
  return {"--" + name, value};
}

// The elements of `outputs` of timed call `call` the parent read of every backend's.
std::vector<Tensor> sampled(const std::vector<Tensor>& outputs, uint64_t secret, uint64_t call) {
  std::vector<Tensor> out;
  for (size_t o = 0; o < outputs.size(); ++o) {
    out.push_back(
        gather_elements(outputs[o], sampled_elements(secret, call, o, outputs[o].numel())));
  }
  return out;
}

// `inputs` with every nonzero f32 element moved one ulp up or down at random (seeded): what one
// rounding more on the way in does, for the reference's spread (AccuracyReference::spread).
std::vector<Tensor> moved_by_one_rounding(const std::vector<Tensor>& inputs, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<Tensor> out;
  for (const Tensor& t : inputs) {
    if (!t.defined() || t.dtype() != DType::kF32) {
      out.push_back(t);
      continue;
    }
    Tensor m = t.contiguous().clone();
    float* x = m.data<float>();
    for (int64_t i = 0; i < m.numel(); ++i) {
      const bool up = (rng() & 1) != 0;
      if (x[i] != 0 && std::isfinite(x[i])) x[i] = std::nextafter(x[i], up ? INFINITY : -INFINITY);
    }
    out.push_back(std::move(m));
  }
  return out;
}

// The accuracy reference, in a worker that loads no plugin: eager's outputs twice on the same
// inputs (they must agree bit for bit) and the fp64 reference, from the registry's interpreter
// that the eager backend wraps. Written to job.tensors as two groups (then two per timing set when
// job.timing_sets: set B, then the sampled elements of each call of job.call_sets; then, with the
// fp64 reference and an output after an update, kSpreadRuns runs of eager on inputs one rounding
// apart), each as it is made; the parent judges.
void reference_job(Session& s) {
  reports::ResultRecord r = s.record("eager", "accuracy");
  std::vector<Tensor> e1, e2, fp64;
  s.report.phase("eager_run", "eager");
  if (!attempt(r, Status::kEagerFailToRun, [&] {
        Interpreter eager(s.graph);
        e1 = eager.run(s.inputs);
        if (!s.job.eager_once) e2 = eager.run(s.inputs);
      })) {
    return s.report.result(r);
  }
  for (size_t i = 0; i < e1.size() && !s.job.eager_once; ++i) {
    if (!identical(e1[i], e2[i])) {
      r.status = Status::kEagerTwoRunsDiffer;
      r.error = fmt::format("output {} differs between two eager runs on the same inputs", i);
      return s.report.result(r);
    }
  }
  // The second run only had to agree: gone before the fp64 run, the largest (a full-size training
  // step's outputs are every parameter and its gradient, 2 GB in f32 for gpt2).
  e2 = {};
  s.report.phase("eager_fp64", "eager");
  if (s.job.want_fp64 && !attempt(r, Status::kEagerFailToRun, [&] {
        fp64 = Interpreter(widen_to_f64(s.graph)).run(widen_inputs_to_f64(s.inputs));
      })) {
    r.error = "fp64 reference: " + r.error;
    return s.report.result(r);
  }
  // Each group is written as it is made and dropped: a full-size step's groups are GBs each.
  std::optional<TensorFileWriter> file;
  s.report.phase("write", "eager");
  if (!attempt(r, Status::kEagerFailToRun, [&] {
        file.emplace(s.job.tensors);
        file->add(e1);
        file->add(fp64);
      }))
    return s.report.result(r);
  e1 = fp64 = {};
  // The timing audit's other sets: B, and the calls whose outputs the parent read.
  if (s.job.timing_sets) {
    s.report.phase("timing_sets", "eager");
    if (!attempt(r, Status::kEagerFailToRun, [&] {
          const Graph varied = with_varied_inputs(s.graph);
          const std::vector<Tensor> set_b = second_input_set(varied, s.job.seed);
          Interpreter eager(s.graph);
          std::optional<Interpreter> fp64;
          if (s.job.want_fp64) fp64.emplace(widen_to_f64(s.graph));
          file->add(eager.run(set_b));
          file->add(fp64 ? fp64->run(widen_inputs_to_f64(set_b)) : std::vector<Tensor>{});
          for (const uint64_t call : s.job.call_sets) {
            const std::vector<Tensor> inputs = call_input_set(set_b, s.job.secret, call);
            file->add(sampled(eager.run(inputs), s.job.verify_secret, call));
            file->add(
                fp64 ? sampled(fp64->run(widen_inputs_to_f64(inputs)), s.job.verify_secret, call)
                     : std::vector<Tensor>{});
          }
        })) {
      r.error = "the timing audit's input sets: " + r.error;
      return s.report.result(r);
    }
  }
  // Where an output comes after an update, eager again on inputs one rounding apart: the spread,
  // handed out last.
  if (s.job.want_fp64) {
    const std::vector<bool> after = outputs_after_an_update(s.graph);
    if (std::find(after.begin(), after.end(), true) != after.end()) {
      s.report.phase("eager_spread", "eager");
      if (!attempt(r, Status::kEagerFailToRun, [&] {
            Interpreter eager(s.graph);
            for (int k = 1; k <= kSpreadRuns; ++k)
              file->add(eager.run(
                  moved_by_one_rounding(s.inputs, s.job.seed * 7919 + static_cast<uint64_t>(k))));
          })) {
        r.error = "eager's spread after an update: " + r.error;
        return s.report.result(r);
      }
    }
  }
  s.report.phase("write", "eager");
  if (!attempt(r, Status::kEagerFailToRun, [&] { file->finish(); })) return s.report.result(r);
  r.status = Status::kPass;
  s.report.result(r);
}

// The share of the worker's time (job.budget_s) its ties may take: a flip is a whole fp64 run,
// a minute on a full-size training step, and a ties job killed at the limit decided none.
constexpr double kTiesBudgetShare = 0.8;

// The graph's ties (comparison_ties.h) and the fp64 reference with each decided the other way, for
// a verdict that failed; like the reference, in a worker that loads no plugin. On set A, or with
// --timing-sets on set B, or on the one call of --call-sets (its outputs' sampled elements, as the
// parent read them). Hands out one group of outputs per tie decided, the closest first, as many as
// fit in kTiesBudgetShare of the worker's time (each written as it is made), then the ties decided
// (the last group: i64 [n, 2] node and element, f64 [n, 2] margin and band, i64 [1] how many
// there were).
void ties_job(Session& s) {
  reports::ResultRecord r = s.record("eager", "accuracy");
  s.report.phase("ties", "eager");
  if (!attempt(r, Status::kEagerFailToRun, [&] {
        const auto t0 = Clock::now();
        std::vector<Tensor> inputs = s.inputs;
        const bool call = s.job.timing_sets && s.job.call_sets.size() == 1;
        if (s.job.timing_sets) {
          inputs = second_input_set(with_varied_inputs(s.graph), s.job.seed);
          if (call) inputs = call_input_set(inputs, s.job.secret, s.job.call_sets[0]);
        }
        size_t total = 0;
        const std::vector<Tie> ties = find_ties(s.graph, inputs, kMaxTies, total);
        // An f32 and an fp64 run: more than one flip costs, until a flip has been timed.
        double flip_s = seconds_since(t0);
        TensorFileWriter file(s.job.tensors);
        std::vector<double> where, band;
        for (const Tie& t : ties) {
          if (s.job.budget_s > 0 && seconds_since(t0) + flip_s > kTiesBudgetShare * s.job.budget_s)
            break;
          const auto f0 = Clock::now();
          std::vector<Tensor> out = fp64_with_tie_flipped(s.graph, inputs, t);
          file.add(call ? sampled(out, s.job.verify_secret, s.job.call_sets[0]) : out);
          flip_s = where.empty() ? seconds_since(f0) : std::max(flip_s, seconds_since(f0));
          where.insert(where.end(), {static_cast<double>(t.node), static_cast<double>(t.element)});
          band.insert(band.end(), {t.margin, t.noise});
        }
        const auto n = static_cast<int64_t>(where.size() / 2);
        const double count = static_cast<double>(total);
        file.add({Tensor::from_doubles(DType::kI64, {n, 2}, where),
                  Tensor::from_doubles(DType::kF64, {n, 2}, band),
                  Tensor::from_doubles(DType::kI64, {1}, {&count, 1})});
        file.finish();
      })) {
    r.error = "the reference's ties: " + r.error;
    return s.report.result(r);
  }
  r.status = Status::kPass;
  s.report.result(r);
}

// The backend's half of accuracy, in a worker that never computes a reference: compile, run once
// on the seeded inputs, hand the outputs out in job.tensors. `pass` here only says it ran.
void outputs_job(Session& s) {
  const std::string backend = s.job.backends.at(0);
  reports::ResultRecord r = s.record(backend, "accuracy");
  std::unique_ptr<LoadedBackend> be;
  s.report.phase("load", backend);
  if (!attempt(r, Status::kFailToLoad, [&] { be = s.load(backend); })) return s.report.result(r);
  std::unique_ptr<plugin::Executable> exe;
  s.report.phase("compile", backend);
  if (!attempt(r, Status::kFailToCompile, [&] { exe = s.compile(*be, backend, false); }))
    return s.report.result(r);
  std::vector<Tensor> res;
  s.report.phase("run", backend);
  if (!attempt(r, Status::kFailToRun, [&] { res = exe->run(s.inputs); })) return s.report.result(r);
  s.report.phase("write", backend);
  if (!attempt(r, Status::kFailToRun, [&] { write_tensor_file(s.job.tensors, {res}); }))
    return s.report.result(r);
  r.status = Status::kPass;
  s.report.result(r);
}

void profile_job(Session& s) {
  const std::string backend = s.job.backends.at(0);
  reports::ResultRecord r = s.record(backend, "performance");
  std::unique_ptr<LoadedBackend> be;
  s.report.phase("load", backend);
  if (!attempt(r, Status::kFailToLoad, [&] { be = s.load(backend); })) return s.report.result(r);
  s.report.phase("compile", backend);
  auto t0 = Clock::now();
  std::unique_ptr<plugin::Executable> exe;
  if (!attempt(r, Status::kFailToCompile, [&] { exe = s.compile(*be, backend, false); })) {
    return s.report.result(r);
  }
  r.compile_s = seconds_since(t0);
  exe.reset();
  s.report.phase("compile_warm", backend);
  t0 = Clock::now();
  if (!attempt(r, Status::kFailToCompile, [&] { exe = s.compile(*be, backend, false); })) {
    return s.report.result(r);
  }
  r.compile_warm_s = seconds_since(t0);
  s.report.phase("run", backend);
  if (!attempt(r, Status::kFailToRun, [&] {
        for (int i = 0; i < std::max(1, s.job.timing.warmup); ++i) exe->run(s.inputs);
      })) {
    return s.report.result(r);
  }
  exe.reset();
  // Kernel timings come from their own executable so the timed samples never carry profiling cost.
  s.report.phase("profile", backend);
  const int runs = std::max(1, s.job.timing.warmup);
  if (!attempt(r, Status::kFailToRun, [&] {
        auto prof = s.compile(*be, backend, true);
        prof->run(s.inputs);  // warm caches outside the profile window
        auto before = prof->profile();
        for (int i = 0; i < runs; ++i) prof->run(s.inputs);
        for (auto k : prof->profile()) {
          for (const auto& b : before) {
            if (b.name == k.name) {
              k.calls -= b.calls;
              k.total_ns -= b.total_ns;
              k.cost.flops -= b.cost.flops;
              k.cost.bytes -= b.cost.bytes;
            }
          }
          // Stored per iteration, so figures compare across --warmup settings.
          reports::KernelTiming kt(k.name, k.calls / runs, k.total_ns / runs);
          if (k.cost.flops > 0 || k.cost.bytes > 0) {
            kt.flops = k.cost.flops / runs;
            kt.bytes = k.cost.bytes / runs;
          }
          r.kernels.push_back(std::move(kt));
        }
      })) {
    return s.report.result(r);
  }
  r.status = Status::kPass;
  // The worker's own peak, without the compiler processes it waited for (wait4's figure counts
  // them), and without its parent's: ru_maxrss survives fork and exec, so a worker forked from a
  // runner holding 1.2 GB reported 1.2 GB for an 9 MB model. VmHWM is this program's own.
  r.peak_rss_mb = own_peak_rss_mb();
  s.report.result(r);
}

}  // namespace

std::vector<std::string> WorkerJob::to_args() const {
  std::vector<std::string> a = {"worker"};
  auto add = [&](const std::vector<std::string>& kv) { a.insert(a.end(), kv.begin(), kv.end()); };
  add(flag("job", job));
  add(flag("graph", graph));
  add(flag("suite", suite));
  add(flag("model", model));
  add(flag("batch-size", std::to_string(batch_size)));
  for (const auto& b : backends) add(flag("backend", b));
  add(flag("seed", std::to_string(seed)));
  add(flag("threads", std::to_string(threads)));
  add(flag("tolerance", fmt::format("{}", tolerance)));
  if (cosine) a.push_back("--cosine");
  if (scaled_tolerance) a.push_back("--scaled-tolerance");
  // The expected outputs and their rule stay with the parent, which judges: no worker is told
  // where they are.
  add(timing_args(timing));
  if (budget_s > 0) add(flag("budget-s", fmt::format("{}", budget_s)));
  if (profile) a.push_back("--profile");
  if (!tensors.empty()) add(flag("tensors", tensors));
  if (!want_fp64) a.push_back("--no-fp64");
  if (eager_once) a.push_back("--eager-once");
  if (turns) a.push_back("--turns");
  if (secret != 0) add(flag("secret", std::to_string(secret)));
  if (timing_sets) a.push_back("--timing-sets");
  if (!call_sets.empty()) add(flag("call-sets", fmt::format("{}", fmt::join(call_sets, ","))));
  if (verify_secret != 0) add(flag("verify-secret", std::to_string(verify_secret)));
  add(flag("report", report));
  for (const auto& p : plugin_paths) add(flag("plugin-path", p));
  for (const auto& [k, v] : config) add(flag("config", fmt::format("{}={}", k, v)));
  for (const auto& spec : backend_env_specs(backend_env)) add(flag("backend-env", spec));
  return a;
}

int run_worker_job(const WorkerJob& given) {
  // --threads 0 (all) is fixed to a count here, before a plugin loads, and every backend sets that
  // count before each run: ATen's first parallel call sets OpenMP's count to its own default (the
  // physical cores, 1 on a 2-vCPU VM), which every backend timed after it would otherwise inherit.
  WorkerJob job = given;
  if (job.threads <= 0) job.threads = omp_get_max_threads();
  job.threads = use_openmp_threads(job.threads);
  if (job.job == "run-graph") return run_graph_job(job);
  Session s(job);
  // Opened before anything can start a thread, so every thread's work is counted.
  std::optional<PerfCounters> counters;
  if (job.job == "timing") counters.emplace();
  try {
    s.report.phase("load", "");
    s.graph = load_graph_file(job.graph);
    reseed_params(s.graph, job.seed);
    s.inputs = make_inputs(s.graph, job.seed);
    if (job.job == "reference") {
      reference_job(s);
    } else if (job.job == "outputs") {
      outputs_job(s);
    } else if (job.job == "profile") {
      profile_job(s);
    } else if (job.job == "timing") {
      timing_job(s, *counters);
    } else if (job.job == "ties") {
      ties_job(s);
    } else if (job.job == "cosim") {
      cosim_job(s);
    } else if (job.job == "counters") {
      counters_job(s);
    } else if (job.job == "load-env-probe") {
      load_env_probe_job(s);
    } else if (job.job == "options") {
      options_job(s);
    } else {
      throw Error(fmt::format("unknown worker job '{}'", job.job));
    }
  } catch (const std::bad_alloc&) {
    return kWorkerExitOom;
  }
  return 0;
}

}  // namespace crucible
