// Throughput of fast_math.h's vectorized exp, tanh and erf (the functions eager and generated
// kernels share), one thread over an L1-resident block, in ns per element and elements per cycle.
#include <benchmark/benchmark.h>

#include <vector>

#include "crucible/core/fast_math.h"

namespace crucible::bench {
namespace {

// 4096 floats (16 KiB in, 16 KiB out) stay in L1, so the figure is the function's compute cost.
template <typename F>
void run_block(benchmark::State& state, F f, float lo, float hi) {
  constexpr int kN = 4096;
  std::vector<float> x(kN), y(kN);
  for (int i = 0; i < kN; ++i) x[i] = lo + (hi - lo) * static_cast<float>(i) / kN;
  const crucible_fast::Limits lim = crucible_fast::limits();
  for (auto _ : state) {
    float* out = y.data();
    const float* in = x.data();
#pragma omp simd
    for (int i = 0; i < kN; ++i) out[i] = f(in[i], lim);
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * kN);
  state.counters["ns_per_elem"] =
      benchmark::Counter(static_cast<double>(state.iterations()) * kN,
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

void BM_FastExp(benchmark::State& state) {
  run_block(
      state,
      [](float v, const crucible_fast::Limits& l) { return crucible_fast::exp_lim_f32(v, l); },
      -80.0f, 80.0f);
}
void BM_FastExpNonpos(benchmark::State& state) {
  run_block(
      state,
      [](float v, const crucible_fast::Limits& l) {
        return crucible_fast::exp_nonpos_lim_f32(v, l);
      },
      -80.0f, 0.0f);
}
void BM_FastTanh(benchmark::State& state) {
  run_block(
      state,
      [](float v, const crucible_fast::Limits& l) { return crucible_fast::tanh_lim_f32(v, l); },
      -6.0f, 6.0f);
}
void BM_FastErf(benchmark::State& state) {
  run_block(
      state,
      [](float v, const crucible_fast::Limits& l) { return crucible_fast::erf_lim_f32(v, l); },
      -6.0f, 6.0f);
}
BENCHMARK(BM_FastExp);
BENCHMARK(BM_FastExpNonpos);
BENCHMARK(BM_FastTanh);
BENCHMARK(BM_FastErf);

}  // namespace
}  // namespace crucible::bench
