// What starting a worker costs, and what of it its confinement adds: a child that runs /bin/true
// as any child, and as a worker (no privileges, in a sandbox writing one folder).
#include <benchmark/benchmark.h>

#include "landlock_sandbox.h"
#include "subprocess.h"
#include "temp_dir.h"

namespace {

using namespace crucible;

// Arg 0: a plain child; 1: a worker's confinement (privileges.h, landlock_sandbox.h).
void BM_WorkerStart(benchmark::State& state) {
  const TempDir dir("crucible_bench_start_");
  ChildLimits limits;
  limits.no_privileges = state.range(0) == 1;
  if (limits.no_privileges) limits.writable = {dir.path()};
  for (auto _ : state) {
    const ChildOutcome o = run_child({"/bin/true"}, {}, dir.path() / "log", limits);
    if (!o.exited || o.exit_code != 0) state.SkipWithError("/bin/true failed");
  }
  state.counters["landlock_abi"] = sandbox_support().abi;
}
BENCHMARK(BM_WorkerStart)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);

}  // namespace
