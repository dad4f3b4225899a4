// `crucible run`: option parsing and validation for a suite run, and the hand-off to the CPU
// launcher when binding or runtime settings were asked for (the launcher re-executes this command
// under them).
#include <fmt/format.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <ctime>
#include <iostream>
#include <regex>
#include <sstream>

#include "cli.h"
#include "crucible/core/error.h"
#include "crucible/core/quote.h"
#include "launcher.h"
#include "memory_cgroup.h"
#include "onnx_models.h"
#include "runner.h"
#include "subprocess.h"
#include "timing_settings.h"

namespace crucible::cli {

namespace {

std::regex compile_regex(const std::string& re, const char* flag) {
  try {
    return std::regex(re);
  } catch (const std::regex_error& e) {
    throw po::error(
        fmt::format("{} '{}' is not a valid regular expression ({})", flag, re, e.what()));
  }
}

// The run's own arguments with every launcher option removed, for the re-executed command.
std::vector<std::string> strip_launcher_args(const std::vector<std::string>& args) {
  static const std::vector<std::string> kWithValue = {
      "--cores",       "--membind",   "--ninstances",    "--ncores-per-instance",
      "--omp-runtime", "--allocator", "--kmp-blocktime", "--kmp-affinity"};
  std::vector<std::string> out;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--dry-run") continue;
    bool skip = false;
    for (const auto& f : kWithValue) {
      if (a == f) {
        ++i;  // the value follows
        skip = true;
      } else if (a.rfind(f + "=", 0) == 0) {
        skip = true;
      }
    }
    if (!skip) out.push_back(a);
  }
  return out;
}

void apply_fallback_affinity() {
  const char* spec = std::getenv("CRUCIBLE_AFFINITY");
  if (spec == nullptr) return;
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : parse_core_list(spec)) CPU_SET(c, &set);
  if (sched_setaffinity(0, sizeof set, &set) != 0)
    throw Error(fmt::format("cannot bind to cores {}", spec));
}

// --seed: a decimal uint64, or "daily".
uint64_t parse_seed(const std::string& text) {
  if (text == "daily") {
    const std::time_t now = std::time(nullptr);
    std::tm tm{};
    gmtime_r(&now, &tm);
    return static_cast<uint64_t>((tm.tm_year + 1900) * 10000 + (tm.tm_mon + 1) * 100 + tm.tm_mday);
  }
  const bool digits =
      !text.empty() && text.size() <= 20 &&
      std::all_of(text.begin(), text.end(), [](unsigned char c) { return std::isdigit(c); });
  errno = 0;
  char* end = nullptr;
  const unsigned long long v = digits ? std::strtoull(text.c_str(), &end, 10) : 0;
  if (!digits || errno == ERANGE || *end != '\0')
    throw po::error(
        fmt::format("--seed must be a number from 0 to 2^64-1 or 'daily', got '{}'", text));
  return v;
}

}  // namespace

void prepare_local_run(const RunConfig& cfg) {
  apply_fallback_affinity();
  if (cfg.memory_limit_mb > 0 && memory_limit_support().kind == MemoryLimitKind::kAddressSpace) {
    std::cerr << fmt::format(
        "crucible run: --memory-limit limits each worker's address space (RLIMIT_AS), not its "
        "resident memory, as no memory cgroup can be made here: {}\n",
        memory_limit_support().why_not);
  }
}

