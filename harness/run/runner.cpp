// `crucible run`'s engine: for every selected model, accuracy (one reference worker, then one
// worker per backend, judged here) and performance jobs (a profile worker per backend, then one
// interleaved timing worker), each result written to the store in its own transaction as soon as it
// is known.
#include "runner.h"

#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <iostream>
#include <optional>
#include <set>

#include "accuracy_check.h"
#include "backend_config.h"
#include "bisect_run.h"
#include "builtin_models.h"
#include "contention.h"
#include "crucible/core/quote.h"
#include "crucible/ir/text_format.h"
#include "crucible/onnx/import.h"
#include "crucible/plugin_file.h"
#include "crucible/plugin_loader.h"
#include "crucible/reports/csv_export.h"
#include "crucible/reports/store.h"
#include "environment.h"
#include "input_sets.h"
#include "job_outcome.h"
#include "load_env_choice.h"
#include "onnx_models.h"
#include "output_dir.h"
#include "progress.h"
#include "result_table.h"
#include "timing_pool.h"
#include "training_models.h"
#include "turn_driver.h"

namespace crucible {

namespace fs = std::filesystem;
using reports::ResultRecord;
using reports::Status;
using reports::status_name;

namespace {

std::atomic<bool> g_interrupted{false};

void on_signal(int) {
  g_interrupted = true;
  kill_running_children();
}

// `name` as one safe file-name component: a backend given as a path ("/x/y.so") or a model name
// with odd bytes must neither point into another directory nor collide with a plain name, so
// anything but [A-Za-z0-9._-] becomes '_' and a changed name gets a hash of the original.
std::string file_component(const std::string& name) {
  std::string out;
  for (unsigned char c : name) out += std::isalnum(c) || c == '.' || c == '_' || c == '-' ? c : '_';
  if (out == name && out != "." && out != "..") return out;
  return fmt::format("{}-{:08x}", out.substr(out.size() > 48 ? out.size() - 48 : 0),
                     static_cast<uint32_t>(std::hash<std::string>{}(name)));
}

// Physics: a median faster than the machine it ran on did not do the graph's work. Part of the
// audit, which --no-audit turns off (and every such result says so).
void fail_beyond_the_machine(ResultRecord& r, double median_ms) {
  if (r.status != Status::kPass || !r.roofline || reports::unaudited(r)) return;
  const std::string why = reports::beyond_the_machine(*r.roofline, median_ms);
  if (why.empty()) return;
  r.status = Status::kFailAudit;
  r.error = why;
}

std::string first_noise_reason(const std::map<std::string, ResultRecord>& results) {
  for (const auto& [backend, r] : results) {
    if (r.noisy) return r.noise_reason;
  }
  return "";
}

class Runner {
 public:
  // `load_errors`: backends whose plugin file is already known to be unloadable, with the loader's
  // message; they are recorded as fail_to_load for every model without starting a worker.
  Runner(const RunConfig& cfg, reports::Store& store, int64_t run_id, fs::path out_dir,
         std::map<std::string, std::string> load_errors)
      : cfg_(cfg),
        store_(store),
        run_id_(run_id),
        out_(std::move(out_dir)),
        load_errors_(std::move(load_errors)) {
    limits_.timeout_s = cfg.timeout_s;
    limits_.memory_limit_mb = cfg.memory_limit_mb;
    perf_backends_.push_back("eager");  // the speed-up baseline always runs first
    for (const auto& b : cfg.backends) {
      if (b != "eager") perf_backends_.push_back(b);
    }
  }

  // One result per (backend, mode), whatever workers it takes (a skipped model's included).
  size_t results_per_model() const {
    return (cfg_.accuracy() ? cfg_.backends.size() : 0) +
           (cfg_.performance() ? perf_backends_.size() : 0);
  }

  size_t jobs_per_model() const {
    return (cfg_.accuracy() ? cfg_.backends.size() : 0) +
           (cfg_.performance() ? 2 * perf_backends_.size() : 0);
  }

