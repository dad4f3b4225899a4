// PackedConv2d: oneDNN's convolution on weights packed once (a batch norm folded in), or our direct
// depthwise loop, with the residual add and the activation fused into the call.
#include "crucible/ops/packed_conv.h"

#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <exception>
#include <limits>
#include <map>
#include <mutex>
#include <oneapi/dnnl/dnnl.hpp>
#include <string_view>
#include <tuple>
#include <unordered_map>

#include "conv/conv_epilogue.h"
#include "conv/winograd_f4x3.h"
#include "crucible/core/error.h"
#include "dnnl_runtime.h"
#include "reduction/reduction_internal.h"
#include "timed_choice.h"
#include "vision/vision_internal.h"

// Which kernel, which activation layouts, and where the epilogue runs (measured on this machine,
// AMD EPYC with AVX-512, 2 threads, oneDNN 2.6.3, batch 8, medians of interleaved runs):
//
// - Layouts as the eager kernel chose them, for the same reasons: 1x1 ungrouped convolutions keep
//   plain NCHW activations (oneDNN's `gemm:jit`; reordering a wide input costs more than a faster
//   kernel saves: 2.6 ms for 256 channels at 56x56 against a 2.2 ms convolution); others take a
//   plain input and a reordered output when oneDNN then picks a direct kernel (the 3-channel stem:
//   nchw -> nChw16c), else reordered activations both ways (`brgconv` picks nhwc).
// - relu and clamp run as oneDNN post-ops only on calls whose input is finite and bounded
//   (activation_post_op_safe): its eltwise relu and clip are vmaxps/vminps with the bound as the
//   second operand, which turn NaN into 0 (PyTorch and our eager keep NaN). Otherwise, and with a
//   residual, they run in our pass after the convolution. On a direct kernel post-ops were nearly
//   free (3x3 64->64 at 56x56 4.29 ms alone, 4.32 with relu or clip); the pass's cost is in
//   docs/design_decisions.md. A residual is added in that pass too: 5.17 vs
//   5.40 ms for that layer with a sum post-op fed by a reorder of the residual into the output's
//   layout (4.42 vs 4.50 at 128x28x28, 4.18 vs 4.24 at 256x14x14).
// - Post-ops on `gemm:jit` are slow in oneDNN 2.6: 1x1 256->64 2.2 ms alone, 2.6 with relu, 9.9
//   with sum + relu; 64->256 2.6 ms alone, 4.4 with relu. There the convolution runs with its
//   (folded) bias only, and the residual and activation follow in one vectorized pass (0.14 and
//   0.58 ms for those two outputs). Run a few images at a time (up to 4 MiB of output), the pass
//   finds its input in the caches: at batch 16, MobileNetV2's 16->96 expand at 112x112 with ReLU6
//   7.8 -> 7.2 ms, 24->144 at 56x56 3.0 -> 2.6, ResNet-50's 64->256 with residual and relu 8.1 ->
//   7.5, the small late layers 1-3% (slicing the direct kernels' reorders and pass gained nothing).
// - A residual that is the output buffer itself (codegen reuses a dying residual's buffer) must be
//   read before the result replaces it: a sum post-op on the output's reorder adds it, or on the
//   GEMM (2.35 ms for 1x1 256->64, so nearly free); the activation then follows in the pass.
// - The binary-add post-op with a plain residual sends every convolution to `gemm:jit` with
//   reference post-ops (30-120 ms): not used.
// - Channels-last activations (codegen's chains of convolutions, conv_layouts.cpp) go to oneDNN
//   as they lie: `brgconv` and `brgconv_1x1` read and write NHWC, so no reorder runs between two
//   convolutions, and 1x1 convolutions leave `gemm:jit` (batch 8, whole problem, no epilogue:
//   ResNet-50's strided 1x1 256->512 5.06 -> 3.32 ms, 512->2048 at 7x7 2.29 -> 1.59 ms, the
//   3x3 64->64 at 56x56 6.34 ms in plain layouts against 3.56). In the network, interleaved:
//   ResNet-50 at batch 8 162.3 -> 156.8 ms, ResNet-18 at batch 16 141.5 -> 134.4 ms.
// - Winograd F(4x4,3x3) (oneDNN's `jit_wino_4x3`, its own blocked layout, reordered to and from)
//   for 3x3 stride-1 dense convolutions, when timed faster at construction: batch 8/16, warm,
//   64->64 at 56x56 3.35 -> 1.45 ms, 256->256 at 14x14 3.03 -> 1.54, 512->512 at 7x7 2.98 ->
//   2.65 (brgconv on NHWC against Winograd). Its transforms spread a NaN or an infinity over a
//   4x4 output tile and multiply magnitudes, so each call first scans its input (all finite and
//   below 2^64, else the direct plan runs: the op's non-finite pattern, bit for bit). oneDNN 2.6
//   has that kernel for AVX-512 only; elsewhere ours runs (winograd_f4x3.cpp), timed the same way:
//   on an AVX2 EPYC, nChw8c, the same layers 16.0 -> 13.7, 13.2 -> 9.5, 15.3 -> 8.5, 18.9 -> 8.2
//   ms.
// - Depthwise convolutions on channels-last activations (one output channel per input channel) run
//   our NHWC loop (conv2d_depthwise_nhwc.cpp): MobileNetV2 at batch 16 58.6 -> 52.0 ms with its
//   1x1 convolutions channels-last around them (48-45 ms since its 3x3s run channels inside
//   each block of pixels, with the kernel's size known). On nChw8c each block of 8 channels is an
//   NHWC image of 8 channels, and the same loop runs it with 8-lane vectors (an AVX2 register).
// - Depthwise convolutions run our direct NCHW loop (conv2d_depthwise.cpp) with the epilogue
//   applied to each output row while it is in L1: 1.46 ms for MobileNetV2's 144-channel 3x3 at
//   56x56 with batch norm and ReLU6, against 3.0 ms for oneDNN's `brdgmm_dw` with a clip post-op
//   (0.53 ms) and the reorders its blocked activations need; eager's three ops take 2.1 ms. On
//   planes narrower than 40 that loop runs by blocks of 16 channels instead (vectors along
//   channels: EfficientNet's 672-channel 5x5 at 14x14, batch 8, 6.24 -> 1.23 ms).

