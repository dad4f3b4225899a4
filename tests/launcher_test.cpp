// The CPU launcher: core lists, a two-instance plan and its --dry-run text, the fallbacks on a
// one-node machine without numactl, and the settings that must stop rather than be substituted.
#include "launcher.h"

#include <gtest/gtest.h>

#include "cli_util.h"
#include "crucible/core/error.h"

namespace crucible {
namespace {

LaunchHost host_with(std::vector<int> cores, std::string numactl = "/usr/bin/numactl") {
  LaunchHost h;
  h.online_cores = std::move(cores);
  h.numa_nodes = {0};
  h.numactl = std::move(numactl);
  h.libraries = {{"jemalloc", "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2"},
                 {"tcmalloc", ""},
                 {"intel", ""},
                 {"llvm", "/usr/lib/x86_64-linux-gnu/libomp.so.5"}};
  return h;
}

TEST(Launcher, CoreLists) {
  EXPECT_EQ(parse_core_list("0-3,8,10-11"), (std::vector<int>{0, 1, 2, 3, 8, 10, 11}));
  EXPECT_EQ(format_core_list({0, 1, 2, 3, 8, 10, 11}), "0-3,8,10-11");
  for (const char* bad : {"", "a", "3-1", "1,,2", "-1", "1-"})
    EXPECT_THROW(parse_core_list(bad), Error) << bad;
}

TEST(Launcher, TwoInstancePlanBindsDisjointCoresWithTheirSettings) {
  LaunchOptions o;
  o.ninstances = 2;
  o.membind = 0;
  o.omp_runtime = "llvm";
  o.allocator = "jemalloc";
  o.kmp_blocktime = 1;
  auto plan = plan_launch(o, host_with({0, 1, 2, 3}), "/opt/crucible/bin/crucible",
                          {"--suite", "tutorial"});
  ASSERT_EQ(plan.instances.size(), 2u);
  EXPECT_TRUE(plan.notes.empty());
  EXPECT_EQ(
      describe_instance(plan.instances[0]),
      "CRUCIBLE_INSTANCE=0/2 CRUCIBLE_LAUNCHED=1 "
      "CRUCIBLE_LAUNCHER='cores=0-1 membind=0 instance=0/2 omp=llvm allocator=jemalloc' "
      "KMP_AFFINITY=granularity=fine,compact,1,0 KMP_BLOCKTIME=1 "
      "LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libomp.so.5:/usr/lib/x86_64-linux-gnu/libjemalloc.so.2 "
      "MALLOC_CONF=oversize_threshold:1,background_thread:true,metadata_thp:auto,dirty_decay_ms:-1,"
      "muzzy_decay_ms:-1 OMP_NUM_THREADS=2 "
      "/usr/bin/numactl -C 0-1 -m 0 /opt/crucible/bin/crucible run --suite tutorial");
  EXPECT_EQ(plan.instances[1].cores, (std::vector<int>{2, 3}));
  EXPECT_EQ(plan.instances[1].argv[2], "2-3");
}

TEST(Launcher, MissingNodeAndNumactlFallBackOutLoud) {
  LaunchOptions o;
  o.membind = 1;
  o.cores = "1";
  auto plan = plan_launch(o, host_with({0, 1}, ""), "/c", {});
  ASSERT_EQ(plan.notes.size(), 2u);
  EXPECT_EQ(plan.notes[0],
            "launcher: NUMA node 1 does not exist (this machine has 1 node(s): 0); running without "
            "memory binding");
  EXPECT_EQ(plan.notes[1],
            "launcher: numactl not found (apt-get install numactl); binding cores with "
            "sched_setaffinity instead");
  EXPECT_EQ(plan.instances[0].env.at("CRUCIBLE_AFFINITY"), "1");
  EXPECT_EQ(plan.instances[0].argv[0], "/c");
}

TEST(Launcher, MissingAllocatorOrRuntimeStops) {
  LaunchOptions o;
  o.allocator = "tcmalloc";
  try {
    plan_launch(o, host_with({0, 1}), "/c", {});
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_STREQ(
        e.what(),
        "launcher: allocator 'tcmalloc' requested but it is not installed (apt-get install "
        "libgoogle-perftools4)");
  }
  LaunchOptions rt;
  rt.omp_runtime = "intel";
  EXPECT_THROW(plan_launch(rt, host_with({0, 1}), "/c", {}), Error);
  LaunchOptions kmp;
  kmp.kmp_blocktime = 0;  // meaningless for GNU OpenMP: refuse rather than ignore
  EXPECT_THROW(plan_launch(kmp, host_with({0, 1}), "/c", {}), Error);
  LaunchOptions too_many;
  too_many.ninstances = 3;
  EXPECT_THROW(plan_launch(too_many, host_with({0, 1}), "/c", {}), Error);
  LaunchOptions bad_core;
  bad_core.cores = "5";
  EXPECT_THROW(plan_launch(bad_core, host_with({0, 1}), "/c", {}), Error);
}

TEST(Launcher, DryRunThroughTheCliOnThisMachine) {
  auto r = testing::run_crucible(
      "run --suite tutorial --ninstances 2 --membind 1 --dry-run --mode performance --repeat 3");
  ASSERT_EQ(r.status, 0) << r.err;
  // Two instances, one core each, the run's own flags kept and the launcher's removed.
  EXPECT_EQ(testing::count_lines(r.out), 2) << r.out;
  EXPECT_NE(r.out.find("instance 0: "), std::string::npos);
  EXPECT_NE(r.out.find("instance 1: "), std::string::npos);
  EXPECT_NE(r.out.find("OMP_NUM_THREADS=1 "), std::string::npos);
  EXPECT_NE(r.out.find(" run --suite tutorial --mode performance --repeat 3"), std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find("--ninstances"), std::string::npos);
  EXPECT_EQ(r.out.find("--dry-run"), std::string::npos);
  // This VM has one NUMA node: the fallback is said in one line.
  EXPECT_NE(r.err.find("launcher: NUMA node 1 does not exist"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace crucible