  void run_model(const ModelEntry& entry, Progress& progress) {
    ModelEntry m = entry;
    if (m.skip.empty() && !m.onnx.empty()) import_onnx(m);
    if (!m.skip.empty()) {
      for (const auto& mode : modes()) {
        for (const auto& b : mode == "accuracy" ? cfg_.backends : perf_backends_) {
          ResultRecord r = blank(m, b, mode, 0);
          r.status = Status::kSkipped;
          r.error = m.skip;
          record(m, r, progress);
        }
      }
      return;
    }
    int64_t batch = m.batch_size;
    std::string load_error = m.import_error;
    if (load_error.empty()) try {
        Graph g = load_graph_file(m.graph);
        check_side_files(g);
        if (batch == 0 && !g.inputs().empty() && !g.value(g.inputs()[0]).type.shape.empty()) {
          batch = g.value(g.inputs()[0]).type.shape[0];
        }
        if (m.training) {
          reseed_params(g, cfg_.seed);  // the weights a step starts from are the run's
          write_training_graphs(m, g, cfg_.train, out_ / "graphs");
        }
      } catch (const Error& e) {
        load_error = e.what();
      }
    if (!load_error.empty()) {
      for (const auto& mode : modes()) {
        for (const auto& b : mode == "accuracy" ? cfg_.backends : perf_backends_) {
          ResultRecord r = blank(m, b, mode, batch);
          r.status = Status::kFailToLoad;
          r.error = load_error;
          record(m, r, progress);
        }
      }
      return;
    }
    std::set<std::string> passed;
    std::map<std::string, std::string> load_failed = load_errors_;  // backend -> loader's message
    // The reference first, before any worker loads a plugin: a plugin that rewrites the files a
    // reference is read from (a test case's output_N.pb) is too late for this model.
    reference_role_ = "reference";
    reference_ = compute_reference(make_job(m, batch, "reference", {}),
                                   check_files(m, reference_role_), {{}, limits_}, cfg_.accuracy());
    if (cfg_.accuracy()) run_accuracy(m, batch, passed, load_failed, progress);
    if (!cfg_.performance() || g_interrupted) return;
    ModelEntry timed = m;
    if (!m.step_graph.empty()) {
      // Training: the graph timed is one step, with a reference of its own.
      timed.graph = m.step_graph;
      reference_role_ = "step-reference";
      reference_ = compute_reference(make_job(timed, batch, "reference", {}),
                                     check_files(timed, reference_role_), {{}, limits_}, false);
    }
    run_performance(timed, batch, passed, load_failed, progress);
  }

  const std::vector<ResultRecord>& results() const { return results_; }

 private:
  // An ONNX model is imported into the run's graphs/ now; what crucible does not implement makes
  // it skipped with the reason, a malformed file fail_to_load.
  void import_onnx(ModelEntry& m) const {
    try {
      import_onnx_model(m, out_ / "graphs", cfg_.shapes);
    } catch (const onnx::ImportError& e) {
      (e.unsupported() ? m.skip : m.import_error) = e.what();
    } catch (const Error& e) {
      m.import_error = e.what();
    }
  }

  std::vector<std::string> modes() const {
    std::vector<std::string> out;
    if (cfg_.accuracy()) out.push_back("accuracy");
    if (cfg_.performance()) out.push_back("performance");
    return out;
  }

  ResultRecord blank(const ModelEntry& m, const std::string& backend, const std::string& mode,
                     int64_t batch) const {
    return reports::make_result(m.suite, m.name, backend, mode, batch);
  }

  WorkerJob make_job(const ModelEntry& m, int64_t batch, const std::string& kind,
                     std::vector<std::string> backends) const {
    WorkerJob job;
    job.job = kind;
    job.graph = fs::absolute(m.graph).string();
    job.suite = m.suite;
    job.model = m.name;
    job.batch_size = batch;
    job.backends = std::move(backends);
    job.seed = cfg_.seed;
    job.threads = cfg_.threads;
    job.tolerance = m.tolerance;
    job.cosine = m.cosine;
    job.scaled_tolerance = m.scaled_tolerance;
    if (!m.onnx_data.empty() && !case_files(m.onnx_data, "output").empty()) {
      job.expected = fs::absolute(m.onnx_data).string();
      job.rtol = m.rtol;
      job.atol = m.atol;
      job.fp64_check = m.fp64_check;
    }
    job.timing = cfg_.timing;
    job.budget_s = cfg_.timeout_s;
    job.plugin_paths = cfg_.plugin_paths;
    job.config = cfg_.config;
    job.backend_env = cfg_.backend_env;
    return job;
  }

  // The files of one accuracy worker: `role` is "reference" or a backend's name.
  CheckFiles check_files(const ModelEntry& m, const std::string& role) const {
    const std::string label =
        fmt::format("{}.{}.accuracy", file_component(m.name), file_component(role));
    const WorkerFiles files = worker_files(out_, label);
    return {files, worker_tensors(files)};
  }

