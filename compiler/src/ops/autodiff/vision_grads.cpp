// Gradient rules of convolution, the pools and inference-form batch_norm, each in registry ops:
// conv2d's input gradient is conv_transpose2d, its weight gradient a conv2d of the input by the
// output gradient (stride and dilation trading places, groups kept), and conv_transpose2d's the
// same with the roles of input and output swapped; a pool's input gradient is
// a grouped conv_transpose2d of its per-tap gradients (max: each window's first maximum; average:
// the share of each element) by a 0/1 or ones kernel, cropped to the input.
#include <fmt/format.h>

#include <limits>

#include "autodiff/grad_builder.h"
#include "crucible/core/error.h"
#include "vision/window_geometry.h"

namespace crucible::autodiff {

namespace {

using vision::Hw;

void need_batched(GradBuilder& b, const char* op) {
  if (b.shape(b.x(0)).size() != 4)
    throw GraphError(fmt::format("autodiff: {}'s gradient needs a batched [N,C,H,W] input, not {}",
                                 op, b.type(b.x(0)).str()));
}

// `v` [N,C,h,w] with `top`/`left` rows and columns cut off (or zeros added, when negative) and
// then cut or zero-extended to `size`: the inverse of a window op's padding.
ValueId crop(GradBuilder& b, ValueId v, Hw top_left, Hw size) {
  const Shape s = b.shape(v);
  const std::vector<int64_t> pads = {
      0, 0, -top_left.h, -top_left.w, 0, 0, size.h + top_left.h - s[2], size.w + top_left.w - s[3]};
  bool any = false;
  for (int64_t p : pads) any = any || p != 0;
  return any ? b.op("pad", {v}, {{"pads", pads}}) : v;
}

ValueId conv2d_input_grad(GradBuilder& b, const vision::ConvParams& p) {
  const Shape x = b.shape(b.x(0)), w = b.shape(b.x(1)), gy = b.shape(b.gy());
  // conv_transpose2d's output extent falls short of the input by what the forward's floor
  // dropped: output_padding gives it back (always below the stride).
  const int64_t oph =
      x[2] - ((gy[2] - 1) * p.stride.h - 2 * p.padding.h + p.dilation.h * (w[2] - 1) + 1);
  const int64_t opw =
      x[3] - ((gy[3] - 1) * p.stride.w - 2 * p.padding.w + p.dilation.w * (w[3] - 1) + 1);
  return b.op("conv_transpose2d", {b.gy(), b.x(1)},
              {{"stride", std::vector<int64_t>{p.stride.h, p.stride.w}},
               {"padding", std::vector<int64_t>{p.padding.h, p.padding.w}},
               {"output_padding", std::vector<int64_t>{oph, opw}},
               {"dilation", std::vector<int64_t>{p.dilation.h, p.dilation.w}},
               {"groups", p.groups}});
}

// The weight gradient of y = conv2d(x, W): dW[g*Og+o, c, i, j] = sum over n and output
// positions of gy[n, g*Og+o] times x[n, g*Cg+c] at the tap, as a conv2d whose batch is the input
// channels within a group, whose channels are (group, image) and whose kernel is the output
// gradient. `w` is W's shape.
ValueId conv2d_weight_grad(GradBuilder& b, const vision::ConvParams& p, ValueId input,
                           ValueId grad_out, const Shape& w) {
  const Shape x = b.shape(input), gy = b.shape(grad_out);
  const int64_t n = x[0], groups = p.groups, cg = x[1] / groups, og = w[0] / groups;
  ValueId in =
      b.op("reshape", {input}, {{"shape", std::vector<int64_t>{n, groups, cg, x[2], x[3]}}});
  in = b.op("permute", {in}, {{"dims", std::vector<int64_t>{2, 1, 0, 3, 4}}});
  in = b.op("reshape", {in}, {{"shape", std::vector<int64_t>{cg, groups * n, x[2], x[3]}}});
  ValueId k =
      b.op("reshape", {grad_out}, {{"shape", std::vector<int64_t>{n, groups, og, gy[2], gy[3]}}});
  k = b.op("permute", {k}, {{"dims", std::vector<int64_t>{1, 2, 0, 3, 4}}});
  k = b.op("reshape", {k}, {{"shape", std::vector<int64_t>{groups * og, n, gy[2], gy[3]}}});
  ValueId r = b.op("conv2d", {in, k},
                   {{"stride", std::vector<int64_t>{p.dilation.h, p.dilation.w}},
                    {"padding", std::vector<int64_t>{p.padding.h, p.padding.w}},
                    {"dilation", std::vector<int64_t>{p.stride.h, p.stride.w}},
                    {"groups", groups}});
  // Taps past the kernel (the input's rows the forward's floor dropped) are cut off.
  const Shape rs = b.shape(r);
  if (rs[2] != w[2])
    r = b.op("slice", {r}, {{"dim", int64_t{2}}, {"start", int64_t{0}}, {"end", w[2]}});
  if (rs[3] != w[3])
    r = b.op("slice", {r}, {{"dim", int64_t{3}}, {"start", int64_t{0}}, {"end", w[3]}});
  return b.op("permute", {r}, {{"dims", std::vector<int64_t>{1, 0, 2, 3}}});
}

Grads conv2d_grad(GradBuilder& b) {
  need_batched(b, "conv2d");
  const vision::ConvParams p = vision::conv_params(b.node().attrs);
  Grads out(b.node().operands.size(), -1);
  if (b.wants(0)) out[0] = conv2d_input_grad(b, p);
  if (b.wants(1)) out[1] = conv2d_weight_grad(b, p, b.x(0), b.gy(), b.shape(b.x(1)));
  if (out.size() > 2 && b.wants(2))
    out[2] = b.op("sum", {b.gy()}, {{"dims", std::vector<int64_t>{0, 2, 3}}});
  return out;
}

// y = conv_transpose2d(x, W) is the adjoint of z -> conv2d(z, W) (W [Cin, Cout/g, kh, kw] is
// conv2d's [out, in/g] layout from y's channels to x's): x's gradient is that conv2d of gy (its
// extent is x's: the output padding is below the stride), and W's is conv2d's weight gradient with
// gy as the input and x as the output gradient.
Grads conv_transpose2d_grad(GradBuilder& b) {
  need_batched(b, "conv_transpose2d");
  const vision::ConvParams p = vision::conv_params(b.node().attrs);
  Grads out(b.node().operands.size(), -1);
  if (b.wants(0)) {
    out[0] = b.op("conv2d", {b.gy(), b.x(1)},
                  {{"stride", std::vector<int64_t>{p.stride.h, p.stride.w}},
                   {"padding", std::vector<int64_t>{p.padding.h, p.padding.w}},
                   {"dilation", std::vector<int64_t>{p.dilation.h, p.dilation.w}},
                   {"groups", p.groups}});
  }
  if (b.wants(1)) out[1] = conv2d_weight_grad(b, p, b.gy(), b.x(0), b.shape(b.x(1)));
  if (out.size() > 2 && b.wants(2))
    out[2] = b.op("sum", {b.gy()}, {{"dims", std::vector<int64_t>{0, 2, 3}}});
  return out;
}

// Per-tap gradients [N, C*T, OH, OW] spread back over the (padded) input by a grouped
// conv_transpose2d with `kernel` [C*T, 1, kh, kw], then cropped to the input.
ValueId spread_taps(GradBuilder& b, ValueId taps, ValueId kernel, const vision::PoolParams& p) {
  const Shape x = b.shape(b.x(0));
  const ValueId spread = b.op("conv_transpose2d", {taps, kernel},
                              {{"stride", std::vector<int64_t>{p.stride.h, p.stride.w}},
                               {"dilation", std::vector<int64_t>{p.dilation.h, p.dilation.w}},
                               {"groups", x[1]}});
  return crop(b, spread, p.padding, {x[2], x[3]});
}

// [C*T, 1, kh, kw] with channel c*T+t one at tap t: tap t's gradient goes to its own position.
ValueId tap_kernel(GradBuilder& b, int64_t channels, Hw k, DType dt) {
  const int64_t taps = k.h * k.w;
  const ValueId idx =
      b.op("arange", {}, {{"end", static_cast<double>(taps)}, {"dtype", DType::kI64}});
  const ValueId rows = b.op("reshape", {idx}, {{"shape", std::vector<int64_t>{taps, 1}}});
  const ValueId cols = b.op("reshape", {idx}, {{"shape", std::vector<int64_t>{1, taps}}});
  ValueId eye = b.op("cast", {b.op("eq", {rows, cols})}, {{"dtype", dt}});
  eye = b.op("reshape", {eye}, {{"shape", std::vector<int64_t>{1, taps, 1, k.h, k.w}}});
  eye = b.op("expand", {eye}, {{"shape", std::vector<int64_t>{channels, taps, 1, k.h, k.w}}});
  return b.op("reshape", {eye}, {{"shape", std::vector<int64_t>{channels * taps, 1, k.h, k.w}}});
}

// Each output's gradient to the first of its window's elements equal to the maximum (PyTorch's
// argmax), tap by tap over the input padded with the lowest value.
Grads max_pool2d_grad(GradBuilder& b) {
  need_batched(b, "max_pool2d");
  const vision::PoolParams p = vision::pool_params(b.node().attrs);
  const Shape x = b.shape(b.x(0)), y = b.shape(b.y());
  const DType dt = b.type(b.x(0)).dtype;
  const Hw extent{(y[2] - 1) * p.stride.h + p.dilation.h * (p.kernel.h - 1) + 1,
                  (y[3] - 1) * p.stride.w + p.dilation.w * (p.kernel.w - 1) + 1};
  const ValueId padded = b.op(
      "pad", {b.x(0)},
      {{"pads", std::vector<int64_t>{0, 0, p.padding.h, p.padding.w, 0, 0,
                                     extent.h - x[2] - p.padding.h, extent.w - x[3] - p.padding.w}},
       {"value", std::numeric_limits<double>::lowest()}});
  ValueId seen = -1;
  std::vector<ValueId> taps;
  for (int64_t i = 0; i < p.kernel.h; ++i) {
    for (int64_t j = 0; j < p.kernel.w; ++j) {
      const int64_t top = i * p.dilation.h, left = j * p.dilation.w;
      ValueId at = b.op("slice", {padded},
                        {{"dim", int64_t{2}},
                         {"start", top},
                         {"end", top + (y[2] - 1) * p.stride.h + 1},
                         {"step", p.stride.h}});
      at = b.op("slice", {at},
                {{"dim", int64_t{3}},
                 {"start", left},
                 {"end", left + (y[3] - 1) * p.stride.w + 1},
                 {"step", p.stride.w}});
      const ValueId hit = b.op("eq", {at, b.y()});
      const ValueId first =
          seen < 0 ? hit : b.op("logical_and", {hit, b.op("logical_not", {seen})});
      seen = seen < 0 ? hit : b.op("logical_or", {seen, hit});
      taps.push_back(b.op("unsqueeze", {b.masked(first, b.gy())}, {{"dim", int64_t{2}}}));
    }
  }
  ValueId stacked = taps.size() == 1 ? taps[0] : b.op("cat", taps, {{"dim", int64_t{2}}});
  stacked = b.op("reshape", {stacked},
                 {{"shape", std::vector<int64_t>{y[0], y[1] * static_cast<int64_t>(taps.size()),
                                                 y[2], y[3]}}});
  return {spread_taps(b, stacked, tap_kernel(b, x[1], p.kernel, dt), p)};
}

// An average whose every window divides by kh*kw: each element gets that share of every
// window's gradient that covers it.
ValueId average_grad(GradBuilder& b, const vision::PoolParams& p) {
  const Shape x = b.shape(b.x(0));
  const DType dt = b.type(b.x(0)).dtype;
  const ValueId share = b.times(b.gy(), 1.0 / static_cast<double>(p.kernel.h * p.kernel.w));
  const ValueId ones = b.filled({x[1], 1, p.kernel.h, p.kernel.w}, 1.0, dt);
  return spread_taps(b, share, ones, p);
}

Grads avg_pool2d_grad(GradBuilder& b) {
  need_batched(b, "avg_pool2d");
  const vision::PoolParams p = vision::pool_params(b.node().attrs);
  const bool padded = p.padding.h > 0 || p.padding.w > 0;
  if (p.ceil_mode || (padded && !p.count_include_pad))
    throw GraphError(
        "autodiff: avg_pool2d's gradient is implemented for windows that all divide by the "
        "kernel's size (no ceil_mode; count_include_pad, or no padding)");
  return {average_grad(b, p)};
}

Grads adaptive_avg_pool2d_grad(GradBuilder& b) {
  need_batched(b, "adaptive_avg_pool2d");
  const Shape x = b.shape(b.x(0)), y = b.shape(b.y());
  if (x[2] % y[2] != 0 || x[3] % y[3] != 0)
    throw GraphError(fmt::format(
        "autodiff: adaptive_avg_pool2d's gradient is implemented for output sizes that divide "
        "the input ({}x{} into {}x{} does not)",
        x[2], x[3], y[2], y[3]));
  vision::PoolParams p;
  p.kernel = {x[2] / y[2], x[3] / y[3]};
  p.stride = p.kernel;
  return {average_grad(b, p)};
}

// Inference form: y = (x - mean) * w / sqrt(var + eps) + b per channel (dim 1), the statistics
// constants of the model (a training step uses batch statistics instead: training.h).
Grads batch_norm_grad(GradBuilder& b) {
  const Shape x = b.shape(b.x(0));
  const int64_t c = x.at(1);
  std::vector<int64_t> per_channel(x.size(), 1), others;
  per_channel[1] = c;
  for (size_t d = 0; d < x.size(); ++d)
    if (d != 1) others.push_back(static_cast<int64_t>(d));
  auto bc = [&](ValueId v) { return b.op("reshape", {v}, {{"shape", per_channel}}); };
  const double eps = b.node().attrs.get_float_or("eps", 1e-5);
  const ValueId inv = b.op("rsqrt", {b.op("add", {b.x(4), b.scalar_like(eps, b.x(4))})});
  const ValueId centered = b.op("sub", {b.x(0), bc(b.x(3))});
  Grads out(5, -1);
  if (b.wants(0)) out[0] = b.mul(b.gy(), bc(b.mul(b.x(1), inv)));
  if (b.wants(1))
    out[1] = b.op("sum", {b.mul(b.gy(), b.mul(centered, bc(inv)))}, {{"dims", others}});
  if (b.wants(2)) out[2] = b.op("sum", {b.gy()}, {{"dims", others}});
  if (b.wants(3))
    out[3] = b.neg(b.mul(b.op("sum", {b.gy()}, {{"dims", others}}), b.mul(b.x(1), inv)));
  if (b.wants(4)) {
    // d/dvar of (var + eps)^-1/2 is -1/2 (var + eps)^-3/2.
    const ValueId inv3 = b.mul(inv, b.mul(inv, inv));
    const ValueId s = b.op("sum", {b.mul(b.gy(), centered)}, {{"dims", others}});
    out[4] = b.mul(s, b.mul(b.x(1), b.times(inv3, -0.5)));
  }
  return out;
}

// The matrix resize applies along dim `d` (2: rows, 3: columns) of x, as [in, out]: resize of
// the one-hot images of that dim, 1 wide in the other dim (whose single column's weights sum to
// 1), with the scale the forward used.
ValueId resize_matrix(GradBuilder& b, int64_t d) {
  const Shape x = b.shape(b.x(0)), y = b.shape(b.y());
  const int64_t in = x[static_cast<size_t>(d)], out = y[static_cast<size_t>(d)];
  const ValueId ids =
      b.op("arange", {}, {{"end", static_cast<double>(in)}, {"dtype", DType::kI64}});
  const Shape column = d == 2 ? Shape{1, 1, in, 1} : Shape{1, 1, 1, in};
  const ValueId basis =
      b.as_number(b.op("eq", {b.op("reshape", {ids}, {{"shape", Shape{in, 1, 1, 1}}}),
                              b.op("reshape", {ids}, {{"shape", column}})}),
                  b.x(0));
  Attrs attrs = b.node().attrs;
  const char* scale = d == 2 ? "scale_h" : "scale_w";
  attrs.set(scale, attrs.get_float_or(scale, static_cast<double>(out) / static_cast<double>(in)));
  attrs.set(d == 2 ? "scale_w" : "scale_h", 1.0);
  attrs.set("sizes", d == 2 ? Shape{in, 1, out, 1} : Shape{in, 1, 1, out});
  return b.op("reshape", {b.op("resize", {basis}, attrs)}, {{"shape", Shape{in, out}}});
}

// resize is linear and separable (nearest and bilinear alike): y = Rh x Rw^T per image, so
// x's gradient is Rh^T gy Rw, each matrix read off resize itself (resize_matrix).
Grads resize_grad(GradBuilder& b) {
  if (!b.wants(0)) return {-1};
  const Shape x = b.shape(b.x(0)), y = b.shape(b.y());
  if (shape_numel(x) == 0 || shape_numel(y) == 0) return {b.filled(x, 0, b.type(b.x(0)).dtype)};
  const ValueId rows = b.op("matmul", {resize_matrix(b, 2), b.gy()});
  const ValueId cols =
      b.op("permute", {resize_matrix(b, 3)}, {{"dims", std::vector<int64_t>{1, 0}}});
  return {b.op("matmul", {rows, cols})};
}

}  // namespace

void add_vision_grads(GradTable& t) {
  t["conv2d"] = conv2d_grad;
  t["conv_transpose2d"] = conv_transpose2d_grad;
  t["resize"] = resize_grad;
  t["max_pool2d"] = max_pool2d_grad;
  t["avg_pool2d"] = avg_pool2d_grad;
  t["adaptive_avg_pool2d"] = adaptive_avg_pool2d_grad;
  t["batch_norm"] = batch_norm_grad;
}

}  // namespace crucible::autodiff