namespace crucible {
namespace {

using dnnl::memory;
using Tag = memory::format_tag;
using vision::ConvShape;
constexpr auto kF32 = memory::data_type::f32;

constexpr size_t kMaxPlans = 64;  // distinct input shapes kept per PackedConv2d
// Output bytes one GEMM call should produce when a pass over them follows (a few L2s' worth).
constexpr int64_t kSliceBytes = int64_t{4} << 20;

bool is_gemm_or_ref(const char* impl) {
  const std::string_view s(impl);
  return s.find("gemm") != std::string_view::npos || s.starts_with("ref");
}

// A plan's problem with post-ops, when oneDNN builds it on the same weights with a kernel the plan
// accepts; `built` false otherwise.
struct PostOpConv {
  bool built = false;
  dnnl::convolution_forward conv;
  memory::desc scratch;
};

// One input shape's primitive(s), layouts and reorders.
struct Plan {
  ConvShape shape;
  dnnl::convolution_forward conv;
  memory::desc user_src, user_dst, src_md, dst_md, scratch_md;
  memory weights;  // in conv's layout: the shared packed copy, or this plan's own
  bool own_weights = false;
  bool reorder_src = false, reorder_dst = false;
  dnnl::reorder to_src, from_dst;
  // Without post-ops, a residual that is y itself is added by the output's reorder (a sum
  // post-op: y = reorder(dst) + y) before the activation pass.
  dnnl::reorder from_dst_sum;
  // A plain-output convolution with a residual that is y itself: the same problem with a sum
  // post-op, which reads the residual from y before the result replaces it.
  PostOpConv with_sum;
  // The activation as oneDNN's clip post-op, for calls whose input is finite and bounded (see
  // activation_post_op_safe): the pass after the convolution is then not needed.
  PostOpConv with_act;
  std::string impl;
};

// y = epilogue(y + residual) over the whole output, in chunks spread over the threads.
void epilogue_pass(float* y, const float* residual, int64_t n,
                   const vision::RowEpilogue<float>& e) {
  constexpr int64_t kChunk = 16384;
  const int64_t chunks = (n + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static) if (n >= reduction::kParallelGrain && chunks > 1)
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t k0 = c * kChunk, len = std::min(kChunk, n - k0);
    vision::finish_row(y + k0, residual != nullptr ? residual + k0 : nullptr, y + k0, len, e);
  }
}

// A temporary in some layout, from the tensor allocator (whose block cache keeps large
// temporaries from page-faulting on every call).
Tensor scratch_tensor(const memory::desc& md) {
  return Tensor::empty(DType::kF32, {static_cast<int64_t>((md.get_size() + 3) / 4)});
}

// Winograd's transforms multiply magnitudes: inputs below 2^64 and weights below 2^32 keep every
// intermediate of a 3x3 tile below 2^126 for up to 2^16 input channels, so nothing overflows where
// the direct sum would not.
constexpr float kWinogradInputLimit = 0x1p64f, kWinogradWeightLimit = 0x1p32f;

// `fastest` keeps Winograd only when it takes at most this fraction of the direct kernel's time:
// its transforms round more (RMSE against fp64 up to 7.5x eager's on a 16-channel layer whose
// output the block returns), which a near tie does not pay for.
constexpr double kWinogradMargin = 0.9;

// A dense 3x3 stride-1 convolution with bounded finite weights: what oneDNN's Winograd computes.
// Padding at most 1 ("same" or "valid"): with more, an edge output's window holds mostly padding
// while its 6x6 tile carries interior values, whose rounding the transforms spread into it (pad
// 3 reached 6.6x the error bound the tests hold Winograd to, pad <= 1 stays under 0.3x).
bool winograd_eligible(const ConvShape& s, const std::vector<float>& folded) {
  if (s.kh != 3 || s.kw != 3 || s.p.stride.h != 1 || s.p.stride.w != 1 || s.p.dilation.h != 1 ||
      s.p.dilation.w != 1 || s.p.groups != 1 || s.c > (int64_t{1} << 16) || s.p.padding.h > 1 ||
      s.p.padding.w > 1)
    return false;
  return std::all_of(folded.begin(), folded.end(),
                     [](float w) { return std::abs(w) < kWinogradWeightLimit; });
}

// Every one of x's n values finite and below the input limit (NaN fails the comparison).
bool finite_and_bounded(const float* x, int64_t n) {
  int64_t bad = 0;
#pragma omp parallel for simd reduction(+ : bad) if (n >= reduction::kParallelGrain)
  for (int64_t i = 0; i < n; ++i) bad += std::abs(x[i]) < kWinogradInputLimit ? 0 : 1;
  return bad == 0;
}

// relu and clamp as oneDNN's clip post-op (max with the low bound, then min with the high one;
// relu is clip to [0, inf]) compute what our pass does bit for bit when no output is NaN or -0:
// clip turns NaN into the bound, and returns the bound's +0 for a -0. With every input finite and
// below kWinogradInputLimit (finite_and_bounded, checked per call), weights whose L1 norm per
// output channel is below 2^60 keep every partial sum below 2^124, so nothing overflows into an
// infinity or a NaN; and a sum of products starting from +0 (oneDNN's accumulators) or from a bias
// that is not -0 is never -0. Brgemm kernels apply the post-op as they store, so on MobileNetV2's
// 24->144 expand (batch 8, 56x56, NHWC, 2 threads) the clamp costs 0.03 ms there against 0.11 ms
// for the pass over the output.
bool activation_post_op_safe(const ConvEpilogue& ep, const std::vector<float>& folded,
                             const std::vector<float>& bias, int64_t outputs, float lo, float hi) {
  if (ep.residual) return false;
  if (ep.activation == ConvActivation::kClamp) {
    // A -0 bound is returned for +0 outputs where the pass keeps +0; a NaN bound is no bound.
    for (const float b : {lo, hi}) {
      if (std::isnan(b) || (b == 0.0f && std::signbit(b))) return false;
    }
  } else if (ep.activation != ConvActivation::kRelu) {
    return false;
  }
  const size_t per_output = folded.size() / static_cast<size_t>(outputs);
  for (int64_t o = 0; o < outputs; ++o) {
    double l1 = 0;
    for (size_t k = 0; k < per_output; ++k) l1 += std::abs(folded[o * per_output + k]);
    if (!(l1 < 0x1p60)) return false;  // NaN weights fail too
  }
  return std::all_of(bias.begin(), bias.end(), [](float b) {
    return std::abs(b) < 0x1p100f && !(b == 0.0f && std::signbit(b));
  });
}

Tag tag_of(ActivationLayout layout) {
  switch (layout) {
    case ActivationLayout::kNhwc:
      return Tag::nhwc;
    case ActivationLayout::kNchw8c:
      return Tag::nChw8c;
    case ActivationLayout::kNchw:
      break;
  }
  return Tag::nchw;
}

// The layouts a problem accepts: our depthwise loops take NCHW, or NHWC or nChw8c in and out with
// one output channel per input channel; a blocked layout with a partial last block would be larger
// than the caller's buffer. Throws Error naming what is wrong.
void check_layouts(const ConvShape& s, const ConvLayouts& layouts, bool depthwise) {
  if (depthwise && layouts.src != layouts.dst) {
    throw Error(fmt::format(
        "PackedConv2d: a depthwise convolution takes one layout in and out, got {} -> {}",
        layout_name(layouts.src), layout_name(layouts.dst)));
  }
  if (depthwise && layouts.src != ActivationLayout::kNchw && s.o != s.c) {
    throw Error(fmt::format(
        "PackedConv2d: a depthwise convolution on {} needs one output channel per input channel, "
        "got {} -> {}",
        layout_name(layouts.src), s.c, s.o));
  }
  for (const auto& [layout, channels, side] :
       {std::tuple{layouts.src, s.c, "input"}, std::tuple{layouts.dst, s.o, "output"}}) {
    if (layout == ActivationLayout::kNchw8c && channels % 8 != 0) {
      throw Error(fmt::format("PackedConv2d: an nChw8c {} needs channels divisible by 8, got {}",
                              side, channels));
    }
  }
}

// Depthwise weights [O][taps] regrouped for our channels-inner loops: [O/lanes][taps][lanes], so a
// tap's weights for `lanes` consecutive channels are one vector (lanes = O: tap-major, for NHWC).
std::vector<float> taps_inner(const std::vector<float>& w, int64_t outputs, int64_t taps,
                              int64_t lanes) {
  std::vector<float> out(w.size());
  for (int64_t o = 0; o < outputs; ++o) {
    for (int64_t t = 0; t < taps; ++t)
      out[(o / lanes * taps + t) * lanes + o % lanes] = w[o * taps + t];
  }
  return out;
}

// Throws Error unless `ep` fits a convolution with `outputs` channels: scale and shift one per
// output, or both empty; a clamp's bounds ordered numbers.
void check_epilogue(const ConvEpilogue& ep, int64_t outputs) {
  const bool affine = !ep.scale.empty() || !ep.shift.empty();
  if (affine && (ep.scale.size() != static_cast<size_t>(outputs) ||
                 ep.shift.size() != static_cast<size_t>(outputs))) {
    throw Error(fmt::format("PackedConv2d: scale and shift need {} values each, got {} and {}",
                            outputs, ep.scale.size(), ep.shift.size()));
  }
  if (ep.activation == ConvActivation::kClamp && !(ep.clamp_min <= ep.clamp_max)) {  // NaN too
    throw Error(fmt::format("PackedConv2d: clamp bounds [{}, {}] are not ordered numbers",
                            ep.clamp_min, ep.clamp_max));
  }
}

// Each output channel's weights times its affine scale (none without an affine), in double,
// each rounded once to f32.
std::vector<float> scaled_weights(const Tensor& weight, const ConvEpilogue& ep, int64_t outputs) {
  const std::vector<double> w = weight.to_doubles();
  const int64_t per_output = static_cast<int64_t>(w.size()) / outputs;
  std::vector<float> folded(w.size());
  for (int64_t o = 0; o < outputs; ++o) {
    const double sc = ep.scale.empty() ? 1.0 : ep.scale[o];
    for (int64_t k = 0; k < per_output; ++k) {
      folded[o * per_output + k] = static_cast<float>(w[o * per_output + k] * sc);
    }
  }
  return folded;
}

}  // namespace

