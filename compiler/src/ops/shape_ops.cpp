// The shape op family: views (reshape, permute, transpose, expand, slice, squeeze, unsqueeze), cat,
// and the creation ops full and arange. Type rules validate everything so kernels never throw.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>
#include <vector>

#include "crucible/core/error.h"
#include "crucible/core/parallel_grain.h"
#include "crucible/ir/type_rules.h"
#include "elementwise/elementwise_loop.h"
#include "register_ops.h"

namespace crucible {
namespace {

using ew::types_of;

// An int-list attribute; a bare int counts as a one-element list (kernels may be called with attrs
// that did not pass through infer_type's normalisation).
std::vector<int64_t> ints_attr(const Attrs& attrs, std::string_view name) {
  const AttrValue* v = attrs.find(name);
  if (v != nullptr) {
    if (const int64_t* i = std::get_if<int64_t>(v)) return {*i};
  }
  return attrs.get_ints(name);
}

// Wraps a possibly negative dimension into [0, rank). A 0-d tensor accepts 0 and -1, as in PyTorch.
int64_t wrap(int64_t dim, int64_t rank, std::string_view what) {
  const int64_t r = std::max<int64_t>(rank, 1);
  if (dim < -r || dim >= r) {
    throw Error(fmt::format("{} {} is out of range for a tensor of rank {} (expected {} to {})",
                            what, dim, rank, -r, r - 1));
  }
  return dim < 0 ? dim + r : dim;
}

int64_t rank_of(const TensorType& t) { return static_cast<int64_t>(t.shape.size()); }

// --- reshape
// --------------------------------------------------------------------------------------
Shape resolve_reshape(const std::vector<int64_t>& shape, int64_t numel) {
  Shape out(shape.begin(), shape.end());
  int64_t known = 1, infer_at = -1;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] == -1) {
      if (infer_at >= 0)
        throw Error(fmt::format("shape {} has more than one -1", shape_str(shape)));
      infer_at = static_cast<int64_t>(i);
    } else if (out[i] < 0) {
      throw Error(fmt::format("shape {} has the invalid size {}", shape_str(shape), out[i]));
    } else {
      known *= out[i];
    }
  }
  if (infer_at >= 0) {
    // With a 0 elsewhere the -1 could be anything (PyTorch refuses too).
    if (known == 0 || numel % known != 0) {
      throw Error(fmt::format("shape {} is invalid for {} elements", shape_str(shape), numel));
    }
    out[infer_at] = numel / known;
  } else if (known != numel) {
    throw Error(fmt::format("shape {} is invalid for {} elements", shape_str(shape), numel));
  }
  return out;
}

OpDef reshape_def() {
  OpDef d;
  d.schema = {"reshape", 1, 1, {{"shape", AttrKind::kInts, true}}};
  d.infer = [](std::span<const TensorType> in, const Attrs& attrs) -> TensorType {
    return {in[0].dtype, resolve_reshape(ints_attr(attrs, "shape"), in[0].numel())};
  };
  d.kernel = [](std::span<const Tensor> in, const Attrs& attrs) {
    const Shape shape = resolve_reshape(ints_attr(attrs, "shape"), in[0].numel());
    return in[0].reshape(shape);  // a view when the strides allow it, a copy otherwise
  };
  d.cost = view_cost;
  return d;
}

// --- permute / transpose
// ----------------------------------------------------------------------------
std::vector<int64_t> permute_dims(const TensorType& t, const std::vector<int64_t>& dims) {
  const int64_t rank = rank_of(t);
  if (static_cast<int64_t>(dims.size()) != rank) {
    throw Error(fmt::format("dims {} has {} entries for a tensor of rank {}", shape_str(dims),
                            dims.size(), rank));
  }
  std::vector<int64_t> out;
  std::vector<bool> seen(static_cast<size_t>(rank), false);
  for (int64_t d : dims) {
    const int64_t w = wrap(d, rank, "dim");
    if (seen[w]) throw Error(fmt::format("dims {} repeats dimension {}", shape_str(dims), w));
    seen[w] = true;
    out.push_back(w);
  }
  return out;
}

OpDef permute_def() {
  OpDef d;
  d.schema = {"permute", 1, 1, {{"dims", AttrKind::kInts, true}}};
  d.infer = [](std::span<const TensorType> in, const Attrs& attrs) -> TensorType {
    const std::vector<int64_t> dims = permute_dims(in[0], ints_attr(attrs, "dims"));
    Shape shape;
    for (int64_t w : dims) shape.push_back(in[0].shape[w]);
    return {in[0].dtype, shape};
  };
  d.kernel = [](std::span<const Tensor> in, const Attrs& attrs) {
    return in[0].permute(permute_dims(ew::type_of(in[0]), ints_attr(attrs, "dims")));
  };
  d.cost = view_cost;
  return d;
}

