// max_pool2d, avg_pool2d and adaptive_avg_pool2d against naive double-precision references
// (PyTorch's output-size and divisor rules written out independently), and their errors.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "crucible/core/error.h"
#include "crucible/core/rng.h"
#include "crucible/ops/max_pool_nhwc.h"
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

struct Pool {
  int64_t kh, kw, sh, sw, ph = 0, pw = 0, dh = 1, dw = 1;
  bool ceil = false, include_pad = true;
};

// PyTorch's pooling_output_shape, spelled out: with ceil_mode the size rounds up, unless the last
// window would then start beyond the input and its left padding.
int64_t OutSize(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d, bool ceil) {
  const double span = static_cast<double>(in + 2 * p - d * (k - 1) - 1) / static_cast<double>(s);
  int64_t out = static_cast<int64_t>(ceil ? std::ceil(span) : std::floor(span)) + 1;
  if (ceil && (out - 1) * s >= in + p) --out;
  return out;
}

// Reference pooling of contiguous [planes, h, w] data in double. max: NaN wins; avg: PyTorch's
// divisor (window clipped to the padded input, or to the input when !include_pad).
std::vector<double> RefPool(const std::vector<double>& x, int64_t planes, int64_t h, int64_t w,
                            const Pool& p, bool max, int64_t& oh, int64_t& ow) {
  oh = OutSize(h, p.kh, p.sh, p.ph, p.dh, p.ceil);
  ow = OutSize(w, p.kw, p.sw, p.pw, p.dw, p.ceil);
  std::vector<double> out;
  for (int64_t c = 0; c < planes; ++c) {
    for (int64_t y = 0; y < oh; ++y) {
      for (int64_t z = 0; z < ow; ++z) {
        double m = -std::numeric_limits<double>::infinity(), s = 0;
        int64_t inside = 0;
        for (int64_t i = 0; i < p.kh; ++i) {
          for (int64_t j = 0; j < p.kw; ++j) {
            const int64_t ih = y * p.sh - p.ph + i * p.dh, iw = z * p.sw - p.pw + j * p.dw;
            if (ih < 0 || ih >= h || iw < 0 || iw >= w) continue;
            const double v = x[(c * h + ih) * w + iw];
            if (std::isnan(v) || v > m) m = std::isnan(m) ? m : v;
            s += v;
            ++inside;
          }
        }
        if (max) {
          out.push_back(m);
        } else {
          const int64_t h0 = y * p.sh - p.ph, w0 = z * p.sw - p.pw;
          const int64_t h1 = std::min(h0 + p.kh, h + p.ph), w1 = std::min(w0 + p.kw, w + p.pw);
          const int64_t divisor = p.include_pad ? (h1 - h0) * (w1 - w0) : inside;
          out.push_back(s / static_cast<double>(divisor));
        }
      }
    }
  }
  return out;
}

Attrs PoolAttrs(const Pool& p, bool max) {
  Attrs a{{"kernel_size", std::vector<int64_t>{p.kh, p.kw}},
          {"stride", std::vector<int64_t>{p.sh, p.sw}},
          {"padding", std::vector<int64_t>{p.ph, p.pw}},
          {"ceil_mode", p.ceil}};
  if (max) {
    a.set("dilation", std::vector<int64_t>{p.dh, p.dw});
  } else {
    a.set("count_include_pad", p.include_pad);
  }
  return a;
}

double Tol(DType t) { return t == DType::kF64 ? 1e-13 : t == DType::kF32 ? 2e-6 : 8e-3; }

void CheckPool(const Tensor& x, const Pool& p, bool max) {
  const int64_t r = x.dim(), h = x.shape()[r - 2], w = x.shape()[r - 1];
  const int64_t planes = x.numel() / std::max<int64_t>(h * w, 1);
  int64_t oh, ow;
  const std::vector<double> ref = RefPool(x.to_doubles(), planes, h, w, p, max, oh, ow);
  Shape shape = x.shape();
  shape[r - 2] = oh;
  shape[r - 1] = ow;
  ExpectTensor(Op(max ? "max_pool2d" : "avg_pool2d", {x}, PoolAttrs(p, max)), x.dtype(), shape, ref,
               Tol(x.dtype()));
}

int64_t Pick(std::mt19937& rng, int64_t lo, int64_t hi) {
  return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
}