const char* layout_name(ActivationLayout layout) {
  switch (layout) {
    case ActivationLayout::kNhwc:
      return "nhwc";
    case ActivationLayout::kNchw8c:
      return "nChw8c";
    case ActivationLayout::kNchw:
      break;
  }
  return "nchw";
}

ActivationLayout preferred_chain_layout() {
  // Every AVX-512 core level (core, VNNI, BF16, AMX) carries avx512_core's bits.
  const auto core = static_cast<unsigned>(dnnl::cpu_isa::avx512_core);
  const auto isa = static_cast<unsigned>(dnnl::get_effective_cpu_isa());
  return (isa & core) == core ? ActivationLayout::kNhwc : ActivationLayout::kNchw8c;
}

void ConvEpilogue::fold_batch_norm(const Tensor& gamma, const Tensor& beta, const Tensor& mean,
                                   const Tensor& var, double eps) {
  const std::vector<double> g = gamma.to_doubles(), b = beta.to_doubles(), m = mean.to_doubles(),
                            v = var.to_doubles();
  if (b.size() != g.size() || m.size() != g.size() || v.size() != g.size()) {
    throw Error(
        fmt::format("fold_batch_norm: weight, bias, mean and var sizes differ ({} {} {} {})",
                    g.size(), b.size(), m.size(), v.size()));
  }
  scale.resize(g.size());
  shift.resize(g.size());
  for (size_t i = 0; i < g.size(); ++i) {
    scale[i] = g[i] / std::sqrt(v[i] + eps);
    shift[i] = b[i] - m[i] * scale[i];
  }
}