namespace {

// What the options give as text, before it becomes a RunConfig.
struct RunArgs {
  std::vector<std::string> suites, backends, only, config, shapes, backend_env;
  std::string filter, exclude, shard, mode = "accuracy", seed, db = "crucible.db", output_dir;
  std::string optimizer = "sgd", loss = "auto", recompute = "cheap";
  double weight_decay = -1;  // below 0: the optimizer's default
};

// --mode training's step: loss, optimizer and how many steps are judged.
po::options_description training_option_table(TrainingOptions& t, RunArgs& raw) {
  po::options_description train("training (--mode training)");
  train.add_options()("train-steps", po::value(&t.steps)->default_value(3),
                      "steps judged: losses of every step, gradients and parameters after step 1 "
                      "and this one")(
      "optimizer", po::value(&raw.optimizer)->default_value("sgd"),
      "sgd (momentum, L2 weight decay) | adamw (decoupled weight decay), as torch.optim's")(
      "lr", po::value(&t.optimizer.lr)->default_value(0.01), "learning rate")(
      "momentum", po::value(&t.optimizer.momentum)->default_value(0.9), "sgd's momentum")(
      "weight-decay", po::value(&raw.weight_decay), "weight decay (default: sgd 0, adamw 0.01)")(
      "loss", po::value(&raw.loss)->default_value("auto"),
      "auto (cross_entropy on a prediction whose last dim is classes, else mse) | "
      "cross_entropy (against random int64 labels) | mse (against a random target)")(
      "recompute", po::value(&raw.recompute)->default_value("cheap"),
      "cheap (the backward recomputes elementwise and view results from what matmuls, "
      "convolutions and reductions saved, as AOTAutograd's partitioner does) | none (it keeps "
      "every forward value it reads)");
  return train;
}

// Every option of a run, in its five groups: a table, read by --help and the parser.
po::options_description run_option_table(RunConfig& cfg, RunArgs& raw, LaunchOptions& launch) {
  po::options_description what("what to run");
  what.add_options()("suite,s", po::value(&raw.suites)->composing(),
                     "suite names or manifest paths (comma-separated)")(
      "graph,g", po::value(&cfg.graphs)->composing(),
      "run a .graph or .onnx file as a model (repeatable)")(
      "shape", po::value(&raw.shapes)->composing(),
      "NAME=D1,D2,...: dims of an ONNX model's symbolic input NAME (repeatable)")(
      "input-data", po::value(&cfg.input_files)->composing(),
      "a TensorProto file (input_0.pb) bound to the next input of the one --graph MODEL.onnx as "
      "its data, its dtype and dims checked against the input's (repeatable)")(
      "only", po::value(&raw.only)->composing(), "run only these models (comma-separated)")(
      "filter", po::value(&raw.filter), "run models whose name matches this regex")(
      "exclude", po::value(&raw.exclude), "skip models whose name matches this regex")(
      "shard", po::value(&raw.shard), "run shard I of N (0-based), e.g. 0/4")(
      "backends,b", po::value(&raw.backends)->composing(),
      "backends to compare (comma-separated; default eager)")(
      "mode,m", po::value(&raw.mode)->default_value("accuracy"),
      "accuracy | performance | both | training (each model's training step: its gradients and "
      "updated parameters judged after 1 and --train-steps steps, and one step timed; results "
      "are named <model>.train; a manifest's train_* keys apply) | all (both, and each model's "
      "training after it, in one run)")(
      "config,c", po::value(&raw.config)->composing(),
      "option key=value for every backend but eager, or BACKEND:key=value for that backend "
      "alone (repeatable); each backend is asked before the run whether it takes its options, "
      "and one it refuses is the request's error")(
      "backend-env", po::value(&raw.backend_env)->composing(),
      "BACKEND:KEY=VALUE sets, BACKEND:-KEY unsets, a variable while a worker loads that "
      "backend's plugin, and only then (e.g. libtorch:-OPENBLAS_CORETYPE: OpenBLAS reads it at "
      "load); recorded with the run (repeatable). A load-time environment a backend declares "
      "(the libtorch peers' BLAS core) is chosen by measurement unless -c BACKEND:OPTION=NAME "
      "names a candidate (-c libtorch:blas_core=env; docs/guide/performance.md)");
  po::options_description how(
      "how to run (every worker is sandboxed: it writes its own folder, its backend's kernel "
      "cache and $CRUCIBLE_WORKER_WRITABLE alone; CRUCIBLE_NO_SANDBOX=1 lifts it)");
  add_timing_options(how, cfg.timing);  // the options a timing worker is told (timing_settings.h)
  how.add_options()("timeout", po::value(&cfg.timeout_s)->default_value(600),
                    "seconds before a worker is killed")(
      "memory-limit", po::value(&cfg.memory_limit_mb)->default_value(0),
      memory_limit_help("worker").c_str())("threads,t", po::value(&cfg.threads)->default_value(0),
                                           "OpenMP threads per worker (0: all)")(
      "seed", po::value(&raw.seed)->default_value("0"),
      "seed of every input and parameter recipe: a number, or 'daily' for the seed of the day "
      "(YYYYMMDD in UTC), as the nightly runs")(
      "retry-noisy", po::value(&cfg.retry_noisy)->default_value(0),
      "performance: rerun a model's timing up to N times while a result is noisy")(
      "processes", po::value(&cfg.processes)->default_value(1),
      "performance: time each model in N worker processes, one after another, each for "
      "--repeat samples and --min-time-ms / N, and pool their samples (pyperf's remedy for "
      "what one process's memory layout does to a graph of microseconds)")(
      "bisect", po::bool_switch(&cfg.bisect),
      "accuracy: after the run, minify every new failure (one the previous run of that model and "
      "backend did not have) with `crucible minify`'s machinery; repros go to <output>/repros "
      "and the store's repros table")(
      "counters", po::value(&cfg.counters),
      "performance: cachegrind = after timing, run 3 more calls of each timed backend under "
      "Valgrind's cache simulator (callgrind --cache-sim, one thread, fixed 32K/32K/8M caches), "
      "counting inside each call only, and store instructions, D1 and LL misses per call: "
      "deterministic series for the detector where the machine has no PMU")(
      "variant", po::value(&cfg.variant)->default_value("full"),
      "built-in models: full | small (CI-sized)")(
      "batch-size", po::value(&cfg.batch_size)->default_value(0),
      "batch size of built-in models (0: each model's default)")(
      "plugin-path", po::value(&cfg.plugin_paths)->composing(), "extra plugin directories")(
      "suite-path", po::value(&cfg.suite_paths)->composing(), "extra suite directories");
  po::options_description out("where results go");
  out.add_options()("db", po::value(&raw.db)->default_value("crucible.db"), "SQLite database")(
      "output-dir,o", po::value(&raw.output_dir),
      "logs, CSVs and repros: a folder no other run has written to ('{run}' in the name becomes "
      "the run id); default crucible_out/<store name>-<hash of its path>/run_<id>")(
      "tag", po::value(&cfg.tag), "a label stored with the run")(
      "verbose,v", po::bool_switch(&cfg.verbose),
      "print each failure's whole error under its row (default: its first line)");
  po::options_description cpu("CPU launcher (re-runs under numactl with these settings)");
  cpu.add_options()("cores", po::value(&launch.cores), "core list, e.g. 0-3")(
      "membind", po::value(&launch.membind), "NUMA node for memory")(
      "ninstances", po::value(&launch.ninstances)->default_value(1),
      "instances, each on its own cores")("ncores-per-instance",
                                          po::value(&launch.ncores_per_instance)->default_value(0),
                                          "cores per instance")(
      "omp-runtime", po::value(&launch.omp_runtime)->default_value("gomp"), "gomp | llvm | intel")(
      "allocator", po::value(&launch.allocator)->default_value("default"),
      "default | jemalloc | tcmalloc")("kmp-blocktime", po::value(&launch.kmp_blocktime),
                                       "KMP_BLOCKTIME in ms")(
      "kmp-affinity", po::value(&launch.kmp_affinity), "KMP_AFFINITY")(
      "dry-run", po::bool_switch(&launch.dry_run),
      "print the launch command and environment, run nothing");
  po::options_description all;
  all.add(what).add(how).add(training_option_table(cfg.train, raw)).add(out).add(cpu);
  return all;
}

// The training options' values, and the choices they name.
void check_training_values(TrainingOptions& t, const RunArgs& raw) {
  if (t.steps < 1 || t.steps > 100) throw po::error("--train-steps must be between 1 and 100");
  if (!(t.optimizer.lr > 0) || !std::isfinite(t.optimizer.lr))
    throw po::error("--lr must be a positive number");
  if (!(t.optimizer.momentum >= 0 && t.optimizer.momentum < 1))
    throw po::error("--momentum must be in [0, 1)");
  if (raw.weight_decay >= 0 && std::isfinite(raw.weight_decay)) {
    t.optimizer.weight_decay = raw.weight_decay;
  } else if (raw.weight_decay != -1) {
    throw po::error("--weight-decay must be a number >= 0");
  }
  if (raw.recompute != "cheap" && raw.recompute != "none")
    throw po::error(fmt::format("--recompute must be cheap or none, got '{}'", raw.recompute));
  t.recompute = raw.recompute == "cheap";
  try {
    t.optimizer.kind = parse_optimizer(raw.optimizer);
  } catch (const Error& e) {
    throw po::error(fmt::format("--optimizer: {}", e.what()));
  }
  try {
    t.loss = parse_loss(raw.loss);
  } catch (const Error& e) {
    throw po::error(fmt::format("--loss: {}", e.what()));
  }
}

// The values each option may take.
void check_values(RunConfig& cfg, const RunArgs& raw) {
  if (cfg.suites.empty() && cfg.graphs.empty())
    throw po::error("give at least one --suite or --graph");
  if (cfg.timing.repeat < 1) throw po::error("--repeat must be at least 1");
  if (cfg.timing.warmup < 0) throw po::error("--warmup must be >= 0");
  if (!(cfg.timeout_s > 0)) throw po::error("--timeout must be positive");
  cfg.memory_limit_mb = checked_memory_limit(cfg.memory_limit_mb);
  if (cfg.threads < 0) throw po::error("--threads must be >= 0");
  cfg.seed = parse_seed(raw.seed);
  try {
    cfg.shapes = parse_shape_bindings(raw.shapes);
  } catch (const Error& e) {
    throw po::error(e.what());
  }
  if (!(cfg.timing.min_sample_ms > 0) || cfg.timing.min_sample_ms > 60'000)
    throw po::error("--min-sample-ms must be above 0 and at most 60000");
  if (!(cfg.timing.min_time_ms >= 0) || cfg.timing.min_time_ms > 3'600'000)
    throw po::error("--min-time-ms must be between 0 and 3600000");
  if (cfg.retry_noisy < 0) throw po::error("--retry-noisy must be >= 0");
  if (cfg.bisect && !cfg.accuracy()) throw po::error("--bisect needs --mode accuracy or both");
  if (cfg.processes < 1 || cfg.processes > 1000)
    throw po::error("--processes must be between 1 and 1000");
  if (cfg.variant != "full" && cfg.variant != "small")
    throw po::error(fmt::format("--variant must be full or small, got '{}'", cfg.variant));
  if (cfg.batch_size < 0) throw po::error("--batch-size must be >= 0");
  if (!cfg.counters.empty() && cfg.counters != "cachegrind")
    throw po::error(fmt::format("--counters must be cachegrind, got '{}'", cfg.counters));
#ifdef CRUCIBLE_SANITIZED
  if (!cfg.counters.empty())
    throw po::error(fmt::format(
        "--counters cachegrind cannot count a crucible built with -fsanitize={} (Valgrind cannot "
        "run its shadow memory); use a normal build",
        CRUCIBLE_SANITIZED));
#endif
  if (!cfg.counters.empty() && find_in_path("valgrind").empty())
    throw po::error("--counters cachegrind needs valgrind on PATH (apt-get install valgrind)");
  check_training_values(cfg.train, raw);
}

// An option nothing in the run would take is refused, never accepted and ignored.
void refuse_unused(const po::variables_map& vm, const RunConfig& cfg) {
  // Options of one mode, given for a run without it, would be accepted and do nothing.
  std::vector<std::string> timing_only = {"retry-noisy", "processes", "counters"};
  for (const TimingOption& o : timing_options()) {
    if (o.timing_only) timing_only.push_back(o.name);
  }
  for (const std::string& name : timing_only) {
    if (!cfg.performance() && vm.count(name) && !vm[name].defaulted()) {
      throw po::error(fmt::format("--{} applies to timing: give --mode performance or both", name));
    }
  }
  for (const char* name :
       {"train-steps", "optimizer", "lr", "momentum", "weight-decay", "loss", "recompute"}) {
    if (!cfg.training() && vm.count(name) && !vm[name].defaulted())
      throw po::error(fmt::format("--{} applies to training: give --mode training or all", name));
  }
  if (cfg.suites.empty()) {
    for (const char* name : {"variant", "batch-size"}) {
      if (vm.count(name) && !vm[name].defaulted()) {
        throw po::error(fmt::format(
            "--{} applies to built-in models, and --graph files keep their own shapes", name));
      }
    }
  }
  // A -c option no backend of the run receives would be accepted and do nothing.
  const bool only_eager = std::all_of(cfg.backends.begin(), cfg.backends.end(),
                                      [](const std::string& b) { return b == "eager"; });
  for (const auto& [key, value] : cfg.config) {
    const size_t colon = key.find(':');
    if (colon == std::string::npos && only_eager) {
      throw po::error(
          fmt::format("-c {}={} reaches every backend but eager, and this run has no other (give "
                      "eager:{}={} for eager)",
                      key, value, key, value));
    }
    const std::string scope = colon == std::string::npos ? "" : key.substr(0, colon);
    if (!scope.empty() && scope != "eager" &&
        std::find(cfg.backends.begin(), cfg.backends.end(), scope) == cfg.backends.end()) {
      throw po::error(
          fmt::format("-c {}={}: backend '{}' is not in this run's --backends", key, value, scope));
    }
  }
}

// --backend-env: each spec's syntax, and a backend this run loads.
BackendEnv checked_backend_env(const std::vector<std::string>& specs, const RunConfig& cfg) {
  BackendEnv env = parsed_backend_env(specs);
  for (const auto& [backend, changes] : env) {
    if (backend != "eager" &&
        std::find(cfg.backends.begin(), cfg.backends.end(), backend) == cfg.backends.end()) {
      throw po::error(
          fmt::format("--backend-env {}:{}: backend '{}' is not in this run's --backends", backend,
                      describe_env(changes), backend));
    }
  }
  return env;
}

}  // namespace

bool parse_run_options(const std::string& command, const std::string& usage,
                       const po::options_description& extra, const std::vector<std::string>& args,
                       RunConfig& cfg, LaunchOptions& launch,
                       const std::vector<std::string>& refused,
                       const std::function<void(RunConfig&)>& preset) {
  RunArgs raw;
  po::options_description all;
  all.add(extra).add(run_option_table(cfg, raw, launch));
  po::variables_map vm;
  if (!parse(command, usage, all, {}, args, vm)) return false;
  for (const std::string& name : refused) {
    if (vm.count(name) && !vm[name].defaulted()) {
      throw po::error(
          fmt::format("--{} is not an option of {} (it sets that itself)", name, command));
    }
  }
  cfg.suites = split_commas(raw.suites);
  cfg.backends = split_commas(raw.backends);
  if (cfg.backends.empty()) cfg.backends = {"eager"};
  cfg.filter.only = split_commas(raw.only);
  if (!raw.filter.empty()) cfg.filter.include = compile_regex(raw.filter, "--filter");
  if (!raw.exclude.empty()) cfg.filter.exclude = compile_regex(raw.exclude, "--exclude");
  if (!raw.shard.empty()) parse_shard(raw.shard, cfg.filter);
  if (raw.mode != "accuracy" && raw.mode != "performance" && raw.mode != "both" &&
      raw.mode != "training" && raw.mode != "all") {
    throw po::error(fmt::format(
        "--mode must be accuracy, performance, both, training or all, got '{}'", raw.mode));
  }
  cfg.mode = raw.mode;
  if (preset) preset(cfg);  // the caller's own mode and backends, before they are checked against
  cfg.config = parse_config(raw.config);
  cfg.backend_env = checked_backend_env(raw.backend_env, cfg);
  check_values(cfg, raw);
  refuse_unused(vm, cfg);
  cfg.db = raw.db;
  cfg.output_dir = raw.output_dir;
  // As a shell would run it again: a -c value with a space stays one word.
  std::vector<std::string> argv = {"crucible", command};
  argv.insert(argv.end(), args.begin(), args.end());
  cfg.command_line = shell_command(argv);
  return true;
}

int run_command(const std::vector<std::string>& args) {
  RunConfig cfg;
  LaunchOptions launch;
  if (!parse_run_options(
          "run",
          "--suite S [--backends eager,codegen] [--mode accuracy|performance|both] [options]",
          po::options_description(), args, cfg, launch)) {
    return kExitOk;
  }
  if (launch.requested() && std::getenv("CRUCIBLE_LAUNCHED") == nullptr) {
    LaunchPlan plan = plan_launch(launch, LaunchHost::detect(), self_executable().string(),
                                  strip_launcher_args(args));
    return execute_launch(plan, launch.dry_run);
  }
  prepare_local_run(cfg);
  return execute_run(cfg);
}

}  // namespace crucible::cli
