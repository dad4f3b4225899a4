// ONNX ops that move or select data without arithmetic: constants, Shape/Size, reshapes, Transpose,
// Concat/Split/Slice, Expand/Tile, Gather, Where, Pad, Trilu, CumSum, Range, Identity, Dropout.
// With static shapes, the shape-only ones fold to constants here.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <span>

#include "converters.h"
#include "tensor_proto.h"

namespace crucible::onnx {

namespace {

Tensor i64_tensor(const std::vector<int64_t>& v, Shape shape) {
  Tensor t = Tensor::empty(DType::kI64, std::move(shape));
  std::copy(v.begin(), v.end(), t.data<int64_t>());
  return t;
}

Val reshape(Ctx& c, const Val& x, const Shape& shape) {
  if (x.type.shape == shape) return x;
  std::vector<int64_t> dims(shape.begin(), shape.end());
  return c.op("reshape", {x}, {{"shape", dims}});
}

void constant(Ctx& c, const NodeProto& n) {
  if (n.attribute_size() != 1) malformed("Constant needs exactly one value attribute");
  const auto& a = n.attribute(0);
  const std::string& k = a.name();
  if (k == "value") return c.out(n, 0, c.constant(tensor_from_proto(a.t(), {}, "value")));
  if (k == "value_float") return c.out(n, 0, c.scalar(a.f(), DType::kF32));
  if (k == "value_int") return c.out(n, 0, c.constant(i64_tensor({a.i()}, {})));
  if (k == "value_floats") {
    std::vector<double> v(a.floats().begin(), a.floats().end());
    return c.out(
        n, 0, c.constant(Tensor::from_doubles(DType::kF32, {static_cast<int64_t>(v.size())}, v)));
  }
  if (k == "value_ints") {
    std::vector<int64_t> v(a.ints().begin(), a.ints().end());
    return c.out(n, 0, c.constant(i64_tensor(v, {static_cast<int64_t>(v.size())})));
  }
  unsupported(fmt::format("Constant with attribute {} not supported", k));
}

void identity(Ctx& c, const NodeProto& n) { c.out(n, 0, c.in(n, 0)); }

void dropout(Ctx& c, const NodeProto& n) {
  // Inference: the identity; a training_mode input that is true is a training graph.
  if (c.present(n, 2)) {
    // torchvision 0.14 exports dropout(p=0) with training_mode true: still the identity.
    const Tensor mode = c.in(n, 2).value();
    const auto ratio = c.opt_in(n, 1);
    const bool no_drop = ratio && ratio->value().defined() && ratio->value().get(0) == 0;
    if (!no_drop && (!mode.defined() || mode.get(0) != 0)) unsupported("Dropout in training mode");
  }
  Val x = c.in(n, 0);
  c.out(n, 0, x);
  if (n.output_size() > 1 && !n.output(1).empty())
    c.out(n, 1, c.constant(Tensor::full(DType::kBool, x.type.shape, 1)));
}

void shape(Ctx& c, const NodeProto& n) {
  const Shape& s = c.in(n, 0).type.shape;
  const int64_t r = static_cast<int64_t>(s.size());
  auto clampi = [&](int64_t v) { return std::clamp<int64_t>(v < 0 ? v + r : v, 0, r); };
  const int64_t start = clampi(attr_int(n, "start", 0)), end = clampi(attr_int(n, "end", r));
  std::vector<int64_t> v(s.begin() + start, s.begin() + std::max(start, end));
  c.out(n, 0, c.constant(i64_tensor(v, {static_cast<int64_t>(v.size())})));
}

void size(Ctx& c, const NodeProto& n) {
  c.out(n, 0, c.constant(i64_tensor({c.in(n, 0).type.numel()}, {})));
}

void constant_of_shape(Ctx& c, const NodeProto& n) {
  std::vector<int64_t> dims = c.const_ints(n, 0);
  DType dtype = DType::kF32;
  double value = 0;
  if (const auto* a = find_attr(n, "value")) {
    Tensor v = tensor_from_proto(a->t(), {}, "value");
    if (v.numel() != 1) malformed("ConstantOfShape's value must hold one element");
    dtype = v.dtype();
    value = v.get(0);
  }
  Shape shape(dims.begin(), dims.end());
  checked_numel(shape, "ConstantOfShape");
  c.out(n, 0, c.op("full", {}, {{"shape", dims}, {"value", value}, {"dtype", dtype}}));
}

void reshape_op(Ctx& c, const NodeProto& n) {
  Val x = c.in(n, 0);
  std::vector<int64_t> dims =
      c.opset() < 5 ? attr_ints(n, "shape").value_or(std::vector<int64_t>{}) : c.const_ints(n, 1);
  const bool allowzero = attr_int(n, "allowzero", 0) != 0;
  int64_t known = 1, infer = -1;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] == 0 && !allowzero) {
      if (i >= x.type.shape.size()) malformed("Reshape copies a dim the input does not have");
      dims[i] = x.type.shape[i];
    }
    if (dims[i] == -1) {
      if (infer >= 0) malformed("Reshape has two -1 dims");
      infer = static_cast<int64_t>(i);
    } else if (dims[i] < 0) {
      malformed(fmt::format("Reshape dim {} is negative", dims[i]));
    } else if (__builtin_mul_overflow(known, dims[i], &known)) {
      malformed(fmt::format("Reshape shape {} has more than 2^63 elements", shape_str(dims)));
    }
  }
  if (infer >= 0) dims[infer] = known == 0 ? 0 : x.type.numel() / known;
  c.out(n, 0, reshape(c, x, Shape(dims.begin(), dims.end())));
}

