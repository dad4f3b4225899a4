// PackedLinear against a double-precision reference computed here: layouts, epilogues, odd sizes,
// padded rows, weights that die after packing, concurrent calls and the error cases.
#include "crucible/ops/packed_linear.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numbers>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "crucible/core/error.h"
#include "crucible/core/rng.h"
#include "test_util.h"

namespace crucible {
namespace {

using testing::op_helpers::ExpectErrorWith;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kSentinel = -12345.678f;  // what row padding of y must still hold afterwards

Tensor Uniform(Shape shape, uint64_t seed, double low = -1.0, double high = 1.0) {
  Tensor t = Tensor::empty(DType::kF32, std::move(shape));
  fill_uniform(t, seed, low, high);
  return t;
}

double Activate(Epilogue e, double v) {
  switch (e) {
    case Epilogue::kNone:
      return v;
    case Epilogue::kRelu:
      return v > 0 ? v : 0;
    case Epilogue::kGelu:
      return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0)));
    case Epilogue::kGeluTanh:
      return 0.5 * v *
             (1 + std::tanh(std::sqrt(2 / std::numbers::pi) * (v + 0.044715 * v * v * v)));
    case Epilogue::kSigmoid:
      return 1 / (1 + std::exp(-v));
    case Epilogue::kTanh:
      return std::tanh(v);
  }
  return v;
}

// What one PackedLinear computes, in double, and a bound for each element's f32 error.
struct Problem {
  int64_t m = 0, k = 0, n = 0;
  bool nk = true;  // weight stored [N,K]
  Tensor weight, bias;
  Epilogue epilogue = Epilogue::kNone;
  float alpha = 1.0f, beta = 1.0f;
};

// x has m rows with stride ldx. Returns the expected y (m x n, dense) and fills `tol`.
//
// Error bound: a K-term f32 dot product in any summation order (blocked, FMA or not) errs by at
// most gamma_K * sum|x||w| ~= K*u*S with u = 2^-24; folding alpha into the weights and pre-scaling
// the bias by beta add one rounding each, so (K+3)*u*S bounds the pre-activation error, S =
// |alpha| sum|x w| + |beta b|. No epilogue has a slope above 1.13 (GELU's maximum), and oneDNN's
// vectorised exp/erf/tanh approximations add a few ulps of the result: 8 ulps (2^-21 relative)
// plus 1e-7 absolute, where sigmoid and GELU tend to 0.
std::vector<double> Reference(const Problem& p, const std::vector<float>& x, int64_t ldx,
                              std::vector<double>* tol) {
  std::vector<double> y(p.m * p.n);
  tol->assign(p.m * p.n, 0.0);
  const std::vector<double> wv = p.weight.to_doubles();
  std::vector<double> wd(p.n * p.k);  // as [N,K]
  for (int64_t j = 0; j < p.n; ++j) {
    for (int64_t q = 0; q < p.k; ++q) wd[j * p.k + q] = wv[p.nk ? j * p.k + q : q * p.n + j];
  }
  const bool has_bias = p.bias.defined() && p.beta != 0.0f;
  const std::vector<double> bv = has_bias ? p.bias.to_doubles() : std::vector<double>{};
  const double u = std::ldexp(1.0, -24);
  for (int64_t i = 0; i < p.m; ++i) {
    for (int64_t j = 0; j < p.n; ++j) {
      double sum = 0, abs_sum = 0;
      for (int64_t q = 0; q < p.k; ++q) {
        const double t = static_cast<double>(x[i * ldx + q]) * wd[j * p.k + q];
        sum += t;
        abs_sum += std::abs(t);
      }
      double pre = p.alpha * sum;
      double s = std::abs(p.alpha) * abs_sum;
      if (has_bias) {
        const double b = static_cast<double>(p.beta) * bv[bv.size() == 1 ? 0 : j];
        pre += b;
        s += std::abs(b);
      }
      const double out = Activate(p.epilogue, pre);
      y[i * p.n + j] = out;
      (*tol)[i * p.n + j] = 1.13 * (p.k + 3) * u * s + std::ldexp(std::abs(out), -21) + 1e-7;
    }
  }
  return y;
}