// A random window: kernel 1-4, stride 1-3, padding up to half the kernel, dilation 1-2.
Pool RandomPool(std::mt19937& rng) {
  auto pick = [&](int64_t lo, int64_t hi) { return Pick(rng, lo, hi); };
  Pool p;
  p.kh = pick(1, 4);
  p.kw = pick(1, 4);
  p.sh = pick(1, 3);
  p.sw = pick(1, 3);
  p.ph = pick(0, p.kh / 2);
  p.pw = pick(0, p.kw / 2);
  p.dh = pick(1, 2);
  p.dw = pick(1, 2);
  p.ceil = pick(0, 1) == 1;
  p.include_pad = pick(0, 1) == 1;
  return p;
}

TEST(Pool2d, RandomizedWindowsMatchReference) {
  std::mt19937 rng(77);
  auto pick = [&](int64_t lo, int64_t hi) { return Pick(rng, lo, hi); };
  int checked = 0;
  while (checked < 80) {
    Pool p = RandomPool(rng);
    const int64_t n = pick(1, 2), c = pick(1, 3), h = pick(1, 12), w = pick(1, 12);
    const bool max = checked % 2 == 0;
    if (!max) p.dh = p.dw = 1;
    if (OutSize(h, p.kh, p.sh, p.ph, p.dh, p.ceil) < 1 ||
        OutSize(w, p.kw, p.sw, p.pw, p.dw, p.ceil) < 1)
      continue;
    const DType dt = checked % 3 == 0 ? DType::kF32 : checked % 3 == 1 ? DType::kF64 : DType::kBF16;
    SCOPED_TRACE(fmt::format("case {}: {} [{},{},{},{}] k{}x{} s{},{} p{},{} d{},{} ceil={} pad={}",
                             checked, max ? "max" : "avg", n, c, h, w, p.kh, p.kw, p.sh, p.sw, p.ph,
                             p.pw, p.dh, p.dw, p.ceil, p.include_pad));
    CheckPool(Uniform(dt, {n, c, h, w}, 300 + checked), p, max);
    ++checked;
  }
}

// A max pool over a channels-inner buffer gives the op's result bit for bit: random windows with
// NaN and -inf planted, and the ResNet stem's pool large enough to run in parallel. `in_layout`
// lays a logical NCHW tensor out as `pool` reads it; channel counts are multiples of `block`.
using PoolOnBuffers = void (*)(const float*, const Shape&, const Attrs&, float*);
void CheckChannelsInnerMaxPool(const std::function<Tensor(const Tensor&)>& in_layout,
                               PoolOnBuffers pool, int64_t block, uint32_t seed) {
  std::mt19937 rng(seed);
  auto pick = [&](int64_t lo, int64_t hi) { return Pick(rng, lo, hi); };
  int checked = 0;
  while (checked < 60) {
    Pool p = RandomPool(rng);
    Shape shape{pick(1, 2), pick(1, 70 / block) * block, pick(1, 12), pick(1, 12)};
    if (checked == 0) shape = {2, 64, 56, 56}, p = Pool{3, 3, 2, 2, 1, 1};
    if (OutSize(shape[2], p.kh, p.sh, p.ph, p.dh, p.ceil) < 1 ||
        OutSize(shape[3], p.kw, p.sw, p.pw, p.dw, p.ceil) < 1)
      continue;
    SCOPED_TRACE(fmt::format("case {}: {} k{}x{} s{},{} p{},{} d{},{} ceil={}", checked,
                             shape_str(shape), p.kh, p.kw, p.sh, p.sw, p.ph, p.pw, p.dh, p.dw,
                             p.ceil));
    Tensor x = Uniform(DType::kF32, shape, 700 + checked);
    float* xd = x.data<float>();
    xd[pick(0, x.numel() - 1)] = std::nanf("");
    xd[pick(0, x.numel() - 1)] = -std::numeric_limits<float>::infinity();
    const Attrs attrs = PoolAttrs(p, /*max=*/true);
    const Tensor want = in_layout(Op("max_pool2d", {x}, attrs));
    Tensor got = Tensor::empty(DType::kF32, want.shape());
    pool(in_layout(x).data<float>(), shape, attrs, got.data<float>());
    const float *g = got.data<float>(), *w = want.data<float>();
    int bad = 0;
    for (int64_t i = 0; i < got.numel() && bad < 3; ++i) {
      if (std::isnan(g[i]) != std::isnan(w[i]) || (!std::isnan(w[i]) && g[i] != w[i])) {
        ADD_FAILURE() << "element " << i << ": " << g[i] << " vs the op's " << w[i];
        ++bad;
      }
    }
    ++checked;
  }
  float y = 0;
  const float x[32] = {};
  ExpectErrorWith(
      [&] {
        pool(x, {1, block, 2, 2}, {{"kernel_size", int64_t{3}}}, &y);
      },
      "no window fits");
}