OpDef transpose_def() {
  OpDef d;
  d.schema = {"transpose", 1, 1, {{"dim0", AttrKind::kInt, true}, {"dim1", AttrKind::kInt, true}}};
  d.infer = [](std::span<const TensorType> in, const Attrs& attrs) -> TensorType {
    const int64_t rank = rank_of(in[0]);
    const int64_t d0 = wrap(attrs.get_int("dim0"), rank, "dim0"),
                  d1 = wrap(attrs.get_int("dim1"), rank, "dim1");
    Shape shape = in[0].shape;
    if (rank > 0) std::swap(shape[d0], shape[d1]);
    return {in[0].dtype, shape};
  };
  d.kernel = [](std::span<const Tensor> in, const Attrs& attrs) {
    return in[0].transpose(attrs.get_int("dim0"), attrs.get_int("dim1"));
  };
  d.cost = view_cost;
  return d;
}

// --- expand
// ---------------------------------------------------------------------------------------
Shape expand_shape(const TensorType& t, const std::vector<int64_t>& shape) {
  const size_t rank = t.shape.size();
  if (shape.size() < rank) {
    throw Error(fmt::format("cannot expand {} to the shorter shape {}", shape_str(t.shape),
                            shape_str(shape)));
  }
  const size_t lead = shape.size() - rank;
  Shape out(shape.begin(), shape.end());
  for (size_t i = 0; i < out.size(); ++i) {
    if (i < lead) {
      if (out[i] < 0) {
        throw Error(fmt::format("size {} is not allowed in the new leading dimension {} of {}",
                                out[i], i, shape_str(shape)));
      }
      continue;
    }
    const int64_t have = t.shape[i - lead];
    if (out[i] == -1) out[i] = have;
    if (out[i] < 0)
      throw Error(fmt::format("shape {} has the invalid size {}", shape_str(shape), out[i]));
    if (have != out[i] && have != 1) {
      throw Error(fmt::format("cannot expand {} to {}: size {} in dimension {} is not 1",
                              shape_str(t.shape), shape_str(shape), have, i));
    }
  }
  return out;
}

OpDef expand_def() {
  OpDef d;
  d.schema = {"expand", 1, 1, {{"shape", AttrKind::kInts, true}}};
  d.infer = [](std::span<const TensorType> in, const Attrs& attrs) -> TensorType {
    return {in[0].dtype, expand_shape(in[0], ints_attr(attrs, "shape"))};
  };
  d.kernel = [](std::span<const Tensor> in, const Attrs& attrs) {
    return in[0].expand(expand_shape(ew::type_of(in[0]), ints_attr(attrs, "shape")));
  };
  d.cost = view_cost;
  return d;
}

// --- slice
// ----------------------------------------------------------------------------------------
struct SliceArgs {
  int64_t dim, start, end, step;
};

// Python-style bounds: negative start/end count from the end, then both clamp into [0, size] (and
// end to at least start), so out-of-range bounds give a short or empty slice, not an error.
SliceArgs slice_args(const TensorType& t, const Attrs& attrs) {
  if (t.shape.empty()) throw Error("cannot slice a 0-d tensor");
  SliceArgs s;
  s.dim = wrap(attrs.get_int("dim"), rank_of(t), "dim");
  s.step = attrs.get_int_or("step", 1);
  if (s.step <= 0) throw Error(fmt::format("step must be positive, got {}", s.step));
  const int64_t n = t.shape[s.dim];
  int64_t start = attrs.get_int_or("start", 0),
          end = attrs.get_int_or("end", std::numeric_limits<int64_t>::max());
  if (start < 0) start += n;
  if (end < 0) end += n;
  s.start = std::clamp<int64_t>(start, 0, n);
  s.end = std::clamp<int64_t>(end, s.start, n);
  return s;
}

OpDef slice_def() {
  OpDef d;
  d.schema = {"slice",
              1,
              1,
              {{"dim", AttrKind::kInt, true},
               {"start", AttrKind::kInt, false},
               {"end", AttrKind::kInt, false},
               {"step", AttrKind::kInt, false}}};
  d.infer = [](std::span<const TensorType> in, const Attrs& attrs) -> TensorType {
    const SliceArgs s = slice_args(in[0], attrs);
    Shape shape = in[0].shape;
    shape[s.dim] = s.end == s.start ? 0 : (s.end - s.start - 1) / s.step + 1;  // no overflow
    return {in[0].dtype, shape};
  };
  d.kernel = [](std::span<const Tensor> in, const Attrs& attrs) {
    const SliceArgs s = slice_args(ew::type_of(in[0]), attrs);
    return in[0].slice(s.dim, s.start, s.end, s.step);
  };
  d.cost = view_cost;
  return d;
}

