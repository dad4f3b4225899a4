// The eager plugin end to end through the real loader: tutorial graphs run and match hand
// computations, profiling names kernels per op kind, intermediates expose every node's value.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>

#include "cli_util.h"
#include "crucible/core/block_cache.h"
#include "crucible/ir/text_format.h"
#include "crucible/ir/transforms.h"
#include "crucible/plugin_loader.h"
#include "test_util.h"

namespace crucible {
namespace {

using testing::ExpectTensor;
using testing::T;

std::unique_ptr<LoadedBackend> eager() {
  return load_plugin(find_plugin("eager", plugin_search_path({})));
}

const char* kFoo1 =
    "graph foo1(%x1: u8[1,3], %x2: u8[2,3]) {\n"
    "  %a = neg(%x1)\n"
    "  %b = maximum(%x2, %a)\n"
    "  %y = cat(%b, dim=0)\n"
    "  return %y\n"
    "}\n";

TEST(EagerBackend, RunsTheTutorialGraphWithU8WrapAround) {
  auto be = eager();
  Graph g = parse_graph(kFoo1);
  auto exe = be->backend().compile(g, {});
  std::vector<Tensor> in{T(DType::kU8, {1, 3}, {0, 1, 200}),
                         T(DType::kU8, {2, 3}, {10, 254, 50, 0, 255, 57})};
  auto out = exe->run(in);
  ASSERT_EQ(out.size(), 1u);
  // neg in u8: 0 -> 0, 1 -> 255, 200 -> 56.
  ExpectTensor(out[0], DType::kU8, {2, 3}, {10, 255, 56, 0, 255, 57});
}

TEST(EagerBackend, ProfileCountsCallsPerOpKindOnlyWhenAsked) {
  auto be = eager();
  Graph g = parse_graph(
      "graph p(%x: f32[4,4]) {\n  %a = add(%x, %x)\n  %b = add(%a, %x)\n  %c = mul(%b, %a)\n  "
      "return %c\n}\n");
  plugin::Options opts;
  opts.profile = true;
  auto exe = be->backend().compile(g, opts);
  auto in = make_inputs(g, 1);
  exe->run(in);
  exe->run(in);
  auto stats = exe->profile();
  ASSERT_EQ(stats.size(), 2u);
  for (const auto& s : stats) {
    if (s.name == "eager::add") {
      EXPECT_EQ(s.calls, 4);
    } else {
      EXPECT_EQ(s.name, "eager::mul");
      EXPECT_EQ(s.calls, 2);
    }
    EXPECT_GT(s.total_ns, 0);
  }
  auto quiet = be->backend().compile(g, {});
  quiet->run(in);
  EXPECT_TRUE(quiet->profile().empty());
}

TEST(EagerBackend, IntermediatesReturnEveryNodeValue) {
  auto be = eager();
  Graph g = parse_graph(kFoo1);
  auto exe = be->backend().compile(g, {});
  std::vector<Tensor> in{T(DType::kU8, {1, 3}, {0, 1, 200}),
                         T(DType::kU8, {2, 3}, {10, 254, 50, 0, 255, 57})};
  std::vector<ValueId> ids{*g.find_value("a"), *g.find_value("b")};
  auto vals = exe->intermediates(in, ids);
  ASSERT_EQ(vals.size(), 2u);
  ExpectTensor(vals[0], DType::kU8, {1, 3}, {0, 255, 56});
  ExpectTensor(vals[1], DType::kU8, {2, 3}, {10, 255, 56, 0, 255, 57});
  std::vector<ValueId> bad{12345};
  EXPECT_THROW(exe->intermediates(in, bad), Error);
}

TEST(EagerBackend, ParametersComeFromTheirInitializers) {
  auto be = eager();
  Graph g = parse_graph(
      "graph p(%x: f32[2]) {\n  param %w: f32[2] = full(value=2.5)\n  %y = mul(%x, %w)\n  return "
      "%y\n}\n");
  auto exe = be->backend().compile(g, {});
  std::vector<Tensor> in{T(DType::kF32, {2}, {1, -2})};
  ExpectTensor(exe->run(in)[0], DType::kF32, {2}, {2.5, -5});
}

TEST(EagerBackend, WrongInputsAreErrorsNotCrashes) {
  auto be = eager();
  Graph g = parse_graph(kFoo1);
  auto exe = be->backend().compile(g, {});
  std::vector<Tensor> one{T(DType::kU8, {1, 3}, {0, 1, 2})};
  EXPECT_THROW(exe->run(one), Error);
  std::vector<Tensor> wrong{T(DType::kF32, {1, 3}, {0, 1, 2}),
                            T(DType::kU8, {2, 3}, {0, 0, 0, 0, 0, 0})};
  try {
    exe->run(wrong);
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "input %x1 must be u8[1,3], got f32[1,3]");
  }
}

TEST(EagerBackend, UnknownConfigKeyIsACompileError) {
  auto be = eager();
  plugin::Options opts;
  opts.config["fusion"] = "off";
  EXPECT_THROW(be->backend().compile(parse_graph(kFoo1), opts), plugin::CompileError);
}

TEST(EagerBackend, ResultsAreIdenticalAcrossThreadCounts) {
  auto be = eager();
  Graph g =
      load_graph_file(std::string(CRUCIBLE_SOURCE_DIR) + "/suites/tutorial/add_add_mul_add.graph");
  auto in = make_inputs(g, 0);
  plugin::Options one, two;
  one.threads = 1;
  two.threads = 2;
  Tensor a = be->backend().compile(g, one)->run(in)[0];
  Tensor b = be->backend().compile(g, two)->run(in)[0];
  ASSERT_EQ(a.nbytes(), b.nbytes());
  EXPECT_EQ(0, std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()));
}

