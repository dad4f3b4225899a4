// Fused patterns, eager against codegen side by side in one benchmark: each iteration times both on
// the same inputs and reports both medians, the speed-up, the bytes each form must move, and each
// form's achieved bandwidth as a fraction of the STREAM triad measured earlier in this binary.
#include <benchmark/benchmark.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <vector>

#include "bounds.h"
#include "crucible/ir/text_format.h"
#include "crucible/plugin_loader.h"
#include "crucible/reports/records.h"
#include "stream_triad.h"

namespace crucible::bench {
namespace {

constexpr double kMiB = 1 << 20;

LoadedBackend& backend(const std::string& name) {
  static std::map<std::string, std::unique_ptr<LoadedBackend>> loaded;
  auto& slot = loaded[name];
  if (!slot) slot = load_plugin(find_plugin(name, plugin_search_path({})));
  return *slot;
}

// A fused pattern's graph from bench/patterns/, the files `crucible run --graph` times on every
// backend (the libtorch peer included) for the same table.
std::string pattern(const std::string& name) {
  std::ifstream in(std::string(CRUCIBLE_PATTERN_DIR) + "/" + name + ".graph");
  if (!in) throw std::runtime_error("no pattern " + name + " in " CRUCIBLE_PATTERN_DIR);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// A STREAM triad a = b + s*c over three float arrays holding `bytes` in all: the bandwidth a plain
// streaming loop reaches on the same footprint as a fused kernel, timed beside it from the same
// cold cache. On a VM whose shared cache holds tens of MiB and whose neighbours come and go, one
// triad measured at startup is neither the same cache regime nor the same moment.
class SameFootprintTriad {
 public:
  explicit SameFootprintTriad(double bytes)
      : n_(static_cast<int64_t>(bytes / (3 * sizeof(float)))), a_(n_), b_(n_, 1.0f), c_(n_, 2.0f) {}
  double bytes() const { return stream_triad_bytes<float>(n_); }
  void run() {
    float* a = a_.data();
    const float *b = b_.data(), *c = c_.data();
    const int64_t n = n_;
    stream_triad(a, b, c, 3.0f, n);
    benchmark::ClobberMemory();
  }

 private:
  int64_t n_;
  std::vector<float> a_, b_, c_;
};

// Times eager, codegen and a same-footprint triad in turn on `text`, each after evicting the
// caches; `fused_bytes` / `eager_bytes` are what each form must move per run (the fused kernel
// reads its inputs and writes its output once; eager reads and writes every intermediate), of
// which `written_bytes` the fused kernel stores; `flops` for compute-bound patterns.
void compare(benchmark::State& state, const std::string& text, double fused_bytes,
             double eager_bytes, double written_bytes, double flops = 0) {
  Graph g = parse_graph(text);
  auto in = make_inputs(g, 1);
  plugin::Options opts;
  auto eager = backend("eager").backend().compile(g, opts);
  auto codegen = backend("codegen").backend().compile(g, opts);
  for (int i = 0; i < 3; ++i) {  // warm caches, pages and the block cache
    eager->run(in);
    codegen->run(in);
  }
  std::optional<SameFootprintTriad> triad;
  if (fused_bytes > 0) triad.emplace(fused_bytes);
  std::vector<double> te, tc, tt;
  auto timed = [](auto&& body) {
    evict_caches();  // each form starts from DRAM, as the triad bound does
    auto t0 = std::chrono::steady_clock::now();
    body();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  for (auto _ : state) {
    te.push_back(timed([&] { benchmark::DoNotOptimize(eager->run(in)); }));
    tc.push_back(timed([&] { benchmark::DoNotOptimize(codegen->run(in)); }));
    if (triad) tt.push_back(timed([&] { triad->run(); }));
    state.SetIterationTime(tc.back());
  }
  const double me = reports::median(te), mc = reports::median(tc),
               stream = triad_bytes_per_second();
  state.counters["eager_ms"] = me * 1e3;
  state.counters["codegen_ms"] = mc * 1e3;
  state.counters["speedup"] = me / mc;
  if (fused_bytes > 0) {
    state.counters["fused_MiB"] = fused_bytes / kMiB;
    state.counters["eager_MiB"] = eager_bytes / kMiB;
    state.counters["bound_x"] = eager_bytes / fused_bytes;  // the speed-up memory traffic allows
    // The bound: the same-footprint triad's median, measured in the same iterations.
    const double triad_bw = triad->bytes() / reports::median(tt);
    state.counters["triad_GB/s"] = triad_bw / 1e9;
    state.counters["codegen_GB/s"] = fused_bytes / mc / 1e9;
    state.counters["codegen_of_triad"] = fused_bytes / mc / triad_bw;
    state.counters["eager_of_triad"] = eager_bytes / me / triad_bw;
    // Both count bytes as STREAM does, but a store to a line not in cache first reads it (write
    // allocate): the triad moves 4/3 of its count, a kernel (read + 2 x written) / read+written.
    // Their ratio caps of_triad for plain stores: 1 for two inputs and one output, 0.89 for one
    // and one (softmax, gelu).
    state.counters["cap_of_triad"] = (4.0 / 3.0) / ((fused_bytes + written_bytes) / fused_bytes);
    // Against STREAM's DRAM-sized triad (best pass, start of the binary) for reference.
    if (stream > 0) state.counters["codegen_of_stream"] = fused_bytes / mc / stream;
  }
  if (flops > 0) {
    state.counters["codegen_GFLOP/s"] = flops / mc / 1e9;
    state.counters["eager_GFLOP/s"] = flops / me / 1e9;
    if (peak_flops() > 0) state.counters["codegen_of_peak"] = flops / mc / peak_flops();
  }
}

void BM_Fused_AddAddMulAdd_16384x512(benchmark::State& state) {
  const double full = 16384.0 * 512 * 4;
  // eager: add(a0,a1) 2 passes, add(t0,a2) 3, mul 2, add 2 = 9 full tensors; fused: a0, a2, y = 3.
  compare(state, pattern("add_add_mul_add_16384x512"), 3 * full, 9 * full, full);
}
BENCHMARK(BM_Fused_AddAddMulAdd_16384x512)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->Iterations(150);

void BM_Fused_SoftmaxScaleMask_8192x1024(benchmark::State& state) {
  const double full = 8192.0 * 1024 * 4;
  // eager: mul 2, add 2, softmax 2 = 6 full tensors; fused: x, y = 2.
  compare(state, pattern("softmax_scale_mask_8192x1024"), 2 * full, 6 * full, full);
}
BENCHMARK(BM_Fused_SoftmaxScaleMask_8192x1024)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->Iterations(150);

void BM_Fused_LayerNormResidual_8192x1024(benchmark::State& state) {
  const double full = 8192.0 * 1024 * 4;
  // eager: add 3, layer_norm 2 = 5 full tensors; fused: x, residual, y = 3.
  compare(state, pattern("layer_norm_residual_8192x1024"), 3 * full, 5 * full, full);
}
BENCHMARK(BM_Fused_LayerNormResidual_8192x1024)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->Iterations(150);

void BM_Fused_GeluBias_8192x2048(benchmark::State& state) {
  const double full = 8192.0 * 2048 * 4;
  // eager: add 2, gelu 2 = 4 full tensors; fused: x, y = 2.
  compare(state, pattern("gelu_bias_8192x2048"), 2 * full, 4 * full, full);
}
BENCHMARK(BM_Fused_GeluBias_8192x2048)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->Iterations(150);

void BM_LinearBiasRelu_16384x512x512(benchmark::State& state) {
  compare(state, pattern("linear_bias_relu_16384x512x512"), 0, 0, 0, 2.0 * 16384 * 512 * 512);
}
BENCHMARK(BM_LinearBiasRelu_16384x512x512)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->Iterations(40);

void BM_BatchedMatmul_64x128x128(benchmark::State& state) {
  compare(state, pattern("batched_matmul_64x128x128"), 0, 0, 0, 2.0 * 64 * 128 * 128 * 128);
}
BENCHMARK(BM_BatchedMatmul_64x128x128)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->Iterations(40);

// A transformer-like stack of `blocks` blocks (about 12 nodes each after decomposition): linear
// with packed weights, bias, residual, layer norm, gelu, scaled softmax. Cold compile (fresh cache)
// of the whole graph, its kernels split across translation units compiled in parallel.
Graph transformer_like(int blocks) {
  Graph g("transformer_like");
  ValueId x = g.add_input("x", {DType::kF32, {64, 256}});
  for (int b = 0; b < blocks; ++b) {
    auto p = [&](const std::string& n, Shape s) {
      return g.add_param(fmt::format("{}{}", n, b), {DType::kF32, std::move(s)},
                         Initializer{"randn", {{"seed", int64_t{b}}, {"std", 0.05}}});
    };
    ValueId h = g.add_node("linear", {x, p("w", {256, 256})});
    h = g.add_node("add", {h, p("bias", {256})});
    h = g.add_node("add", {h, x});
    h = g.add_node("layer_norm", {h, p("lnw", {256}), p("lnb", {256})},
                   {{"normalized_shape", std::vector<int64_t>{256}}});
    h = g.add_node("gelu", {h});
    ValueId s = g.add_node("mul", {h, p("scale", {256})});
    s = g.add_node("softmax", {s}, {{"dim", int64_t{-1}}});
    x = g.add_node("add", {h, s});
  }
  g.set_outputs({x});
  return g;
}

void BM_ColdCompile_TransformerLike(benchmark::State& state) {
  const int blocks = static_cast<int>(state.range(0));
  Graph g = transformer_like(blocks);
  const auto dir =
      std::filesystem::temp_directory_path() / fmt::format("crucible_bench_cache_{}", ::getpid());
  for (auto _ : state) {
    std::filesystem::remove_all(dir);
    ::setenv("CRUCIBLE_CACHE_DIR", dir.c_str(), 1);
    auto t0 = std::chrono::steady_clock::now();
    auto exe = backend("codegen").backend().compile(g, {});
    state.SetIterationTime(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    benchmark::DoNotOptimize(exe.get());
  }
  ::unsetenv("CRUCIBLE_CACHE_DIR");
  std::filesystem::remove_all(dir);
  state.counters["graph_nodes"] = static_cast<double>(g.nodes().size());
}
BENCHMARK(BM_ColdCompile_TransformerLike)
    ->Arg(188)
    ->UseManualTime()
    ->Unit(benchmark::kSecond)
    ->Iterations(1);

}  // namespace
}  // namespace crucible::bench
