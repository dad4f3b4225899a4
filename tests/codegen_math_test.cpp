// Codegen's loops for the elementwise ops added for ONNX import: they fuse into one kernel (no
// extern call) and agree with eager's kernels on NaN, infinities, zero divisors and every dtype.
#include <gtest/gtest.h>

#include <limits>

#include "backend_pair.h"
#include "crucible/ir/text_format.h"
#include "test_util.h"

namespace crucible {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

class CodegenMath : public testing::BackendPair {};

TEST_F(CodegenMath, NewElementwiseOpsFuseAndMatchEager) {
  const Graph g = parse_graph(R"(
graph math(%a: f32[4,6], %b: f32[6], %d: f64[4,6], %h: bf16[4,6], %i: i32[4,6], %j: i32[6],
           %u: u8[6], %m: bool[4,6]) {
  %fl = floor(%a)
  %ce = ceil(%d)
  %ro = round(%h)
  %sg = sign(%a)
  %si = sign(%i)
  %ri = round(%i)
  %ta = tan(%a)
  %as = asin(%b)
  %ac = acos(%d)
  %at = atan(%h)
  %sh = sinh(%a)
  %ch = cosh(%d)
  %ash = asinh(%a)
  %ach = acosh(%d)
  %ath = atanh(%b)
  %nn = isnan(%a)
  %ni = isinf(%d)
  %np = isinf(%a, detect_negative=false)
  %nq = isinf(%i)
  %ln = logical_not(%a)
  %la = logical_and(%m, %nn)
  %lo = logical_or(%i, %m)
  %lx = logical_xor(%h, %b)
  %md = mod(%a, %b)
  %mf = mod(%d, %b, fmod=true)
  %mi = mod(%i, %j)
  %mj = mod(%i, %j, fmod=true)
  %mu = mod(%u, %u)
  %mx = mod(%i, %b)
  return %fl, %ce, %ro, %sg, %si, %ri, %ta, %as, %ac, %at, %sh, %ch, %ash, %ach, %ath, %nn, %ni, %np, %nq, %ln, %la, %lo, %lx, %md, %mf, %mi, %mj, %mu, %mx
}
)");
  const std::string ir = post_fusion_ir(g);
  EXPECT_EQ(count(ir, "extern::"), 0) << ir;
  // Inputs with the special values: halves (round), NaN, infinities, zero and negative divisors,
  // INT_MIN % -1.
  const std::vector<double> fl = {0.5, -0.5, 1.5, 2.5,  -2.5, kNaN, kInf, -kInf,
                                  0,   -0.0, 0.9, -0.9, 3,    -3,   7.5,  1,
                                  -1,  1e30, -7,  2,    0.25, 100,  -100, 1.2};
  std::vector<double> ints;
  for (int k = 0; k < 24; ++k) ints.push_back((k * 37) % 19 - 9);
  ints[5] = -2147483648.0;
  std::vector<Tensor> in = {
      Tensor::from_doubles(DType::kF32, {4, 6}, fl),
      testing::T(DType::kF32, {6}, {2, -2, 0, kNaN, 0.5, -0.75}),
      Tensor::from_doubles(DType::kF64, {4, 6}, fl),
      Tensor::from_doubles(DType::kBF16, {4, 6}, fl),
      Tensor::from_doubles(DType::kI32, {4, 6}, ints),
      testing::T(DType::kI32, {6}, {3, -3, 0, -1, 7, 1}),
      testing::T(DType::kU8, {6}, {0, 1, 7, 200, 255, 3}),
      Tensor::from_doubles(DType::kBool, {4, 6}, std::vector<double>(24, 1)),
  };
  ExpectSameAsEager(g, in);
}

}  // namespace
}  // namespace crucible