// The fp64 reference graph computes every float in f64: explicit casts to bf16/f32 and float
// constants become f64 as well, so they meet the widened parameters (a bf16 cast feeding a linear
// with a widened weight made the reference fail: "operand dtypes differ (bf16 and f64)").
TEST(EagerBackend, Fp64ReferenceWidensCastsAndConstantsToo) {
  const Graph g = parse_graph(
      "graph w(%x: f32[3,4]) {\n  param %w: bf16[5,4] = randn(seed=1)\n"
      "  %c = cast(%x, dtype=bf16)\n  %l = linear(%c, %w)\n"
      "  %k = full(shape=[5], value=0.5, dtype=f32)\n  %f = cast(%l, dtype=f32)\n"
      "  %y = add(%f, %k)\n  %i = cast(%y, dtype=i32)\n  return %y, %i\n}\n");
  const Graph w = widen_to_f64(g);
  for (const Value& v : w.values()) {
    EXPECT_TRUE(!is_floating(v.type.dtype) || v.type.dtype == DType::kF64) << v.name;
  }
  EXPECT_EQ(w.value(w.outputs()[1]).type.dtype, DType::kI32);  // integer casts stay
  auto eager = load_plugin(find_plugin("eager", plugin_search_path({})));
  const auto in = make_inputs(g, 1);
  const auto ref = eager->backend().compile(w, {})->run(widen_inputs_to_f64(in));
  const auto got = eager->backend().compile(g, {})->run(in);
  for (int64_t i = 0; i < got[0].numel(); ++i) EXPECT_NEAR(got[0].get(i), ref[0].get(i), 0.05);
}

TEST(BlockCache, ReusesFreedLargeBlocks) {
  block_cache_clear();
  void* first;
  {
    Tensor t = Tensor::empty(DType::kF32, {1 << 20});
    first = t.raw_data();
  }
  EXPECT_GE(block_cache_bytes(), size_t{4} << 20);
  Tensor again = Tensor::empty(DType::kF32, {1 << 20});
  EXPECT_EQ(again.raw_data(), first);
}

// Large blocks are cached by size class: a block freed by a tensor serves a later one of another
// size in its class, not one past it; tensor storage still counts what tensors asked for.
TEST(BlockCache, AFreedBlockServesAnotherSizeOfItsClass) {
  block_cache_clear();
  const size_t in_use = storage_bytes_in_use();
  void* first;
  {
    Tensor t = Tensor::empty(DType::kF32, {(3 << 18) + 16});  // 3 MiB + 64 bytes
    first = t.raw_data();
    EXPECT_EQ(storage_bytes_in_use(), in_use + (size_t{3} << 20) + 64);
  }
  {
    Tensor larger = Tensor::empty(DType::kF32, {1 << 20});  // 4 MiB: the same class
    EXPECT_EQ(larger.raw_data(), first);
    larger.copy_from(Tensor::full(DType::kF32, {1 << 20}, 1.0));  // all of it is the block's
  }
  Tensor past = Tensor::empty(DType::kF32, {(1 << 20) + 16});  // 4 MiB + 64 bytes: the next class
  EXPECT_NE(past.raw_data(), first);
  EXPECT_GE(block_cache_bytes(), size_t{4} << 20);  // the 4 MiB block stays cached
}

TEST(RunGraphCli, PrintsEachOutputAndKernelProfile) {
  auto r = testing::run_crucible(
      "run-graph " + std::string(CRUCIBLE_SOURCE_DIR) +
      "/suites/tutorial/neg_maximum_cat_u8.graph --backend eager --seed 3 --profile");
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("output 0 %y: u8[8390,8] sum="), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("eager::neg"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("eager::cat"), std::string::npos) << r.out;
  // Same seed, same checksum; another seed, other inputs.
  auto again = testing::run_crucible("run-graph " + std::string(CRUCIBLE_SOURCE_DIR) +
                                     "/suites/tutorial/neg_maximum_cat_u8.graph --seed 3");
  auto other = testing::run_crucible("run-graph " + std::string(CRUCIBLE_SOURCE_DIR) +
                                     "/suites/tutorial/neg_maximum_cat_u8.graph --seed 4");
  auto fnv = [](const std::string& s) { return s.substr(s.find("fnv="), 20); };
  EXPECT_EQ(fnv(r.out), fnv(again.out));
  EXPECT_NE(fnv(r.out), fnv(other.out));
}

