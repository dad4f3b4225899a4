// silu, hardswish and hardsigmoid against their definitions in double, at the breakpoints, at the
// extremes (inf, NaN, overflowing exp) and on strided inputs of every float dtype.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "crucible/core/rng.h"
#include "test_util.h"

namespace crucible {
namespace {

using testing::ExpectTensor;
using testing::T;
using namespace testing::op_helpers;

double Relu6(double v) { return std::isnan(v) ? v : std::min(std::max(v, 0.0), 6.0); }
double Silu(double x) { return x / (1.0 + std::exp(-x)); }
double Hardsigmoid(double x) { return Relu6(x + 3.0) / 6.0; }
double Hardswish(double x) { return x * Relu6(x + 3.0) / 6.0; }

struct Activation {
  const char* name;
  std::function<double(double)> f;
};
const Activation kActivations[] = {
    {"silu", Silu}, {"hardswish", Hardswish}, {"hardsigmoid", Hardsigmoid}};

std::vector<double> Map(const std::vector<double>& v, const std::function<double(double)>& f) {
  std::vector<double> out;
  for (double x : v) out.push_back(f(x));
  return out;
}

TEST(Activations, BreakpointsAndExtremes) {
  // -3 and 3 are the hard* kinks; +-100 overflow exp(-x) in float; -inf makes silu -inf/inf = NaN,
  // as PyTorch's x / (1 + exp(-x)) gives.
  const std::vector<double> v = {-kInf, -100, -3.5, -3, -1, -0.25, 0, 0.5, 3, 4, 100, kInf, kNaN};
  for (const Activation& a : kActivations) {
    for (DType dt : {DType::kF32, DType::kF64, DType::kBF16}) {
      SCOPED_TRACE(std::string(a.name) + " " + std::string(dtype_name(dt)));
      const Tensor x = T(dt, {static_cast<int64_t>(v.size())}, v);
      std::vector<double> want = Map(x.to_doubles(), a.f);
      if (a.name == std::string("silu")) want[0] = kNaN;
      ExpectTensor(Op(a.name, {x}), dt, x.shape(), want, dt == DType::kBF16 ? 1e-2 : 1e-6);
    }
  }
}

TEST(Activations, RandomStridedInputsMatchDefinition) {
  for (const Activation& a : kActivations) {
    for (DType dt : {DType::kF32, DType::kF64, DType::kBF16}) {
      SCOPED_TRACE(std::string(a.name) + " " + std::string(dtype_name(dt)));
      Tensor base = Tensor::empty(dt, {37, 2 * 41});
      fill_uniform(base, 5, -8.0, 8.0);
      const Tensor x = base.slice(1, 0, 82, 2).transpose(0, 1);  // [41, 37], strides (2, 82)
      ExpectTensor(Op(a.name, {x}), dt, {41, 37}, Map(x.to_doubles(), a.f),
                   dt == DType::kBF16  ? 1e-2
                   : dt == DType::kF32 ? 1e-6
                                       : 1e-14);
    }
  }
}

TEST(Activations, LargeContiguousInputRunsInParallelAndIntegersBecomeF32) {
  Tensor x = Tensor::empty(DType::kF32, {3, 70001});
  fill_uniform(x, 9, -6.0, 6.0);
  for (const Activation& a : kActivations) {
    SCOPED_TRACE(a.name);
    ExpectTensor(Op(a.name, {x}), DType::kF32, x.shape(), Map(x.to_doubles(), a.f), 1e-6);
    const Tensor i = T(DType::kI32, {4}, {-4, -1, 2, 5});
    ExpectTensor(Op(a.name, {i}), DType::kF32, {4}, Map(i.to_doubles(), a.f), 1e-6);
    EXPECT_EQ(shape_str(Op(a.name, {Tensor::empty(DType::kF32, {0, 3})}).shape()), "[0,3]");
  }
}

}  // namespace
}  // namespace crucible