std::string ConvEpilogue::name() const {
  std::string s;
  auto add = [&](const std::string& part) { s += (s.empty() ? "" : "+") + part; };
  if (!scale.empty()) add("affine");
  if (residual) add("add");
  if (activation == ConvActivation::kRelu) add("relu");
  if (activation == ConvActivation::kClamp) {
    add(clamp_min == 0.0 && clamp_max == 6.0 ? std::string("relu6")
                                             : fmt::format("clamp({},{})", clamp_min, clamp_max));
  }
  if (activation == ConvActivation::kSigmoid) add("sigmoid");
  if (activation == ConvActivation::kSilu) add("silu");
  if (activation == ConvActivation::kHardsigmoid) add("hardsigmoid");
  if (activation == ConvActivation::kHardswish) add("hardswish");
  return s.empty() ? "none" : s;
}

// The outcome of each Winograd race this process ran, by race_key: a network's repeated layers
// (DenseNet-121's 58 3x3 convolutions have 4 shapes) race once, and then all run the same
// algorithm, so equal layers round alike.
vision::RaceOutcomes& winograd_races() {
  static vision::RaceOutcomes outcomes;
  return outcomes;
}

struct PackedConv2d::Impl {
  Attrs attrs;
  Shape weight_shape;
  ConvShape base;  // the problem the weights were packed for
  ConvEpilogue epilogue;
  ConvLayouts layouts;
  vision::RowEpilogue<float> row;  // the activation for our own loops (residual set per call)
  bool depthwise = false;
  bool has_bias = false;
  std::vector<float> bias_values;  // bias * scale + shift; oneDNN reads it in place
  std::vector<float> folded;       // depthwise only: W * scale, OIHW ([kh][kw][O] for NHWC)
  memory::desc bias_md;
  memory bias_mem;
  memory packed;                          // the weights in oneDNN's layout for `base`
  std::shared_ptr<const Plan> base_plan;  // made in the constructor, for `base`
  std::shared_ptr<const Plan> winograd;   // for `base`, when chosen (finite inputs only)
  // Ours, for `base`, when chosen where oneDNN has no Winograd kernel (finite inputs only).
  std::shared_ptr<const vision::WinogradF4x3> own_winograd;
  Shape base_input;
  dnnl::primitive_attr plain_attr, sum_attr;
  bool act_post_op = false;  // activation_post_op_safe held for the weights and epilogue
  dnnl::primitive_attr act_attr;

  mutable std::mutex mutex;
  mutable std::map<Shape, std::shared_ptr<const Plan>> plans;

  ConvShape shape_of(const Shape& x) const {
    if (x.size() != 4 || x[1] != base.c) {
      throw Error(
          fmt::format("PackedConv2d: input shape {} must be [N,{},H,W]", shape_str(x), base.c));
    }
    const TensorType types[] = {{DType::kF32, x}, {DType::kF32, weight_shape}};
    return vision::conv_shape(types, attrs);
  }

