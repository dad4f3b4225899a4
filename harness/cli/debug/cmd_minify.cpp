// `crucible minify (FILE | --suite S --only M) --backend B`: reduces a graph on which a backend
// fails to a small repro that fails the same way, and `crucible repro DIR`, which reruns one.
#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <iostream>

#include "builtin_models.h"
#include "cli.h"
#include "crucible/ir/text_format.h"
#include "crucible/plugin_file.h"
#include "crucible/plugin_loader.h"
#include "crucible/reports/store.h"
#include "load_env_choice.h"
#include "minify/minify.h"
#include "output_dir.h"
#include "subprocess.h"
#include "temp_dir.h"
#include "training_models.h"

namespace crucible::cli {

namespace fs = std::filesystem;

namespace {

// The one model --suite/--only names, as a graph file (built-in models written into `dir`).
ModelEntry suite_model(const std::string& suite, const std::string& only,
                       const std::string& variant, int64_t batch_size,
                       const std::vector<std::string>& suite_paths, const fs::path& dir) {
  ModelFilter filter;
  filter.only = {only};
  std::vector<ModelEntry> models =
      select_models({find_suite(suite, suite_search_path(suite_paths))}, filter);
  if (models.size() != 1)
    throw Error(fmt::format("--only {} names {} models", only, models.size()));
  judge_step_file_as_training(models[0]);  // a manifest's graph= that is a step, as a run judges it
  if (!models[0].builtin.empty()) {
    const auto built = build_builtin_models(
        models, variant == "small" ? models::Variant::kSmall : models::Variant::kFull, batch_size);
    fs::create_directories(dir);
    write_builtin_models(built, models, dir);
  }
  return models[0];
}

// The graph of --suite S --only M, with the model's tolerance and accuracy rule into `mo`.
Graph suite_graph(const std::string& suite, const std::string& only, const std::string& variant,
                  int64_t batch_size, const std::vector<std::string>& suite_paths,
                  const fs::path& dir, double& tolerance, minify::MinifyOptions& mo) {
  const ModelEntry m = suite_model(suite, only, variant, batch_size, suite_paths, dir);
  tolerance = m.tolerance;
  mo.oracle.cosine = m.cosine;
  mo.oracle.scaled_tolerance = m.scaled_tolerance;
  mo.original = fmt::format("--suite {} --only {}", suite, only);
  return load_graph_file(m.graph);
}

// Refuses what minify cannot do with these options (exit 2), before any work.
void check_minify_options(const std::string& file, const std::string& suite,
                          const std::string& only, const std::string& want,
                          const std::string& variant, double timeout_s, double tolerance,
                          minify::MinifyOptions& mo) {
  if (file.empty() == suite.empty()) throw po::error("give a .graph file or --suite, not both");
  if (!suite.empty() && only.empty()) throw po::error("--suite needs --only MODEL");
  if (want != "auto" && want != "accuracy" && want != "compile" && want != "crash" &&
      want != "timeout" && want != "suspicious") {
    throw po::error(fmt::format(
        "--signature must be auto, accuracy, compile, crash, timeout or suspicious, got '{}'",
        want));
  }
  if (!(timeout_s > 0)) throw po::error("--timeout must be positive");
  if (mo.oracle.threads < 0) throw po::error("--threads must be >= 0");
  mo.oracle.limits.memory_limit_mb = checked_memory_limit(mo.oracle.limits.memory_limit_mb);
  if (mo.determinism < 1 || mo.replays < 1)
    throw po::error("--determinism and --replays must be at least 1");
  if (tolerance < 0) throw po::error("--tolerance must be >= 0");
  if (mo.jobs < 1 || mo.jobs > 32) throw po::error("--jobs must be between 1 and 32");
  if (mo.jobs > 1 && mo.oracle.threads == 0) {
    mo.oracle.threads = std::max(1, static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN)) / mo.jobs);
  }
  if (variant != "full" && variant != "small")
    throw po::error(fmt::format("--variant must be full or small, got '{}'", variant));
}

// The graph of FILE, with the training rule into `mo` and `tolerance` under --scaled-tolerance;
// a training step (a graph with gradient sets), minified without it, gets a note saying so.
Graph file_graph(const std::string& file, double& tolerance, minify::MinifyOptions& mo) {
  Graph g = load_graph_file(file);
  mo.original = fs::absolute(file).string();
  if (mo.oracle.scaled_tolerance) {
    tolerance = kTrainingTolerance;
  } else if (!g.gradients().empty()) {
    std::cerr << fmt::format(
        "minify: note: {} is a training step; a run judges it with --scaled-tolerance\n", file);
  }
  return g;
}