  // Each backend's outputs in a worker of its own, judged here against the model's reference
  // (accuracy_check.h).
  void run_accuracy(const ModelEntry& m, int64_t batch, std::set<std::string>& passed,
                    std::map<std::string, std::string>& load_failed, Progress& progress) {
    const CheckLaunch launch{{}, limits_};
    for (const auto& b : cfg_.backends) {
      if (g_interrupted) return;
      if (auto it = load_errors_.find(b); it != load_errors_.end()) {
        ResultRecord r = blank(m, b, "accuracy", batch);
        r.status = Status::kFailToLoad;
        r.error = it->second;
        record(m, r, progress);
        continue;
      }
      WorkerJob job = make_job(m, batch, "outputs", {b});
      ResultRecord r = check_accuracy(job, *reference_, check_files(m, b), launch);
      if (r.status == Status::kPass) passed.insert(r.backend);
      if (r.status == Status::kFailToLoad) load_failed.emplace(r.backend, r.error);
      record(m, r, progress);
    }
  }

  // `wrapper` (a command the worker runs under) and `extra_env` are for the counters job.
  std::vector<ResultRecord> run_job(WorkerJob& job, const std::string& label,
                                    double* peak_rss_mb = nullptr, const fs::path& cache_dir = {},
                                    const std::vector<std::string>& wrapper = {},
                                    const std::map<std::string, std::string>& extra_env = {}) {
    const WorkerFiles files = worker_files(out_, label);
    std::map<std::string, std::string> env = extra_env;
    if (!cache_dir.empty()) env["CRUCIBLE_CACHE_DIR"] = cache_dir.string();
    WorkerRun w = run_worker(job, files, env, limits_, wrapper);
    if (peak_rss_mb) *peak_rss_mb = w.outcome.peak_rss_mb;
    return w.results;
  }

  // The timing of `loadable` on model `m`, one result per backend: a timing worker per backend,
  // taking turns (turn_driver.h), their hand-offs judged here. A noisy timing is rerun
  // (--retry-noisy) as a whole: the backends are timed side by side, so the speed-ups stay ratios
  // of one attempt's medians. Under --processes N each attempt is N timings in turn, each
  // sampling --min-time-ms / N, whose samples are pooled per backend.
  std::map<std::string, ResultRecord> time_backends(const ModelEntry& m, int64_t batch,
                                                    const std::vector<std::string>& loadable) {
    std::map<std::string, ResultRecord> by_backend;
    for (int attempt = 1; !loadable.empty() && !g_interrupted; ++attempt) {
      by_backend.clear();
      for (int p = 0; p < cfg_.processes && !g_interrupted; ++p) {
        for (ResultRecord& r : time_in_turns(m, batch, loadable, p)) {
          auto [it, first] = by_backend.try_emplace(r.backend, r);
          if (!first) pool_timing(it->second, r);
        }
      }
      bool noisy = false;
      for (auto& [name, r] : by_backend) {
        r.attempts = attempt;
        noisy = noisy || r.noisy;
      }
      if (!noisy || attempt > cfg_.retry_noisy) break;
      std::cerr << fmt::format("{}/{}: timing was noisy ({}), retrying ({} of {})\n",
                               escape_controls(m.suite), escape_controls(m.name),
                               first_noise_reason(by_backend), attempt, cfg_.retry_noisy);
    }
    return by_backend;
  }

  // The kernel cache folder of `b` on `m` for this run, shared by its profile and timing workers.
  fs::path cache_of(const ModelEntry& m, const std::string& b) const {
    return out_ / "cache" / fmt::format("{}.{}", file_component(m.name), file_component(b));
  }

  // A worker's time per call by the parent's clock.
  static double per_call_ms(const TurnRecord& rec) {
    return rec.calls_timed > 0 ? rec.timed_ms() / static_cast<double>(rec.calls_timed) : 0;
  }