void flatten(Ctx& c, const NodeProto& n) {
  Val x = c.in(n, 0);
  const int64_t r = x.rank();
  int64_t axis = attr_int(n, "axis", 1);
  if (axis < 0) axis += r;
  if (axis < 0 || axis > r) malformed(fmt::format("Flatten axis out of range for rank {}", r));
  // Checked products: with a 0 dim among them, the others may be as large as int64 allows.
  const std::span<const int64_t> dims(x.type.shape);
  const int64_t outer = shape_numel(dims.first(static_cast<size_t>(axis))),
                inner = shape_numel(dims.subspan(static_cast<size_t>(axis)));
  c.out(n, 0, reshape(c, x, {outer, inner}));
}

// Squeeze and Unsqueeze take their axes as an attribute before opset 13, an input after.
std::optional<std::vector<int64_t>> axes_of(Ctx& c, const NodeProto& n, int input) {
  if (c.opset() >= 13) {
    if (!c.present(n, input)) return std::nullopt;
    return c.const_ints(n, input);
  }
  return attr_ints(n, "axes");
}

void squeeze(Ctx& c, const NodeProto& n) {
  Val x = c.in(n, 0);
  const auto axes = axes_of(c, n, 1);
  std::vector<bool> drop(x.type.shape.size(), false);
  if (axes) {
    for (int64_t a : *axes) {
      const int64_t d = norm_axis(a, x.rank());
      if (x.type.shape[d] != 1)
        malformed(fmt::format("Squeeze axis {} has size {}", a, x.type.shape[d]));
      drop[d] = true;
    }
  } else {
    for (size_t i = 0; i < drop.size(); ++i) drop[i] = x.type.shape[i] == 1;
  }
  Shape s;
  for (size_t i = 0; i < drop.size(); ++i)
    if (!drop[i]) s.push_back(x.type.shape[i]);
  c.out(n, 0, reshape(c, x, s));
}

void unsqueeze(Ctx& c, const NodeProto& n) {
  Val x = c.in(n, 0);
  const auto axes = axes_of(c, n, 1);
  if (!axes) malformed("Unsqueeze needs axes");
  const int64_t r = x.rank() + static_cast<int64_t>(axes->size());
  std::vector<bool> added(r, false);
  for (int64_t a : *axes) {
    const int64_t d = norm_axis(a, r);
    if (added[d]) malformed("Unsqueeze lists an axis twice");
    added[d] = true;
  }
  Shape s;
  size_t k = 0;
  for (int64_t i = 0; i < r; ++i) s.push_back(added[i] ? 1 : x.type.shape[k++]);
  c.out(n, 0, reshape(c, x, s));
}

void transpose(Ctx& c, const NodeProto& n) {
  Val x = c.in(n, 0);
  std::vector<int64_t> perm = attr_ints(n, "perm").value_or(std::vector<int64_t>{});
  if (perm.empty())
    for (int64_t i = x.rank() - 1; i >= 0; --i) perm.push_back(i);
  c.out(n, 0, c.op("permute", {x}, {{"dims", perm}}));
}

