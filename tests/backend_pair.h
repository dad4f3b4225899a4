// The fixture codegen tests share: eager and codegen loaded through the real plugin loader with a
// private kernel cache, tensor-by-tensor comparison, and the post-fusion loop program of a graph.
#pragma once

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
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
  // With fp64[i] (the fp64 reference), a floating output off eager by more than that passes by
  // the harness's own rule (accuracy.h): its RMSE against fp64 is within m x eager's. Two float
  // summation orders legitimately differ by more than 1e-5 where an output cancels: the sanitized
  // eager (-O1, no FMA) on another CPU did on MobileNet's block, with codegen the nearer one.
  static void ExpectTensorsMatch(const std::vector<Tensor>& got, const std::vector<Tensor>& ref,
                                 const std::vector<std::string>& names,
                                 const std::vector<Tensor>& fp64 = {}) {
    ASSERT_EQ(got.size(), ref.size());
    for (size_t i = 0; i < ref.size(); ++i) {
      SCOPED_TRACE(names.at(i));
      ASSERT_EQ(shape_str(got[i].shape()), shape_str(ref[i].shape()));
      ASSERT_EQ(got[i].dtype(), ref[i].dtype());
      const Tensor truth = i < fp64.size() ? fp64[i].contiguous() : Tensor();
      const auto a =
          compare_output(got[i].contiguous(), ref[i].contiguous(), truth, Tolerance(ref[i]));
      if (truth.defined() && is_floating(ref[i].dtype())) {
        EXPECT_TRUE(a.passed) << a.mismatches << " elements off eager, the first at "
                              << a.first_mismatch << ", max abs err " << a.max_abs_err
                              << "; RMSE against fp64 " << a.rmse_vs_fp64 << ", eager's "
                              << a.rmse_eager_vs_fp64;
      } else {
        EXPECT_EQ(a.mismatches, 0)
            << "first mismatch at " << a.first_mismatch << ", max abs err " << a.max_abs_err;
      }
    }
  }

  // Every output of `g` on both backends from the same seeded inputs (or `inputs`). The fp64
  // reference is run only when an output is off eager, to judge it.
  static void ExpectSameAsEager(const Graph& g, std::vector<Tensor> inputs = {},
                                plugin::Options opts = {}, uint64_t seed = 7) {
    if (inputs.empty()) inputs = make_inputs(g, seed);
    auto ref = eager_->backend().compile(g, {})->run(inputs);
    auto got = codegen_->backend().compile(g, opts)->run(inputs);
    std::vector<std::string> names;
    for (size_t i = 0; i < g.outputs().size(); ++i)
      names.push_back(fmt::format("output {} %{}", i, g.value(g.outputs()[i]).name));
    std::vector<Tensor> fp64;
    if (!AllWithinTolerance(got, ref))
      fp64 = eager_->backend().compile(widen_to_f64(g), {})->run(widen_inputs_to_f64(inputs));
    ExpectTensorsMatch(got, ref, names, fp64);
  }

  static AccuracyOptions Tolerance(const Tensor& ref) {
    AccuracyOptions o;
    o.tol = ref.dtype() == DType::kBF16 ? 1e-2 : 1e-5;
    return o;
  }

  static bool AllWithinTolerance(const std::vector<Tensor>& got, const std::vector<Tensor>& ref) {
    for (size_t i = 0; i < got.size() && i < ref.size(); ++i) {
      if (got[i].shape() != ref[i].shape() || got[i].dtype() != ref[i].dtype())
        continue;  // ExpectTensorsMatch says so
      if (compare_output(got[i].contiguous(), ref[i].contiguous(), Tensor(), Tolerance(ref[i]))
              .mismatches != 0)
        return false;
    }
    return true;
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