// --- squeeze / unsqueeze
// ----------------------------------------------------------------------------
OpDef squeeze_def() {
  OpDef d;
  d.schema = {"squeeze", 1, 1, {{"dim", AttrKind::kInt, false}}};
  d.infer = [](std::span<const TensorType> in, const Attrs& attrs) -> TensorType {
    const TensorType& t = in[0];
    Shape shape;
    if (attrs.has("dim")) {
      const int64_t dim = wrap(attrs.get_int("dim"), rank_of(t), "dim");
      shape = t.shape;
      if (!shape.empty() && shape[dim] == 1) shape.erase(shape.begin() + dim);
    } else {
      std::copy_if(t.shape.begin(), t.shape.end(), std::back_inserter(shape),
                   [](int64_t s) { return s != 1; });
    }
    return {t.dtype, shape};
  };
  d.kernel = [](std::span<const Tensor> in, const Attrs& attrs) {
    const Tensor& x = in[0];
    if (attrs.has("dim")) return x.squeeze(attrs.get_int("dim"));
    Shape shape, strides;
    for (int64_t i = 0; i < x.dim(); ++i) {
      if (x.shape()[i] == 1) continue;
      shape.push_back(x.shape()[i]);
      strides.push_back(x.strides()[i]);
    }
    return x.as_strided(shape, strides, x.offset());
  };
  d.cost = view_cost;
  return d;
}

OpDef unsqueeze_def() {
  OpDef d;
  d.schema = {"unsqueeze", 1, 1, {{"dim", AttrKind::kInt, true}}};
  d.infer = [](std::span<const TensorType> in, const Attrs& attrs) -> TensorType {
    const int64_t dim = wrap(attrs.get_int("dim"), rank_of(in[0]) + 1, "dim");
    Shape shape = in[0].shape;
    shape.insert(shape.begin() + dim, 1);
    return {in[0].dtype, shape};
  };
  d.kernel = [](std::span<const Tensor> in, const Attrs& attrs) {
    return in[0].unsqueeze(attrs.get_int("dim"));
  };
  d.cost = view_cost;
  return d;
}

// --- cat
// ------------------------------------------------------------------------------------------
TensorType cat_rule(std::span<const TensorType> in, const Attrs& attrs) {
  const TensorType& first = in[0];
  const int64_t rank = rank_of(first);
  if (rank == 0) throw Error("cannot concatenate 0-d tensors");
  const int64_t dim = wrap(attrs.get_int_or("dim", 0), rank, "dim");
  Shape shape = first.shape;
  for (size_t k = 1; k < in.size(); ++k) {
    const Shape& s = in[k].shape;
    if (rank_of(in[k]) != rank) {
      throw Error(fmt::format("operand {} has rank {} ({}), operand 0 has rank {} ({})", k,
                              s.size(), shape_str(s), rank, shape_str(first.shape)));
    }
    for (int64_t d = 0; d < rank; ++d) {
      if (d != dim && s[d] != first.shape[d]) {
        throw Error(fmt::format(
            "operand {} has shape {}, which differs from operand 0's {} in dimension {}", k,
            shape_str(s), shape_str(first.shape), d));
      }
    }
    shape[dim] += s[dim];
  }
  return {result_type(in), shape};
}

OpDef cat_def() {
  OpDef d;
  d.schema = {"cat", 1, -1, {{"dim", AttrKind::kInt, false}}};
  d.infer = cat_rule;
  d.kernel = [](std::span<const Tensor> in, const Attrs& attrs) {
    const TensorType ty = cat_rule(types_of(in), attrs);
    const int64_t dim =
        wrap(attrs.get_int_or("dim", 0), static_cast<int64_t>(ty.shape.size()), "dim");
    Tensor out = Tensor::empty(ty.dtype, ty.shape);
    int64_t at = 0;
    for (const Tensor& t : in) {
      const int64_t n = t.shape()[dim];
      // copy_from converts the dtype and handles any strides on both sides, in parallel.
      if (n > 0) out.slice(dim, at, at + n).copy_from(t);
      at += n;
    }
    return out;
  };
  d.cost = movement_cost;
  return d;
}