  // One timing of `loadable`, the `p`-th of --processes: each backend's worker gets its share of
  // --timeout as its budget, all share one secret (call i of sample r has the same inputs in
  // every backend's worker, so eager's read outputs are the others' reference), and every result
  // is judged by what the parent saw, by its hand-off and by the calls the parent read.
  std::vector<ResultRecord> time_in_turns(const ModelEntry& m, int64_t batch,
                                          const std::vector<std::string>& loadable, int p) {
    const uint64_t secret = os_secret();
    std::vector<TurnWorker> workers;
    for (const std::string& b : loadable) {
      WorkerJob job = make_job(m, batch, "timing", {b});
      job.timing.min_time_ms /= cfg_.processes;
      job.budget_s = cfg_.timeout_s / static_cast<double>(loadable.size());
      job.secret = secret;
      std::string label = fmt::format("{}.{}.timing", file_component(m.name), file_component(b));
      if (cfg_.processes > 1) label += fmt::format(".p{}", p + 1);
      const WorkerFiles files = worker_files(out_, label);
      job.tensors = worker_tensors(files).string();
      // The profile's cache: what the backend chose there is what is timed.
      const fs::path cache = cache_of(m, b);
      fs::create_directories(cache);
      workers.push_back({job, files, b == "eager", {{"CRUCIBLE_CACHE_DIR", cache.string()}}});
    }
    std::vector<TurnRecord> records = take_turns(workers, {}, limits_);
    judge_turns(records);
    const TurnRecord* eager = nullptr;
    for (size_t k = 0; k < workers.size(); ++k) {
      if (workers[k].reference) eager = &records[k];
    }
    std::vector<ResultRecord> out;
    for (size_t k = 0; k < workers.size(); ++k) {
      const TurnRecord& rec = records[k];
      const TimedCalls calls{&rec.verified,     eager && eager != &rec ? &eager->verified : nullptr,
                             rec.verify_secret, rec.calls_timed,
                             rec.timed_ms(),    per_call_ms(eager ? *eager : rec)};
      judge_timing_hand_off(workers[k].job, *reference_, check_files(m, reference_role_),
                            {{}, limits_}, calls, records[k].results);
      for (ResultRecord& r : records[k].results) out.push_back(std::move(r));
    }
    return out;
  }

  void run_performance(const ModelEntry& m, int64_t batch,
                       const std::set<std::string>& accuracy_passed,
                       const std::map<std::string, std::string>& load_failed, Progress& progress) {
    // In `both` mode only backends that passed accuracy are timed (eager is always the baseline);
    // one that failed to load is fail_to_load here too, and gets no worker.
    std::vector<std::string> timed, loadable;
    for (const auto& b : perf_backends_) {
      const bool failed_load = load_failed.contains(b);
      if (failed_load || !cfg_.accuracy() || accuracy_passed.contains(b) || b == "eager") {
        timed.push_back(b);
        if (!failed_load) loadable.push_back(b);
      }
    }
    std::map<std::string, ResultRecord> profile;
    std::map<std::string, double> peak;
    for (const auto& b : timed) {
      if (g_interrupted) return;
      if (auto it = load_failed.find(b); it != load_failed.end()) {
        profile[b] = blank(m, b, "performance", batch);
        profile[b].status = Status::kFailToLoad;
        profile[b].error = it->second;
        std::cerr << progress.done(profile[b], "profile");
        continue;
      }
      WorkerJob job = make_job(m, batch, "profile", {b});
      // A fresh cache directory per (model, backend): the first compile in it is a cold compile.
      const fs::path cache = cache_of(m, b);
      fs::remove_all(cache);
      fs::create_directories(cache);
      double rss = 0;
      profile[b] =
          run_job(job, fmt::format("{}.{}.profile", file_component(m.name), file_component(b)),
                  &rss, cache)
              .at(0);
      peak[b] = profile[b].peak_rss_mb.value_or(rss);
      std::cerr << progress.done(profile[b], "profile");
    }
    if (g_interrupted) return;
    std::map<std::string, ResultRecord> by_backend = time_backends(m, batch, loadable);
    const ResultRecord& eager = by_backend["eager"];
    const double eager_median = reports::summarize(eager.samples_ms).median;
    for (const auto& b : perf_backends_) {
      ResultRecord r = blank(m, b, "performance", batch);
      if (std::find(timed.begin(), timed.end(), b) == timed.end()) {
        r.status = Status::kSkipped;
        r.error = "did not pass accuracy";
        record(m, r, progress);
        continue;
      }
      const ResultRecord& p = profile[b];
      if (auto t = by_backend.find(b); t != by_backend.end()) r = t->second;
      if (p.status != Status::kPass) {
        r.status = p.status;
        r.error = p.error;
      }
      r.compile_s = p.compile_s;
      r.compile_warm_s = p.compile_warm_s;
      r.kernels = p.kernels;
      // Profile and timing share the backend's cache folder (cache_of), so what it chose at
      // compile time is the same in both; a backend whose version says otherwise has its profile's
      // kernels left out rather than shown beside a path that was not timed.
      if (p.status == Status::kPass && r.status == Status::kPass && !p.backend_version.empty() &&
          !r.backend_version.empty() && p.backend_version != r.backend_version) {
        r.kernels.clear();
        std::cerr << fmt::format(
            "{} on {}: kernels not kept: profiled as \"{}\", timed as \"{}\"\n", m.name, b,
            p.backend_version, r.backend_version);
      }
      if (peak[b] > 0) r.peak_rss_mb = peak[b];
      // The graph's work and the machine's limits as the reference backend's worker measured them:
      // a worker's report of its own bound is its plugin's to change (its memory, its report).
      if (eager.roofline) r.roofline = eager.roofline;
      const double median = reports::summarize(r.samples_ms).median;
      fail_beyond_the_machine(r, median);
      // A speed-up is reported only between two timings that passed their audit, neither
      // disturbed by another backend's threads nor withheld by the parent (judge_turns).
      if (r.status == Status::kPass && eager.status == Status::kPass && r.disturbed_by.empty() &&
          eager.disturbed_by.empty() && !r.speedup_withheld && !eager.speedup_withheld &&
          std::isfinite(eager_median) && std::isfinite(median) && median > 0)
        r.speedup = eager_median / median;
      if (!r.counters_unavailable.empty() && !counters_note_shown_) {
        counters_note_shown_ = true;
        std::cerr << "counters not recorded: " << r.counters_unavailable << "\n";
      }
      if (peak["eager"] > 0 && peak[b] > 0) r.memory_ratio = peak["eager"] / peak[b];
      if (!cfg_.counters.empty() && r.status == Status::kPass && !g_interrupted) {
        count_calls(m, batch, r);
      }
      record(m, r, progress);
    }
  }

