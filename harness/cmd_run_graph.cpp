// `crucible run-graph FILE --backend B`: load a plugin, compile one .graph file, run it on seeded
// inputs and print each output's summary (and per-kernel timings with --profile).
#include <fmt/format.h>
#include <omp.h>

#include <chrono>
#include <iostream>

#include "cli.h"
#include "crucible/ir/text_format.h"
#include "plugin_loader.h"
#include "tensor_summary.h"

namespace crucible::cli {

int run_graph_command(const std::vector<std::string>& args) {
  po::options_description opts("run-graph options");
  std::string file, backend_name;
  uint64_t seed = 0;
  int threads = 0;
  std::vector<std::string> plugin_paths, config;
  opts.add_options()("graph", po::value(&file)->required(), "the .graph file to run")(
      "backend,b", po::value(&backend_name)->default_value("eager"),
      "backend name or plugin .so path")("seed", po::value(&seed)->default_value(0),
                                         "seed of the random inputs")(
      "threads,t", po::value(&threads)->default_value(0), "OpenMP threads (0: all cores)")(
      "profile", po::bool_switch(), "print per-kernel timings")(
      "plugin-path", po::value(&plugin_paths)->composing(),
      "extra plugin directories (also CRUCIBLE_PLUGIN_PATH)")(
      "config,c", po::value(&config)->composing(), "backend option key=value (repeatable)");
  po::positional_options_description pos;
  pos.add("graph", 1);
  po::variables_map vm;
  if (!parse("run-graph",
             "FILE [--backend eager] [--seed N] [--threads T] [--profile] [-c key=value]", opts,
             pos, args, vm)) {
    return kExitOk;
  }
  if (threads < 0) throw po::error("--threads must be >= 0");
  plugin::Options options;  // flags are checked before any work starts
  options.threads = threads;
  options.profile = vm["profile"].as<bool>();
  options.config = parse_config(config);

  Graph graph = load_graph_file(file);
  auto loaded = load_plugin(find_plugin(backend_name, plugin_search_path(plugin_paths)));
  if (threads > 0) omp_set_num_threads(threads);

  const auto info = loaded->backend().info();
  auto t0 = std::chrono::steady_clock::now();
  std::unique_ptr<plugin::Executable> exe;
  try {
    exe = loaded->backend().compile(graph, options);
  } catch (const plugin::CompileError& e) {
    std::cerr << fmt::format("crucible run-graph: {} failed to compile {}: {}\n", info.name, file,
                             e.what());
    return kExitFailed;
  }
  auto t1 = std::chrono::steady_clock::now();
  std::vector<Tensor> inputs = make_inputs(graph, seed);
  auto t2 = std::chrono::steady_clock::now();
  std::vector<Tensor> outputs = exe->run(inputs);
  auto t3 = std::chrono::steady_clock::now();

  auto ms = [](auto d) { return std::chrono::duration<double, std::milli>(d).count(); };
  std::cout << fmt::format(
      "graph {} ({}) on {} {}, seed {}, {} threads: compile {:.2f} ms, run {:.2f} ms\n",
      graph.name(), file, info.name, info.version, seed, omp_get_max_threads(), ms(t1 - t0),
      ms(t3 - t2));
  for (size_t i = 0; i < outputs.size(); ++i) {
    std::cout << fmt::format("  output {} %{}: {}\n", i, graph.value(graph.outputs()[i]).name,
                             summarize_tensor(outputs[i]));
  }
  if (options.profile) {
    auto stats = exe->profile();
    std::sort(stats.begin(), stats.end(),
              [](const auto& a, const auto& b) { return a.total_ns > b.total_ns; });
    std::cout << fmt::format("  {:<32} {:>8} {:>12}\n", "kernel", "calls", "total ms");
    for (const auto& s : stats) {
      std::cout << fmt::format("  {:<32} {:>8} {:>12.3f}\n", s.name, s.calls, s.total_ns / 1e6);
    }
  }
  return kExitOk;
}

}  // namespace crucible::cli