  // The primitive for one problem. `plain_weights` is the folded OIHW copy for the first plan
  // (made in the constructor), null afterwards: later plans start from `packed`.
  std::shared_ptr<const Plan> make_plan(const ConvShape& s, const float* plain_weights,
                                        bool winograd = false) const {
    using dims = memory::dims;
    const int64_t g = s.p.groups;
    const dims src_dims{s.n, s.c, s.h, s.w}, dst_dims{s.n, s.o, s.oh, s.ow};
    const dims wei_dims =
        g > 1 ? dims{g, s.o / g, s.c / g, s.kh, s.kw} : dims{s.o, s.c, s.kh, s.kw};
    auto plan = std::make_shared<Plan>();
    plan->shape = s;
    plan->user_src = memory::desc(src_dims, kF32, tag_of(layouts.src));
    plan->user_dst = memory::desc(dst_dims, kF32, tag_of(layouts.dst));
    const memory::desc any_src(src_dims, kF32, Tag::any), any_dst(dst_dims, kF32, Tag::any),
        any_wei(wei_dims, kF32, Tag::any);
    // oneDNN counts dilation from 0 (no gaps); PyTorch from 1.
    const dims strides{s.p.stride.h, s.p.stride.w}, dilates{s.p.dilation.h - 1, s.p.dilation.w - 1},
        pad{s.p.padding.h, s.p.padding.w};
    using fwd = dnnl::convolution_forward;
    auto describe = [&](const memory::desc& src, const memory::desc& dst,
                        const dnnl::primitive_attr& attr) {
      const auto prop = dnnl::prop_kind::forward_inference;
      const auto algo =
          winograd ? dnnl::algorithm::convolution_winograd : dnnl::algorithm::convolution_direct;
      const fwd::desc d =
          has_bias ? fwd::desc(prop, algo, src, any_wei, bias_md, dst, strides, dilates, pad, pad)
                   : fwd::desc(prop, algo, src, any_wei, dst, strides, dilates, pad, pad);
      return fwd::primitive_desc(d, attr, dnnl_rt::cpu_engine());
    };
    // The direct kernel's layouts (Winograd takes its own, reordered to and from).
    auto direct_pd = [&] {
      fwd::primitive_desc pd = describe(plan->user_src, plan->user_dst, plain_attr);
      const bool pointwise = s.kh == 1 && s.kw == 1 && g == 1;
      const bool plain =
          layouts.src == ActivationLayout::kNchw && layouts.dst == ActivationLayout::kNchw;
      if (!plain) {
        // Channels-last or blocked on either side: direct kernels read and write it as it lies;
        // only when oneDNN has nothing but GEMM or reference code for it does a reordered problem
        // run.
        // And anything beats the reference kernel, which is all oneDNN 2.6 has on AVX2 for some
        // problems in a channels-inner layout (AlexNet's 11x11/4 stem to nChw8c or NHWC: 2 s
        // against 2 ms for GEMM on plain activations and a reorder).
        if (is_gemm_or_ref(pd.impl_info_str())) {
          fwd::primitive_desc direct = describe(any_src, any_dst, plain_attr);
          if (!is_gemm_or_ref(direct.impl_info_str()) ||
              (dnnl_rt::is_reference(pd.impl_info_str()) &&
               !dnnl_rt::is_reference(direct.impl_info_str()))) {
            pd = direct;
          }
        }
      } else if (!pointwise) {
        fwd::primitive_desc direct = describe(plan->user_src, any_dst, plain_attr);
        if (is_gemm_or_ref(direct.impl_info_str())) direct = describe(any_src, any_dst, plain_attr);
        if (!is_gemm_or_ref(direct.impl_info_str())) pd = direct;
      }
      return pd;
    };
    const fwd::primitive_desc pd = winograd ? describe(any_src, any_dst, plain_attr) : direct_pd();
    auto with_post_ops = [&](const dnnl::primitive_attr& attr, bool gemm_too) {
      PostOpConv v;
      try {
        const fwd::primitive_desc d = describe(pd.src_desc(), pd.dst_desc(), attr);
        const char* impl = d.impl_info_str();
        if (!dnnl_rt::is_reference(impl) && (gemm_too || !is_gemm_or_ref(impl)) &&
            d.weights_desc() == pd.weights_desc()) {
          v = {true, fwd(d), d.scratchpad_desc()};
        }
      } catch (const dnnl::error&) {
        // None here: the residual is copied aside, the activation runs in the pass.
      }
      return v;
    };
    if (epilogue.residual) plan->with_sum = with_post_ops(sum_attr, /*gemm_too=*/true);
    // The clip post-op only on brgemm and direct kernels: on `gemm:jit` oneDNN 2.6 runs post-ops
    // slowly (the top of the file).
    if (act_post_op && !winograd && !is_gemm_or_ref(pd.impl_info_str())) {
      plan->with_act = with_post_ops(act_attr, /*gemm_too=*/false);
    }
    plan->impl = pd.impl_info_str();
    plan->conv = fwd(pd);
    plan->scratch_md = pd.scratchpad_desc();
    plan->src_md = pd.src_desc();
    plan->dst_md = pd.dst_desc();
    const dnnl::engine& e = dnnl_rt::cpu_engine();
    plan->reorder_src = plan->src_md != plan->user_src;
    plan->reorder_dst = plan->dst_md != plan->user_dst;
    if (plan->reorder_src) plan->to_src = dnnl::reorder({e, plan->user_src, e, plan->src_md});
    if (plan->reorder_dst) plan->from_dst = dnnl::reorder({e, plan->dst_md, e, plan->user_dst});
    if (epilogue.residual && plan->reorder_dst) {
      dnnl::post_ops sum;
      sum.append_sum(1.0f);
      dnnl::primitive_attr attr;
      attr.set_post_ops(sum);
      plan->from_dst_sum = dnnl::reorder({e, plan->dst_md, e, plan->user_dst, attr});
    }
    attach_weights(*plan, pd.weights_desc(), {wei_dims, kF32, g > 1 ? Tag::goihw : Tag::oihw},
                   plain_weights);
    return plan;
  }

  // The plan's weights in the layout its kernel wants (`w_md`): packed from the plain copy
  // (`plain_md`) for the first plan; a later problem whose kernel wants another layout gets its
  // own copy, reordered from the packed one.
  void attach_weights(Plan& plan, const memory::desc& w_md, const memory::desc& plain_md,
                      const float* plain_weights) const {
    if (plain_weights == nullptr && w_md == packed.get_desc()) {
      plan.weights = packed;
      return;
    }
    const dnnl::engine& e = dnnl_rt::cpu_engine();
    plan.weights = memory(w_md, e);
    plan.own_weights = plain_weights == nullptr;
    memory from =
        plain_weights != nullptr ? memory(plain_md, e, const_cast<float*>(plain_weights)) : packed;
    dnnl::stream& stream = dnnl_rt::thread_stream();
    dnnl::reorder(from, plan.weights).execute(stream, from, plan.weights);
    stream.wait();
  }

  std::shared_ptr<const Plan> plan_for(const Shape& x) const {
    if (x == base_input) return base_plan;
    {
      std::lock_guard<std::mutex> lock(mutex);
      auto it = plans.find(x);
      if (it != plans.end()) return it->second;
    }
    // Built outside the lock (a JIT compile): two threads may race to build the same plan, which
    // costs time but is harmless.
    std::shared_ptr<const Plan> plan;
    try {
      plan = make_plan(shape_of(x), nullptr);
    } catch (const dnnl::error& e) {
      throw Error(
          fmt::format("PackedConv2d: oneDNN rejected input {}: {}", shape_str(x), e.what()));
    }
    std::lock_guard<std::mutex> lock(mutex);
    // Shape-polymorphic callers must not grow the cache forever.
    if (plans.size() >= kMaxPlans) plans.clear();
    return plans.emplace(x, plan).first->second;
  }