  // --counters cachegrind: a worker under callgrind counts kCountedCalls calls of r's backend
  // (counters_job.cpp) on one thread, BLAS and OpenMP threads passive, with the profile step's
  // kernel cache, and fixed simulated caches so counts compare across hosts.
  void count_calls(const ModelEntry& m, int64_t batch, ResultRecord& r) {
    WorkerJob job = make_job(m, batch, "counters", {r.backend});
    job.threads = 1;
    const std::string label =
        fmt::format("{}.{}.counters", file_component(m.name), file_component(r.backend));
    // A directory of its own, emptied first: callgrind adds .1, .2, ... to the file's name per
    // dump. In the worker's folder, the one its sandbox lets it (and callgrind in it) write.
    const fs::path dir = worker_files(out_, label).report.parent_path() / "callgrind";
    fs::remove_all(dir);
    fs::create_directories(dir);
    const fs::path dumps = dir / "callgrind.out";
    const std::vector<std::string> valgrind = {find_in_path("valgrind"),
                                               "--tool=callgrind",
                                               "--instr-atstart=no",
                                               "--collect-atstart=no",
                                               "--cache-sim=yes",
                                               "--I1=32768,8,64",
                                               "--D1=32768,8,64",
                                               "--LL=8388608,16,64",
                                               "--smc-check=all-non-file",
                                               "-q",
                                               "--callgrind-out-file=" + dumps.string()};
    const fs::path cache =
        out_ / "cache" / fmt::format("{}.{}", file_component(m.name), file_component(r.backend));
    const std::vector<ResultRecord> got = run_job(job, label, nullptr, cache, valgrind,
                                                  {{"CRUCIBLE_CALLGRIND_OUT", dumps.string()},
                                                   {"OPENBLAS_NUM_THREADS", "1"},
                                                   {"OMP_NUM_THREADS", "1"},
                                                   {"OMP_WAIT_POLICY", "PASSIVE"}});
    if (!got.empty() && got[0].status == Status::kPass) {
      r.sim_instructions = got[0].sim_instructions;
      r.sim_d1_misses = got[0].sim_d1_misses;
      r.sim_ll_misses = got[0].sim_ll_misses;
      // The profile's kernels that are functions of their own (codegen's extern "C" kernels)
      // get their counts; eager's op names are not symbols and stay without.
      for (const reports::KernelTiming& counted : got[0].kernels) {
        for (reports::KernelTiming& k : r.kernels) {
          if (k.name == counted.name) k.instructions = counted.instructions;
        }
      }
      return;
    }
    std::string why = got.empty() ? "no result" : got[0].error;
    if (why.find("SIGILL") != std::string::npos) {
      why =
          "valgrind cannot decode this build's instructions (AVX-512): count with a build "
          "configured -DCRUCIBLE_ARCH=x86-64-v3";
    }
    r.counters_unavailable +=
        (r.counters_unavailable.empty() ? "" : "; ") + std::string("cachegrind: ") + why;
  }