// Asks the backend (mo.oracle's, with its -c options, seed, timeout and plugin paths) what it
// declares, and chooses its load-time environment once, before the original runs.
void ask_backend(const BackendEnv& given, minify::MinifyOptions& mo) {
  const std::string& backend = mo.oracle.backend;
  // Once, before the original runs: every candidate and the repro keep the load-time environment
  // it failed under.
  RunConfig peer;
  peer.backends = {backend};
  peer.config = mo.oracle.config;
  peer.backend_env = given;
  peer.threads = mo.oracle.threads;
  peer.seed = mo.seed;
  peer.plugin_paths = mo.oracle.plugin_paths;
  peer.timeout_s = mo.oracle.limits.timeout_s;
  peer.memory_limit_mb = mo.oracle.limits.memory_limit_mb;
  const Declarations declared = ask_backends(peer);  // a refused -c option: exit 2, no work
  if (const auto it = declared.find(backend); it != declared.end())
    mo.bisection = it->second.bisection;
  std::string chosen;
  mo.oracle.backend_env = choose_backend_load_env(backend, peer, declared, &chosen);
  if (!chosen.empty()) std::cerr << "minify: " << chosen << "\n";
}

// minify_out/<graph name>, or <graph name>.N when that holds an earlier repro: by default a
// minify never replaces the repro an earlier one wrote (and the store recorded).
fs::path first_free_repro_dir(const Graph& g) {
  return first_free_name(fs::path("minify_out") / g.name(), [](const fs::path& dir) {
    std::error_code ec;
    return !fs::exists(fs::symlink_status(dir, ec));
  });
}

void print_minify_result(const minify::MinifyResult& r, const fs::path& out) {
  std::cout << fmt::format("minify: {}\n", r.message);
  if (r.culprit.oracle_calls > 0) std::cout << "culprit: " << r.culprit.str() << "\n";
  if (!r.cosim_node.empty()) {
    std::cout << fmt::format("cosim: first diverging node %{}{}\n", r.cosim_node,
                             r.cosim_cut ? "" : " (cutting to it lost the failure)");
  }
  std::cout << fmt::format("oracle calls {}, cache hits {}, flipped verdicts {}, {:.1f} s\n",
                           r.oracle_calls, r.cache_hits, r.flipped, r.wall_s);
  if (r.outcome == minify::MinifyResult::Outcome::kMinimized ||
      r.outcome == minify::MinifyResult::Outcome::kNotReproduced) {
    std::cout << fmt::format("repro: {}\nrerun: crucible repro {}\n", out.string(), out.string());
  }
}

// Ctrl-C or a kill: no worker may outlive the command (each runs in its own process group), and a
// half-minimized graph is not a result; async-signal-safe to the end.
void on_signal(int) {
  kill_running_children();
  _exit(130);
}

void stop_cleanly_on_signals() {
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

void print_progress(const std::string& line) {
  if (isatty(STDERR_FILENO)) {
    std::cerr << "\r\033[K"
              << "minify: " << line << std::flush;
  } else {
    std::cerr << "minify: " << line << "\n";
  }
}

// Minifies `g` on `inputs` as `mo` says, with the backend's load-time environment `env`, and
// records the repro in store `db` as model `model` of `suite`; the command's exit code.
int minify_and_record(const Graph& g, const std::vector<Tensor>& inputs, EnvChanges env,
                      const std::string& db, const std::string& suite, const std::string& model,
                      minify::MinifyOptions& mo) {
  BackendEnv given;
  if (!env.empty()) given[mo.oracle.backend] = std::move(env);
  auto store = reports::Store::open(db);  // before any work: a bad --db is exit 2 at once
  stop_cleanly_on_signals();              // the probes' workers are children too
  ask_backend(given, mo);
  minify::Oracle oracle(mo.oracle);
  const minify::MinifyResult r = minify::minify(g, inputs, oracle, mo);
  store->add_repro(minify::repro_record(r, mo, suite, model));
  if (isatty(STDERR_FILENO)) std::cerr << "\n";
  print_minify_result(r, mo.out);
  return r.outcome == minify::MinifyResult::Outcome::kMinimized ? kExitOk : kExitFailed;
}

}  // namespace

