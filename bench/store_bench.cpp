// The store's speed: ingesting results with kernel rows (the bar: >= 100k kernel rows/s)
// and answering `history` for one series over a year of nightly runs (< 100 ms).
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <filesystem>

#include "crucible/reports/store.h"

namespace {

namespace fs = std::filesystem;
using namespace crucible::reports;

fs::path bench_db(const std::string& name) {
  const fs::path p = fs::temp_directory_path() / (name + std::to_string(::getpid()) + ".db");
  for (const char* suffix : {"", "-wal", "-shm"}) fs::remove(p.string() + suffix);
  return p;
}

// One result as a nightly performance run writes it: 20 samples and `kernels` kernel rows.
ResultRecord result(const std::string& model, const std::string& backend, int kernels, int n) {
  ResultRecord r = make_result("bench", model, backend, "performance", 8);
  r.status = Status::kPass;
  for (int i = 0; i < 20; ++i) r.samples_ms.push_back(1.0 + 0.001 * ((i + n) % 7));
  r.speedup = 1.5;
  for (int k = 0; k < kernels; ++k) {
    r.kernels.push_back({"cpp_fused_kernel_" + std::to_string(k), 20, 100000 + k, std::nullopt});
  }
  return r;
}

// Each result is its own transaction (synchronous=FULL): what a run does, crash-safe per result.
void BM_StoreIngestKernelRows(benchmark::State& state) {
  const fs::path db = bench_db("crucible_bench_ingest");
  auto store = Store::open(db);
  RunInfo info;
  info.suites = "bench";
  info.backends = "codegen";
  info.mode = "performance";
  const int64_t run = store->begin_run(info);
  const int kernels = static_cast<int>(state.range(0));
  int n = 0;
  for (auto _ : state) {
    ++n;
    store->add_result(run, result("m" + std::to_string(n), "codegen", kernels, n));
  }
  state.counters["kernel_rows/s"] = benchmark::Counter(
      static_cast<double>(state.iterations()) * kernels, benchmark::Counter::kIsRate);
  store.reset();
  for (const char* suffix : {"", "-wal", "-shm"}) fs::remove(db.string() + suffix);
}
BENCHMARK(BM_StoreIngestKernelRows)->Arg(100)->Arg(1000)->Unit(benchmark::kMillisecond);

// A year: 365 nightly runs x 20 models x 3 backends, 20 samples and 20 kernel rows per result.
void BM_HistoryOverAYear(benchmark::State& state) {
  const fs::path db = bench_db("crucible_bench_year");
  {
    auto store = Store::open(db);
    for (int night = 0; night < 365; ++night) {
      const int64_t run =
          store->begin_run(make_run_info("bench", "eager,codegen,other", "performance"));
      std::vector<ResultRecord> rs;
      for (int m = 0; m < 20; ++m) {
        for (const char* b : {"eager", "codegen", "other"}) {
          rs.push_back(result("model" + std::to_string(m), b, 20, night));
        }
      }
      store->add_results(run, rs);
      store->finish_run(run, "complete");
    }
  }
  auto store = Store::open_readonly(db);
  HistoryQuery q{"model7", "codegen", "", "speedup", ""};
  size_t rows = 0;
  for (auto _ : state) rows = store->history(q).rows.size();
  state.counters["rows"] = static_cast<double>(rows);
  store.reset();
  for (const char* suffix : {"", "-wal", "-shm"}) fs::remove(db.string() + suffix);
}
BENCHMARK(BM_HistoryOverAYear)->Unit(benchmark::kMillisecond)->Iterations(20);

}  // namespace