  void record(const ModelEntry& m, ResultRecord r, Progress& progress) {
    // A result that ends after an interrupt may be its doing (a terminal's Ctrl-C reaches the
    // workers too, and the handler kills the rest): it is neither stored nor shown, so an
    // interrupted run holds only the results that ended before it.
    if (g_interrupted) return;
    if (!m.xfail.empty() && !reports::is_success(r.status) && r.status != Status::kSkipped) {
      r.error =
          fmt::format("expected failure ({}): {}: {}", m.xfail, status_name(r.status), r.error);
      r.status = Status::kXfail;
    }
    store_.add_result(run_id_, r);
    std::cerr << progress.done(r);
    results_.push_back(std::move(r));
  }

  const RunConfig& cfg_;
  reports::Store& store_;
  int64_t run_id_;
  fs::path out_;
  std::map<std::string, std::string> load_errors_;
  ChildLimits limits_;
  std::vector<std::string> perf_backends_;
  std::vector<ResultRecord> results_;
  std::optional<ReferenceOutcome> reference_;  // the current model's (accuracy_check.h)
  std::string reference_role_;                 // whose files hold it (check_files)
  bool counters_note_shown_ = false;
};

// The run's own folder from the default or a "{run}" pattern; a folder left by another store's run
// of that id (a store deleted and made anew) is kept, and this run takes the next free name.
fs::path claim_run_output_dir(const RunConfig& cfg, int64_t run_id) {
  const fs::path base = cfg.output_dir.empty() ? default_output_dir(cfg.db, run_id)
                                               : expand_output_dir(cfg.output_dir, run_id);
  return first_free_name(
      base, [&](const fs::path& dir) { return claim_output_dir(dir, cfg.db, run_id); });
}

// The request, checked before the run row exists: its suites and models (a --graph file that
// does not parse is bad input), the built-in models, and each backend's plugin file.
struct RunPlan {
  std::vector<Suite> suites;
  std::vector<ModelEntry> models;
  std::vector<BuiltGraph> builtins;
  std::map<std::string, std::string> load_errors;  // backend -> why its file cannot load
};

RunPlan plan_run(const RunConfig& cfg) {
  RunPlan plan;
  for (const auto& s : cfg.suites)
    plan.suites.push_back(find_suite(s, suite_search_path(cfg.suite_paths)));
  if (const auto onnx_graphs = std::count_if(cfg.graphs.begin(), cfg.graphs.end(),
                                             [](const std::string& g) { return is_onnx_file(g); });
      !cfg.input_files.empty() && onnx_graphs != 1)
    throw Error(
        fmt::format("--input-data binds the inputs of one --graph MODEL.onnx, and this run has {}",
                    onnx_graphs));
  if (!cfg.graphs.empty()) {
    Suite adhoc{"graphs", {}, {}};
    std::map<std::string, std::string> file_of;  // model name -> the --graph file named so
    for (const auto& g : cfg.graphs) {
      if (!fs::exists(g)) throw Error(fmt::format("{}: cannot read: No such file or directory", g));
      // A file given on the command line is the request itself: a syntax error in it is bad
      // input (exit 2, no run recorded), as run-graph says it, not a model that failed to load.
      ModelEntry m;
      m.suite = "graphs";
      m.name = is_onnx_file(g) ? onnx::model_name(g) : fs::path(g).stem().string();
      // One name is one model: its results, its folder of imported weights.
      if (const auto [at, fresh] = file_of.emplace(m.name, g); !fresh) {
        throw Error(
            fmt::format("--graph {} and --graph {} are both model '{}': give one a file (or, for "
                        "model.onnx, a folder) of another name",
                        at->second, g, m.name));
      }
      if (is_onnx_file(g)) {
        onnx::ImportOptions opts;
        opts.shapes = cfg.shapes;
        for (const std::string& f : cfg.input_files) {
          if (!fs::is_regular_file(f))
            throw Error(fmt::format("--input-data {}: cannot read: not a file", f));
          opts.input_files.push_back(fs::absolute(f));
        }
        // Checked now (each file's dtype and dims against its input's), imported again into
        // the run's folder.
        const Graph checked = onnx::import_model(g, opts);
        if (opts.input_files.size() > checked.inputs().size())
          throw Error(fmt::format("--input-data: {} files for the {} input{} of {}",
                                  opts.input_files.size(), checked.inputs().size(),
                                  checked.inputs().size() == 1 ? "" : "s", g));
        m.onnx = fs::absolute(g);
        m.input_files = opts.input_files;
      } else {
        check_side_files(load_graph_file(g));
        m.graph = fs::absolute(g);
      }
      adhoc.models.push_back(m);
    }
    plan.suites.push_back(adhoc);
  }
  std::vector<ModelEntry> selected = select_models(plan.suites, cfg.filter);
  // A training step in a file is judged as --mode training judges it, by the run, --bisect and
  // the repro alike: at the inference rule a step's thousands of comparison ties (relu's backward
  // at margins under f32 rounding) fail an honest backend, more than the ties job re-decides.
  for (ModelEntry& m : selected) judge_step_file_as_training(m);
  plan.models = with_training_entries(std::move(selected), cfg.inference(), cfg.training());
  if (plan.models.empty())
    throw Error("no models selected (check --suite, --only, --filter, --exclude and --shard)");
  if (!cfg.shapes.empty() && std::none_of(plan.models.begin(), plan.models.end(),
                                          [](const ModelEntry& m) { return !m.onnx.empty(); }))
    throw Error("--shape binds ONNX models' inputs, and this run has no ONNX model");
  plan.builtins =
      build_builtin_models(plan.models, models::parse_variant(cfg.variant), cfg.batch_size);
  // A backend that cannot be found is a bad request (exit 2). One that is found but cannot load is
  // recorded as fail_to_load for every model while the others run: its file is checked here
  // (without loading it: plugin code runs only in workers), the rest of loading in the workers.
  std::set<std::string> all_backends(cfg.backends.begin(), cfg.backends.end());
  all_backends.insert("eager");
  for (const auto& b : all_backends) {
    const fs::path file = find_plugin(b, plugin_search_path(cfg.plugin_paths));
    try {
      validate_plugin_file(file);
    } catch (const PluginError& e) {
      plan.load_errors[b] = e.what();
    }
  }
  return plan;
}

// Each backend's environment as the run header and the store show it (without the reason line
// crucible passes to a plugin whose load-time environment it chose: the choice's entry holds it).
std::map<std::string, std::string> backend_env_entries(const RunConfig& cfg,
                                                       const std::vector<LoadEnvDecision>& chosen) {
  std::map<std::string, std::string> out;
  for (auto [backend, changes] : cfg.backend_env) {
    for (const LoadEnvDecision& c : chosen) {
      if (c.backend == backend && !c.reason_var.empty()) changes.erase(c.reason_var);
    }
    if (!changes.empty()) out["backend_env." + backend] = describe_env(changes);
  }
  for (const LoadEnvDecision& c : chosen) out[c.header_key()] = c.summary();
  return out;
}

// The run's row, with the machine it runs on.
reports::RunInfo run_info(const RunConfig& cfg, const RunPlan& plan) {
  reports::RunInfo info;
  info.tag = cfg.tag;
  for (const auto& s : plan.suites) info.suites += (info.suites.empty() ? "" : ",") + s.name;
  for (const auto& b : cfg.backends) info.backends += (info.backends.empty() ? "" : ",") + b;
  info.mode = cfg.mode;
  info.env = capture_environment(cfg.threads);  // with execute_run's thread binding
  info.env.canary_ms = noise_canary_ms();
  info.env.seed = cfg.seed;
  info.env.command = cfg.command_line;
  return info;
}

// The table, summary and CSVs after the run; the exit code (130 interrupted, 1 a model failed).
int report_run(const RunConfig& cfg, int64_t run_id, const fs::path& out_dir,
               const std::vector<ResultRecord>& results) {
  std::cout << format_result_table(results, cfg.verbose) << format_speedup_summary(results);
  for (const auto& f : reports::write_dynamo_csvs(out_dir, results))
    std::cout << "wrote " << f.string() << "\n";
  std::cout << fmt::format("run {} recorded in {}\n", run_id, cfg.db.string());
  if (g_interrupted) {
    std::cerr << fmt::format("run {} interrupted: recorded as incomplete\n", run_id);
    return 130;
  }
  for (const auto& r : results) {
    if (!reports::is_success(r.status)) return 1;
  }
  return 0;
}

}  // namespace

int execute_run(const RunConfig& given, int64_t* run_id_out) {
  RunPlan plan = plan_run(given);  // its models point at their written graphs below
  // Before anything is made: options a backend refuses are the request's error.
  const Declarations declared = ask_backends(given, plan.load_errors);
  RunConfig cfg = given;  // with the chosen load-time environments in backend_env
  // A folder named outright is claimed before the run exists, so a clash records nothing.
  const std::string out_pattern = cfg.output_dir.string();
  const bool out_per_run = out_pattern.empty() || has_run_placeholder(out_pattern);
  std::error_code ec;
  const bool out_existed = out_per_run || fs::exists(cfg.output_dir, ec);
  if (!out_per_run && !claim_output_dir(cfg.output_dir, cfg.db, 0)) {
    throw Error(fmt::format(
        "{}: the folder holds the outputs of {}; give --output-dir a new folder (or one with "
        "{{run}} in its name), or remove it",
        out_pattern, output_dir_owner(cfg.output_dir)));
  }
  // A request refused before the run exists leaves no folder it made.
  struct Unclaim {
    fs::path dir;
    bool made = false;
    ~Unclaim() {
      if (dir.empty()) return;
      release_output_dir(dir);
      std::error_code ignored;
      if (made) fs::remove(dir, ignored);  // only while empty
    }
  } unclaim{out_per_run ? fs::path() : cfg.output_dir, !out_existed};

  // Once, before anything starts a worker: the probes run bound as the models' workers will, and
  // the run's environment records the binding.
  bind_worker_threads();
  // Before the run exists, so a probe's candidates never share the machine with a model's worker.
  const std::vector<LoadEnvDecision> load_envs = choose_load_envs(cfg, declared);
  auto store = reports::Store::open(cfg.db);
  reports::RunInfo info = run_info(cfg, plan);
  const std::map<std::string, std::string> env_entries = backend_env_entries(cfg, load_envs);
  info.env.launcher.insert(env_entries.begin(), env_entries.end());
  const int64_t run_id = store->begin_run(info);
  if (run_id_out != nullptr) *run_id_out = run_id;
  // The output folder needs the run's id; if it cannot be made, the run row goes again, so a
  // request that ends in an error records nothing.
  fs::path out_dir;
  try {
    out_dir = out_per_run ? claim_run_output_dir(cfg, run_id) : cfg.output_dir;
    unclaim.dir.clear();
    mark_output_dir(out_dir, cfg.db, run_id);
    for (const char* sub : {"logs", "reports", "cache"}) fs::create_directories(out_dir / sub);
    write_builtin_models(plan.builtins, plan.models, out_dir / "graphs");
  } catch (const fs::filesystem_error& e) {
    store->discard_run(run_id);
    throw Error(fmt::format("{}: cannot write the run's outputs: {}", e.path1().string(),
                            e.code().message()));
  } catch (...) {
    store->discard_run(run_id);
    throw;
  }

  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);