std::vector<float> Inputs(int64_t m, int64_t k, int64_t ldx, uint64_t seed) {
  std::vector<float> x(m * ldx, kNaN);  // NaN padding: reading it would poison the result
  if (m * k == 0) return x;
  Tensor t = Uniform({m, k}, seed);
  for (int64_t i = 0; i < m; ++i) std::memcpy(&x[i * ldx], t.data<float>() + i * k, k * 4);
  return x;
}

// Runs `pl` on fresh inputs and checks every element and the padding of y. Returns the worst
// error as a fraction of its tolerance (infinity for NaN or touched padding); reports failures
// itself only when `expect`, for callers on other threads.
double RunAndCompare(const PackedLinear& pl, const Problem& p, int64_t ldx, int64_t ldy,
                     uint64_t seed, bool expect = true) {
  const std::vector<float> x = Inputs(p.m, p.k, ldx, seed);
  std::vector<float> y(p.m * ldy, kSentinel);
  pl.run(x.data(), p.m, ldx, y.data(), ldy);
  std::vector<double> tol;
  const std::vector<double> want = Reference(p, x, ldx, &tol);
  const double inf = std::numeric_limits<double>::infinity();
  double worst = 0;
  int reported = 0;
  for (int64_t i = 0; i < p.m; ++i) {
    for (int64_t j = 0; j < ldy; ++j) {
      const float got = y[i * ldy + j];
      if (j >= p.n) {
        if (std::memcmp(&got, &kSentinel, 4) == 0) continue;
        worst = inf;
        if (expect && reported++ < 5) {
          ADD_FAILURE() << "row padding y[" << i << "," << j << "] overwritten with " << got;
        }
        continue;
      }
      const double err = std::abs(got - want[i * p.n + j]), t = tol[i * p.n + j];
      const double ratio = std::isnan(got) ? inf : err / t;
      worst = std::max(worst, ratio);
      if (expect && !(ratio <= 1.0) && reported++ < 5) {
        ADD_FAILURE() << "y[" << i << "," << j << "] = " << got << ", want " << want[i * p.n + j]
                      << " +- " << t << " (M=" << p.m << " K=" << p.k << " N=" << p.n
                      << " ldx=" << ldx << " ldy=" << ldy
                      << " epilogue=" << epilogue_name(p.epilogue) << ")";
      }
    }
  }
  return worst;
}

Problem MakeProblem(int64_t m, int64_t k, int64_t n, bool nk, bool with_bias, Epilogue e,
                    uint64_t seed, double wscale = 1.0) {
  Problem p;
  p.m = m;
  p.k = k;
  p.n = n;
  p.nk = nk;
  p.epilogue = e;
  // Weights ~ U(-r, r) with r = wscale/sqrt(K) keep pre-activations O(1), where activations bend.
  const double r = wscale / std::sqrt(static_cast<double>(std::max<int64_t>(k, 1)));
  p.weight = Uniform(nk ? Shape{n, k} : Shape{k, n}, seed, -r, r);
  if (with_bias) p.bias = Uniform({n}, seed + 1);
  return p;
}

PackedLinear Pack(const Problem& p) {
  return PackedLinear(p.weight, p.nk, p.bias, p.epilogue, p.alpha, p.beta);
}

constexpr Epilogue kAllEpilogues[] = {Epilogue::kNone,     Epilogue::kRelu,    Epilogue::kGelu,
                                      Epilogue::kGeluTanh, Epilogue::kSigmoid, Epilogue::kTanh};

TEST(PackedLinear, EpilogueNames) {
  EXPECT_STREQ(epilogue_name(Epilogue::kNone), "none");
  EXPECT_STREQ(epilogue_name(Epilogue::kRelu), "relu");
  EXPECT_STREQ(epilogue_name(Epilogue::kGelu), "gelu");
  EXPECT_STREQ(epilogue_name(Epilogue::kGeluTanh), "gelu_tanh");
  EXPECT_STREQ(epilogue_name(Epilogue::kSigmoid), "sigmoid");
  EXPECT_STREQ(epilogue_name(Epilogue::kTanh), "tanh");
}

