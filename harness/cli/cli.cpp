// Subcommand table and shared option parsing for the crucible CLI.
#include "cli.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <iostream>

#include "crucible/plugin_api.h"
#include "environment.h"
#include "memory_cgroup.h"

namespace crucible::cli {

const std::vector<Command>& commands() {
  static const std::vector<Command> kCommands = {
      {"run", "run model suites on backends in isolated workers and record the results",
       run_command},
      {"calibrate",
       "A/A runs of one build: per model, the CV of time and instructions and the speed-up spread",
       calibrate_command},
      {"minify", "reduce a graph a backend fails on to a small repro that fails the same way",
       minify_command},
      {"repro", "rerun a repro written by minify and say whether it still fails the same way",
       repro_command},
      {"bisect", "find the commit that introduced a failure or slowdown (git bisect run)",
       bisect_command},
      {"runs", "list the store's newest runs", runs_command},
      {"results", "one run's results, each failure's reason under its row", results_command},
      {"history", "one model's metric on one backend over the store's runs", history_command},
      {"kernels", "a result's kernel timings, slowest first", kernels_command},
      {"compare", "two runs side by side: statuses, changes with confidence, kernels",
       compare_command},
      {"regressions", "changes the detector finds in the store's history (exit 1: a regression)",
       regressions_command},
      {"query", "run one read-only SQL statement on the store", query_command},
      {"report", "write a static HTML dashboard of the store", report_command},
      {"db", "merge shard databases into one, check a store for lost runs, or migrate an older one",
       db_command},
      {"check-expected", "judge a run's accuracy against each suite's expected statuses",
       check_expected_command},
      {"export-results", "write a stored run as CSV, Google Benchmark JSON, JUnit or a trace",
       export_results_command},
      {"import", "import an ONNX model as a .graph file with its weights beside it",
       import_command},
      {"run-graph", "run one .graph file on a backend and print its outputs", run_graph_command},
      {"list", "list registered ops or available backend plugins", list_command},
      {"models", "list models with parameter counts, nodes and FLOPs", models_command},
      {"export", "write a built-in model as a .graph file", export_command},
      {"worker", "(internal) one isolated job of a run", worker_command},
      {"bisect-step", "(internal) build and judge one commit for crucible bisect",
       bisect_step_command},
  };
  return kCommands;
}

std::string version_text() {
  const std::string commit = source_commit();
  return fmt::format(
      "crucible {}\ncommit {}\nplugin ABI {}\nbuilt by {} with -march={}\n", CRUCIBLE_VERSION,
      commit.empty() ? "unknown (the source tree is not a git checkout here)" : commit,
      CRUCIBLE_PLUGIN_ABI_VERSION,
#if defined(__clang__)
      "clang " __clang_version__,
#elif defined(__GNUC__)
      "GCC " __VERSION__,
#else
      "an unknown compiler",
#endif
      CRUCIBLE_BUILT_ARCH);
}

std::string memory_limit_help(const std::string& who) {
  return fmt::format(
      "MB per {0} (0: none, -1: 80% of RAM): the resident memory (RSS, page cache, kernel "
      "memory) of the {0} and the compilers it starts, in a memory cgroup of its own with swap "
      "off, the {0} ending as oom when the kernel's OOM killer acts; where no cgroup can be made, "
      "the address space (RLIMIT_AS) of each process instead. At least 64 (128 under RLIMIT_AS)",
      who);
}

int64_t checked_memory_limit(int64_t mb) {
  if (mb < -1) throw po::error("--memory-limit must be -1, 0 or a size in MB");
  if (mb == -1) {
    // A runaway worker should fail alone, not push the whole machine into swap or the OOM killer.
    mb = static_cast<int64_t>(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGESIZE) / (1 << 20) * 8 / 10;
  }
  if (mb > 0) {
    const MemoryLimitKind kind = memory_limit_support().kind;
#ifdef CRUCIBLE_SANITIZED
    // The sanitizer reserves terabytes of address space at start: no RLIMIT_AS fits beside it.
    if (kind == MemoryLimitKind::kAddressSpace) {
      throw po::error(fmt::format(
          "--memory-limit needs a memory cgroup in a crucible built with -fsanitize={} (the "
          "address-space fallback cannot hold its shadow memory), and none can be made here: {}",
          CRUCIBLE_SANITIZED, memory_limit_support().why_not));
    }
#endif
    const int64_t floor = memory_limit_floor_mb(kind);
    if (mb < floor) {
      throw po::error(fmt::format(
          "--memory-limit {} MB is below the {} MB a worker needs to start and compile here "
          "(the limit is on {}); give at least {}, or 0 for no limit",
          mb, floor, describe(kind), floor));
    }
  }
  return mb;
}

bool parse(const std::string& command, const std::string& usage,
           const po::options_description& options,
           const po::positional_options_description& positional,
           const std::vector<std::string>& args, po::variables_map& vm) {
  po::options_description all;
  all.add_options()("help,h", "show this help");
  all.add(options);
  // No guessing: `--back` must not quietly mean --backends (or --backend).
  po::store(
      po::command_line_parser(args)
          .options(all)
          .positional(positional)
          .style(po::command_line_style::default_style & ~po::command_line_style::allow_guessing)
          .run(),
      vm);
  if (vm.count("help")) {
    std::cout << fmt::format("usage: crucible {} {}\n\n", command, usage) << all << "\n";
    return false;
  }
  po::notify(vm);
  return true;
}

std::vector<std::string> split_commas(const std::vector<std::string>& items) {
  std::vector<std::string> out;
  for (const auto& item : items) {
    size_t start = 0;
    while (start <= item.size()) {
      const size_t comma = std::min(item.find(',', start), item.size());
      if (comma > start) out.push_back(item.substr(start, comma - start));
      start = comma + 1;
    }
  }
  return out;
}

std::map<std::string, std::string> parse_config(const std::vector<std::string>& pairs) {
  std::map<std::string, std::string> out;
  for (const std::string& p : pairs) {
    size_t eq = p.find('=');
    if (eq == std::string::npos || eq == 0) {
      throw po::error(fmt::format("-c expects key=value, got '{}'", p));
    }
    const size_t colon = p.find(':');
    if (colon < eq && (colon == 0 || colon + 1 == eq)) {
      throw po::error(fmt::format("-c expects BACKEND:key=value, got '{}'", p));
    }
    out[p.substr(0, eq)] = p.substr(eq + 1);
  }
  return out;
}

BackendEnv parsed_backend_env(const std::vector<std::string>& specs) {
  try {
    return parse_backend_env(specs);
  } catch (const Error& e) {
    throw po::error(e.what());
  }
}

EnvChanges one_backend_env(const std::vector<std::string>& specs, const std::string& backend) {
  const BackendEnv env = parsed_backend_env(specs);
  for (const auto& [name, changes] : env) {
    if (name != backend)
      throw po::error(fmt::format("--backend-env {}:{}: backend '{}' is not --backend {}", name,
                                  describe_env(changes), name, backend));
  }
  return env.empty() ? EnvChanges{} : env.begin()->second;
}

}  // namespace crucible::cli
