// crucible run --counters cachegrind end to end: the real worker under the real Valgrind. Where
// the build can run under Valgrind (no AVX-512 in it) each timed backend gets instruction, D1 and
// LL counts for 3 calls; a native build on an AVX-512 host says why it cannot, in the result.
// Bad values of the flag are one line and exit 2.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "cli_util.h"

namespace crucible {
namespace {

namespace fs = std::filesystem;
using testing::query_text;
using testing::run_crucible;

// Whether this build's own code holds AVX-512 instructions Valgrind cannot decode.
bool build_has_avx512() {
  std::ifstream cpu("/proc/cpuinfo");
  std::string all((std::istreambuf_iterator<char>(cpu)), std::istreambuf_iterator<char>());
#ifdef CRUCIBLE_KERNEL_ARCH
  const std::string arch = CRUCIBLE_KERNEL_ARCH;
#else
  const std::string arch = "";
#endif
  return arch == "native" && all.find(" avx512f") != std::string::npos;
}

TEST(Counters, CachegrindCountsEachTimedBackendOrSaysWhyNot) {
  const fs::path dir = testing::fresh_test_dir("crucible_counters");
  const fs::path db = dir / "c.db";
  const auto r = run_crucible(
      "run --suite tutorial --only sin_cos --backends eager,codegen --mode "
      "performance --repeat 3 --counters cachegrind --output-dir " +
      (dir / "out").string() + " --db " + db.string());
#ifdef CRUCIBLE_SANITIZED
  // A sanitized build refuses up front: Valgrind cannot run the sanitizer's shadow memory.
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("cannot count a crucible built with -fsanitize="), std::string::npos)
      << r.err;
  EXPECT_FALSE(fs::exists(db));
  return;
#endif
  ASSERT_EQ(r.status, 0) << r.err;
  const std::string got =
      query_text(db,
                 "SELECT backend, length(sim_instructions) / 8, sim_instructions_median > 1000,"
                 " length(sim_d1_misses) / 8, length(sim_ll_misses) / 8, counters_unavailable LIKE"
                 " '%valgrind cannot decode this build''s instructions (AVX-512)%' FROM results"
                 " ORDER BY backend");
  // Per kernel: codegen's kernels are functions of their own, each counted inside the call;
  // eager's op names are no symbols.
  const std::string kernels = query_text(
      db,
      "SELECT x.backend, count(k.instructions), coalesce(max(k.instructions <="
      " x.sim_instructions_median), 1) FROM results x JOIN kernels k ON k.result_id = x.id"
      " GROUP BY x.backend ORDER BY x.backend");
  if (build_has_avx512()) {
    EXPECT_EQ(got, "codegen|||||1\neager|||||1\n");
    EXPECT_EQ(kernels, "codegen|0|1\neager|0|1\n");
  } else {
    EXPECT_EQ(got, "codegen|3|1|3|3|0\neager|3|1|3|3|0\n");
    EXPECT_EQ(kernels, "codegen|1|1\neager|0|1\n");  // sin_cos is one fused kernel
  }
  fs::remove_all(dir);
}

TEST(Counters, BadValuesAreOneLine) {
  auto r = run_crucible("run --suite tutorial --mode performance --counters perf");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("--counters must be cachegrind, got 'perf'"), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
#ifdef CRUCIBLE_SANITIZED
  // A sanitized build refuses the flag before anything else is said of it.
  const std::string no_mode = "cannot count a crucible built with -fsanitize=",
                    no_valgrind = no_mode;
#else
  const std::string no_mode = "--counters applies to timing: give --mode performance or both",
                    no_valgrind = "--counters cachegrind needs valgrind on PATH";
#endif
  // Counters follow a timing: an accuracy run would accept the flag and never count.
  r = run_crucible("run --suite tutorial --counters cachegrind");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find(no_mode), std::string::npos) << r.err;
  // Without Valgrind on PATH the run refuses to start rather than count nothing.
  r = run_crucible("run --suite tutorial --mode performance --counters cachegrind",
                   "PATH=/nonexistent");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find(no_valgrind), std::string::npos) << r.err;
}

}  // namespace
}  // namespace crucible