// --- creation
// --------------------------------------------------------------------------------------- Integer
// dtypes must hold `v` exactly in range (PyTorch refuses overflowing fill values too).
void check_fits(double v, DType dtype, std::string_view what) {
  if (!is_integral(dtype)) return;
  const bool fits = dispatch_all(dtype, "check", [&]<typename T>() {
    if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
      // The upper bound is exclusive: double(INT64_MAX) rounds up to 2^63, which does not fit.
      return std::isfinite(v) && v >= static_cast<double>(std::numeric_limits<T>::lowest()) &&
             v < static_cast<double>(std::numeric_limits<T>::max()) + 1.0;
    } else {
      return true;
    }
  });
  if (!fits)
    throw Error(fmt::format("{} {} cannot be converted to {} without overflow", what, v,
                            dtype_name(dtype)));
}

TensorType full_rule(std::span<const TensorType>, const Attrs& attrs) {
  const std::vector<int64_t> shape = ints_attr(attrs, "shape");
  for (int64_t s : shape) {
    if (s < 0) throw Error(fmt::format("shape {} has a negative size", shape_str(shape)));
  }
  const DType dtype = attrs.find("dtype") ? attrs.get_dtype("dtype") : DType::kF32;
  check_fits(attrs.get_float("value"), dtype, "value");
  return {dtype, shape};
}

OpDef full_def() {
  OpDef d;
  d.schema = {"full",
              0,
              0,
              {{"shape", AttrKind::kInts, true},
               {"value", AttrKind::kFloat, true},
               {"dtype", AttrKind::kDType, false}}};
  d.infer = full_rule;
  d.kernel = [](std::span<const Tensor>, const Attrs& attrs) {
    const TensorType ty = full_rule({}, attrs);
    return Tensor::full(ty.dtype, ty.shape, attrs.get_float("value"));
  };
  d.cost = movement_cost;
  return d;
}

struct ArangeArgs {
  double start, step;
  int64_t length;
  DType dtype;
};

// length = ceil((end - start) / step), 0 when negative. Values are start + i*step computed in
// double and then converted (truncated for integer dtypes).
ArangeArgs arange_args(const Attrs& attrs) {
  ArangeArgs a;
  a.start = attrs.get_float_or("start", 0.0);
  a.step = attrs.get_float_or("step", 1.0);
  const double end = attrs.get_float("end");
  a.dtype = attrs.find("dtype") ? attrs.get_dtype("dtype") : DType::kI64;
  if (a.dtype == DType::kBool) throw Error("not supported for bool");
  if (!std::isfinite(a.start) || !std::isfinite(end) || !std::isfinite(a.step)) {
    throw Error(fmt::format("start={}, end={} and step={} must be finite", a.start, end, a.step));
  }
  if (a.step == 0) throw Error("step must be nonzero");
  const double len = std::ceil((end - a.start) / a.step);
  if (len > 1e15) throw Error(fmt::format("{} elements are too many", len));
  a.length = len < 0 ? 0 : static_cast<int64_t>(len);
  if (a.length > 0) {
    check_fits(a.start, a.dtype, "start");
    check_fits(a.start + static_cast<double>(a.length - 1) * a.step, a.dtype, "last value");
  }
  return a;
}

OpDef arange_def() {
  OpDef d;
  d.schema = {"arange",
              0,
              0,
              {{"end", AttrKind::kFloat, true},
               {"start", AttrKind::kFloat, false},
               {"step", AttrKind::kFloat, false},
               {"dtype", AttrKind::kDType, false}}};
  d.infer = [](std::span<const TensorType>, const Attrs& attrs) -> TensorType {
    const ArangeArgs a = arange_args(attrs);
    return {a.dtype, {a.length}};
  };
  d.kernel = [](std::span<const Tensor>, const Attrs& attrs) {
    const ArangeArgs a = arange_args(attrs);
    Tensor out = Tensor::empty(a.dtype, {a.length});
    dispatch_all(a.dtype, "arange", [&]<typename T>() {
      T* p = out.data<T>();
      const int64_t n = a.length;
      const double start = a.start, step = a.step;
#pragma omp parallel for simd schedule(static) if (worth_parallel(n))
      for (int64_t i = 0; i < n; ++i) {
        p[i] = from_double<T>(start + static_cast<double>(i) * step);
      }
    });
    return out;
  };
  d.cost = movement_cost;
  return d;
}

}  // namespace

void register_shape_ops(OpRegistry& r) {
  r.add(reshape_def());
  r.add(permute_def());
  r.add(transpose_def());
  r.add(expand_def());
  r.add(slice_def());
  r.add(squeeze_def());
  r.add(unsqueeze_def());
  r.add(cat_def());
  r.add(full_def());
  r.add(arange_def());
}

}  // namespace crucible
