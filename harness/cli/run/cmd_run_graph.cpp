// `crucible run-graph FILE --backend B`: checks the request, then runs the plugin in a worker child
// with a timeout, so a hang, crash or exit is one line and exit 1; prints the child's output.
#include <fmt/format.h>
#include <signal.h>
#include <stdlib.h>

#include <atomic>
#include <fstream>
#include <iostream>

#include "cli.h"
#include "crucible/core/quote.h"
#include "crucible/ir/text_format.h"
#include "crucible/plugin_file.h"
#include "crucible/plugin_loader.h"
#include "environment.h"
#include "job_outcome.h"
#include "load_env_choice.h"
#include "subprocess.h"
#include "temp_dir.h"
#include "worker.h"
#include "worker_launch.h"
#include "worker_report.h"

namespace crucible::cli {

namespace fs = std::filesystem;

namespace {

std::atomic<bool> g_interrupted{false};

void on_signal(int) {
  g_interrupted = true;
  kill_running_children();
}

// Where the child was, from the last phase its report names.
std::string when(const WorkerReport& report, const std::string& graph_file) {
  const std::string& p = report.phase;
  const std::string file = escape_controls(graph_file);
  if (p.empty()) return "while starting";
  if (p == "load") return "while loading the plugin";
  if (p == "compile") return fmt::format("while compiling {}", file);
  if (p == "run") return fmt::format("while running {}", file);
  if (p == "profile") return "while reading its profile";
  if (p == "unload") return "after its result, while unloading";
  return fmt::format("during {}", escape_controls(p));
}

// What the child's end means for run-graph: a timeout, crash or early exit said in one line
// (exit 1); otherwise the plugin's own output and run-graph's result, as in-process.
int relay_child(const WorkerReport& report, const ChildOutcome& outcome, const fs::path& log,
                const std::string& backend_name, const std::string& file, double timeout_s) {
  const std::string backend = escape_controls(backend_name);
  const std::string tail = log_tail(log);
  const std::string detail = tail.empty() ? "" : ": " + tail;
  if (outcome.timed_out) {
    std::cerr << fmt::format("crucible run-graph: {} timed out after {} s {} (--timeout){}\n",
                             backend, timeout_s, when(report, file), detail);
    return kExitFailed;
  }
  if (!outcome.exited) {
    std::cerr << fmt::format("crucible run-graph: {} crashed with {} {}{}\n", backend,
                             signal_name(outcome.signal), when(report, file), detail);
    return kExitFailed;
  }
  if (!report.reply) {
    std::cerr << fmt::format(
        "crucible run-graph: {} ended the process with exit status {} {}, before run-graph had "
        "its result{}\n",
        backend, outcome.exit_code, when(report, file), detail);
    return kExitFailed;
  }
  if (outcome.exit_code != report.reply->exit_code) {
    std::cerr << fmt::format(
        "crucible run-graph: {} ended the process with exit status {} {} (run-graph's status "
        "was {}){}\n",
        backend, outcome.exit_code, when(report, file), report.reply->exit_code, detail);
    return kExitFailed;
  }
  // The plugin's own output (warnings, debug prints), as it would have appeared in-process.
  if (std::ifstream in(log, std::ios::binary); in && in.peek() != EOF) std::cerr << in.rdbuf();
  std::cerr << report.reply->err;
  std::cout << report.reply->out;
  return report.reply->exit_code;
}

}  // namespace

int run_graph_command(const std::vector<std::string>& args) {
  po::options_description opts("run-graph options");
  std::string file, backend_name;
  uint64_t seed = 0;
  int threads = 0;
  double timeout_s = 600;
  std::vector<std::string> plugin_paths, config, backend_env;
  opts.add_options()("graph", po::value(&file)->required(), "the .graph file to run")(
      "backend,b", po::value(&backend_name)->default_value("eager"),
      "backend name or plugin .so path")("seed", po::value(&seed)->default_value(0),
                                         "seed of the random inputs")(
      "threads,t", po::value(&threads)->default_value(0), "OpenMP threads (0: all cores)")(
      "profile", po::bool_switch(), "print per-kernel timings")(
      "timeout", po::value(&timeout_s)->default_value(600),
      "seconds the backend may take to load, compile and run before it is killed (exit 1)")(
      "plugin-path", po::value(&plugin_paths)->composing(),
      "extra plugin directories (also CRUCIBLE_PLUGIN_PATH)")(
      "config,c", po::value(&config)->composing(), "backend option key=value (repeatable)")(
      "backend-env", po::value(&backend_env)->composing(),
      "BACKEND:KEY=VALUE sets, BACKEND:-KEY unsets, a variable while the worker loads the "
      "backend's plugin (as crucible run's); a load-time environment the backend declares "
      "(the libtorch peers' -c blas_core=auto|NAME) is chosen as a run chooses it");
  po::positional_options_description pos;
  pos.add("graph", 1);
  po::variables_map vm;
  if (!parse("run-graph",
             "FILE [--backend eager] [--seed N] [--threads T] [--profile] [--timeout S] "
             "[-c key=value] [--backend-env BACKEND:KEY=VALUE]",
             opts, pos, args, vm)) {
    return kExitOk;
  }
  if (threads < 0) throw po::error("--threads must be >= 0");
  if (!(timeout_s > 0)) throw po::error("--timeout must be positive");

  // Everything that needs no plugin code is checked here, so bad input is exit 2 before any child.
  WorkerJob job;
  job.job = "run-graph";
  job.config = parse_config(config);
  job.profile = vm["profile"].as<bool>();
  Graph graph = load_graph_file(file);
  check_side_files(graph);  // a missing or short side file is bad input (exit 2), not a backend's
  const fs::path plugin = find_plugin(backend_name, plugin_search_path(plugin_paths));
  validate_plugin_file(plugin);
  job.graph = file;
  job.model = graph.name();
  job.backends = {plugin.string()};
  job.seed = seed;
  job.threads = threads;
  RunConfig peer;  // what asking the backend and choosing its load-time environment need
  peer.config = job.config;
  peer.backend_env[plugin.string()] = one_backend_env(backend_env, backend_name);
  peer.threads = threads;
  peer.seed = seed;
  peer.plugin_paths = plugin_paths;
  peer.timeout_s = timeout_s;
  peer.backends = job.backends;
  // A backend that cannot run here or refuses its -c options is exit 2 before the graph's worker.
  const Declarations declared = ask_backends(peer);

  TempDir tmp("crucible_run_graph_");
  job.report = (tmp.path() / "report").string();
  const fs::path log = tmp.path() / "log";
  ChildLimits limits;
  limits.timeout_s = timeout_s;
  limits.no_privileges = true;  // its worker loads the plugin
  std::map<std::string, std::string> env;
  allow_worker_writes(job, env, limits);

  struct sigaction sa {
  }, old_int{}, old_term{};
  sa.sa_handler = on_signal;
  sigaction(SIGINT, &sa, &old_int);
  sigaction(SIGTERM, &sa, &old_term);
  bind_worker_threads();
  // Bound as the worker will be; the probe's workers are children the signals above kill too.
  // The choice is not printed: the version run-graph prints ends with it.
  job.backend_env[plugin.string()] = choose_backend_load_env(plugin.string(), peer, declared);
  std::vector<std::string> argv{self_executable().string()};
  for (auto& a : job.to_args()) argv.push_back(a);
  const ChildOutcome outcome = g_interrupted ? ChildOutcome{} : run_child(argv, env, log, limits);
  sigaction(SIGINT, &old_int, nullptr);
  sigaction(SIGTERM, &old_term, nullptr);
  if (g_interrupted) {
    std::cerr << "crucible run-graph: interrupted\n";
    return 130;
  }

  return relay_child(read_report(job.report), outcome, log, backend_name, file, timeout_s);
}

}  // namespace crucible::cli
