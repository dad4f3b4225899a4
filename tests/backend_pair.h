// The fixture codegen tests share: eager and codegen loaded through the real plugin loader with a
// private kernel cache, tensor-by-tensor comparison, and the post-fusion loop program of a graph.
#pragma once

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "accuracy.h"
#include "crucible/ir/graph.h"
#include "crucible/ir/transforms.h"
#include "crucible/plugin_loader.h"

namespace crucible::testing {

class BackendPair : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    cache_ = std::filesystem::temp_directory_path() /
             ("crucible_pair_cache_" + std::to_string(::getpid()));
    ::setenv("CRUCIBLE_CACHE_DIR", cache_.c_str(), 1);
    eager_ = load_plugin(find_plugin("eager", plugin_search_path({}))).release();
    codegen_ = load_plugin(find_plugin("codegen", plugin_search_path({}))).release();
  }
  static void TearDownTestSuite() { std::filesystem::remove_all(cache_); }

  // got[i] against ref[i]: shape, dtype, and every element within 1e-5 relative + absolute
  // (bf16: 1e-2), integers and bool exactly, NaN where ref has NaN. names[i] labels failures.
  // With `fp64` (the fp64 reference, run once, at the first floating output off eager), such an
  // output passes by the harness's own rule (accuracy.h): its RMSE against fp64 is within m x
  // eager's. Two float summation orders legitimately differ by more than 1e-5 where an output
  // cancels: the sanitized eager (-O1, no FMA) on another CPU did on MobileNet's block, with
  // codegen the nearer one.
  static void ExpectTensorsMatch(const std::vector<Tensor>& got, const std::vector<Tensor>& ref,
                                 const std::vector<std::string>& names,
                                 const std::function<std::vector<Tensor>()>& fp64 = {}) {
    ASSERT_EQ(got.size(), ref.size());
    std::vector<Tensor> truth;
    for (size_t i = 0; i < ref.size(); ++i) {
      SCOPED_TRACE(names.at(i));
      ASSERT_EQ(shape_str(got[i].shape()), shape_str(ref[i].shape()));
      ASSERT_EQ(got[i].dtype(), ref[i].dtype());
      AccuracyOptions o;
      o.tol = ref[i].dtype() == DType::kBF16 ? 1e-2 : 1e-5;
      auto a = compare_output(got[i].contiguous(), ref[i].contiguous(), Tensor(), o);
      if (a.mismatches == 0 || !fp64 || !is_floating(ref[i].dtype())) {
        EXPECT_EQ(a.mismatches, 0)
            << "first mismatch at " << a.first_mismatch << ", max abs err " << a.max_abs_err;
        continue;
      }
      if (truth.empty()) truth = fp64();
      a = compare_output(got[i].contiguous(), ref[i].contiguous(), truth.at(i).contiguous(), o);
      EXPECT_TRUE(a.passed) << a.mismatches << " elements off eager, the first at "
                            << a.first_mismatch << ", max abs err " << a.max_abs_err
                            << "; RMSE against fp64 " << a.rmse_vs_fp64 << ", eager's "
                            << a.rmse_eager_vs_fp64;
    }
  }

  // Every output of `g` on both backends from the same seeded inputs (or `inputs`), an output
  // off eager judged by the fp64 reference.
  static void ExpectSameAsEager(const Graph& g, std::vector<Tensor> inputs = {},
                                plugin::Options opts = {}, uint64_t seed = 7) {
    if (inputs.empty()) inputs = make_inputs(g, seed);
    auto ref = eager_->backend().compile(g, {})->run(inputs);
    auto got = codegen_->backend().compile(g, opts)->run(inputs);
    std::vector<std::string> names;
    for (size_t i = 0; i < g.outputs().size(); ++i)
      names.push_back(fmt::format("output {} %{}", i, g.value(g.outputs()[i]).name));
    ExpectTensorsMatch(got, ref, names, [&] {
      return eager_->backend().compile(widen_to_f64(g), {})->run(widen_inputs_to_f64(inputs));
    });
  }

  // The loop program after fusion (ir_post_fusion.txt of the debug directory).
  static std::string post_fusion_ir(const Graph& g, plugin::Options opts = {}) {
    return debug_artifact(g, "ir_post_fusion.txt", std::move(opts));
  }

  // One file of the debug directory codegen writes for `g` (output_code.cpp, ...).
  static std::string debug_artifact(const Graph& g, const std::string& file,
                                    plugin::Options opts = {}) {
    const auto dir = std::filesystem::temp_directory_path() /
                     ("crucible_pair_dbg_" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir);
    opts.config["debug_dir"] = dir.string();
    codegen_->backend().compile(g, opts);
    std::ifstream in(dir / file);
    std::stringstream s;
    s << in.rdbuf();
    std::filesystem::remove_all(dir);
    return s.str();
  }

  static int count(const std::string& text, const std::string& what) {
    int n = 0;
    for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
    return n;
  }

  static inline std::filesystem::path cache_;
  static inline LoadedBackend* eager_ = nullptr;
  static inline LoadedBackend* codegen_ = nullptr;
};

}  // namespace crucible::testing
