// matmul, linear, addmm, embedding and the GEMM entry points against hand values and a double
// reference, with tolerances from the k * u * sum|a||b| error bound of a k-term dot product.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "crucible/core/error.h"
#include "crucible/core/rng.h"
#include "crucible/ops/gemm.h"
#include "test_util.h"

namespace crucible {
namespace {

using testing::ExpectTensor;
using testing::T;
using namespace testing::op_helpers;

Tensor Uniform(DType dtype, Shape shape, uint64_t seed) {
  Tensor t = Tensor::empty(dtype, std::move(shape));
  fill_uniform(t, seed, -1.0, 1.0);
  return t;
}

// torch.matmul in double, straight from the definition. abs_sum[i] = sum_k |a||b| bounds the
// rounding error of any summation order of the same terms.
struct Reference {
  Shape shape;
  std::vector<double> value, abs_sum;
};

Reference RefMatmul(const Tensor& a, const Tensor& b) {
  Shape as = a.shape(), bs = b.shape();
  const bool a1 = as.size() == 1, b1 = bs.size() == 1;
  if (a1) as.insert(as.begin(), 1);
  if (b1) bs.push_back(1);
  const int64_t m = as[as.size() - 2], k = as.back(), n = bs.back();
  const Shape ba(as.begin(), as.end() - 2), bb(bs.begin(), bs.end() - 2);
  const size_t nb = std::max(ba.size(), bb.size());
  Shape batch(nb);
  for (size_t i = 0; i < nb; ++i) {
    const int64_t x = i < nb - ba.size() ? 1 : ba[i - (nb - ba.size())];
    const int64_t y = i < nb - bb.size() ? 1 : bb[i - (nb - bb.size())];
    batch[i] = std::max(x, y);
  }
  const std::vector<double> av = a.to_doubles(), bv = b.to_doubles();
  Reference r;
  r.shape = batch;
  if (!a1) r.shape.push_back(m);
  if (!b1) r.shape.push_back(n);
  const int64_t total = shape_numel(batch);
  for (int64_t t = 0; t < total; ++t) {
    // Offsets into a and b: right-aligned batch index, 0 along broadcast (size-1 or absent) dims.
    int64_t rem = t, off_a = 0, off_b = 0, sa = m * k, sb = k * n;
    for (size_t d = nb; d-- > 0;) {
      const int64_t i = rem % batch[d];
      rem /= batch[d];
      const int64_t da = static_cast<int64_t>(d) - static_cast<int64_t>(nb - ba.size());
      const int64_t db = static_cast<int64_t>(d) - static_cast<int64_t>(nb - bb.size());
      if (da >= 0) {
        off_a += (ba[da] == 1 ? 0 : i) * sa;
        sa *= ba[da];
      }
      if (db >= 0) {
        off_b += (bb[db] == 1 ? 0 : i) * sb;
        sb *= bb[db];
      }
    }
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        double s = 0, abs = 0;
        for (int64_t p = 0; p < k; ++p) {
          const double x = av[off_a + i * k + p], y = bv[off_b + p * n + j];
          s += x * y;
          abs += std::abs(x * y);
        }
        r.value.push_back(s);
        r.abs_sum.push_back(abs);
      }
    }
  }
  return r;
}

// Unit roundoff of the result's dtype, and the relative accuracy of its storage.
double Roundoff(DType dt) {
  return dt == DType::kF64 ? 0x1p-53 : dt == DType::kF32 ? 0x1p-24 : 0x1p-8;
}

// |got - exact| <= k * u * sum|a||b| (+ one rounding of the result for bf16 storage).
void ExpectMatmulClose(const Tensor& got, const Reference& want, int64_t k, DType dt) {
  ASSERT_EQ(dtype_name(got.dtype()), dtype_name(dt));
  ASSERT_EQ(shape_str(got.shape()), shape_str(want.shape));
  const double u = Roundoff(dt), u_compute = dt == DType::kBF16 ? 0x1p-24 : u;
  for (size_t i = 0; i < want.value.size(); ++i) {
    double tol = (k + 1) * u_compute * want.abs_sum[i] + 1e-300;
    if (dt == DType::kBF16) tol += u * std::abs(want.value[i]);
    ASSERT_NEAR(got.get(static_cast<int64_t>(i)), want.value[i], tol) << "element " << i;
  }
}