// Every (M, K, N) from the odd sizes, linear layout, with and without bias.
TEST(PackedLinear, OddSizesWithAndWithoutBias) {
  uint64_t seed = 100;
  for (int64_t m : {1, 7, 333}) {
    for (int64_t k : {13, 512}) {
      for (int64_t n : {1, 10, 1000}) {
        for (bool with_bias : {false, true}) {
          SCOPED_TRACE(::testing::Message()
                       << "M=" << m << " K=" << k << " N=" << n << " bias=" << with_bias);
          const Problem p = MakeProblem(m, k, n, true, with_bias, Epilogue::kNone, seed += 2);
          const PackedLinear pl = Pack(p);
          EXPECT_EQ(pl.in_features(), k);
          EXPECT_EQ(pl.out_features(), n);
          RunAndCompare(pl, p, k, n, seed + 7);
        }
      }
    }
  }
}

// Each epilogue on the blocked path (M >= 2, dense rows), the 1-row path and the padded-row path.
TEST(PackedLinear, EachEpilogueOnEveryPath) {
  uint64_t seed = 500;
  for (Epilogue e : kAllEpilogues) {
    for (bool with_bias : {false, true}) {
      SCOPED_TRACE(::testing::Message() << epilogue_name(e) << " bias=" << with_bias);
      // wscale 3 spreads pre-activations over about [-4, 4], through every activation's bend.
      Problem p = MakeProblem(33, 64, 48, true, with_bias, e, seed += 2, 3.0);
      const PackedLinear pl = Pack(p);
      EXPECT_EQ(pl.epilogue(), e);
      RunAndCompare(pl, p, 64, 48, seed + 11);  // dense
      RunAndCompare(pl, p, 70, 51, seed + 12);  // padded rows
      p.m = 1;
      RunAndCompare(pl, p, 64, 48, seed + 13);  // one row
    }
  }
}

// A NaN in a row of x makes that row's outputs NaN through every epilogue, on the blocked, the
// 1-row and the padded-row paths; so does inf - inf inside a sum. oneDNN's relu post-op turned
// them into 0 (max(x, 0) with 0 winning over NaN); relu now runs in a pass that keeps NaN.
TEST(PackedLinear, NanAndInfPassThroughEveryEpilogue) {
  const int64_t k = 40, n = 48;
  for (Epilogue e : kAllEpilogues) {
    const Problem p = MakeProblem(8, k, n, true, true, e, 900, 3.0);
    const PackedLinear pl = Pack(p);
    for (int64_t m : {int64_t{8}, int64_t{1}}) {
      for (int64_t ldy : {n, n + 5}) {
        SCOPED_TRACE(::testing::Message() << epilogue_name(e) << " M=" << m << " ldy=" << ldy);
        std::vector<float> x(m * k, 0.25f), y(m * ldy, 0.0f);
        x[3] = NAN;
        if (m > 1) x[k + 1] = std::numeric_limits<float>::infinity();
        if (m > 1) x[k + 2] = -std::numeric_limits<float>::infinity();
        pl.run(x.data(), m, k, y.data(), ldy);
        for (int64_t j = 0; j < n; ++j) EXPECT_TRUE(std::isnan(y[j])) << "row 0 col " << j;
        if (m > 1) {
          // inf * w1 - inf * w2 is NaN unless the two weights' signs differ: then +-inf.
          const float* w = p.weight.data<float>();
          for (int64_t j = 0; j < n; ++j) {
            if ((w[j * k + 1] > 0) == (w[j * k + 2] > 0)) {
              EXPECT_TRUE(std::isnan(y[ldy + j])) << "row 1 col " << j;
            }
          }
        }
      }
    }
  }
}