void concat(Ctx& c, const NodeProto& n) {
  std::vector<Val> parts;
  for (int i = 0; i < n.input_size(); ++i) parts.push_back(c.in(n, i));
  if (parts.empty()) malformed("Concat needs inputs");
  const int64_t axis = norm_axis(attr_int(n, "axis", 0), parts[0].rank());
  c.out(n, 0, parts.size() == 1 ? parts[0] : c.op("cat", parts, {{"dim", axis}}));
}

void split(Ctx& c, const NodeProto& n) {
  Val x = c.in(n, 0);
  const int64_t axis = norm_axis(attr_int(n, "axis", 0), x.rank());
  const int64_t dim = x.type.shape[axis];
  std::vector<int64_t> sizes;
  if (c.opset() >= 13 && c.present(n, 1)) {
    sizes = c.const_ints(n, 1);
  } else if (auto s = attr_ints(n, "split")) {
    sizes = *s;
  } else {
    const int64_t parts = n.output_size();
    const int64_t each = (dim + parts - 1) / parts;
    for (int64_t i = 0, left = dim; i < parts; ++i, left -= each)
      sizes.push_back(std::min(each, std::max<int64_t>(left, 0)));
  }
  if (static_cast<int>(sizes.size()) != n.output_size())
    malformed("Split sizes do not match outputs");
  int64_t start = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    c.out(n, static_cast<int>(i),
          c.op("slice", {x}, {{"dim", axis}, {"start", start}, {"end", start + sizes[i]}}));
    start += sizes[i];
  }
  if (start != dim) malformed(fmt::format("Split sizes sum to {}, the axis has {}", start, dim));
}

// One axis of an ONNX Slice with its clamping rules; a negative step becomes a gather of the
// indices it visits (the registry's slice steps forward only).
Val slice_axis(Ctx& c, Val x, int64_t axis, int64_t start, int64_t end, int64_t step) {
  const int64_t d = x.type.shape[axis];
  if (step == 0) malformed("Slice step is 0");
  if (start < 0) start += d;
  if (end < 0) end += d;
  if (step > 0) {
    start = std::clamp<int64_t>(start, 0, d);
    end = std::clamp<int64_t>(end, 0, d);
    if (start == 0 && end == d && step == 1) return x;
    return c.op("slice", {x},
                {{"dim", axis}, {"start", start}, {"end", std::max(start, end)}, {"step", step}});
  }
  start = std::clamp<int64_t>(start, 0, d - 1);
  end = std::clamp<int64_t>(end, -1, d - 1);
  std::vector<int64_t> idx;
  for (int64_t i = start; i > end; i += step) idx.push_back(i);
  return c.op("gather", {x, c.constant(i64_tensor(idx, {static_cast<int64_t>(idx.size())}))},
              {{"dim", axis}});
}

void slice(Ctx& c, const NodeProto& n) {
  Val x = c.in(n, 0);
  std::vector<int64_t> starts, ends, axes, steps;
  if (c.opset() < 10) {
    starts = attr_ints(n, "starts").value_or(starts);
    ends = attr_ints(n, "ends").value_or(ends);
    axes = attr_ints(n, "axes").value_or(axes);
  } else {
    starts = c.const_ints(n, 1);
    ends = c.const_ints(n, 2);
    if (c.present(n, 3)) axes = c.const_ints(n, 3);
    if (c.present(n, 4)) steps = c.const_ints(n, 4);
  }
  if (axes.empty())
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size())
    malformed("Slice's starts, ends, axes and steps differ in length");
  for (size_t i = 0; i < starts.size(); ++i)
    x = slice_axis(c, x, norm_axis(axes[i], x.rank()), starts[i], ends[i], steps[i]);
  c.out(n, 0, x);
}

// ONNX's Expand broadcasts both ways: the result is the broadcast of the two shapes.
void expand(Ctx& c, const NodeProto& n) {
  Val x = c.in(n, 0);
  const std::vector<int64_t> want = c.const_ints(n, 1);
  const size_t r = std::max(want.size(), x.type.shape.size());
  std::vector<int64_t> out(r);
  for (size_t i = 0; i < r; ++i) {
    const int64_t a = i + x.type.shape.size() >= r ? x.type.shape[i + x.type.shape.size() - r] : 1;
    const int64_t b = i + want.size() >= r ? want[i + want.size() - r] : 1;
    if (a != b && a != 1 && b != 1)
      malformed(fmt::format("Expand cannot broadcast {} to the requested shape", x.type.str()));
    out[i] = a == 1 ? b : a;
  }
  checked_numel(Shape(out.begin(), out.end()), "Expand");
  if (Shape(out.begin(), out.end()) == x.type.shape) return c.out(n, 0, x);
  c.out(n, 0, c.op("expand", {x}, {{"shape", out}}));
}