// Its option table (45 lines) reads best beside the checks of the values it binds; the work is
// minify_and_record's.
int minify_command(const std::vector<std::string>& args) {
  po::options_description opts("minify options");
  std::string file, suite, only, variant, want, out, backend, db;
  std::vector<std::string> config, plugin_paths, suite_paths, backend_env;
  uint64_t seed = 0;
  int64_t batch_size = 0;
  double timeout_s = 120, tolerance = 0;
  minify::MinifyOptions mo;
  opts.add_options()("graph", po::value(&file), "the failing .graph file")(
      "suite,s", po::value(&suite), "or a suite name or manifest path...")(
      "only", po::value(&only), "...and the one model of it to minify")(
      "variant", po::value(&variant)->default_value("full"), "built-in models: full | small")(
      "batch-size", po::value(&batch_size)->default_value(0), "built-in models' batch size")(
      "backend,b", po::value(&backend)->required(), "the backend that fails")(
      "config,c", po::value(&config)->composing(), "backend option key=value (repeatable)")(
      "backend-env", po::value(&backend_env)->composing(),
      "BACKEND:KEY=VALUE sets, BACKEND:-KEY unsets, a variable while a worker loads the backend's "
      "plugin (as crucible run's); a load-time environment the backend declares (the libtorch "
      "peers' -c blas_core=...) is chosen once, as a run chooses it, and recorded in the repro")(
      "signature", po::value(&want)->default_value("auto"),
      "which failure to keep: auto (the one observed) | accuracy | compile | crash | timeout | "
      "suspicious (a pass far from fp64, pass_suspicious: reduced while it stays suspicious or "
      "fails accuracy in the same dtype)")(
      "output-dir,o", po::value(&out),
      "the repro directory (default minify_out/<graph name>, or <graph name>.N when that holds "
      "an earlier repro: the store's rows point at them)")(
      "seed", po::value(&seed)->default_value(0), "seed of the inputs and parameter recipes")(
      "threads,t", po::value(&mo.oracle.threads)->default_value(0), "OpenMP threads per worker")(
      "timeout", po::value(&timeout_s)->default_value(120),
      "seconds before a candidate's worker is killed (a hang is a timeout verdict)")(
      "memory-limit", po::value(&mo.oracle.limits.memory_limit_mb)->default_value(0),
      memory_limit_help("candidate's worker").c_str())(
      "tolerance", po::value(&tolerance)->default_value(0),
      "accuracy tolerance (0: the model's, else 1e-4; 1e-2 with --scaled-tolerance)")(
      "scaled-tolerance", po::bool_switch(&mo.oracle.scaled_tolerance),
      "judge by the training rule a run judges a training step (a graph with gradient sets) "
      "by: the absolute tolerance is the tolerance times the RMS of all floating outputs")(
      "determinism", po::value(&mo.determinism)->default_value(3),
      "runs of the original that must all fail the same way before reducing")(
      "replays", po::value(&mo.replays)->default_value(5),
      "fresh-worker reruns of the result before it is written")(
      "jobs,j", po::value(&mo.jobs)->default_value(1),
      "candidates tested at once, each in its own worker; the first (in the pass's order) that "
      "fails counts, so the result does not depend on N. With --threads 0, each worker gets "
      "cores / N threads")(
      "no-kernel-bisect", po::bool_switch(),
      "skip bisecting the minimized graph to a culprit kernel (the reference's kernel per node) "
      "and pass (each turned off), which a backend that declares its passes gets (codegen: "
      "fusion, packed_linear, packed_conv, fast_math, decompositions, ...)")(
      "no-cosim", po::bool_switch(),
      "skip per-node localization (one worker comparing every node's value) for accuracy "
      "failures; reduce by prefix bisection and ddmin alone")(
      "plugin-path", po::value(&plugin_paths)->composing(), "extra plugin directories")(
      "suite-path", po::value(&suite_paths)->composing(), "extra suite directories")(
      "db", po::value(&db)->default_value("crucible.db"),
      "SQLite database the minification is recorded in (table repros)");
  po::positional_options_description pos;
  pos.add("graph", 1);
  po::variables_map vm;
  if (!parse("minify",
             "(FILE.graph | --suite S --only M) --backend B [-c key=value] "
             "[--signature auto|accuracy|compile|crash|timeout|suspicious] [-o DIR]",
             opts, pos, args, vm)) {
    return kExitOk;
  }
  check_minify_options(file, suite, only, want, variant, timeout_s, tolerance, mo);

  TempDir work("crucible_minify_");
  double model_tolerance = 1e-4;
  Graph g = file.empty() ? suite_graph(suite, only, variant, batch_size, suite_paths,
                                       work.path() / "models", model_tolerance, mo)
                         : file_graph(file, model_tolerance, mo);
  check_side_files(g);
  const fs::path plugin = find_plugin(backend, plugin_search_path(plugin_paths));
  validate_plugin_file(plugin);
  reseed_params(g, seed);
  const std::vector<Tensor> inputs = make_inputs(g, seed);

  mo.oracle.backend = backend;
  mo.oracle.config = parse_config(config);
  mo.oracle.plugin_paths = plugin_paths;
  mo.oracle.tolerance = tolerance > 0 ? tolerance : model_tolerance;
  mo.oracle.limits.timeout_s = timeout_s;
  mo.oracle.work_dir = work.path() / "candidates";
  mo.want = want;
  mo.seed = seed;
  mo.cosim = !vm["no-cosim"].as<bool>();
  mo.bisect = !vm["no-kernel-bisect"].as<bool>();
  mo.out = out.empty() ? first_free_repro_dir(g) : fs::path(out);
  minify::check_repro_dir(mo.out);  // before any work: a user's directory is never overwritten
  mo.progress = print_progress;

  return minify_and_record(g, inputs, one_backend_env(backend_env, backend), db,
                           suite.empty() ? "graph" : suite, suite.empty() ? g.name() : only, mo);
}