// OMP_THREAD_LIMIT below --threads: oneDNN split its GEMM into as many parts as threads were
// asked for and computed only the parts of the one thread that came (eager's linear had a different
// checksum). Each backend must give what it gives on one thread, whatever caps OpenMP.
TEST(RunGraphCli, AThreadLimitBelowTheThreadsAskedChangesNoResult) {
  const auto dir = testing::fresh_test_dir("crucible_omp_limit");
  std::ofstream(dir / "lin.graph") << "graph lin(%x: f32[64,512]) {\n"
                                      "  param %w: f32[512,512] = randn(seed=1, std=0.05)\n"
                                      "  param %b: f32[512] = randn(seed=2, std=0.05)\n"
                                      "  %y = linear(%x, %w, %b)\n"
                                      "  %z = relu(%y)\n"
                                      "  return %z\n}\n";
  auto fnv = [](const testing::CliResult& r) {
    const size_t at = r.out.find("fnv=");
    return at == std::string::npos ? "(none: " + r.err + ")" : r.out.substr(at, 20);
  };
  for (const char* backend : {"eager", "codegen"}) {
    SCOPED_TRACE(backend);
    const std::string run = fmt::format("run-graph {} --backend {} --seed 1 --threads ",
                                        (dir / "lin.graph").string(), backend);
    const auto one = testing::run_crucible(run + "1");
    ASSERT_EQ(one.status, 0) << one.err;
    EXPECT_EQ(fnv(testing::run_crucible(run + "2", "OMP_THREAD_LIMIT=1")), fnv(one));
    EXPECT_EQ(fnv(testing::run_crucible(run + "2", "OMP_DYNAMIC=true")), fnv(one));
  }
  std::filesystem::remove_all(dir);
}

TEST(RunGraphCli, BadInputGivesOneLineAndExitTwo) {
  auto dir = std::filesystem::temp_directory_path() / ("crucible_rg_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  { std::ofstream(dir / "bad.graph") << "graph g(%x: f32[2]) {\n  %y = nag(%x)\n  return %y\n}\n"; }
  {
    std::ofstream(dir / "ctl.graph")
        << "graph g(%x: f32[2]) {\n  param %w: f32[2] = file(path=\"a\\n\x1b[31mb.bin\")\n"
           "  %y = add(%x, %w)\n  return %y\n}\n";
    std::ofstream(dir / "huge.graph")
        << "graph g(%x: f32[4611686018427387904,2]) {\n  %y = neg(%x)\n  return %y\n}\n";
  }
  struct Case {
    std::string args, expected;
  } cases[] = {
      {(dir / "bad.graph").string(), "bad.graph:2:8: unknown op 'nag'"},
      {(dir / "missing.graph").string(), "missing.graph: cannot read: No such file or directory"},
      {"--threads -3 " + (dir / "bad.graph").string(), "--threads must be >= 0"},
      {"--frobnicate x", "unrecognised option '--frobnicate'"},
      {"", "the option '--graph' is required"},
      {(dir / "bad.graph").string() + " -c novalue", "-c expects key=value, got 'novalue'"},
      {"--backend nosuch " + std::string(CRUCIBLE_SOURCE_DIR) + "/suites/tutorial/sin_cos.graph",
       "backend 'nosuch': no crucible_backend_nosuch.so"},
      // Control bytes from the file are escaped, so the message stays one line.
      {(dir / "ctl.graph").string(), "ctl.graph:2:22: parameter %w: "},
      {(dir / "ctl.graph").string(), "a\\n\\x1b[31mb.bin: does not exist"},
      {(dir / "huge.graph").string(),
       "huge.graph:1:13: shape [4611686018427387904,2] is too large"},
      {dir.string(), "is a directory, not a .graph file"},
  };
  for (const auto& c : cases) {
    auto r = testing::run_crucible("run-graph " + c.args);
    EXPECT_EQ(r.status, 2) << c.args;
    EXPECT_EQ(testing::count_lines(r.err), 1) << r.err;
    EXPECT_NE(r.err.find(c.expected), std::string::npos) << r.err;
  }
  std::filesystem::remove_all(dir);
}

// An option the backend does not take is refused before the graph's worker, as run refuses it:
// one line naming the backend (not its plugin file) and exit 2.
TEST(RunGraphCli, RefusedOptionIsOneLineExitTwo) {
  auto r = testing::run_crucible("run-graph " + std::string(CRUCIBLE_SOURCE_DIR) +
                                 "/suites/tutorial/sin_cos.graph -c fusion=off");
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(testing::count_lines(r.err), 1) << r.err;
  EXPECT_NE(r.err.find("backend 'eager' refuses its options: eager: unknown option -c fusion=off"),
            std::string::npos)
      << r.err;
}

}  // namespace
}  // namespace crucible