void tile(Ctx& c, const NodeProto& n) {
  Val x = c.in(n, 0);
  const std::vector<int64_t> reps = c.const_ints(n, 1);
  if (static_cast<int64_t>(reps.size()) != x.rank())
    malformed("Tile's repeats differ from the rank");
  Shape interleaved, expanded, result;
  for (size_t i = 0; i < reps.size(); ++i) {
    if (reps[i] < 0) malformed("Tile repeat is negative");
    interleaved.insert(interleaved.end(), {1, x.type.shape[i]});
    expanded.insert(expanded.end(), {reps[i], x.type.shape[i]});
    result.push_back(reps[i] * x.type.shape[i]);
  }
  checked_numel(result, "Tile");
  Val y = reshape(c, x, interleaved);
  y = c.op("expand", {y}, {{"shape", std::vector<int64_t>(expanded.begin(), expanded.end())}});
  c.out(n, 0, reshape(c, y, result));
}

void gather(Ctx& c, const NodeProto& n) {
  Val x = c.in(n, 0);
  c.out(n, 0,
        c.op("gather", {x, c.in(n, 1)}, {{"dim", norm_axis(attr_int(n, "axis", 0), x.rank())}}));
}

void gather_elements(Ctx& c, const NodeProto& n) {
  Val x = c.in(n, 0);
  c.out(n, 0,
        c.op("gather_elements", {x, c.in(n, 1)},
             {{"dim", norm_axis(attr_int(n, "axis", 0), x.rank())}}));
}

void where(Ctx& c, const NodeProto& n) {
  c.out(n, 0, c.op("where", {c.in(n, 0), c.in(n, 1), c.in(n, 2)}));
}

void range(Ctx& c, const NodeProto& n) {
  Val start = c.in(n, 0), limit = c.in(n, 1), delta = c.in(n, 2);
  if (!start.value().defined() || !limit.value().defined() || !delta.value().defined())
    unsupported("Range with computed bounds");
  for (const Val* v : {&start, &limit, &delta}) {
    if (v->value().numel() != 1) malformed("Range's start, limit and delta must be scalars");
  }
  const double s = start.value().get(0), l = limit.value().get(0), d = delta.value().get(0);
  if (d == 0) malformed("Range delta is 0");
  // The count is a constant this importer materializes: checked as a double before any cast (NaN
  // or 1e300 must not reach int64) and held to the folding limit.
  const double span = std::max(std::ceil((l - s) / d), 0.0);
  if (!(span <= static_cast<double>(c.fold_limit())))
    malformed(
        fmt::format("Range of {} elements (start {}, limit {}, delta {}) is more than the "
                    "{} a constant may hold",
                    span, s, l, d, c.fold_limit()));
  const auto count = static_cast<int64_t>(span);
  std::vector<double> v(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) v[i] = s + static_cast<double>(i) * d;
  c.out(n, 0, c.constant(Tensor::from_doubles(start.type.dtype, {count}, v)));
}

void pad(Ctx& c, const NodeProto& n) {
  Val x = c.in(n, 0);
  std::vector<int64_t> pads;
  double value = 0;
  if (c.opset() < 11) {
    pads = attr_ints(n, "pads").value_or(pads);
    value = attr_float(n, "value", 0);
  } else {
    pads = c.const_ints(n, 1);
    if (auto v = c.opt_in(n, 2)) {
      if (!v->value().defined()) unsupported("Pad with a computed constant_value");
      value = v->value().get(0);
    }
    if (c.present(n, 3)) unsupported("Pad with axes");
  }
  if (static_cast<int64_t>(pads.size()) != 2 * x.rank()) malformed("Pad needs 2 x rank pads");
  const std::string mode = attr_string(n, "mode", "constant");
  c.out(n, 0, c.op("pad", {x}, {{"pads", pads}, {"mode", mode}, {"value", value}}));
}

void trilu(Ctx& c, const NodeProto& n) {
  int64_t k = 0;
  if (c.present(n, 1)) k = c.const_ints(n, 1).at(0);
  c.out(n, 0, c.op("trilu", {c.in(n, 0)}, {{"k", k}, {"upper", attr_int(n, "upper", 1) != 0}}));
}