  // How many images one oneDNN call takes. On plain activations (`gemm:jit`) the epilogue pass
  // follows the convolution: a few images at a time keep its input in the caches (see the top of
  // the file). Always a divisor of the batch, so one more plan serves every call. Channels-last
  // outputs (brgemm kernels) run whole: sliced, ResNet-50 at batch 8 ran 1.8% slower.
  int64_t images_per_call(const Plan& p) const {
    const ConvShape& s = p.shape;
    const bool pass = epilogue.residual || epilogue.activation != ConvActivation::kNone;
    if (!pass || p.reorder_src || p.reorder_dst || layouts.dst != ActivationLayout::kNchw)
      return s.n;
    const int64_t image_bytes = s.o * s.oh * s.ow * static_cast<int64_t>(sizeof(float));
    const int64_t fit = std::max<int64_t>(1, kSliceBytes / image_bytes);
    int64_t per_call = 1;
    for (int64_t k = 1; k <= std::min(fit, s.n); ++k) {
      if (s.n % k == 0) per_call = k;
    }
    return per_call;
  }

  // Builds the Winograd plan for `base` from the folded OIHW weights (oneDNN's, else ours) and
  // keeps it, when `timed` only if it clearly beats the direct plan (timed_choice.h: alternating
  // runs on the graph's own shape, epilogue and layouts, the fastest of each compared).
  void choose_winograd(const float* folded_weights, bool timed) {
    std::shared_ptr<const Plan> w;
    std::shared_ptr<const vision::WinogradF4x3> own;
    try {
      w = make_plan(base, folded_weights, /*winograd=*/true);
    } catch (const dnnl::error&) {
      // oneDNN 2.6 has Winograd for AVX-512 only. Where ours cannot be built either (its GEMMs
      // refused, its 4x larger weights not allocated), the direct plan runs.
      try {
        own = std::make_shared<const vision::WinogradF4x3>(
            base, folded_weights, has_bias ? bias_values.data() : nullptr, layouts);
      } catch (const std::exception&) {
        return;
      }
    }
    if (timed &&
        !winograd_races().decide(race_key(w != nullptr), [&] { return race_winograd(w, own); })) {
      return;
    }
    winograd = std::move(w);
    own_winograd = std::move(own);
  }

  // What a race's outcome depends on: the problem, the layouts, the epilogue's cost, whose
  // Winograd runs and on how many threads. Weights and the affine's values do not change timing.
  std::string race_key(bool onednn_winograd) const {
    const ConvShape& s = base;
    return fmt::format("{}x{}x{}x{} o{} pad{},{} {}->{} bias{} {} {} threads {}", s.n, s.c, s.h,
                       s.w, s.o, s.p.padding.h, s.p.padding.w, layout_name(layouts.src),
                       layout_name(layouts.dst), has_bias, epilogue.name(),
                       onednn_winograd ? "onednn" : "ours", omp_get_max_threads());
  }

  // Whether Winograd (`w`, else `own`) clearly beats the direct plan on this problem.
  bool race_winograd(const std::shared_ptr<const Plan>& w,
                     const std::shared_ptr<const vision::WinogradF4x3>& own) const {
    const memory::desc& user_src = base_plan->user_src;
    const memory::desc& user_dst = base_plan->user_dst;
    Tensor x = scratch_tensor(user_src), y = scratch_tensor(user_dst), r;
    std::fill_n(x.data<float>(), x.numel(), 0.5f);
    if (epilogue.residual) {
      r = scratch_tensor(user_dst);
      std::fill_n(r.data<float>(), r.numel(), 0.25f);
    }
    const float* res = r.defined() ? r.data<float>() : nullptr;
    const vision::RaceTimes t =
        vision::race([&] { run_onednn(*base_plan, x.data<float>(), y.data<float>(), res); },
                     [&] {
                       if (w) {
                         run_onednn(*w, x.data<float>(), y.data<float>(), res);
                       } else {
                         own->run(base, x.data<float>(), y.data<float>(), res, row);
                       }
                     });
    return vision::challenger_wins(t.incumbent, t.challenger, kWinogradMargin);
  }

  void run_onednn(const Plan& p, const float* x, float* y, const float* residual) const {
    const dnnl::engine& e = dnnl_rt::cpu_engine();
    dnnl::stream& stream = dnnl_rt::thread_stream();
    memory user_x(p.user_src, e, const_cast<float*>(x)), user_y(p.user_dst, e, y);
    Tensor src_buf, dst_buf, aside;
    memory src = user_x, dst = user_y;
    if (p.reorder_src) {
      src_buf = scratch_tensor(p.src_md);
      src = memory(p.src_md, e, src_buf.raw_data());
      p.to_src.execute(stream, user_x, src);
    }
    if (p.reorder_dst) {
      dst_buf = scratch_tensor(p.dst_md);
      dst = memory(p.dst_md, e, dst_buf.raw_data());
    }
    const dnnl::convolution_forward* conv = &p.conv;
    const memory::desc* scratch = &p.scratch_md;
    const float* pass_residual = residual;  // what the pass after the convolution adds
    bool pass_activation = row.activation != ConvActivation::kNone;
    if (p.with_act.built && residual == nullptr &&
        finite_and_bounded(x, p.shape.n * p.shape.c * p.shape.h * p.shape.w)) {
      conv = &p.with_act.conv;
      scratch = &p.with_act.scratch;
      pass_activation = false;
    }
    bool sum_on_reorder = false;
    if (residual != nullptr && residual == y) {  // y's contents must be added before replaced
      if (p.reorder_dst) {
        sum_on_reorder = true;
        pass_residual = nullptr;
      } else if (p.with_sum.built) {
        conv = &p.with_sum.conv;
        scratch = &p.with_sum.scratch;
        pass_residual = nullptr;
      } else {  // the convolution would overwrite the residual before the pass reads it
        aside = scratch_tensor(p.user_dst);
        std::copy_n(residual, aside.numel(), aside.data<float>());
        pass_residual = aside.data<float>();
      }
    }
    std::unordered_map<int, memory> args{
        {DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, p.weights}, {DNNL_ARG_DST, dst}};
    if (has_bias) args.emplace(DNNL_ARG_BIAS, bias_mem);
    dnnl_rt::execute(*conv, args, *scratch);
    if (p.reorder_dst) {
      (sum_on_reorder ? p.from_dst_sum : p.from_dst).execute(stream, dst, user_y);
      stream.wait();
    }
    if (pass_residual != nullptr || pass_activation) {
      const ConvShape& s = p.shape;
      epilogue_pass(y, pass_residual, s.n * s.o * s.oh * s.ow, row);
    }
  }
};