Tensor Permuted(const Tensor& t, std::vector<int64_t> dims) {
  return Op("permute", {t}, {{"dims", std::move(dims)}}).contiguous();
}

// max_pool2d_nhwc: codegen's channels-last chains (AVX-512).
TEST(Pool2d, ChannelsLastMaxPoolIsTheOpBitForBit) {
  CheckChannelsInnerMaxPool(
      [](const Tensor& t) {
        return Permuted(t, {0, 2, 3, 1});
      },
      max_pool2d_nhwc, 1, 78);
}

// max_pool2d_nchw8c: codegen's blocked chains (AVX2); a channel count with a partial block is
// refused.
TEST(Pool2d, BlockedMaxPoolIsTheOpBitForBit) {
  const auto nchw8c = [](const Tensor& t) {
    const Shape& s = t.shape();
    return Permuted(t.contiguous().reshape(Shape{s[0], s[1] / 8, 8, s[2], s[3]}), {0, 1, 3, 4, 2});
  };
  CheckChannelsInnerMaxPool(nchw8c, max_pool2d_nchw8c, 8, 79);
  float y[64] = {};
  const float x[64] = {};
  ExpectErrorWith(
      [&] {
        max_pool2d_nchw8c(x, {1, 12, 2, 2}, {{"kernel_size", int64_t{2}}}, y);
      },
      "C a multiple of 8");
}

// The ResNet stem pool, large enough to run in parallel, in every float dtype, and on a 3-D input.
TEST(Pool2d, ResNetStemPoolAndUnbatchedInput) {
  const Pool p{3, 3, 2, 2, 1, 1};
  for (DType dt : {DType::kF32, DType::kF64, DType::kBF16}) {
    CheckPool(Uniform(dt, {2, 16, 57, 57}, 1), p, true);
    CheckPool(Uniform(dt, {2, 16, 57, 57}, 2), p, false);
  }
  CheckPool(Uniform(DType::kF32, {3, 9, 8}, 3), p, true);
  CheckPool(Uniform(DType::kF32, {3, 9, 8}, 3), p, false);
}

TEST(Pool2d, CeilModeDropsAWindowThatWouldStartInThePadding) {
  // 5 rows, kernel 2, stride 2, padding 1: ceil((5+2-2)/2)+1 = 4 windows would start at rows
  // -1, 1, 3, 5; the last starts in the right padding, so PyTorch keeps 3.
  const Tensor x = Uniform(DType::kF32, {1, 1, 5, 5}, 4);
  const Attrs a{{"kernel_size", int64_t{2}},
                {"stride", int64_t{2}},
                {"padding", int64_t{1}},
                {"ceil_mode", true}};
  EXPECT_EQ(shape_str(Op("max_pool2d", {x}, a).shape()), "[1,1,3,3]");
  EXPECT_EQ(shape_str(Op("avg_pool2d", {x}, a).shape()), "[1,1,3,3]");
  CheckPool(x, Pool{2, 2, 2, 2, 1, 1, 1, 1, true, true}, true);
  CheckPool(x, Pool{2, 2, 2, 2, 1, 1, 1, 1, true, false}, false);
  // Without padding the extra window starts inside the input and is kept, partial: 6 -> 3.
  const Tensor y = Uniform(DType::kF32, {1, 2, 6, 6}, 5);
  for (bool pad : {true, false}) {
    CheckPool(y, Pool{3, 3, 2, 2, 0, 0, 1, 1, true, pad}, false);
    CheckPool(y, Pool{3, 3, 2, 2, 1, 1, 1, 1, true, pad}, false);
  }
  EXPECT_EQ(shape_str(Op("max_pool2d", {y},
                         {{"kernel_size", int64_t{3}}, {"stride", int64_t{2}}, {"ceil_mode", true}})
                          .shape()),
            "[1,2,3,3]");
}

TEST(Pool2d, CountIncludePadChangesOnlyBorderDivisors) {
  const Tensor x = T(DType::kF32, {1, 1, 2, 2}, {1, 2, 3, 4});
  Attrs a{{"kernel_size", int64_t{2}}, {"stride", int64_t{1}}, {"padding", int64_t{1}}};
  ExpectTensor(Op("avg_pool2d", {x}, a), DType::kF32, {1, 1, 3, 3},
               {0.25, 0.75, 0.5, 1, 2.5, 1.5, 0.75, 1.75, 1});
  a.set("count_include_pad", false);
  ExpectTensor(Op("avg_pool2d", {x}, a), DType::kF32, {1, 1, 3, 3},
               {1, 1.5, 2, 2, 2.5, 3, 3, 3.5, 4});
}