int64_t InnerDim(const Tensor& a) { return a.shape().back(); }

// ---- matmul ----

TEST(Matmul, TwoByThreeTimesThreeByTwo) {
  Tensor a = T(DType::kF32, {2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor b = T(DType::kF32, {3, 2}, {7, 8, 9, 10, 11, 12});
  ExpectTensor(Op("matmul", {a, b}), DType::kF32, {2, 2}, {58, 64, 139, 154});
  ExpectTensor(Op("matmul", {T(DType::kF64, {2, 3}, {1, 2, 3, 4, 5, 6}),
                             T(DType::kF64, {3, 2}, {7, 8, 9, 10, 11, 12})}),
               DType::kF64, {2, 2}, {58, 64, 139, 154});
  ExpectTensor(Op("matmul", {a.to(DType::kBF16), b.to(DType::kBF16)}), DType::kBF16, {2, 2},
               {58, 64, 139, 154}, 4e-3);
}

TEST(Matmul, OneDimensionalOperands) {
  Tensor v = T(DType::kF32, {3}, {1, 2, 3});
  Tensor b = T(DType::kF32, {3, 2}, {7, 8, 9, 10, 11, 12});
  Tensor a = T(DType::kF32, {2, 3}, {1, 2, 3, 4, 5, 6});
  ExpectTensor(Op("matmul", {v, T(DType::kF32, {3}, {4, 5, 6})}), DType::kF32, {}, {32});
  ExpectTensor(Op("matmul", {v, b}), DType::kF32, {2}, {58, 64});
  ExpectTensor(Op("matmul", {a, T(DType::kF32, {3}, {1, 1, 1})}), DType::kF32, {2}, {6, 15});
  // 1-D with batched operands: the vector broadcasts over the batch.
  Tensor bb = Uniform(DType::kF32, {4, 3, 2}, 1);
  Tensor r = Op("matmul", {v, bb});
  ExpectMatmulClose(r, RefMatmul(v, bb), 3, DType::kF32);
  EXPECT_EQ(shape_str(r.shape()), "[4,2]");
  Tensor ab = Uniform(DType::kF64, {4, 2, 3}, 2);
  Tensor vd = v.to(DType::kF64);
  Tensor r2 = Op("matmul", {ab, vd});
  ExpectMatmulClose(r2, RefMatmul(ab, vd), 3, DType::kF64);
  EXPECT_EQ(shape_str(r2.shape()), "[4,2]");
}

TEST(Matmul, BatchedWithBroadcasting) {
  struct Case {
    Shape a, b;
  };
  const std::vector<Case> cases = {
      {{2, 1, 2, 3}, {3, 3, 2}},  // [2,1] with [3] -> [2,3]
      {{5, 4, 3}, {3, 6}},        // shared b: folded into one GEMM
      {{4, 3}, {5, 3, 6}},        // shared a: broadcast through a batch stride of 0
      {{2, 3, 4, 5}, {2, 3, 5, 2}}, {{1, 3, 4, 5}, {2, 1, 5, 2}}, {{3, 1, 4, 5}, {1, 5, 2}},
  };
  uint64_t seed = 10;
  for (const Case& c : cases) {
    SCOPED_TRACE(shape_str(c.a) + " @ " + shape_str(c.b));
    for (DType dt : {DType::kF32, DType::kF64, DType::kBF16}) {
      Tensor a = Uniform(dt, c.a, seed++), b = Uniform(dt, c.b, seed++);
      ExpectMatmulClose(Op("matmul", {a, b}), RefMatmul(a, b), InnerDim(a), dt);
    }
  }
}

TEST(Matmul, NonContiguousOperands) {
  for (DType dt : {DType::kF32, DType::kF64, DType::kBF16}) {
    SCOPED_TRACE(dtype_name(dt));
    // Transposed views reach the GEMM as trans flags; stepped slices and broadcast rows are copied.
    Tensor at = Uniform(dt, {7, 5}, 40).transpose(0, 1);  // [5,7], column-major
    Tensor bt = Uniform(dt, {9, 7}, 41).transpose(0, 1);  // [7,9]
    ExpectMatmulClose(Op("matmul", {at, bt}), RefMatmul(at, bt), 7, dt);
    Tensor padded = Uniform(dt, {5, 12}, 42).slice(1, 2, 9);  // [5,7] with leading dimension 12
    ExpectMatmulClose(Op("matmul", {padded, bt}), RefMatmul(padded, bt), 7, dt);
    Tensor stepped = Uniform(dt, {5, 14}, 43).slice(1, 0, 14, 2);  // column stride 2
    Tensor bs = Uniform(dt, {14, 9}, 44).slice(0, 1, 14, 2);       // row stride 18
    ExpectMatmulClose(Op("matmul", {stepped, bs}), RefMatmul(stepped, bs), 7, dt);
    Tensor rows = Uniform(dt, {1, 7}, 45).expand(std::vector<int64_t>{5, 7});  // row stride 0
    ExpectMatmulClose(Op("matmul", {rows, bt}), RefMatmul(rows, bt), 7, dt);
    Tensor batched_t = Uniform(dt, {3, 9, 7}, 46).transpose(1, 2);  // [3,7,9], transposed matrices
    Tensor batched_p =
        Uniform(dt, {5, 3, 7}, 47).permute(std::vector<int64_t>{1, 0, 2});  // [3,5,7]
    ExpectMatmulClose(Op("matmul", {batched_p, batched_t}), RefMatmul(batched_p, batched_t), 7, dt);
  }
}

// Batches folded into M must keep their own row spacing: here one row per batch, 6 apart.
TEST(Matmul, SharedWeightWithGappedBatchRows) {
  for (DType dt : {DType::kF32, DType::kF64}) {
    Tensor a = Uniform(dt, {5, 2, 3}, 48).slice(1, 0, 1);  // [5,1,3], strides [6,3,1]
    Tensor b = Uniform(dt, {3, 4}, 49);
    ExpectMatmulClose(Op("matmul", {a, b}), RefMatmul(a, b), 3, dt);
    Tensor a2 = Uniform(dt, {5, 6, 3}, 50).slice(1, 0, 4);  // [5,4,3], batch stride 18 != 4*3
    ExpectMatmulClose(Op("matmul", {a2, b}), RefMatmul(a2, b), 3, dt);
  }
}

// Odd sizes cross every blocking edge. Tolerance: the k * u * sum|a||b| bound of a k-term dot.
TEST(Matmul, LargeRandomAgainstDoubleReference) {
  Tensor a = Uniform(DType::kF32, {257, 129}, 50), b = Uniform(DType::kF32, {129, 65}, 51);
  ExpectMatmulClose(Op("matmul", {a, b}), RefMatmul(a, b), 129, DType::kF32);
  Tensor a2 = Uniform(DType::kF32, {33, 1031}, 52), b2 = Uniform(DType::kF32, {1031, 47}, 53);
  ExpectMatmulClose(Op("matmul", {a2, b2}), RefMatmul(a2, b2), 1031, DType::kF32);
  // f64 through our own kernel: several KC depth panels, MC row blocks and a partial NR tile.
  Tensor c = Uniform(DType::kF64, {261, 600}, 54), d = Uniform(DType::kF64, {600, 83}, 55);
  ExpectMatmulClose(Op("matmul", {c, d}), RefMatmul(c, d), 600, DType::kF64);
  Tensor ct = Uniform(DType::kF64, {600, 261}, 56).transpose(0, 1);
  Tensor dt = Uniform(DType::kF64, {83, 600}, 57).transpose(0, 1);
  ExpectMatmulClose(Op("matmul", {ct, dt}), RefMatmul(ct, dt), 600, DType::kF64);
  Tensor e = Uniform(DType::kBF16, {65, 300}, 58), f = Uniform(DType::kBF16, {300, 31}, 59);
  ExpectMatmulClose(Op("matmul", {e, f}), RefMatmul(e, f), 300, DType::kBF16);
}

TEST(Matmul, ResultsAreDeterministic) {
  Tensor a = Uniform(DType::kF64, {300, 300}, 60), b = Uniform(DType::kF64, {300, 300}, 61);
  Tensor x = Op("matmul", {a, b}), y = Op("matmul", {a, b});
  EXPECT_EQ(x.to_doubles(), y.to_doubles());
}

TEST(Matmul, DegenerateSizes) {
  ExpectTensor(
      Op("matmul", {Tensor::empty(DType::kF32, {2, 0}), Tensor::empty(DType::kF32, {0, 3})}),
      DType::kF32, {2, 3}, {0, 0, 0, 0, 0, 0});
  ExpectTensor(
      Op("matmul", {Tensor::empty(DType::kF64, {2, 0}), Tensor::empty(DType::kF64, {0, 3})}),
      DType::kF64, {2, 3}, {0, 0, 0, 0, 0, 0});
  ExpectTensor(
      Op("matmul", {Tensor::empty(DType::kF32, {0, 4}), Tensor::empty(DType::kF32, {4, 3})}),
      DType::kF32, {0, 3}, {});
  ExpectTensor(Op("matmul", {Tensor::empty(DType::kF32, {0}), Tensor::empty(DType::kF32, {0})}),
               DType::kF32, {}, {0});
  ExpectTensor(
      Op("matmul", {Tensor::empty(DType::kF32, {3, 0, 4}), Tensor::empty(DType::kF32, {4, 2})}),
      DType::kF32, {3, 0, 2}, {});
}

// K = 0 in every operand layout an empty tensor can have (its strides are then arbitrary: a
// contiguous [3,0] has row stride 0, an expanded one 0 in both, a transposed one swaps them): the
// product is zeros, linear gives its bias, addmm beta * input. The differential fuzzer found eager
// rejecting an expanded [3,0] operand ("invalid leading dimensions lda=0").
TEST(Matmul, EmptyInnerDimensionInEveryLayout) {
  for (DType dt : {DType::kF32, DType::kF64}) {
    SCOPED_TRACE(dtype_name(dt));
    const std::vector<Tensor> lhs = {
        Tensor::empty(dt, {3, 0}),
        Op("expand", {Tensor::empty(dt, {1, 0})}, Attrs{{"shape", std::vector<int64_t>{3, 0}}}),
        Op("transpose", {Tensor::empty(dt, {0, 3})},
           Attrs{{"dim0", int64_t{0}}, {"dim1", int64_t{1}}})};
    const std::vector<Tensor> rhs = {
        Tensor::empty(dt, {0, 2}),
        Op("expand", {Tensor::empty(dt, {0, 1})}, Attrs{{"shape", std::vector<int64_t>{0, 2}}}),
        Op("transpose", {Tensor::empty(dt, {2, 0})},
           Attrs{{"dim0", int64_t{0}}, {"dim1", int64_t{1}}})};
    for (size_t i = 0; i < lhs.size(); ++i) {
      for (size_t j = 0; j < rhs.size(); ++j) {
        SCOPED_TRACE(::testing::Message() << "lhs layout " << i << ", rhs layout " << j);
        ExpectTensor(Op("matmul", {lhs[i], rhs[j]}), dt, {3, 2}, std::vector<double>(6, 0.0));
        // Batched: the same operands broadcast over a batch of 2.
        Tensor batched = Op("expand", {Op("unsqueeze", {lhs[i]}, Attrs{{"dim", int64_t{0}}})},
                            Attrs{{"shape", std::vector<int64_t>{2, 3, 0}}});
        ExpectTensor(Op("matmul", {batched, rhs[j]}), dt, {2, 3, 2}, std::vector<double>(12, 0.0));
        Tensor w = Op("transpose", {rhs[j]}, Attrs{{"dim0", int64_t{0}}, {"dim1", int64_t{1}}});
        ExpectTensor(Op("linear", {lhs[i], w, T(dt, {2}, {1.5, -2})}), dt, {3, 2},
                     {1.5, -2, 1.5, -2, 1.5, -2});
        ExpectTensor(
            Op("addmm", {T(dt, {2}, {1, 2}), lhs[i], rhs[j]}, Attrs{{"beta", 0.5}, {"alpha", 3.0}}),
            dt, {3, 2}, {0.5, 1, 0.5, 1, 0.5, 1});
      }
    }
  }
}

TEST(Matmul, Errors) {
  Tensor a = T(DType::kF32, {2, 3}, {1, 2, 3, 4, 5, 6});
  ExpectError("matmul", {a, Tensor::zeros(DType::kF32, {4, 2})}, {},
              "inner dimensions do not match: [2,3] @ [4,2]");
  ExpectError("matmul", {T(DType::kF32, {3}, {1, 2, 3}), T(DType::kF32, {2}, {1, 2})}, {},
              "[3] @ [2]");
  ExpectError("matmul",
              {T(DType::kI32, {2, 2}, {1, 2, 3, 4}), T(DType::kI32, {2, 2}, {1, 2, 3, 4})}, {},
              "floating-point");
  ExpectError("matmul", {a, Tensor::zeros(DType::kF64, {3, 2})}, {}, "dtypes differ (f32 and f64)");
  ExpectError("matmul", {T(DType::kF32, {}, {1}), a}, {}, "at least 1-D");
  ExpectError("matmul",
              {Tensor::zeros(DType::kF32, {2, 2, 3}), Tensor::zeros(DType::kF32, {3, 3, 2})}, {},
              "do not broadcast");
}

// ---- linear / addmm ----

TEST(Linear, WithAndWithoutBias) {
  Tensor x = T(DType::kF32, {2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor w = T(DType::kF32, {2, 3}, {1, 0, -1, 2, 1, 0});  // [out=2, in=3]
  Tensor b = T(DType::kF32, {2}, {10, 20});
  ExpectTensor(Op("linear", {x, w}), DType::kF32, {2, 2}, {-2, 4, -2, 13});
  ExpectTensor(Op("linear", {x, w, b}), DType::kF32, {2, 2}, {8, 24, 8, 33});
  ExpectTensor(Op("linear", {T(DType::kF32, {3}, {1, 2, 3}), w, b}), DType::kF32, {2}, {8, 24});
  Tensor x3 = T(DType::kF64, {2, 1, 3}, {1, 2, 3, 4, 5, 6});
  ExpectTensor(Op("linear", {x3, w.to(DType::kF64), b.to(DType::kF64)}), DType::kF64, {2, 1, 2},
               {8, 24, 8, 33});
  ExpectTensor(Op("linear", {x.to(DType::kBF16), w.to(DType::kBF16), b.to(DType::kBF16)}),
               DType::kBF16, {2, 2}, {8, 24, 8, 33}, 4e-3);
  // A transposed input and an [in, out] weight viewed as [out, in].
  Tensor wt = T(DType::kF32, {3, 2}, {1, 2, 0, 1, -1, 0}).transpose(0, 1);
  ExpectTensor(Op("linear", {x.transpose(0, 1).contiguous().transpose(0, 1), wt, b}), DType::kF32,
               {2, 2}, {8, 24, 8, 33});
}

TEST(Linear, LargeRandom) {
  for (DType dt : {DType::kF32, DType::kF64}) {
    SCOPED_TRACE(dtype_name(dt));
    Tensor x = Uniform(dt, {3, 37, 100}, 70), w = Uniform(dt, {51, 100}, 71),
           b = Uniform(dt, {51}, 72);
    Tensor y = Op("linear", {x, w, b});
    Reference ref = RefMatmul(x, w.transpose(0, 1));
    const std::vector<double> bv = b.to_doubles();
    for (size_t i = 0; i < ref.value.size(); ++i) ref.value[i] += bv[i % 51];
    ExpectMatmulClose(y, ref, 101, dt);
  }
}

TEST(Linear, Errors) {
  Tensor x = T(DType::kF32, {2, 3}, {1, 2, 3, 4, 5, 6});
  ExpectError("linear", {x, Tensor::zeros(DType::kF32, {2, 4})}, {}, "in_features 4");
  ExpectError("linear", {x, Tensor::zeros(DType::kF32, {3})}, {}, "weight must be 2-D");
  ExpectError("linear", {x, Tensor::zeros(DType::kF32, {2, 3}), Tensor::zeros(DType::kF32, {3})},
              {}, "bias shape [3] must be [2]");
  ExpectError("linear", {x, Tensor::zeros(DType::kBF16, {2, 3})}, {}, "dtypes differ");
}

TEST(Addmm, AlphaBetaAndBroadcastBias) {
  Tensor a = T(DType::kF32, {2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor b = T(DType::kF32, {3, 2}, {7, 8, 9, 10, 11, 12});
  Tensor bias = T(DType::kF32, {2, 2}, {1, 2, 3, 4});
  ExpectTensor(Op("addmm", {bias, a, b}), DType::kF32, {2, 2}, {59, 66, 142, 158});
  Attrs ab{{"beta", 0.5}, {"alpha", 2.0}};
  ExpectTensor(Op("addmm", {bias, a, b}, ab), DType::kF32, {2, 2}, {116.5, 129, 279.5, 310});
  ExpectTensor(Op("addmm", {T(DType::kF32, {2}, {10, 20}), a, b}, ab), DType::kF32, {2, 2},
               {121, 138, 283, 318});
  ExpectTensor(Op("addmm", {T(DType::kF32, {2, 1}, {10, 20}), a, b}), DType::kF32, {2, 2},
               {68, 74, 159, 174});
  ExpectTensor(Op("addmm", {T(DType::kF64, {}, {1}), a.to(DType::kF64), b.to(DType::kF64)},
                  Attrs{{"alpha", int64_t{-1}}}),
               DType::kF64, {2, 2}, {-57, -63, -138, -153});
  // beta = 0 ignores the bias, NaN included.
  Tensor nan_bias = Tensor::full(DType::kF32, {2, 2}, std::numeric_limits<double>::quiet_NaN());
  ExpectTensor(Op("addmm", {nan_bias, a, b}, Attrs{{"beta", 0.0}}), DType::kF32, {2, 2},
               {58, 64, 139, 154});
  ExpectTensor(Op("addmm", {bias.to(DType::kBF16), a.to(DType::kBF16), b.to(DType::kBF16)}, ab),
               DType::kBF16, {2, 2}, {116.5, 129, 279.5, 310}, 4e-3);
  // Column-major operands (transposed views of transposed copies) reach the GEMM as trans flags.
  Tensor a_cm = a.transpose(0, 1).contiguous().transpose(0, 1);
  Tensor b_cm = b.transpose(0, 1).contiguous().transpose(0, 1);
  ASSERT_FALSE(a_cm.is_contiguous());
  ExpectTensor(Op("addmm", {bias, a_cm, b_cm}), DType::kF32, {2, 2}, {59, 66, 142, 158});
}

TEST(Addmm, Errors) {
  Tensor a = T(DType::kF32, {2, 3}, {1, 2, 3, 4, 5, 6});
  ExpectError("addmm", {Tensor::zeros(DType::kF32, {3}), a, Tensor::zeros(DType::kF32, {3, 2})}, {},
              "does not broadcast to the product's shape [2,2]");
  ExpectError("addmm", {Tensor::zeros(DType::kF32, {2}), a, Tensor::zeros(DType::kF32, {2, 2})}, {},
              "inner dimensions do not match");
  ExpectError("addmm", {Tensor::zeros(DType::kF32, {2}), a, Tensor::zeros(DType::kF32, {3})}, {},
              "must be 2-D");
  ExpectError("addmm", {Tensor::zeros(DType::kF64, {2}), a, Tensor::zeros(DType::kF32, {3, 2})}, {},
              "dtypes differ");
}

// ---- embedding ----

TEST(Embedding, GathersRows) {
  Tensor w = T(DType::kF32, {4, 2}, {0, 1, 2, 3, 4, 5, 6, 7});
  ExpectTensor(Op("embedding", {w, T(DType::kI64, {2, 2}, {3, 0, 1, 1})}), DType::kF32, {2, 2, 2},
               {6, 7, 0, 1, 2, 3, 2, 3});
  ExpectTensor(Op("embedding", {w, T(DType::kI32, {3}, {2, 2, 0})}), DType::kF32, {3, 2},
               {4, 5, 4, 5, 0, 1});
  ExpectTensor(Op("embedding", {w, T(DType::kI64, {}, {1})}), DType::kF32, {2}, {2, 3});
  ExpectTensor(Op("embedding", {w, Tensor::empty(DType::kI64, {0})}), DType::kF32, {0, 2}, {});
  // A transposed table (column stride 4) and a sliced one (row stride 4).
  Tensor wt = T(DType::kF64, {2, 4}, {0, 2, 4, 6, 1, 3, 5, 7}).transpose(0, 1);
  ExpectTensor(Op("embedding", {wt, T(DType::kI64, {2}, {3, 1})}), DType::kF64, {2, 2},
               {6, 7, 2, 3});
  Tensor ws = T(DType::kBF16, {2, 4}, {0, 1, 2, 3, 4, 5, 6, 7}).slice(1, 1, 3);
  ExpectTensor(Op("embedding", {ws, T(DType::kI32, {2}, {1, 0})}), DType::kBF16, {2, 2},
               {5, 6, 1, 2});
}

TEST(Embedding, LargeTableInParallel) {
  Tensor w = Uniform(DType::kF32, {1000, 64}, 80);
  Tensor idx = Tensor::empty(DType::kI64, {50, 20});
  fill_randint(idx, 81, 0, 1000);
  Tensor y = Op("embedding", {w, idx});
  for (int64_t i = 0; i < idx.numel(); i += 37) {
    const int64_t row = static_cast<int64_t>(idx.get(i));
    for (int64_t j = 0; j < 64; ++j) ASSERT_EQ(y.get(i * 64 + j), w.get(row * 64 + j));
  }
}

TEST(Embedding, Errors) {
  Tensor w = T(DType::kF32, {4, 2}, {0, 1, 2, 3, 4, 5, 6, 7});
  ExpectError("embedding", {w, T(DType::kI64, {3}, {0, 4, 1})}, {},
              "index 4 is out of range for a table of 4 rows");
  ExpectError("embedding", {w, T(DType::kI32, {2}, {-1, 0})}, {}, "index -1");
  ExpectError("embedding", {w, T(DType::kF32, {2}, {0, 1})}, {}, "indices must be i32 or i64");
  ExpectError("embedding", {T(DType::kI32, {2, 2}, {0, 1, 2, 3}), T(DType::kI64, {1}, {0})}, {},
              "floating-point");
  ExpectError("embedding", {T(DType::kF32, {4}, {0, 1, 2, 3}), T(DType::kI64, {1}, {0})}, {},
              "must be 2-D");
}

// ---- the GEMM entry points used by generated code ----

std::vector<double> RefGemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                            const std::vector<double>& a, int64_t lda, const std::vector<double>& b,
                            int64_t ldb, const std::vector<double>& c, int64_t ldc, double beta,
                            double alpha) {
  std::vector<double> out = c;
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (int64_t p = 0; p < k; ++p)
        s += (ta ? a[p * lda + i] : a[i * lda + p]) * (tb ? b[j * ldb + p] : b[p * ldb + j]);
      out[i * ldc + j] = alpha * s + (beta == 0 ? 0 : beta * c[i * ldc + j]);
    }
  }
  return out;
}

std::vector<double> RandomVector(size_t n, uint64_t seed) {
  std::vector<double> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = random_uniform(seed, i) * 2 - 1;
  return v;
}

TEST(Gemm, TransposesLeadingDimensionsAlphaBeta) {
  const int64_t m = 13, n = 11, k = 17;
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      for (double beta : {0.0, 1.0, -0.5}) {
        SCOPED_TRACE(::testing::Message() << "ta=" << ta << " tb=" << tb << " beta=" << beta);
        const int64_t lda = (ta ? m : k) + 3, ldb = (tb ? k : n) + 2, ldc = n + 5;
        const std::vector<double> a = RandomVector((ta ? k : m) * lda, 1),
                                  b = RandomVector((tb ? n : k) * ldb, 2);
        std::vector<double> c = RandomVector(m * ldc, 3);
        if (beta == 0.0) c[0] = std::numeric_limits<double>::quiet_NaN();  // must not be read
        const std::vector<double> want =
            RefGemm(ta, tb, m, n, k, a, lda, b, ldb, c, ldc, beta, 1.5);
        std::vector<double> c64 = c;
        gemm_f64(ta, tb, m, n, k, a.data(), lda, b.data(), ldb, c64.data(), ldc, beta, 1.5);
        std::vector<float> a32(a.begin(), a.end()), b32(b.begin(), b.end()),
            c32(c.begin(), c.end());
        gemm_f32(ta, tb, m, n, k, a32.data(), lda, b32.data(), ldb, c32.data(), ldc,
                 static_cast<float>(beta), 1.5f);
        for (int64_t i = 0; i < m; ++i) {
          for (int64_t j = 0; j < ldc; ++j) {
            const size_t at = i * ldc + j;
            // Padding columns beyond n are untouched.
            ASSERT_NEAR(c64[at], want[at], 1e-13) << i << "," << j;
            ASSERT_NEAR(c32[at], static_cast<float>(want[at]), 1e-5) << i << "," << j;
          }
        }
      }
    }
  }
}

TEST(Gemm, BatchedWithBroadcastOperand) {
  const int64_t batch = 5, m = 6, n = 7, k = 8;
  const std::vector<double> a = RandomVector(m * k, 4), b = RandomVector(batch * k * n, 5);
  std::vector<float> a32(a.begin(), a.end()), b32(b.begin(), b.end()), c32(batch * m * n);
  std::vector<double> c64(batch * m * n);
  gemm_batched_f32(false, false, batch, m, n, k, a32.data(), k, 0, b32.data(), n, k * n, c32.data(),
                   n, m * n);
  gemm_batched_f64(false, false, batch, m, n, k, a.data(), k, 0, b.data(), n, k * n, c64.data(), n,
                   m * n);
  for (int64_t t = 0; t < batch; ++t) {
    const std::vector<double> bt(b.begin() + t * k * n, b.begin() + (t + 1) * k * n);
    const std::vector<double> want =
        RefGemm(false, false, m, n, k, a, k, bt, n, std::vector<double>(m * n), n, 0, 1);
    for (int64_t i = 0; i < m * n; ++i) {
      ASSERT_NEAR(c64[t * m * n + i], want[i], 1e-14);
      ASSERT_NEAR(c32[t * m * n + i], want[i], 1e-5);
    }
  }
}

// Overlapping batch windows (stride 1 < one matrix) are legal for the read-only operands; oneDNN
// may refuse such a layout, and then the sgemm fallback must give the same answer.
TEST(Gemm, OverlappingBatchWindows) {
  const int64_t batch = 4, m = 3, n = 5, k = 4;
  const std::vector<double> a = RandomVector(batch + m * k, 8), b = RandomVector(k * n, 9);
  std::vector<float> a32(a.begin(), a.end()), b32(b.begin(), b.end()), c32(batch * m * n);
  std::vector<double> c64(batch * m * n);
  gemm_batched_f32(false, false, batch, m, n, k, a32.data(), k, 1, b32.data(), n, 0, c32.data(), n,
                   m * n);
  gemm_batched_f64(false, false, batch, m, n, k, a.data(), k, 1, b.data(), n, 0, c64.data(), n,
                   m * n);
  for (int64_t t = 0; t < batch; ++t) {
    const std::vector<double> at(a.begin() + t, a.begin() + t + m * k);
    const std::vector<double> want =
        RefGemm(false, false, m, n, k, at, k, b, n, std::vector<double>(m * n), n, 0, 1);
    for (int64_t i = 0; i < m * n; ++i) {
      ASSERT_NEAR(c64[t * m * n + i], want[i], 1e-14);
      ASSERT_NEAR(c32[t * m * n + i], want[i], 1e-5);
    }
  }
}

// Generated code calls GEMM from inside its own parallel loops and from several threads at once:
// both must give the results of a plain call (shared primitives, per-thread scratchpads).
TEST(Gemm, ConcurrentAndNestedCalls) {
  const int64_t m = 64, n = 48, k = 80;
  const std::vector<double> a = RandomVector(m * k, 6), b = RandomVector(k * n, 7);
  std::vector<float> a32(a.begin(), a.end()), b32(b.begin(), b.end()), want(m * n);
  gemm_f32(false, false, m, n, k, a32.data(), k, b32.data(), n, want.data(), n);
  std::vector<std::vector<float>> results(8, std::vector<float>(m * n));
#pragma omp parallel for num_threads(2)
  for (int t = 0; t < 8; ++t)
    gemm_f32(false, false, m, n, k, a32.data(), k, b32.data(), n, results[t].data(), n);
  std::vector<std::thread> threads;
  std::vector<std::vector<float>> threaded(4, std::vector<float>(m * n));
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int rep = 0; rep < 5; ++rep) {
        gemm_f32(false, false, m, n, k, a32.data(), k, b32.data(), n, threaded[t].data(), n);
      }
    });
  }
  for (auto& th : threads) th.join();
  // Nested calls run on one thread, which may split K differently from a team: equal up to
  // rounding. Calls from separate threads use the same partition as the plain call: bitwise equal.
  for (const auto& r : results) {
    for (int64_t i = 0; i < m * n; ++i) ASSERT_NEAR(r[i], want[i], 1e-5 * (1 + std::abs(want[i])));
  }
  for (const auto& r : threaded) ASSERT_EQ(r, want);
}

TEST(Gemm, RejectsInvalidLeadingDimensions) {
  std::vector<float> a(16), b(16), c(16);
  EXPECT_THROW(gemm_f32(false, false, 2, 2, 4, a.data(), 3, b.data(), 2, c.data(), 2), Error);
  std::vector<double> d(16);
  EXPECT_THROW(gemm_f64(false, false, 2, 4, 2, d.data(), 2, d.data(), 2, d.data(), 4), Error);
}

}  // namespace
}  // namespace crucible
