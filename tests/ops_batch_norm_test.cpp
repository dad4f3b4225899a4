// batch_norm (inference form) against a double-precision reference over ranks 2 to 5, odd and
// parallel-sized shapes, non-contiguous inputs and every float dtype, and its type rule's errors.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "crucible/core/error.h"
#include "crucible/core/rng.h"
#include "test_util.h"

namespace crucible {
namespace {

using testing::ExpectTensor;
using testing::T;
using namespace testing::op_helpers;

Tensor Uniform(DType dtype, Shape shape, uint64_t seed, double lo = -1.0, double hi = 1.0) {
  Tensor t = Tensor::empty(dtype, std::move(shape));
  fill_uniform(t, seed, lo, hi);
  return t;
}

struct Params {
  Tensor weight, bias, mean, var;
};

Params RandomParams(DType dt, int64_t c, uint64_t seed) {
  return {Uniform(dt, {c}, seed), Uniform(dt, {c}, seed + 1), Uniform(dt, {c}, seed + 2),
          Uniform(dt, {c}, seed + 3, 0.0, 2.0)};
}

std::vector<double> RefBatchNorm(const Tensor& x, const Params& p, double eps) {
  const std::vector<double> v = x.to_doubles(), w = p.weight.to_doubles(), b = p.bias.to_doubles(),
                            m = p.mean.to_doubles(), var = p.var.to_doubles();
  const int64_t c = x.shape()[1];
  int64_t inner = 1;
  for (int64_t d = 2; d < x.dim(); ++d) inner *= x.shape()[d];
  std::vector<double> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    const int64_t ch = static_cast<int64_t>(i) / inner % c;
    out[i] = (v[i] - m[ch]) / std::sqrt(var[ch] + eps) * w[ch] + b[ch];
  }
  return out;
}

double Tol(DType t) { return t == DType::kF64 ? 1e-12 : t == DType::kF32 ? 1e-5 : 1e-2; }

void Check(const Tensor& x, const Params& p, double eps = 1e-5) {
  SCOPED_TRACE(shape_str(x.shape()) + " " + std::string(dtype_name(x.dtype())));
  Attrs attrs;
  if (eps != 1e-5) attrs.set("eps", eps);
  ExpectTensor(Op("batch_norm", {x, p.weight, p.bias, p.mean, p.var}, attrs), x.dtype(), x.shape(),
               RefBatchNorm(x, p, eps), Tol(x.dtype()));
}

TEST(BatchNorm, MatchesReferenceOverRanksAndDtypes) {
  const Shape shapes[] = {{5, 7},         {3, 6, 11},   {2, 5, 7, 9}, {2, 3, 4, 5, 3},
                          {4, 8, 33, 35}, {1, 3, 1, 1}, {64, 96}};
  uint64_t seed = 10;
  for (const Shape& s : shapes) {
    for (DType dt : {DType::kF32, DType::kF64, DType::kBF16}) {
      Check(Uniform(dt, s, seed), RandomParams(dt, s[1], seed + 1));
      seed += 10;
    }
  }
}

TEST(BatchNorm, EpsNonContiguousInputAndEmptyBatch) {
  const Params p = RandomParams(DType::kF32, 6, 3);
  Check(Uniform(DType::kF32, {2, 6, 4, 5}, 1), p, 0.5);
  // NHWC storage viewed as NCHW, and a channel slice of a wider tensor.
  const Tensor nhwc =
      Uniform(DType::kF32, {3, 5, 7, 6}, 2).permute(std::vector<int64_t>{0, 3, 1, 2});
  ASSERT_FALSE(nhwc.is_contiguous());
  Check(nhwc, p);
  Check(Uniform(DType::kF32, {2, 12, 3, 3}, 4).slice(1, 0, 12, 2), p);
  const Params q{p.weight.slice(0, 0, 6), Uniform(DType::kF32, {12}, 5).slice(0, 1, 12, 2), p.mean,
                 p.var};
  Check(Uniform(DType::kF32, {2, 6, 3, 3}, 6), q);
  const Tensor empty =
      Op("batch_norm", {Tensor::empty(DType::kF32, {0, 6, 3, 3}), p.weight, p.bias, p.mean, p.var});
  EXPECT_EQ(shape_str(empty.shape()), "[0,6,3,3]");
}

TEST(BatchNorm, NaNStaysInItsElement) {
  const Tensor x = T(DType::kF32, {1, 2, 2}, {1, kNaN, 2, 3});
  const Tensor one = T(DType::kF32, {2}, {1, 1}), zero = T(DType::kF32, {2}, {0, 0});
  ExpectTensor(Op("batch_norm", {x, one, zero, zero, one}, {{"eps", 0.0}}), DType::kF32, {1, 2, 2},
               {1, kNaN, 2, 3});
}

void ExpectGraphError(std::vector<Tensor> in, const std::string& needle) {
  try {
    run_op("batch_norm", in);
    ADD_FAILURE() << "no error; expected one containing '" << needle << "'";
  } catch (const GraphError& e) {
    const std::string msg = e.what();
    EXPECT_EQ(msg.rfind("batch_norm: ", 0), 0u) << msg;
    EXPECT_NE(msg.find(needle), std::string::npos)
        << "message '" << msg << "' lacks '" << needle << "'";
  }
}

TEST(BatchNorm, BadInputIsAGraphErrorSayingWhy) {
  const auto z = [](Shape s, DType dt = DType::kF32) { return Tensor::zeros(dt, std::move(s)); };
  ExpectGraphError({z({4}), z({4}), z({4}), z({4}), z({4})},
                   "input must have at least 2 dims [N,C,...], got 1-D [4]");
  ExpectGraphError({z({2, 3, 4}), z({3}), z({4}), z({3}), z({3})},
                   "bias shape [4] must be [3], the channels (dim 1) of input [2,3,4]");
  ExpectGraphError({z({2, 3, 4}), z({3}), z({3}), z({3}), z({3}, DType::kF64)},
                   "running_var dtype f64 differs from input dtype f32");
  ExpectGraphError({z({2, 3}, DType::kI32), z({3}), z({3}), z({3}), z({3})},
                   "input must be floating-point");
  ExpectGraphError({z({2, 3}), z({3}), z({3}), z({3})}, "expects 5 operands, got 4");
}

}  // namespace
}  // namespace crucible