TEST(Pool2d, StrideDefaultsToKernelSize) {
  const Tensor x = T(DType::kF32, {1, 1, 2, 4}, {1, 5, 2, 0, 3, 4, 8, 7});
  ExpectTensor(Op("max_pool2d", {x}, {{"kernel_size", int64_t{2}}}), DType::kF32, {1, 1, 1, 2},
               {5, 8});
  ExpectTensor(
      Op("avg_pool2d", {x}, {{"kernel_size", int64_t{2}}, {"stride", std::vector<int64_t>{}}}),
      DType::kF32, {1, 1, 1, 2}, {3.25, 4.25});
}

TEST(Pool2d, MaxPoolPropagatesNaNAndAvgPoolAveragesIt) {
  const Tensor x = T(DType::kF32, {1, 1, 2, 4}, {1, kNaN, 2, 0, 3, 4, 8, -kInf});
  ExpectTensor(Op("max_pool2d", {x}, {{"kernel_size", int64_t{2}}}), DType::kF32, {1, 1, 1, 2},
               {kNaN, 8});
  ExpectTensor(Op("avg_pool2d", {x}, {{"kernel_size", int64_t{2}}}), DType::kF32, {1, 1, 1, 2},
               {kNaN, -kInf});
}

TEST(Pool2d, NonContiguousAndEmptyBatch) {
  const Pool p{3, 2, 2, 1, 1, 1};
  const Tensor nhwc = Uniform(DType::kF32, {2, 7, 6, 5}, 6);
  const Tensor x = nhwc.permute(std::vector<int64_t>{0, 3, 1, 2});
  ASSERT_FALSE(x.is_contiguous());
  CheckPool(x, p, true);
  CheckPool(x, p, false);
  for (const char* op : {"max_pool2d", "avg_pool2d"}) {
    const Tensor y = Op(op, {Tensor::empty(DType::kF32, {0, 3, 7, 7})},
                        PoolAttrs(p, std::string(op) == "max_pool2d"));
    EXPECT_EQ(shape_str(y.shape()), "[0,3,4,8]") << op;
  }
}

// adaptive_avg_pool2d: window o of n over `in` covers [floor(o*in/n), ceil((o+1)*in/n)).
std::vector<double> RefAdaptive(const Tensor& x, int64_t oh, int64_t ow) {
  const std::vector<double> v = x.to_doubles();
  const int64_t r = x.dim(), h = x.shape()[r - 2], w = x.shape()[r - 1],
                planes = x.numel() / (h * w);
  std::vector<double> out;
  for (int64_t c = 0; c < planes; ++c) {
    for (int64_t y = 0; y < oh; ++y) {
      for (int64_t z = 0; z < ow; ++z) {
        const int64_t h0 = y * h / oh,
                      h1 = static_cast<int64_t>(std::ceil((y + 1) * h / double(oh)));
        const int64_t w0 = z * w / ow,
                      w1 = static_cast<int64_t>(std::ceil((z + 1) * w / double(ow)));
        double s = 0;
        for (int64_t i = h0; i < h1; ++i)
          for (int64_t j = w0; j < w1; ++j) s += v[(c * h + i) * w + j];
        out.push_back(s / static_cast<double>((h1 - h0) * (w1 - w0)));
      }
    }
  }
  return out;
}

