// ONNX's network ops: Conv, ConvTranspose and pooling (1-d and 2-d, with auto_pad and asymmetric
// pads made explicit), BatchNormalization, LayerNormalization, Softmax/LogSoftmax (with the
// pre-13 flattening), Gemm and MatMul.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <limits>
#include <optional>

#include "converters.h"

namespace crucible::onnx {

namespace {

Val per_channel(Ctx& c, const Val& v, int64_t rank);

struct Window {
  std::vector<int64_t> kernel, strides, dilations, begin, end;  // per spatial dim
  bool symmetric() const { return begin == end; }
};

// Kernel, strides, dilations and the padding ONNX's auto_pad or pads ask for, for a 4-d NCHW input.
Window window(const NodeProto& n, const Shape& x, std::vector<int64_t> kernel) {
  if (x.size() != 4)
    unsupported(fmt::format("{}-d input (only 2-d spatial NCHW)", static_cast<int>(x.size()) - 2));
  Window w;
  w.kernel = std::move(kernel);
  if (w.kernel.size() != 2) malformed("kernel_shape must have 2 dims");
  w.strides = attr_ints(n, "strides").value_or(std::vector<int64_t>{1, 1});
  w.dilations = attr_ints(n, "dilations").value_or(std::vector<int64_t>{1, 1});
  if (w.strides.size() != 2 || w.dilations.size() != 2) malformed("strides/dilations need 2 dims");
  const std::string auto_pad = attr_string(n, "auto_pad", "NOTSET");
  w.begin.assign(2, 0);
  w.end.assign(2, 0);
  if (auto_pad == "NOTSET") {
    auto pads = attr_ints(n, "pads").value_or(std::vector<int64_t>{0, 0, 0, 0});
    if (pads.size() != 4) malformed("pads must have 4 entries");
    w.begin = {pads[0], pads[1]};
    w.end = {pads[2], pads[3]};
  } else if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
    for (int i = 0; i < 2; ++i) {
      const int64_t in = x[2 + i], s = w.strides[i];
      const int64_t out = (in + s - 1) / s;
      const int64_t total =
          std::max<int64_t>((out - 1) * s + (w.kernel[i] - 1) * w.dilations[i] + 1 - in, 0);
      const int64_t small = total / 2;
      w.begin[i] = auto_pad == "SAME_UPPER" ? small : total - small;
      w.end[i] = total - w.begin[i];
    }
  } else if (auto_pad != "VALID") {
    malformed(
        fmt::format("auto_pad '{}' is not NOTSET, SAME_UPPER, SAME_LOWER or VALID", auto_pad));
  }
  for (int64_t v : w.begin)
    if (v < 0) malformed("negative pads");
  for (int64_t v : w.end)
    if (v < 0) malformed("negative pads");
  return w;
}

// Pads H and W explicitly (begin, end) with `value`, for windows the registry's symmetric padding
// cannot express.
Val pad_spatial(Ctx& c, const Val& x, const Window& w, double value) {
  std::vector<int64_t> pads = {0, 0, w.begin[0], w.begin[1], 0, 0, w.end[0], w.end[1]};
  return c.op("pad", {x}, {{"pads", pads}, {"mode", std::string("constant")}, {"value", value}});
}

void conv(Ctx& c, const NodeProto& n) {
  Val x = c.in(n, 0), wt = c.in(n, 1);
  if (wt.rank() != 4) unsupported(fmt::format("Conv with a {}-d weight (only 2-d)", wt.rank()));
  // The weight's spatial dims are the kernel; a kernel_shape that says otherwise is a broken file
  // (the registry's conv2d would take the weight's and SAME padding would follow the attribute).
  const std::vector<int64_t> kernel = {wt.type.shape[2], wt.type.shape[3]};
  if (attr_ints(n, "kernel_shape").value_or(kernel) != kernel)
    malformed(fmt::format("kernel_shape [{}] differs from the weight's [{}]",
                          fmt::join(*attr_ints(n, "kernel_shape"), ","), fmt::join(kernel, ",")));
  Window w = window(n, x.type.shape, kernel);
  std::vector<int64_t> padding = w.begin;
  if (!w.symmetric()) {
    x = pad_spatial(c, x, w, 0.0);
    padding = {0, 0};
  }
  std::vector<Val> operands = {x, wt};
  if (auto b = c.opt_in(n, 2)) operands.push_back(*b);
  c.out(n, 0,
        c.op("conv2d", operands,
             {{"stride", w.strides},
              {"padding", padding},
              {"dilation", w.dilations},
              {"groups", attr_int(n, "group", 1)}}));
}

// ConvTranspose: the registry's conv_transpose2d (weight [Cin, Cout/group, kH, kW]). ONNX's pads
// (or those auto_pad and output_shape imply) crop the full output per side, and output_padding or
// an output_shape beyond the full output extends its end; torch's symmetric padding and
// output_padding (< stride or dilation) take what they can express, an explicit pad the rest.
void conv_transpose(Ctx& c, const NodeProto& n) {
  Val x = c.in(n, 0), wt = c.in(n, 1);
  if (x.rank() != 4 || wt.rank() != 4)
    unsupported(fmt::format("ConvTranspose with a {}-d input (only 1-d and 2-d)", x.rank() - 2));
  const Shape &xs = x.type.shape, &ws = wt.type.shape;
  const std::vector<int64_t> kernel = {ws[2], ws[3]};
  if (attr_ints(n, "kernel_shape").value_or(kernel) != kernel)
    malformed("kernel_shape differs from the weight's");
  auto pair = [&](const char* name, int64_t fallback) {
    auto v = attr_ints(n, name).value_or(std::vector<int64_t>{fallback, fallback});
    if (v.size() != 2) malformed(fmt::format("{} needs 2 entries", name));
    return v;
  };
  const std::vector<int64_t> strides = pair("strides", 1), dilations = pair("dilations", 1),
                             out_pad = pair("output_padding", 0);
  const std::string auto_pad = attr_string(n, "auto_pad", "NOTSET");
  std::optional<std::vector<int64_t>> out_shape = attr_ints(n, "output_shape");
  if (out_shape && out_shape->size() == 4) out_shape = {{(*out_shape)[2], (*out_shape)[3]}};
  if (out_shape && out_shape->size() != 2) malformed("output_shape needs 2 entries");
  if (!out_shape && (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER"))
    out_shape = {{xs[2] * strides[0], xs[3] * strides[1]}};
  // How much of the full output (output_padding included) each side drops; negative extends.
  std::vector<int64_t> head(2, 0), tail(2, 0);
  for (int i = 0; i < 2; ++i) {
    const int64_t full =
        strides[i] * (xs[2 + i] - 1) + (kernel[i] - 1) * dilations[i] + 1 + out_pad[i];
    if (out_shape) {
      const int64_t total = full - (*out_shape)[i];
      if (total < 0) {
        tail[i] = total;
      } else if (auto_pad == "SAME_UPPER") {
        head[i] = total / 2, tail[i] = total - total / 2;
      } else {
        head[i] = total - total / 2, tail[i] = total / 2;
      }
    } else if (auto_pad == "NOTSET") {
      const auto pads = attr_ints(n, "pads").value_or(std::vector<int64_t>{0, 0, 0, 0});
      if (pads.size() != 4) malformed("pads must have 4 entries");
      head[i] = pads[i], tail[i] = pads[2 + i];
    } else if (auto_pad != "VALID") {
      malformed(
          fmt::format("auto_pad '{}' is not NOTSET, SAME_UPPER, SAME_LOWER or VALID", auto_pad));
    }
  }
  std::optional<Val> bias = c.opt_in(n, 2);
  Attrs attrs{{"stride", strides}, {"dilation", dilations}, {"groups", attr_int(n, "group", 1)}};
  bool direct = true;
  for (int i = 0; i < 2; ++i) {
    direct = direct && head[i] == tail[i] && head[i] >= 0 &&
             (out_pad[i] < strides[i] || out_pad[i] < dilations[i]);
  }
  if (direct) {
    attrs.set("padding", head);
    attrs.set("output_padding", out_pad);
    std::vector<Val> operands = {x, wt};
    if (bias) operands.push_back(*bias);
    return c.out(n, 0, c.op("conv_transpose2d", operands, attrs));
  }
  Val y = c.op("conv_transpose2d", {x, wt}, attrs);
  std::vector<int64_t> pads = {
      0, 0, -head[0], -head[1], 0, 0, out_pad[0] - tail[0], out_pad[1] - tail[1]};
  y = c.op("pad", {y}, {{"pads", pads}, {"mode", std::string("constant")}, {"value", 0.0}});
  if (bias) y = c.op("add", {y, per_channel(c, *bias, 4)});
  c.out(n, 0, y);
}

bool fits_registry_padding(const Window& w) {
  return w.symmetric() && w.begin[0] <= w.kernel[0] / 2 && w.begin[1] <= w.kernel[1] / 2;
}

void max_pool(Ctx& c, const NodeProto& n) {
  if (n.output_size() > 1 && !n.output(1).empty()) unsupported("MaxPool's Indices output");
  if (attr_int(n, "storage_order", 0) != 0) unsupported("MaxPool with storage_order=1");
  Val x = c.in(n, 0);
  auto kernel = attr_ints(n, "kernel_shape");
  if (!kernel) malformed("MaxPool needs kernel_shape");
  Window w = window(n, x.type.shape, *kernel);
  std::vector<int64_t> padding = w.begin;
  const bool ceil_mode = attr_int(n, "ceil_mode", 0) != 0;
  if (!fits_registry_padding(w)) {
    if (ceil_mode) unsupported("MaxPool with ceil_mode and padding beyond half the kernel");
    x = pad_spatial(c, x, w, -std::numeric_limits<double>::infinity());
    padding = {0, 0};
  }
  c.out(n, 0,
        c.op("max_pool2d", {x},
             {{"kernel_size", w.kernel},
              {"stride", w.strides},
              {"padding", padding},
              {"dilation", w.dilations},
              {"ceil_mode", ceil_mode}}));
}

void average_pool(Ctx& c, const NodeProto& n) {
  Val x = c.in(n, 0);
  auto kernel = attr_ints(n, "kernel_shape");
  if (!kernel) malformed("AveragePool needs kernel_shape");
  Window w = window(n, x.type.shape, *kernel);
  if (w.dilations != std::vector<int64_t>{1, 1}) unsupported("AveragePool with dilations");
  const bool include_pad = attr_int(n, "count_include_pad", 0) != 0;
  const bool ceil_mode = attr_int(n, "ceil_mode", 0) != 0;
  std::vector<int64_t> padding = w.begin;
  if (!fits_registry_padding(w)) {
    if (ceil_mode) unsupported("AveragePool with ceil_mode and asymmetric or wide pads");
    // Zeros padded in front count as elements, which is what count_include_pad means; without
    // it, the window sums are divided by how many real elements each window held.
    Attrs pool{{"kernel_size", w.kernel},
               {"stride", w.strides},
               {"padding", std::vector<int64_t>{0, 0}},
               {"count_include_pad", true}};
    Val y = c.op("avg_pool2d", {pad_spatial(c, x, w, 0.0)}, pool);
    if (!include_pad) {
      const Shape& s = x.type.shape;
      Val ones = c.constant(Tensor::full(x.type.dtype, {1, 1, s[2], s[3]}, 1.0));
      y = c.op("div", {y, c.op("avg_pool2d", {pad_spatial(c, ones, w, 0.0)}, pool)});
    }
    return c.out(n, 0, y);
  }
  c.out(n, 0,
        c.op("avg_pool2d", {x},
             {{"kernel_size", w.kernel},
              {"stride", w.strides},
              {"padding", padding},
              {"ceil_mode", ceil_mode},
              {"count_include_pad", include_pad}}));
}

std::vector<int64_t> spatial_dims(const Val& x) {
  if (x.rank() < 3) malformed("a global pool needs N, C and spatial dims");
  std::vector<int64_t> dims;
  for (int64_t d = 2; d < x.rank(); ++d) dims.push_back(d);
  return dims;
}

void global_average_pool(Ctx& c, const NodeProto& n) {
  Val x = c.in(n, 0);
  c.out(n, 0, c.op("mean", {x}, {{"dims", spatial_dims(x)}, {"keepdim", true}}));
}

void global_max_pool(Ctx& c, const NodeProto& n) {
  Val x = c.in(n, 0);
  c.out(n, 0, c.op("amax", {x}, {{"dims", spatial_dims(x)}, {"keepdim", true}}));
}

void batch_normalization(Ctx& c, const NodeProto& n) {
  if (attr_int(n, "training_mode", 0) != 0 || n.output_size() > 1)
    unsupported("BatchNormalization in training mode");
  std::vector<Val> in;
  for (int i = 0; i < 5; ++i) in.push_back(c.in(n, i));
  c.out(n, 0, c.op("batch_norm", in, {{"eps", attr_float(n, "epsilon", 1e-5)}}));
}

// (x - mean) / sqrt(var + eps) over `dims`, with the mean and 1/sqrt(var + eps) it used.
struct Normalized {
  Val y, mean, inv_std;
};
Normalized normalize(Ctx& c, const Val& x, const std::vector<int64_t>& dims, double eps) {
  const DType t = x.type.dtype;
  Attrs keep{{"dims", dims}, {"keepdim", true}};
  Val mean = c.op("mean", {x}, keep);
  Val d = c.op("sub", {x, mean});
  Val var = c.op("mean", {c.op("mul", {d, d})}, keep);
  Val inv = c.op("rsqrt", {c.op("add", {var, c.scalar(eps, t)})});
  return {c.op("mul", {d, inv}), mean, inv};
}

void layer_normalization(Ctx& c, const NodeProto& n) {
  Val x = c.in(n, 0), scale = c.in(n, 1);
  const int64_t axis = norm_axis(attr_int(n, "axis", -1), x.rank());
  const double eps = attr_float(n, "epsilon", 1e-5);
  std::vector<int64_t> normalized(x.type.shape.begin() + axis, x.type.shape.end());
  const bool stats = (n.output_size() > 1 && !n.output(1).empty()) ||
                     (n.output_size() > 2 && !n.output(2).empty());
  if (stats) {
    // Mean and InvStdDev wanted too: the primitives, each output where ONNX puts it.
    std::vector<int64_t> dims;
    for (int64_t d = axis; d < x.rank(); ++d) dims.push_back(d);
    Normalized r = normalize(c, x, dims, eps);
    Val y = c.op("mul", {r.y, scale});
    if (c.present(n, 2)) y = c.op("add", {y, c.in(n, 2)});
    c.out(n, 0, y);
    c.out(n, 1, r.mean);
    c.out(n, 2, r.inv_std);
    return;
  }
  Val bias =
      c.present(n, 2) ? c.in(n, 2) : c.constant(Tensor::zeros(scale.type.dtype, scale.type.shape));
  // The registry's layer_norm takes weight and bias of the normalized shape.
  auto fit = [&](Val v) {
    if (v.type.shape == Shape(normalized.begin(), normalized.end())) return v;
    return c.op("expand", {v}, {{"shape", normalized}});
  };
  c.out(n, 0,
        c.op("layer_norm", {x, fit(scale), fit(bias)},
             {{"normalized_shape", normalized}, {"eps", eps}}));
}

// Per-channel scale and bias [C] shaped to broadcast over an NC... input.
Val per_channel(Ctx& c, const Val& v, int64_t rank) {
  std::vector<int64_t> shape(static_cast<size_t>(rank - 1), 1);
  shape[0] = v.type.numel();
  return c.op("reshape", {v}, {{"shape", shape}});
}

void instance_normalization(Ctx& c, const NodeProto& n) {
  Val x = c.in(n, 0);
  const std::vector<int64_t> dims = spatial_dims(x);
  Normalized r = normalize(c, x, dims, attr_float(n, "epsilon", 1e-5));
  Val y = c.op("mul", {r.y, per_channel(c, c.in(n, 1), x.rank())});
  c.out(n, 0, c.op("add", {y, per_channel(c, c.in(n, 2), x.rank())}));
}

// DepthToSpace and SpaceToDepth: a reshape, a permute and a reshape.
void depth_to_space(Ctx& c, const NodeProto& n) {
  Val x = c.in(n, 0);
  if (x.rank() != 4) malformed("DepthToSpace needs a 4-d input");
  const int64_t b = attr_int(n, "blocksize", 0);
  const auto& s = x.type.shape;
  if (b <= 0 || s[1] % (b * b) != 0) malformed("blocksize must divide the channels twice");
  const bool crd = attr_string(n, "mode", "DCR") == "CRD";
  std::vector<int64_t> split = crd ? std::vector<int64_t>{s[0], s[1] / (b * b), b, b, s[2], s[3]}
                                   : std::vector<int64_t>{s[0], b, b, s[1] / (b * b), s[2], s[3]};
  std::vector<int64_t> perm =
      crd ? std::vector<int64_t>{0, 1, 4, 2, 5, 3} : std::vector<int64_t>{0, 3, 4, 1, 5, 2};
  Val y = c.op("permute", {c.op("reshape", {x}, {{"shape", split}})}, {{"dims", perm}});
  std::vector<int64_t> out = {s[0], s[1] / (b * b), s[2] * b, s[3] * b};
  c.out(n, 0, c.op("reshape", {y}, {{"shape", out}}));
}

void space_to_depth(Ctx& c, const NodeProto& n) {
  Val x = c.in(n, 0);
  if (x.rank() != 4) malformed("SpaceToDepth needs a 4-d input");
  const int64_t b = attr_int(n, "blocksize", 0);
  const auto& s = x.type.shape;
  if (b <= 0 || s[2] % b != 0 || s[3] % b != 0) malformed("blocksize must divide H and W");
  std::vector<int64_t> split = {s[0], s[1], s[2] / b, b, s[3] / b, b};
  Val y = c.op("permute", {c.op("reshape", {x}, {{"shape", split}})},
               {{"dims", std::vector<int64_t>{0, 3, 5, 1, 2, 4}}});
  std::vector<int64_t> out = {s[0], s[1] * b * b, s[2] / b, s[3] / b};
  c.out(n, 0, c.op("reshape", {y}, {{"shape", out}}));
}

// Hardmax: 1 where the first maximum along the axis is, else 0 (before opset 13, over the
// input flattened to 2-d at the axis).
void hardmax(Ctx& c, const NodeProto& n) {
  Val x = c.in(n, 0);
  const Shape original = x.type.shape;
  int64_t axis = norm_axis(attr_int(n, "axis", c.opset() >= 13 ? -1 : 1), x.rank());
  if (c.opset() < 13) {
    int64_t outer = 1, inner = 1;
    for (int64_t i = 0; i < x.rank(); ++i) (i < axis ? outer : inner) *= x.type.shape[i];
    x = c.op("reshape", {x}, {{"shape", std::vector<int64_t>{outer, inner}}});
    axis = 1;
  }
  Val idx = c.op("argmax", {x}, {{"dim", axis}, {"keepdim", true}});
  const int64_t len = x.type.shape[axis];
  Shape pos_shape(x.type.shape.size(), 1);
  pos_shape[axis] = len;
  std::vector<double> pos(static_cast<size_t>(len));
  for (int64_t i = 0; i < len; ++i) pos[i] = static_cast<double>(i);
  Val where = c.op("eq", {c.constant(Tensor::from_doubles(DType::kI64, pos_shape, pos)), idx});
  Val y = c.op("cast", {where}, {{"dtype", x.type.dtype}});
  std::vector<int64_t> back(original.begin(), original.end());
  c.out(n, 0, y.type.shape == original ? y : c.op("reshape", {y}, {{"shape", back}}));
}

// Softmax and LogSoftmax: along one axis from opset 13; before, over the input flattened to 2-d
// at `axis` (default 1).
Converter softmax(std::string op) {
  return [op](Ctx& c, const NodeProto& n) {
    Val x = c.in(n, 0);
    if (c.opset() >= 13) {
      return c.out(n, 0, c.op(op, {x}, {{"dim", norm_axis(attr_int(n, "axis", -1), x.rank())}}));
    }
    const int64_t axis = norm_axis(attr_int(n, "axis", 1), x.rank());
    int64_t outer = 1, inner = 1;
    for (int64_t i = 0; i < x.rank(); ++i) (i < axis ? outer : inner) *= x.type.shape[i];
    std::vector<int64_t> flat = {outer, inner}, back(x.type.shape.begin(), x.type.shape.end());
    Val y = c.op(op, {c.op("reshape", {x}, {{"shape", flat}})}, {{"dim", int64_t{1}}});
    c.out(n, 0, c.op("reshape", {y}, {{"shape", back}}));
  };
}

Val transpose2d(Ctx& c, const Val& v) {
  if (v.rank() != 2) malformed("Gemm operands must be 2-d");
  return c.op("permute", {v}, {{"dims", std::vector<int64_t>{1, 0}}});
}

void gemm(Ctx& c, const NodeProto& n) {
  Val a = c.in(n, 0), b = c.in(n, 1);
  // Before any size is read: B's size picks the bias's role below.
  if (a.rank() != 2 || b.rank() != 2) malformed("Gemm operands must be 2-d");
  const double alpha = attr_float(n, "alpha", 1.0), beta = attr_float(n, "beta", 1.0);
  const bool trans_a = attr_int(n, "transA", 0) != 0, trans_b = attr_int(n, "transB", 0) != 0;
  auto bias = c.opt_in(n, 2);
  if (trans_a) a = transpose2d(c, a);
  // linear() is y = a @ w^T + bias: a constant B folds its transpose into the weight.
  const bool as_linear =
      alpha == 1.0 && (!bias || (beta == 1.0 && bias->rank() == 1 &&
                                 bias->type.shape[0] == b.type.shape[trans_b ? 0 : 1]));
  if (as_linear) {
    Val w = trans_b ? b : transpose2d(c, b);
    std::vector<Val> operands = {a, w};
    if (bias) operands.push_back(*bias);
    return c.out(n, 0, c.op("linear", operands));
  }
  if (trans_b) b = transpose2d(c, b);
  Val y = c.op("matmul", {a, b});
  const DType t = y.type.dtype;
  if (alpha != 1.0) y = c.op("mul", {y, c.scalar(alpha, t)});
  if (bias) {
    Val cb = beta == 1.0 ? *bias : c.op("mul", {*bias, c.scalar(beta, t)});
    y = c.op("add", {y, cb});
  }
  c.out(n, 0, y);
}

void matmul(Ctx& c, const NodeProto& n) { c.out(n, 0, c.op("matmul", {c.in(n, 0), c.in(n, 1)})); }

// A 1-d Conv or pool runs as the 2-d one on [N, C, 1, L]: the node is rewritten with a unit
// height in every window attribute (and the weight), converted, and its output reshaped back.
Converter lift_1d(Converter two_d) {
  return [two_d](Ctx& c, const NodeProto& n) {
    const Val x = c.in(n, 0);
    if (x.rank() != 3) return two_d(c, n);
    static int lifted = 0;
    const std::string tag = fmt::format(".lift1d{}", lifted++);
    NodeProto m = n;
    auto unsqueeze_h = [&](int i) {
      const Val v = c.in(n, i);
      if (v.rank() != 3) malformed(fmt::format("input {} must be 3-d for a 1-d window", i));
      const Shape& s = v.type.shape;
      const std::string name = n.input(i) + tag;
      c.define(name, c.op("reshape", {v}, {{"shape", std::vector<int64_t>{s[0], s[1], 1, s[2]}}}));
      m.set_input(i, name);
    };
    unsqueeze_h(0);
    if (n.op_type() != "MaxPool" && n.op_type() != "AveragePool") unsqueeze_h(1);
    for (auto& a : *m.mutable_attribute()) {
      if (a.type() != ::onnx::AttributeProto::INTS) continue;
      std::vector<int64_t> v(a.ints().begin(), a.ints().end());
      a.clear_ints();
      if (a.name() == "pads" && v.size() == 2)
        v = {0, v[0], 0, v[1]};
      else if (v.size() == 1)
        v = {a.name() == "kernel_shape" || a.name() == "strides" || a.name() == "dilations" ||
                     a.name() == "output_shape"
                 ? 1
                 : 0,
             v[0]};
      for (int64_t d : v) a.add_ints(d);
    }
    const std::string out = n.output(0) + tag;
    m.set_output(0, out);
    two_d(c, m);
    const Val y = c.get(out);
    const Shape& s = y.type.shape;
    c.out(n, 0, c.op("reshape", {y}, {{"shape", std::vector<int64_t>{s[0], s[1], s[3]}}}));
  };
}

}  // namespace

void add_nn_converters(ConverterTable& t) {
  t["Conv"] = lift_1d(conv);
  t["ConvTranspose"] = lift_1d(conv_transpose);
  t["MaxPool"] = lift_1d(max_pool);
  t["AveragePool"] = lift_1d(average_pool);
  t["GlobalAveragePool"] = global_average_pool;
  t["GlobalMaxPool"] = global_max_pool;
  t["BatchNormalization"] = batch_normalization;
  t["LayerNormalization"] = layer_normalization;
  t["InstanceNormalization"] = instance_normalization;
  t["DepthToSpace"] = depth_to_space;
  t["SpaceToDepth"] = space_to_depth;
  t["Hardmax"] = hardmax;
  t["Softmax"] = softmax("softmax");
  t["LogSoftmax"] = softmax("log_softmax");
  t["Gemm"] = gemm;
  t["MatMul"] = matmul;
}

}  // namespace crucible::onnx
