// conv2d in f32 through oneDNN's convolution primitive. Plans (primitive, layouts, reorders) are
// cached by problem shape, since creating them costs far more than a small convolution.
#include <fmt/format.h>

#include <array>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <oneapi/dnnl/dnnl.hpp>
#include <string_view>
#include <unordered_map>

#include "crucible/core/error.h"
#include "crucible/core/fnv1a.h"
#include "crucible/core/tensor.h"
#include "dnnl_runtime.h"
#include "plan_cache.h"
#include "vision/vision_internal.h"

// Which layouts the primitive gets (measured on this machine, AMD EPYC with AVX-512, 2 threads,
// oneDNN 2.6.3; times include every reorder):
//
// - Plain NCHW in and out sends every convolution to `gemm:jit` (im2col + sgemm). Letting oneDNN
//   pick the activation layouts (format_tag::any, a channel-blocked layout) selects its direct
//   kernels (`brgconv`, `brdgmm_dw`, `jit`) at the price of reordering input and output:
//   ResNet 3x3 64->64 on 8x56x56: 4.9 ms blocked vs 7.4 ms plain; 512->512 on 8x7x7: 5.0 vs 6.3;
//   grouped 32->64 (4 groups) on 8x28x28: 0.43 vs 0.75; depthwise 3x3 on 8x144x56x56: 2.9 vs
//   6.3 ms (a GEMM per channel), of which the reorders are 2.4 ms.
// - A 1x1 convolution is a plain GEMM already: 2.2 ms plain vs 4.8 ms blocked for 256->64 on
//   8x56x56, where reordering the wide input costs more than the faster kernel saves.
// - The first layer (3 input channels) runs a direct kernel on the plain input when only the
//   output is blocked: 5.5 ms vs 5.9 (both blocked) and 9.9 ms (plain) for 7x7/2 3->64 at 224.
// Hence: 1x1 ungrouped -> plain; else plain input with a blocked output when oneDNN then picks a
// direct kernel; else blocked both ways. (Depthwise layers do not come here: our direct NCHW loop,
// conv2d_depthwise.cpp, needs no reorders and runs that layer in 1.4 ms.) Weights are reordered on
// every call (format_tag::any): an eager kernel cannot know that a weight tensor's contents stay
// the same between calls.