// W stored [K,N] (matmul's and addmm's right operand).
TEST(PackedLinear, KNWeightLayout) {
  uint64_t seed = 900;
  for (int64_t m : {1, 7, 333}) {
    for (auto [k, n] : {std::pair<int64_t, int64_t>{13, 1000}, {512, 10}, {512, 512}, {13, 1}}) {
      SCOPED_TRACE(::testing::Message() << "M=" << m << " K=" << k << " N=" << n);
      const Problem p = MakeProblem(m, k, n, false, true, Epilogue::kRelu, seed += 2);
      RunAndCompare(Pack(p), p, k, n, seed + 5);
    }
  }
}

// addmm: alpha * (x @ W) + beta * bias, including a bias broadcast from [1,N] and from one value.
TEST(PackedLinear, AlphaAndBetaBias) {
  uint64_t seed = 1300;
  for (auto [alpha, beta] : {std::pair<float, float>{0.5f, -2.0f}, {-3.0f, 0.25f}, {2.0f, 1.0f}}) {
    for (Epilogue e : {Epilogue::kNone, Epilogue::kTanh}) {
      SCOPED_TRACE(::testing::Message()
                   << "alpha=" << alpha << " beta=" << beta << " " << epilogue_name(e));
      Problem p = MakeProblem(65, 96, 40, false, true, e, seed += 2);
      p.alpha = alpha;
      p.beta = beta;
      const PackedLinear pl = Pack(p);
      RunAndCompare(pl, p, 96, 40, seed + 3);
      p.m = 1;
      RunAndCompare(pl, p, 96, 40, seed + 4);
    }
  }
  Problem p = MakeProblem(9, 16, 12, false, false, Epilogue::kNone, 1400);
  p.alpha = 1.5f;
  p.beta = 3.0f;
  p.bias = Uniform({1, 12}, 1401);
  RunAndCompare(Pack(p), p, 16, 12, 1402);
  p.bias = Tensor::full(DType::kF32, {1}, 0.75);
  RunAndCompare(Pack(p), p, 16, 12, 1403);
}

// beta == 0 drops the bias altogether, as torch.addmm does: even a NaN bias leaves y finite.
TEST(PackedLinear, ZeroBetaIgnoresBias) {
  Problem p = MakeProblem(20, 32, 16, false, false, Epilogue::kNone, 1500);
  p.beta = 0.0f;
  p.bias = Tensor::full(DType::kF32, {16}, std::numeric_limits<double>::quiet_NaN());
  const PackedLinear pl = Pack(p);
  EXPECT_EQ(pl.describe().find("bias"), std::string::npos) << pl.describe();
  p.bias = Tensor();
  RunAndCompare(pl, p, 32, 16, 1501);
}

// Row strides beyond K and N: x's padding (NaN) must not be read, y's must not be written.
TEST(PackedLinear, PaddedRowStrides) {
  uint64_t seed = 1700;
  for (int64_t m : {1, 7, 333}) {
    for (auto [k, n] : {std::pair<int64_t, int64_t>{13, 10}, {512, 1000}, {512, 1}}) {
      SCOPED_TRACE(::testing::Message() << "M=" << m << " K=" << k << " N=" << n);
      const Problem p = MakeProblem(m, k, n, true, true, Epilogue::kGelu, seed += 2, 2.0);
      const PackedLinear pl = Pack(p);
      RunAndCompare(pl, p, k + 3, n + 5, seed + 1);
      RunAndCompare(pl, p, k, n + 1, seed + 2);  // only y padded
      RunAndCompare(pl, p, k + 8, n, seed + 3);  // only x padded
    }
  }
}

