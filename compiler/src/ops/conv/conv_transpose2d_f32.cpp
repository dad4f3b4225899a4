// conv_transpose2d in f32 through oneDNN's deconvolution primitive, on the plain NCHW tensors and
// PyTorch's [Cin, Cout/groups, kH, kW] weight (oneDNN's iohw). Plans are cached by problem shape.
// A training step's input gradients are these: resnet18's 21 of them at batch 4 took 2.2 s a
// step in the direct scatter loop (conv_transpose_ops.cpp), 85% of eager's whole step.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <memory>
#include <oneapi/dnnl/dnnl.hpp>
#include <vector>

#include "dnnl_runtime.h"
#include "plan_cache.h"
#include "vision/vision_internal.h"

namespace crucible::vision {
namespace {

using dnnl::memory;
using Tag = memory::format_tag;
constexpr auto kDeconvF32 = memory::data_type::f32;

struct DeconvPlan {
  dnnl::deconvolution_forward deconv;
  memory::desc src, wei, dst, bias, scratch;
};

using DeconvKey = std::array<int64_t, 17>;

// nullptr when oneDNN takes no such deconvolution (a right padding below zero: an output padding
// past the padding, which conv_transpose2d_f32 cuts off first).
std::shared_ptr<const DeconvPlan> make_deconv_plan(const DeconvShape& s, bool has_bias) {
  using dims = memory::dims;
  const int64_t g = s.p.groups;
  const dims pad_l{s.p.padding.h, s.p.padding.w},
      pad_r{s.p.padding.h - s.output_padding.h, s.p.padding.w - s.output_padding.w};
  if (pad_r[0] < 0 || pad_r[1] < 0) return nullptr;
  auto plan = std::make_shared<DeconvPlan>();
  plan->src = memory::desc({s.n, s.c, s.h, s.w}, kDeconvF32, Tag::nchw);
  plan->dst = memory::desc({s.n, s.o, s.oh, s.ow}, kDeconvF32, Tag::nchw);
  plan->wei = g > 1 ? memory::desc({g, s.o / g, s.c / g, s.kh, s.kw}, kDeconvF32, Tag::giohw)
                    : memory::desc({s.o, s.c, s.kh, s.kw}, kDeconvF32, Tag::iohw);
  if (has_bias) plan->bias = memory::desc({s.o}, kDeconvF32, Tag::x);
  // oneDNN counts dilation from 0 (no gaps); PyTorch from 1.
  const dims strides{s.p.stride.h, s.p.stride.w}, dilates{s.p.dilation.h - 1, s.p.dilation.w - 1};
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  using fwd = dnnl::deconvolution_forward;
  const auto prop = dnnl::prop_kind::forward_inference;
  const auto algo = dnnl::algorithm::deconvolution_direct;
  const fwd::desc d = has_bias ? fwd::desc(prop, algo, plan->src, plan->wei, plan->bias, plan->dst,
                                           strides, dilates, pad_l, pad_r)
                               : fwd::desc(prop, algo, plan->src, plan->wei, plan->dst, strides,
                                           dilates, pad_l, pad_r);
  const fwd::primitive_desc pd(d, attr, dnnl_rt::cpu_engine());
  plan->deconv = fwd(pd);
  plan->scratch = pd.scratchpad_desc();
  return plan;
}

std::shared_ptr<const DeconvPlan> find_deconv_plan(const DeconvShape& s, bool has_bias) {
  static PlanCache<DeconvKey, DeconvPlan> cache(1024);
  const DeconvKey key{s.n,
                      s.c,
                      s.h,
                      s.w,
                      s.o,
                      s.kh,
                      s.kw,
                      s.p.stride.h,
                      s.p.stride.w,
                      s.p.padding.h,
                      s.p.padding.w,
                      s.p.dilation.h,
                      s.p.dilation.w,
                      s.p.groups,
                      s.output_padding.h,
                      s.output_padding.w,
                      has_bias ? 1 : 0};
  return cache.get(key, [&]() -> std::shared_ptr<const DeconvPlan> {
    try {
      return make_deconv_plan(s, has_bias);
    } catch (const dnnl::error&) {
      return nullptr;  // the direct loop computes it
    }
  });
}

bool run_deconv(const DeconvShape& s, const float* x, const float* w, const float* bias, float* y) {
  const std::shared_ptr<const DeconvPlan> plan = find_deconv_plan(s, bias != nullptr);
  if (!plan) return false;
  const dnnl::engine& e = dnnl_rt::cpu_engine();
  std::unordered_map<int, memory> args{
      {DNNL_ARG_SRC, memory(plan->src, e, const_cast<float*>(x))},
      {DNNL_ARG_WEIGHTS, memory(plan->wei, e, const_cast<float*>(w))},
      {DNNL_ARG_DST, memory(plan->dst, e, y)}};
  if (bias != nullptr) args.emplace(DNNL_ARG_BIAS, memory(plan->bias, e, const_cast<float*>(bias)));
  dnnl_rt::execute(plan->deconv, args, plan->scratch);
  return true;
}

// A depthwise deconvolution whose windows tile the output (stride = kernel, no padding or
// dilation): a pool's input gradient (an adaptive average pool's at resnet's last stage). Each
// output element takes one input element times one tap, which oneDNN's grouped primitive, one
// channel a group, did 40x slower (1 ms for [16,512,1,1]).
bool tiled_depthwise(const DeconvShape& s, const float* x, const float* w, const float* bias,
                     float* y) {
  if (s.p.groups != s.c || s.o != s.c || s.p.stride.h != s.kh || s.p.stride.w != s.kw ||
      s.p.padding.h != 0 || s.p.padding.w != 0 || s.p.dilation.h != 1 || s.p.dilation.w != 1)
    return false;
  const int64_t planes = s.n * s.c;
#pragma omp parallel for schedule(static)
  for (int64_t p = 0; p < planes; ++p) {
    const int64_t c = p % s.c;
    const float fill = bias != nullptr ? bias[c] : 0.0f;
    const float* in = x + p * s.h * s.w;
    const float* taps = w + c * s.kh * s.kw;
    float* out = y + p * s.oh * s.ow;
    for (int64_t r = 0; r < s.oh; ++r) {
      const int64_t i = r / s.kh, a = r % s.kh;
      for (int64_t q = 0; q < s.ow; ++q) {
        const int64_t j = q / s.kw, b = q % s.kw;
        out[r * s.ow + q] = i < s.h && j < s.w ? in[i * s.w + j] * taps[a * s.kw + b] + fill : fill;
      }
    }
  }
  return true;
}

}  // namespace

// An output padding past the padding (the gradient of a 1x1 stride-2 downsample: padding 0,
// output padding 1) would need a negative right padding, which oneDNN refuses. No input reaches
// those last rows and columns (the furthest a tap lands is the padding before the end), so the
// rest is a deconvolution with the output padding cut to the padding, and they hold the bias
// alone. Before, those fell to the direct loop: 19 of codegen's 30 ms in resnet50's small step.
bool conv_transpose2d_f32(const DeconvShape& s, const float* x, const float* w, const float* bias,
                          float* y) {
  const int64_t cut_h = std::max<int64_t>(0, s.output_padding.h - s.p.padding.h);
  const int64_t cut_w = std::max<int64_t>(0, s.output_padding.w - s.p.padding.w);
  if (tiled_depthwise(s, x, w, bias, y)) return true;
  if (cut_h == 0 && cut_w == 0) return run_deconv(s, x, w, bias, y);
  DeconvShape inner = s;
  inner.output_padding = {s.output_padding.h - cut_h, s.output_padding.w - cut_w};
  inner.oh = s.oh - cut_h;
  inner.ow = s.ow - cut_w;
  if (inner.oh <= 0 || inner.ow <= 0) return false;
  std::vector<float> reached(static_cast<size_t>(s.n * s.o * inner.oh * inner.ow));
  if (!run_deconv(inner, x, w, bias, reached.data())) return false;
  const int64_t planes = s.n * s.o;
#pragma omp parallel for schedule(static)
  for (int64_t p = 0; p < planes; ++p) {
    const float fill = bias != nullptr ? bias[p % s.o] : 0.0f;
    const float* from = reached.data() + p * inner.oh * inner.ow;
    float* to = y + p * s.oh * s.ow;
    for (int64_t r = 0; r < s.oh; ++r) {
      float* row = to + r * s.ow;
      if (r < inner.oh) {
        std::copy(from + r * inner.ow, from + (r + 1) * inner.ow, row);
        std::fill(row + inner.ow, row + s.ow, fill);
      } else {
        std::fill(row, row + s.ow, fill);
      }
    }
  }
  return true;
}

}  // namespace crucible::vision