namespace crucible::vision {
namespace {

using dnnl::memory;
using Tag = memory::format_tag;
constexpr auto kF32 = memory::data_type::f32;
using dnnl_rt::cpu_engine;
using dnnl_rt::thread_scratchpad;
using dnnl_rt::thread_stream;

struct ConvKey {
  std::array<int64_t, 16> v{};
  bool operator==(const ConvKey&) const = default;
};

struct ConvKeyHash {
  size_t operator()(const ConvKey& key) const {
    uint64_t h = kFnv1aOffset;
    for (int64_t x : key.v) h = fnv1a_u64(static_cast<uint64_t>(x), h);
    return static_cast<size_t>(h);
  }
};

// A layout change from the caller's plain tensor into the primitive's layout, or back.
struct Reorder {
  bool needed = false;
  memory::desc md;  // the primitive's side
  dnnl::reorder primitive;
};

struct ConvPlan {
  dnnl::convolution_forward conv;
  memory::desc user_src, user_wei, user_dst, bias_md, scratch_md;
  Reorder src, wei, dst;
};

ConvKey key_of(const ConvShape& s, bool has_bias) {
  return {{s.n, s.c, s.h, s.w, s.o, s.kh, s.kw, s.p.stride.h, s.p.stride.w, s.p.padding.h,
           s.p.padding.w, s.p.dilation.h, s.p.dilation.w, s.p.groups, has_bias ? 1 : 0, 0}};
}

// `side` is whichever of the two descriptors the primitive uses.
Reorder make_reorder(const memory::desc& from, const memory::desc& to, const memory::desc& side) {
  Reorder r;
  r.md = side;
  r.needed = from != to;
  if (r.needed) {
    const dnnl::engine& e = cpu_engine();
    r.primitive = dnnl::reorder(dnnl::reorder::primitive_desc(e, from, e, to));
  }
  return r;
}

bool is_gemm_or_ref(const char* impl) {
  const std::string_view s(impl);
  return s.find("gemm") != std::string_view::npos || s.starts_with("ref");
}

std::shared_ptr<const ConvPlan> make_plan(const ConvShape& s, bool has_bias) {
  using dims = memory::dims;
  const int64_t g = s.p.groups;
  const dims src_dims{s.n, s.c, s.h, s.w}, dst_dims{s.n, s.o, s.oh, s.ow};
  const dims wei_dims = g > 1 ? dims{g, s.o / g, s.c / g, s.kh, s.kw} : dims{s.o, s.c, s.kh, s.kw};
  auto plan = std::make_shared<ConvPlan>();
  plan->user_src = memory::desc(src_dims, kF32, Tag::nchw);
  plan->user_dst = memory::desc(dst_dims, kF32, Tag::nchw);
  plan->user_wei = memory::desc(wei_dims, kF32, g > 1 ? Tag::goihw : Tag::oihw);
  if (has_bias) plan->bias_md = memory::desc({s.o}, kF32, Tag::x);
  const memory::desc any_src(src_dims, kF32, Tag::any), any_dst(dst_dims, kF32, Tag::any),
      any_wei(wei_dims, kF32, Tag::any);
  // oneDNN counts dilation from 0 (no gaps); PyTorch from 1.
  const dims strides{s.p.stride.h, s.p.stride.w}, dilates{s.p.dilation.h - 1, s.p.dilation.w - 1},
      pad{s.p.padding.h, s.p.padding.w};
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  auto describe = [&](const memory::desc& src, const memory::desc& dst) {
    using fwd = dnnl::convolution_forward;
    const auto prop = dnnl::prop_kind::forward_inference;
    const auto algo = dnnl::algorithm::convolution_direct;
    const fwd::desc d =
        has_bias
            ? fwd::desc(prop, algo, src, any_wei, plan->bias_md, dst, strides, dilates, pad, pad)
            : fwd::desc(prop, algo, src, any_wei, dst, strides, dilates, pad, pad);
    return fwd::primitive_desc(d, attr, cpu_engine());
  };
  const bool pointwise = s.kh == 1 && s.kw == 1 && g == 1;
  dnnl::convolution_forward::primitive_desc pd = describe(plan->user_src, plan->user_dst);
  if (!pointwise) {
    pd = describe(plan->user_src, any_dst);
    if (is_gemm_or_ref(pd.impl_info_str())) pd = describe(any_src, any_dst);
    // A layout oneDNN can only serve with its reference kernel: plain im2col + GEMM instead.
    if (std::string_view(pd.impl_info_str()).starts_with("ref"))
      pd = describe(plan->user_src, plan->user_dst);
  }
  plan->conv = dnnl::convolution_forward(pd);
  plan->scratch_md = pd.scratchpad_desc();
  plan->src = make_reorder(plan->user_src, pd.src_desc(), pd.src_desc());
  plan->wei = make_reorder(plan->user_wei, pd.weights_desc(), pd.weights_desc());
  plan->dst = make_reorder(pd.dst_desc(), plan->user_dst, pd.dst_desc());
  return plan;
}

std::shared_ptr<const ConvPlan> find_plan(const ConvShape& s, bool has_bias) {
  static PlanCache<ConvKey, ConvPlan,
                   std::unordered_map<ConvKey, std::shared_ptr<const ConvPlan>, ConvKeyHash>>
      cache(1024);
  return cache.get(key_of(s, has_bias), [&] {
    try {
      return make_plan(s, has_bias);
    } catch (const dnnl::error& e) {
      throw Error(fmt::format("conv2d: oneDNN rejected the convolution: {}", e.what()));
    }
  });
}

// A buffer in the primitive's layout (from the tensor allocator, whose block cache keeps large
// temporaries from page-faulting on every call).
Tensor scratch_tensor(const memory::desc& md) {
  return Tensor::empty(DType::kF32, {static_cast<int64_t>((md.get_size() + 3) / 4)});
}

}  // namespace

void conv2d_f32(const ConvShape& s, const float* x, const float* w, const float* bias, float* y) {
  const std::shared_ptr<const ConvPlan> plan = find_plan(s, bias != nullptr);
  const dnnl::engine& e = cpu_engine();
  dnnl::stream& stream = thread_stream();
  memory user_src(plan->user_src, e, const_cast<float*>(x));
  memory user_wei(plan->user_wei, e, const_cast<float*>(w));
  memory user_dst(plan->user_dst, e, y);
  Tensor src_buf, wei_buf, dst_buf;
  memory src = user_src, wei = user_wei, dst = user_dst;
  if (plan->src.needed) {
    src_buf = scratch_tensor(plan->src.md);
    src = memory(plan->src.md, e, src_buf.raw_data());
    plan->src.primitive.execute(stream, user_src, src);
  }
  if (plan->wei.needed) {
    wei_buf = scratch_tensor(plan->wei.md);
    wei = memory(plan->wei.md, e, wei_buf.raw_data());
    plan->wei.primitive.execute(stream, user_wei, wei);
  }
  if (plan->dst.needed) {
    dst_buf = scratch_tensor(plan->dst.md);
    dst = memory(plan->dst.md, e, dst_buf.raw_data());
  }
  std::unordered_map<int, memory> args{
      {DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, wei}, {DNNL_ARG_DST, dst}};
  if (bias != nullptr)
    args.emplace(DNNL_ARG_BIAS, memory(plan->bias_md, e, const_cast<float*>(bias)));
  if (const size_t bytes = plan->scratch_md.get_size(); bytes > 0)
    args.emplace(DNNL_ARG_SCRATCHPAD, memory(plan->scratch_md, e, thread_scratchpad(bytes)));
  plan->conv.execute(stream, args);
  if (plan->dst.needed) plan->dst.primitive.execute(stream, dst, user_dst);
  stream.wait();
}

}  // namespace crucible::vision