// Packing copies: the caller's weight and bias may be overwritten and freed right after
// construction, including before the first 1-row call (which derives the plain copy lazily).
TEST(PackedLinear, CallerTensorsMayDieAfterConstruction) {
  for (auto [k, n] : {std::pair<int64_t, int64_t>{64, 48}, {64, 1}}) {
    for (bool nk : {true, false}) {
      SCOPED_TRACE(::testing::Message() << "K=" << k << " N=" << n << " nk=" << nk);
      Problem p = MakeProblem(5, k, n, nk, true, Epilogue::kSigmoid, 1900 + n, 2.0);
      Problem saved = p;
      saved.weight = p.weight.clone();
      saved.bias = p.bias.clone();
      std::optional<PackedLinear> pl;
      {
        Tensor w = p.weight, b = p.bias;
        p = Problem{};
        pl.emplace(w, nk, b, Epilogue::kSigmoid);
        std::fill_n(w.data<float>(), w.numel(), kNaN);
        std::fill_n(b.data<float>(), b.numel(), kNaN);
      }
      saved.m = 1;
      RunAndCompare(*pl, saved, k, n, 1950);
      saved.m = 5;
      RunAndCompare(*pl, saved, k, n, 1951);
      // A copy shares the packed data and outlives the original.
      const PackedLinear copy = *pl;
      pl.reset();
      RunAndCompare(copy, saved, k, n, 1952);
    }
  }
}

// Two threads call run() at once on one PackedLinear, with batch sizes that create primitives
// and the lazily made plain copy while the other thread runs.
TEST(PackedLinear, ConcurrentRunsFromTwoThreads) {
  const Problem base = MakeProblem(1, 256, 192, true, true, Epilogue::kGeluTanh, 2100, 2.0);
  const PackedLinear pl = Pack(base);
  double worst[2] = {0, 0};
  auto worker = [&](int id) {
    for (int iter = 0; iter < 6; ++iter) {
      for (int64_t m :
           {int64_t{1}, int64_t{3}, int64_t{64}, int64_t{200}, int64_t{1 + 13 * iter + id}}) {
        Problem p = base;
        p.m = m;
        const uint64_t seed = 3000 + 100 * id + 10 * iter + static_cast<uint64_t>(m);
        worst[id] = std::max(worst[id], RunAndCompare(pl, p, 256, 192, seed, false));
        worst[id] = std::max(worst[id], RunAndCompare(pl, p, 260, 192, seed + 1, false));
      }
    }
  };
  std::thread a(worker, 0), b(worker, 1);
  a.join();
  b.join();
  EXPECT_LE(worst[0], 1.0);
  EXPECT_LE(worst[1], 1.0);
}

// Calls from inside an OpenMP parallel region, each thread on its own slice of rows.
TEST(PackedLinear, RunsInsideOpenMPParallelRegion) {
  Problem p = MakeProblem(96, 40, 24, true, true, Epilogue::kRelu, 2300);
  const PackedLinear pl = Pack(p);
  const std::vector<float> x = Inputs(p.m, p.k, p.k, 2301);
  std::vector<float> y(p.m * p.n, kSentinel);
#pragma omp parallel for num_threads(2)
  for (int64_t c = 0; c < 4; ++c) {
    pl.run(x.data() + c * 24 * p.k, 24, p.k, y.data() + c * 24 * p.n, p.n);
  }
  std::vector<double> tol;
  const std::vector<double> want = Reference(p, x, p.k, &tol);
  for (size_t i = 0; i < y.size(); ++i) ASSERT_NEAR(y[i], want[i], tol[i]) << "element " << i;
}

// Products below the parallel grain run on primitives made (and run) on one thread, larger ones on
// all threads: both from the same packed weights, on every path, with the caller's OpenMP thread
// count restored afterwards.
TEST(PackedLinear, SmallAndLargeProductsShareWeightsAndLeaveThreadsAlone) {
  const int threads_before = omp_get_max_threads();
  Problem p = MakeProblem(1, 96, 64, true, true, Epilogue::kRelu, 2400);
  const PackedLinear pl = Pack(p);
  for (int64_t m : {1, 2, 15, 16, 17, 300}) {  // 16 x 96 x 64 = 98304 multiply-adds, the grain
    SCOPED_TRACE(::testing::Message() << "M=" << m);
    p.m = m;
    RunAndCompare(pl, p, 96, 64, 2400 + m);   // dense rows
    RunAndCompare(pl, p, 100, 70, 2500 + m);  // padded rows: the plain matmul
    EXPECT_EQ(omp_get_max_threads(), threads_before);
  }
}