void cumsum(Ctx& c, const NodeProto& n) {
  Val x = c.in(n, 0);
  const int64_t axis = norm_axis(c.const_ints(n, 1).at(0), x.rank());
  c.out(n, 0,
        c.op("cumsum", {x},
             {{"dim", axis},
              {"exclusive", attr_int(n, "exclusive", 0) != 0},
              {"reverse", attr_int(n, "reverse", 0) != 0}}));
}

void eye_like(Ctx& c, const NodeProto& n) {
  Val x = c.in(n, 0);
  if (x.rank() != 2) malformed("EyeLike needs a 2-d input");
  DType dtype = x.type.dtype;
  if (const auto* a = find_attr(n, "dtype")) {
    auto d = dtype_of(static_cast<int32_t>(a->i()));
    if (!d) unsupported("EyeLike dtype");
    dtype = *d;
  }
  const int64_t k = attr_int(n, "k", 0);
  Tensor t = Tensor::zeros(dtype, x.type.shape);
  std::vector<double> v(static_cast<size_t>(t.numel()), 0.0);
  const int64_t cols = x.type.shape[1];
  for (int64_t i = 0; i < x.type.shape[0]; ++i)  // column i + k, without computing it for any k
    if (k >= -i && k < cols - i) v[i * cols + i + k] = 1;
  c.out(n, 0, c.constant(Tensor::from_doubles(dtype, x.type.shape, v)));
}

// ScatterND on constants only: exporters write it into shape arithmetic (swin_t's attention
// masks), which folds; scattering computed data would need a registry op.
void scatter_nd(Ctx& c, const NodeProto& n) {
  Val data = c.in(n, 0), indices = c.in(n, 1), updates = c.in(n, 2);
  if (!data.is_const() || !indices.is_const() || !updates.is_const())
    unsupported("ScatterND on computed values (only constant ones fold)");
  if (attr_string(n, "reduction", "none") != "none") unsupported("ScatterND with a reduction");
  const Shape& ds = data.type.shape;
  const Shape& is = indices.type.shape;
  if (is.empty()) malformed("ScatterND indices need a last dim");
  const int64_t k = is.back();
  if (k > data.rank()) malformed("ScatterND index longer than the data's rank");
  int64_t slice = 1;
  for (int64_t d = k; d < data.rank(); ++d) slice *= ds[d];
  std::vector<double> out = data.constant.to_doubles(), upd = updates.constant.to_doubles();
  const Tensor idx = indices.constant.to(DType::kI64);
  const int64_t count = idx.numel() / std::max<int64_t>(k, 1);
  if (static_cast<int64_t>(upd.size()) != count * slice)
    malformed("ScatterND updates do not match");
  for (int64_t u = 0; u < count; ++u) {
    int64_t offset = 0;
    for (int64_t j = 0; j < k; ++j) {
      int64_t v = idx.data<int64_t>()[u * k + j];
      if (v < 0) v += ds[j];
      if (v < 0 || v >= ds[j]) malformed(fmt::format("ScatterND index {} out of range", v));
      offset = offset * ds[j] + v;
    }
    std::copy_n(upd.begin() + u * slice, slice, out.begin() + offset * slice);
  }
  c.out(n, 0, c.constant(Tensor::from_doubles(data.type.dtype, ds, out)));
}

}  // namespace

void add_shape_converters(ConverterTable& t) {
  t["ScatterND"] = scatter_nd;
  t["Constant"] = constant;
  t["Identity"] = identity;
  t["Dropout"] = dropout;
  t["Shape"] = shape;
  t["Size"] = size;
  t["ConstantOfShape"] = constant_of_shape;
  t["Reshape"] = reshape_op;
  t["Flatten"] = flatten;
  t["Squeeze"] = squeeze;
  t["Unsqueeze"] = unsqueeze;
  t["Transpose"] = transpose;
  t["Concat"] = concat;
  t["Split"] = split;
  t["Slice"] = slice;
  t["Expand"] = expand;
  t["Tile"] = tile;
  t["Gather"] = gather;
  t["GatherElements"] = gather_elements;
  t["Where"] = where;
  t["Range"] = range;
  t["Pad"] = pad;
  t["Trilu"] = trilu;
  t["CumSum"] = cumsum;
  t["EyeLike"] = eye_like;
}

}  // namespace crucible::onnx