// git bisect run: "this commit cannot be tested".
constexpr int kBisectSkip = 125;

int repro_command(const std::vector<std::string>& args) {
  po::options_description opts("repro options");
  std::string dir;
  int times = 5;
  double timeout_s = 120;
  std::vector<std::string> plugin_paths;
  std::string exit_code = "repro";
  opts.add_options()("dir", po::value(&dir)->required(), "the repro directory")(
      "exit-code", po::value(&exit_code)->default_value("repro"),
      "repro: 0 reproduced, 1 not; bisect: git bisect run's convention, 1 (bad) reproduced, "
      "0 (good) not, 125 (skip) when the backend cannot be loaded")(
      "times", po::value(&times)->default_value(5), "fresh-worker reruns")(
      "timeout", po::value(&timeout_s)->default_value(120), "seconds per rerun")(
      "plugin-path", po::value(&plugin_paths)->composing(),
      "plugin directories searched before the one the repro recorded (its plugin_file's)");
  po::positional_options_description pos;
  pos.add("dir", 1);
  po::variables_map vm;
  if (!parse("repro", "DIR [--times N]", opts, pos, args, vm)) return kExitOk;
  if (times < 1) throw po::error("--times must be at least 1");
  if (!(timeout_s > 0)) throw po::error("--timeout must be positive");
  if (exit_code != "repro" && exit_code != "bisect")
    throw po::error("--exit-code must be repro or bisect, not '" + exit_code + "'");
  const bool bisect = exit_code == "bisect";

  minify::LoadedRepro repro = minify::load_repro(dir);
  plugin_paths = minify::repro_plugin_paths(repro.info, plugin_paths);
  // A backend given as a file path is that file, wherever repro runs from.
  const bool by_path = repro.info.backend.find('/') != std::string::npos ||
                       fs::path(repro.info.backend).extension() == ".so";
  if (by_path && !repro.info.plugin_file.empty() && fs::path(repro.info.backend).is_relative())
    repro.info.backend = repro.info.plugin_file;
  try {
    validate_plugin_file(find_plugin(repro.info.backend, plugin_search_path(plugin_paths)));
  } catch (const Error& e) {
    if (!bisect) throw;
    std::cout << "cannot run: " << e.what() << "\n";
    return kBisectSkip;  // a commit whose plugin is missing or broken is no verdict
  }
  TempDir work("crucible_repro_");
  minify::OracleConfig oc;
  oc.backend = repro.info.backend;
  oc.config = repro.info.config;
  oc.backend_env = repro.info.backend_env;  // the load-time environment it failed under
  oc.plugin_paths = plugin_paths;
  oc.tolerance = repro.info.tolerance;
  oc.cosine = repro.info.cosine;
  oc.scaled_tolerance = repro.info.scaled_tolerance;
  oc.threads = repro.info.threads;
  oc.limits.timeout_s = timeout_s;
  oc.work_dir = work.path();
  minify::Oracle oracle(oc);
  stop_cleanly_on_signals();
  int same = 0;
  std::string last;
  for (int i = 0; i < times; ++i) {
    const minify::Verdict v = oracle.run(repro.candidate);
    // A newer backend is what a repro is rerun against; it is said, not refused.
    if (i == 0 && !repro.info.backend_version.empty() && !v.backend_version.empty() &&
        v.backend_version != repro.info.backend_version) {
      std::cout << fmt::format("note: written with {} {}, rerun with {} {}\n", repro.info.backend,
                               repro.info.backend_version, repro.info.backend, v.backend_version);
    }
    if (minify::same_failure(repro.info.signature, v.signature)) {
      ++same;
    } else {
      last = v.signature.str();
    }
  }
  if (same == times) {
    std::cout << fmt::format("reproduced {}/{}: {} on {}\n", same, times,
                             repro.info.signature.str(), repro.info.backend);
    return bisect ? kExitFailed : kExitOk;
  }
  std::cout << fmt::format("not reproduced: {}/{} failed as {}; otherwise {}\n", same, times,
                           repro.info.signature.str(), last);
  // For bisection a commit that fails the same way at all has the bug (a flaky one too).
  if (bisect) return same > 0 ? kExitFailed : kExitOk;
  return kExitFailed;
}

}  // namespace crucible::cli
