// crucible_difffuzz: random graphs on eager and codegen, every disagreement reported with the
// graph that shows it. The nightly runs --long; CI runs a fixed-seed slice as a test.
#include <fmt/format.h>

#include <boost/program_options.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>

#include "crucible/ir/text_format.h"
#include "differential.h"

namespace po = boost::program_options;
using namespace crucible;

int main(int argc, char** argv) {
  int64_t graphs = 200, first_seed = 1, unfused_every = 4, shard = 0, shards = 1;
  int max_nodes = 10;
  std::string out_dir, backend = "codegen";
  po::options_description opts(
      "crucible_difffuzz: random graphs over the whole op set, eager against a backend\noptions");
  opts.add_options()("help,h", "this help")("graphs,n", po::value(&graphs)->default_value(graphs),
                                            "graphs to generate")(
      "seed", po::value(&first_seed)->default_value(first_seed), "seed of the first graph")(
      "long", "nightly mode: 5000 graphs of up to 16 nodes")(
      "max-nodes", po::value(&max_nodes)->default_value(max_nodes), "nodes per graph, at most")(
      "backend", po::value(&backend)->default_value(backend),
      "the backend checked against eager: codegen or libtorch (or any plugin)")(
      "unfused-every", po::value(&unfused_every)->default_value(unfused_every),
      "also run the backend's second configuration on every k-th graph (codegen: -c "
      "fusion=off; libtorch: -c mode=jit; 0: never)")("shard", po::value(&shard)->default_value(0),
                                                      "run graphs i with i % shards == shard")(
      "shards", po::value(&shards)->default_value(1), "number of shards")(
      "out,o", po::value(&out_dir),
      "write each failing graph here as seed_<S>.graph (rejected_<S>.graph when eager rejects it)");
  po::variables_map vm;
  try {
    po::store(po::parse_command_line(argc, argv, opts), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    std::cerr << "crucible_difffuzz: " << e.what() << "\n";
    return 2;
  }
  if (vm.count("help")) {
    std::cout << opts << "\n";
    return 0;
  }
  if (vm.count("long")) {
    if (vm["graphs"].defaulted()) graphs = 5000;
    if (vm["max-nodes"].defaulted()) max_nodes = 16;
  }
  if (graphs < 0 || shards < 1 || shard < 0 || shard >= shards || max_nodes < 1) {
    std::cerr << "crucible_difffuzz: --graphs >= 0, --max-nodes >= 1, 0 <= --shard < --shards\n";
    return 2;
  }
  fuzz::GenOptions gen;
  gen.max_nodes = max_nodes;
  gen.min_nodes = std::min(gen.min_nodes, max_nodes);
  std::unique_ptr<fuzz::Differential> loaded;
  try {
    loaded = std::make_unique<fuzz::Differential>(backend);
  } catch (const Error& e) {
    std::cerr << "crucible_difffuzz: " << e.what() << "\n";
    return 2;
  }
  fuzz::Differential& diff = *loaded;
  const auto t0 = std::chrono::steady_clock::now();
  int64_t ran = 0, invalid = 0, failed = 0, nodes = 0, flips = 0, amplified = 0;
  for (int64_t i = 0; i < graphs; ++i) {
    if (i % shards != shard) continue;
    const uint64_t seed = static_cast<uint64_t>(first_seed + i);
    const Graph g = fuzz::random_graph(seed, gen);
    nodes += static_cast<int64_t>(g.nodes().size());
    const fuzz::Verdict v = diff.check(g, seed, unfused_every > 0 && i % unfused_every == 0, gen);
    ++ran;
    flips += v.rounding_flips;
    amplified += v.amplified;
    if (!v.valid) {  // not a finding, but never silent: the generator may have a gap to close
      ++invalid;
      std::cout << fmt::format("seed {}: rejected by eager: {}\n", seed, v.why_invalid);
      if (!out_dir.empty()) {
        std::filesystem::create_directories(out_dir);
        std::ofstream(std::filesystem::path(out_dir) / fmt::format("rejected_{}.graph", seed))
            << print_graph(g);
      }
      continue;
    }
    if (!v.mismatches.empty()) {
      ++failed;
      std::cout << fmt::format("seed {}: MISMATCH\n", seed);
      for (const std::string& m : v.mismatches) std::cout << "  " << m << "\n";
      if (!out_dir.empty()) {
        std::filesystem::create_directories(out_dir);
        std::ofstream(std::filesystem::path(out_dir) / fmt::format("seed_{}.graph", seed))
            << print_graph(g);
      } else {
        std::cout << print_graph(g);
      }
    }
    if (ran % 100 == 0) {
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      std::cerr << fmt::format("{} graphs, {} mismatching, {:.0f} s\n", ran, failed, s);
    }
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::cout << fmt::format(
      "{} graphs ({} nodes), {} rejected by eager, {} mismatching; not counted as mismatches: {} "
      "integer elements flipped by float rounding, {} runs whose output differences are rounding "
      "amplified downstream (every node agrees with eager's kernel on codegen's operands); {:.1f} "
      "s\n",
      ran, nodes, invalid, failed, flips, amplified, s);
  return failed > 0 ? 1 : 0;
}