PackedConv2d::PackedConv2d(const Tensor& weight, const Tensor& bias, const Attrs& attrs,
                           const Shape& input_shape, ConvEpilogue epilogue, ConvLayouts layouts,
                           ConvAlgorithm algorithm) {
  if (!weight.defined() || weight.dtype() != DType::kF32 || weight.dim() != 4) {
    throw Error("PackedConv2d: weight must be a 4-D f32 tensor [O, C/groups, kH, kW]");
  }
  if (bias.defined() && bias.dtype() != DType::kF32) {
    throw Error(fmt::format("PackedConv2d: bias must be f32, got {}", dtype_name(bias.dtype())));
  }
  if (input_shape.size() != 4) {
    throw Error(
        fmt::format("PackedConv2d: input shape {} must be [N,C,H,W]", shape_str(input_shape)));
  }
  auto impl = std::make_shared<Impl>();
  Impl& im = *impl;
  im.attrs = attrs;
  im.weight_shape = weight.shape();
  std::vector<TensorType> types{{DType::kF32, input_shape}, {DType::kF32, weight.shape()}};
  if (bias.defined()) types.push_back({DType::kF32, bias.shape()});
  try {
    im.base = vision::conv_shape(types, attrs);
  } catch (const Error& e) {
    throw Error(fmt::format("PackedConv2d: {}", e.what()));
  }
  const ConvShape& s = im.base;
  if (s.n == 0 || s.c == 0 || s.h == 0 || s.w == 0 || s.o == 0 || s.oh <= 0 || s.ow <= 0) {
    throw Error(fmt::format("PackedConv2d: empty convolution (input {}, weight {})",
                            shape_str(input_shape), shape_str(weight.shape())));
  }
  check_epilogue(epilogue, s.o);
  const bool affine = !epilogue.scale.empty();
  im.depthwise = is_depthwise_conv(s.c, s.p.groups);
  check_layouts(s, layouts, im.depthwise);
  const bool nhwc =
      layouts.src == ActivationLayout::kNhwc || layouts.dst == ActivationLayout::kNhwc;
  im.layouts = layouts;
  im.epilogue = std::move(epilogue);
  const ConvEpilogue& ep = im.epilogue;
  im.row.activation = ep.activation;
  im.row.lo = static_cast<float>(ep.clamp_min);
  im.row.hi = static_cast<float>(ep.clamp_max);

  // Fold the affine into the weights and bias in double, rounding each once to f32.
  std::vector<float> folded = scaled_weights(weight, ep, s.o);
  im.has_bias = bias.defined() || affine;
  if (im.has_bias) {
    const std::vector<double> b = bias.defined() ? bias.to_doubles() : std::vector<double>(s.o);
    im.bias_values.resize(s.o);
    for (int64_t o = 0; o < s.o; ++o) {
      im.bias_values[o] = static_cast<float>(affine ? b[o] * ep.scale[o] + ep.shift[o] : b[o]);
    }
    im.bias_md = memory::desc({s.o}, kF32, Tag::x);
    im.bias_mem = memory(im.bias_md, dnnl_rt::cpu_engine(), im.bias_values.data());
  }
  if (im.depthwise) {
    const int64_t taps = s.kh * s.kw;
    if (nhwc) {  // tap-major, [kh][kw][C], for the channels-last loop
      im.folded = taps_inner(folded, s.o, taps, s.o);
    } else if (layouts.src == ActivationLayout::kNchw8c) {  // [C/8][kh][kw][8]
      im.folded = taps_inner(folded, s.o, taps, 8);
    } else {
      im.folded = std::move(folded);
    }
    impl_ = std::move(impl);
    return;
  }

  dnnl::post_ops sum;
  sum.append_sum(1.0f);
  im.sum_attr.set_post_ops(sum);
  im.act_post_op = activation_post_op_safe(ep, folded, im.bias_values, s.o, im.row.lo, im.row.hi);
  if (im.act_post_op) {
    const bool relu = ep.activation == ConvActivation::kRelu;
    dnnl::post_ops clip;
    clip.append_eltwise(1.0f, dnnl::algorithm::eltwise_clip, relu ? 0.0f : im.row.lo,
                        relu ? std::numeric_limits<float>::infinity() : im.row.hi);
    im.act_attr.set_post_ops(clip);
  }
  for (dnnl::primitive_attr* a : {&im.plain_attr, &im.sum_attr, &im.act_attr}) {
    a->set_scratchpad_mode(dnnl::scratchpad_mode::user);
  }
  try {
    im.base_plan = im.make_plan(s, folded.data());
    im.packed = im.base_plan->weights;
    im.base_input = input_shape;
  } catch (const dnnl::error& e) {
    throw Error(fmt::format("PackedConv2d: oneDNN rejected the convolution: {}", e.what()));
  }
  if (algorithm != ConvAlgorithm::kDirect && winograd_eligible(s, folded)) {
    im.choose_winograd(folded.data(), algorithm == ConvAlgorithm::kFastest);
  }
  impl_ = std::move(impl);
}

Shape PackedConv2d::output_shape(const Shape& input_shape) const {
  const ConvShape s = impl_->shape_of(input_shape);
  return {s.n, s.o, s.oh, s.ow};
}