  std::cerr << fmt::format(
      "run {}: {} model(s) x {} on {} ({} cores), noise canary {:.1f} ms, output in {}\n", run_id,
      plan.models.size(), info.backends, info.env.cpu_model, info.env.cores, info.env.canary_ms,
      out_dir.string());
  for (const auto& [key, value] : env_entries)
    std::cerr << fmt::format("{}: {}\n", key, escape_controls(value));
  for (const auto& [b, why] : plan.load_errors) {
    std::cerr << fmt::format("backend '{}' cannot be loaded, recorded as fail_to_load: {}\n",
                             escape_controls(b), why);
  }
  Runner runner(cfg, *store, run_id, out_dir, plan.load_errors);
  // A reader (db merge, db check) tells a run that covered its models from one that lost some.
  store->plan_run(run_id, static_cast<int64_t>(plan.models.size() * runner.results_per_model()));
  Progress progress(plan.models.size(), runner.jobs_per_model());
  for (const ModelEntry& m : plan.models) {
    if (g_interrupted) break;
    runner.run_model(m, progress);
    progress.model_finished();
  }
  store->finish_run(run_id, g_interrupted ? "incomplete" : "complete");
  if (cfg.bisect && !g_interrupted) {
    bisect_new_failures(cfg, *store, run_id, plan.models, runner.results(), out_dir);
  }
  return report_run(cfg, run_id, out_dir, runner.results());
}

}  // namespace crucible