TEST(AdaptiveAvgPool2d, NonDivisibleAndEnlargingSizesMatchReference) {
  struct Case {
    Shape x;
    int64_t oh, ow;
  };
  const Case cases[] = {{{2, 3, 7, 5}, 3, 4},  {{1, 2, 3, 4}, 5, 7}, {{2, 4, 7, 7}, 1, 1},
                        {{1, 1, 10, 9}, 4, 2}, {{3, 13, 11}, 2, 3},  {{2, 64, 9, 9}, 1, 1}};
  uint64_t seed = 40;
  for (const Case& c : cases) {
    for (DType dt : {DType::kF32, DType::kF64, DType::kBF16}) {
      SCOPED_TRACE(shape_str(c.x) + " -> " + std::to_string(c.oh) + "x" + std::to_string(c.ow) +
                   " " + std::string(dtype_name(dt)));
      const Tensor x = Uniform(dt, c.x, seed++);
      Shape shape = c.x;
      shape[shape.size() - 2] = c.oh;
      shape.back() = c.ow;
      ExpectTensor(
          Op("adaptive_avg_pool2d", {x}, {{"output_size", std::vector<int64_t>{c.oh, c.ow}}}), dt,
          shape, RefAdaptive(x, c.oh, c.ow), Tol(dt));
    }
  }
  // A non-contiguous input, a single int output size and an empty batch.
  const Tensor x = Uniform(DType::kF32, {2, 6, 5, 3}, 9).permute(std::vector<int64_t>{0, 3, 1, 2});
  ExpectTensor(Op("adaptive_avg_pool2d", {x}, {{"output_size", int64_t{2}}}), DType::kF32,
               {2, 3, 2, 2}, RefAdaptive(x, 2, 2), 2e-6);
  EXPECT_EQ(shape_str(Op("adaptive_avg_pool2d", {Tensor::empty(DType::kF32, {0, 3, 4, 4})},
                         {{"output_size", int64_t{2}}})
                          .shape()),
            "[0,3,2,2]");
}

void ExpectGraphError(const char* op, Shape shape, Attrs attrs, const std::string& needle) {
  try {
    const std::vector<Tensor> in{Tensor::zeros(DType::kF32, std::move(shape))};
    run_op(op, in, std::move(attrs));
    ADD_FAILURE() << op << ": no error; expected one containing '" << needle << "'";
  } catch (const GraphError& e) {
    const std::string msg = e.what();
    EXPECT_EQ(msg.rfind(std::string(op) + ": ", 0), 0u) << msg;
    EXPECT_NE(msg.find(needle), std::string::npos)
        << "message '" << msg << "' lacks '" << needle << "'";
  }
}

TEST(Pool2d, BadInputIsAGraphErrorSayingWhy) {
  for (const char* op : {"max_pool2d", "avg_pool2d"}) {
    ExpectGraphError(op, {1, 1, 8, 8}, {{"kernel_size", int64_t{3}}, {"padding", int64_t{2}}},
                     "padding [2,2] must be at most half the kernel size [3,3]");
    ExpectGraphError(op, {1, 1, 3, 8}, {{"kernel_size", std::vector<int64_t>{5, 2}}},
                     "kernel 5x2 (dilation 1x1) is larger than the padded input 3x8");
    ExpectGraphError(op, {8, 8}, {{"kernel_size", int64_t{2}}},
                     "input must be 3-D [C,H,W] or 4-D [N,C,H,W], got 2-D [8,8]");
    ExpectGraphError(op, {1, 1, 8, 8}, {{"kernel_size", int64_t{0}}},
                     "kernel_size must be positive, got [0,0]");
    ExpectGraphError(op, {1, 0, 8, 8}, {{"kernel_size", int64_t{2}}},
                     "empty channel or spatial dim");
  }
  ExpectGraphError("max_pool2d", {1, 1, 4, 4},
                   {{"kernel_size", int64_t{3}}, {"dilation", int64_t{2}}},
                   "kernel 3x3 (dilation 2x2) is larger than the padded input 4x4");
  ExpectGraphError("max_pool2d", {1, 1, 4, 4},
                   {{"kernel_size", int64_t{2}}, {"stride", int64_t{0}}},
                   "stride must be positive, got [0,0]");
  // Sizes past int64 from a file's attributes are an error, not a signed overflow.
  constexpr int64_t kHuge = int64_t{1} << 62;
  ExpectGraphError("max_pool2d", {1, 1, 4, 4},
                   {{"kernel_size", int64_t{4}},
                    {"stride", int64_t{1}},
                    {"padding", int64_t{2}},
                    {"dilation", kHuge}},
                   "the output size overflows int64");
  ExpectGraphError("adaptive_avg_pool2d", {1, 1, 4, 4},
                   {{"output_size", std::vector<int64_t>{1, 2, 3}}},
                   "output_size must have 1 or 2 elements");
  ExpectGraphError("adaptive_avg_pool2d", {4, 4}, {{"output_size", int64_t{1}}}, "got 2-D [4,4]");
  ExpectGraphError("avg_pool2d", {1, 1, 4, 4},
                   {{"kernel_size", int64_t{2}}, {"dilation", int64_t{2}}},
                   "unknown attribute 'dilation'");
}

}  // namespace
}  // namespace crucible