const ConvEpilogue& PackedConv2d::epilogue() const { return impl_->epilogue; }
const ConvLayouts& PackedConv2d::layouts() const { return impl_->layouts; }
bool PackedConv2d::uses_winograd() const {
  return impl_->winograd != nullptr || impl_->own_winograd != nullptr;
}

void PackedConv2d::run(const float* x, const Shape& input_shape, float* y,
                       const float* residual) const {
  const Impl& im = *impl_;
  if ((residual != nullptr) != im.epilogue.residual) {
    throw Error(im.epilogue.residual ? "PackedConv2d::run: the epilogue adds a residual; none given"
                                     : "PackedConv2d::run: a residual given, but the epilogue "
                                       "has no residual add");
  }
  const ConvShape s = im.shape_of(input_shape);
  if (s.n == 0 || s.oh <= 0 || s.ow <= 0) return;
  if (x == nullptr || y == nullptr) throw Error("PackedConv2d::run: null x or y");
  if (im.depthwise) {
    vision::RowEpilogue<float> row = im.row;
    row.residual = residual;
    const float* b = im.has_bias ? im.bias_values.data() : nullptr;
    if (im.layouts.src == ActivationLayout::kNhwc) {
      vision::conv2d_depthwise_nhwc(s, x, im.folded.data(), b, y, row);
    } else if (im.layouts.src == ActivationLayout::kNchw8c) {
      vision::conv2d_depthwise_nchw8c(s, x, im.folded.data(), b, y, row);
    } else {
      vision::conv2d_depthwise<float>(s, x, im.folded.data(), b, y, row);
    }
    return;
  }
  if ((im.winograd || im.own_winograd) && input_shape == im.base_input &&
      finite_and_bounded(x, shape_numel(input_shape))) {
    if (im.winograd) {
      im.run_onednn(*im.winograd, x, y, residual);
    } else {
      im.own_winograd->run(s, x, y, residual, im.row);
    }
    return;
  }
  const std::shared_ptr<const Plan> plan = im.plan_for(input_shape);
  const int64_t per_call = im.images_per_call(*plan);
  if (per_call == s.n) {
    im.run_onednn(*plan, x, y, residual);
    return;
  }
  const std::shared_ptr<const Plan> part = im.plan_for({per_call, s.c, s.h, s.w});
  const int64_t in_image = s.c * s.h * s.w, out_image = s.o * s.oh * s.ow;
  for (int64_t n = 0; n < s.n; n += per_call) {
    im.run_onednn(*part, x + n * in_image, y + n * out_image,
                  residual != nullptr ? residual + n * out_image : nullptr);
  }
}

void PackedConv2d::prepare(const Shape& input_shape) const {
  const Impl& im = *impl_;
  const ConvShape s = im.shape_of(input_shape);
  if (im.depthwise || s.n == 0) return;
  const int64_t per_call = im.images_per_call(*im.plan_for(input_shape));
  if (per_call != s.n) im.plan_for({per_call, s.c, s.h, s.w});
}

size_t PackedConv2d::packed_bytes() const {
  const Impl& im = *impl_;
  size_t bytes = (im.bias_values.size() + im.folded.size()) * sizeof(float);
  if (im.depthwise) return bytes;
  bytes += im.packed.get_desc().get_size();
  if (im.winograd) bytes += im.winograd->weights.get_desc().get_size();
  if (im.own_winograd) bytes += im.own_winograd->packed_bytes();
  std::lock_guard<std::mutex> lock(im.mutex);
  for (const auto& [shape, plan] : im.plans) {
    if (plan->own_weights) bytes += plan->weights.get_desc().get_size();
  }
  return bytes;
}

std::string PackedConv2d::describe() const {
  const Impl& im = *impl_;
  const ConvShape& s = im.base;
  std::string text = fmt::format("packed conv2d {}->{} {}x{} stride {}x{}", s.c, s.o, s.kh, s.kw,
                                 s.p.stride.h, s.p.stride.w);
  if (s.p.groups > 1) text += fmt::format(" groups {}", s.p.groups);
  if (im.depthwise) {
    text += im.layouts.src == ActivationLayout::kNchw
                ? " (direct depthwise loop, plain activations, epilogue per row)"
                : fmt::format(" (direct depthwise loop, {} activations, epilogue per pixel)",
                              layout_name(im.layouts.src));
  } else {
    const Plan& plan = *im.base_plan;
    text += fmt::format(
        " (oneDNN {}, weights {}, activations {} -> {}, epilogue in a pass after)", plan.impl,
        dnnl_rt::layout_name(im.packed.get_desc(), s.p.groups > 1 ? "goihw" : "oihw"),
        dnnl_rt::layout_name(plan.src_md, "nchw"), dnnl_rt::layout_name(plan.dst_md, "nchw"));
    if (im.layouts.src != ActivationLayout::kNchw || im.layouts.dst != ActivationLayout::kNchw) {
      text += fmt::format(", caller's activations {} -> {}",
                          dnnl_rt::layout_name(plan.user_src, "nchw"),
                          dnnl_rt::layout_name(plan.user_dst, "nchw"));
    }
    if (plan.with_act.built) text += ", the activation as oneDNN's clip on finite inputs";
    if (im.winograd) {
      text += fmt::format(", Winograd F(4x4,3x3) on finite inputs (oneDNN {}, activations {})",
                          im.winograd->impl, dnnl_rt::layout_name(im.winograd->src_md, "nchw"));
    }
    if (im.own_winograd) {
      text +=
          ", Winograd F(4x4,3x3) on finite inputs (ours: 36 GEMMs on packed transformed weights)";
    }
  }
  return fmt::format("{}{}, {} epilogue", text, im.has_bias ? ", bias" : "", im.epilogue.name());
}

}  // namespace crucible