// More distinct batch sizes than the per-M primitive cache holds: eviction keeps results right.
TEST(PackedLinear, ManyDistinctBatchSizes) {
  Problem p = MakeProblem(1, 13, 10, true, true, Epilogue::kNone, 2500);
  const PackedLinear pl = Pack(p);
  for (int64_t m = 1; m <= 80; ++m) {
    p.m = m;
    RunAndCompare(pl, p, 13, 10, 2500 + m);
  }
  p.m = 2;
  RunAndCompare(pl, p, 13, 10, 2600);  // evicted long ago
}

// K = 0 is an empty sum: y = epilogue(bias). N = 0 and M = 0 write nothing.
TEST(PackedLinear, EmptyDimensions) {
  const Tensor bias = Tensor::from_doubles(DType::kF32, {3}, std::vector<double>{-1.0, 0.5, 2.0});
  const PackedLinear pl(Tensor::empty(DType::kF32, {3, 0}), true, bias, Epilogue::kRelu);
  EXPECT_EQ(pl.in_features(), 0);
  std::vector<float> y(2 * 4, kSentinel);
  pl.run(nullptr, 2, 1, y.data(), 4);
  EXPECT_EQ(y, (std::vector<float>{0.0f, 0.5f, 2.0f, kSentinel, 0.0f, 0.5f, 2.0f, kSentinel}));

  const PackedLinear none(Tensor::empty(DType::kF32, {0, 8}), true, Tensor(), Epilogue::kNone);
  EXPECT_EQ(none.out_features(), 0);
  std::vector<float> x(8, 1.0f);
  none.run(x.data(), 1, 8, y.data(), 1);  // nothing to write

  const Problem p = MakeProblem(0, 8, 4, true, false, Epilogue::kNone, 2700);
  Pack(p).run(nullptr, 0, 8, nullptr, 4);
}

// prepare() builds ahead what run() needs: the 1-row call's plain copy shows in packed_bytes()
// before any run, and prepared calls compute the same as unprepared ones.
TEST(PackedLinear, PrepareAhead) {
  Problem p = MakeProblem(1, 96, 64, true, true, Epilogue::kGelu, 2800);
  const PackedLinear pl = Pack(p);
  const size_t before = pl.packed_bytes();
  pl.prepare(1, 96, 64);
  EXPECT_GE(pl.packed_bytes(), before + 96u * 64u * 4u);
  pl.prepare(40, 96, 64);
  pl.prepare(0, 96, 64);
  RunAndCompare(pl, p, 96, 64, 2801);
  p.m = 40;
  RunAndCompare(pl, p, 96, 64, 2802);
  ExpectErrorWith([&] { pl.prepare(4, 95, 64); }, "ldx=95");
}

// With the row count hinted (a compiler's static M), the weights are packed once, in the layout
// that M's convolution wants, so prepare() and run() add no second copy; a hint of 1 (a gemv)
// packs only the plain copy. Results match the reference either way.
TEST(PackedLinear, RowsHintPacksOneCopy) {
  uint64_t seed = 7000;
  for (int64_t m : {1, 7, 1024}) {
    for (auto [k, n] : {std::pair<int64_t, int64_t>{768, 768}, {768, 3072}, {96, 40}}) {
      SCOPED_TRACE(::testing::Message() << "M=" << m << " K=" << k << " N=" << n);
      Problem p = MakeProblem(m, k, n, true, true, Epilogue::kGelu, seed += 2);
      const PackedLinear pl(p.weight, p.nk, p.bias, p.epilogue, p.alpha, p.beta, m);
      pl.prepare(m, k, n);
      // One copy, its outputs padded at most to a 64-wide block, plus the bias.
      const size_t one_copy = static_cast<size_t>(k * n) * sizeof(float);
      const size_t padded = static_cast<size_t>(k * ((n + 63) / 64 * 64) + n) * sizeof(float);
      EXPECT_GE(pl.packed_bytes(), one_copy);
      EXPECT_LE(pl.packed_bytes(), padded) << pl.describe();
      RunAndCompare(pl, p, k, n, seed + 1);
      EXPECT_LE(pl.packed_bytes(), padded) << "run() made a second copy: " << pl.describe();
    }
  }
}

TEST(PackedLinear, DescribeAndPackedBytes) {
  const Problem p = MakeProblem(2, 512, 512, true, true, Epilogue::kRelu, 2900);
  const PackedLinear pl = Pack(p);
  const std::string d = pl.describe();
  EXPECT_NE(d.find("packed linear 512x512"), std::string::npos) << d;
  EXPECT_NE(d.find("bias+relu epilogue"), std::string::npos) << d;
  EXPECT_NE(d.find("oneDNN"), std::string::npos) << d;
  const size_t before = pl.packed_bytes();
  EXPECT_GE(before, 512u * 512u * 4u + 512u * 4u);
  Problem one = p;
  one.m = 1;
  RunAndCompare(pl, one, 512, 512, 2901);
  EXPECT_GE(pl.packed_bytes(), before + 512u * 512u * 4u);  // the plain copy for 1-row calls

  Problem q = MakeProblem(2, 13, 1, false, false, Epilogue::kTanh, 2902);
  q.alpha = 0.5f;
  const PackedLinear small = Pack(q);
  EXPECT_NE(small.describe().find("packed linear 13x1"), std::string::npos) << small.describe();
  EXPECT_NE(small.describe().find("tanh epilogue"), std::string::npos) << small.describe();
  EXPECT_NE(small.describe().find("alpha=0.5"), std::string::npos) << small.describe();
  EXPECT_GE(small.packed_bytes(), 13u * 4u);
}

TEST(PackedLinear, RejectsBadOperands) {
  const Tensor w = Uniform({8, 4}, 3100);
  const Tensor b = Uniform({8}, 3101);
  ExpectErrorWith([&] { PackedLinear(w.to(DType::kF64), true, b, Epilogue::kNone); },
                  "weight must be f32, got f64");
  ExpectErrorWith([&] { PackedLinear(w.to(DType::kBF16), true, b, Epilogue::kNone); },
                  "weight must be f32, got bf16");
  ExpectErrorWith([&] { PackedLinear(Uniform({32}, 3102), true, b, Epilogue::kNone); },
                  "weight must be 2-D");
  ExpectErrorWith(
      [&] {
        PackedLinear(Uniform({2, 4, 4}, 3103), true, b, Epilogue::kNone);
      },
      "weight must be 2-D");
  ExpectErrorWith([&] { PackedLinear(Tensor(), true, b, Epilogue::kNone); }, "undefined");
  ExpectErrorWith([&] { PackedLinear(w, true, b.to(DType::kF64), Epilogue::kNone); },
                  "bias must be f32, got f64");
  ExpectErrorWith([&] { PackedLinear(w, true, Uniform({4}, 3104), Epilogue::kNone); },
                  "bias shape [4] must be [8]");
  ExpectErrorWith([&] { PackedLinear(w, false, b, Epilogue::kNone); },  // [K=8,N=4]
                  "bias shape [8] must be [4]");
  ExpectErrorWith(
      [&] {
        PackedLinear(w, true, Uniform({2, 8}, 3105), Epilogue::kNone);
      },
      "bias shape [2,8]");

  const PackedLinear pl(w, true, b, Epilogue::kNone);
  std::vector<float> x(64, 1.0f), y(64, 0.0f);
  ExpectErrorWith([&] { pl.run(x.data(), 2, 3, y.data(), 8); }, "ldx=3");
  ExpectErrorWith([&] { pl.run(x.data(), 2, 4, y.data(), 7); }, "ldy=7");
  ExpectErrorWith([&] { pl.run(x.data(), -1, 4, y.data(), 8); }, "negative row count");
  ExpectErrorWith([&] { pl.run(nullptr, 2, 4, y.data(), 8); }, "null");
}

}  // namespace
}  // namespace crucible
