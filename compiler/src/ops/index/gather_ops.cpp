// gather (ONNX Gather: whole slices picked by an index tensor of any rank) and gather_elements
// (ONNX GatherElements, torch.gather), with the index helpers the index family shares.
#include <fmt/format.h>

#include <cstring>

#include "crucible/core/error.h"
#include "elementwise/elementwise_loop.h"
#include "index/index_internal.h"
#include "register_ops.h"

namespace crucible {
namespace index {

int64_t axis_of(const Shape& shape, int64_t dim) {
  const auto rank = static_cast<int64_t>(shape.size());
  if (rank == 0) throw Error("needs a tensor of rank >= 1, got a 0-d tensor");
  if (dim < -rank || dim >= rank) {
    throw Error(fmt::format("dim {} is out of range for a tensor of rank {} (expected {} to {})",
                            dim, rank, -rank, rank - 1));
  }
  return dim < 0 ? dim + rank : dim;
}

void require_index_dtype(DType t, const char* operand) {
  if (t != DType::kI32 && t != DType::kI64) {
    throw Error(fmt::format("{} must be i32 or i64, got {}", operand, dtype_name(t)));
  }
}

std::vector<int64_t> wrapped_indices(const Tensor& index, int64_t size, int64_t dim) {
  const Tensor i64 = index.dtype() == DType::kI64 ? index.contiguous() : index.to(DType::kI64);
  const int64_t* p = i64.data<int64_t>();
  std::vector<int64_t> out(p, p + i64.numel());
  for (int64_t& v : out) {
    if (v < -size || v >= size) {
      throw Error(
          fmt::format("index {} is out of range for dimension {} of size {}", v, dim, size));
    }
    if (v < 0) v += size;
  }
  return out;
}

Lines lines_around(const Shape& shape, int64_t axis) {
  Lines l;
  for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d) {
    (d < axis ? l.outer : d == axis ? l.n : l.inner) *= shape[d];
  }
  return l;
}

namespace {

using ew::types_of;

// --- gather: out[o, j..., i] = x[o, index[j...], i] ----------------------------------------------
TensorType gather_rule(std::span<const TensorType> in, const Attrs& attrs) {
  require_index_dtype(in[1].dtype, "index");
  const Shape& xs = in[0].shape;
  const int64_t axis = axis_of(xs, attrs.get_int("dim"));
  Shape out(xs.begin(), xs.begin() + axis);
  out.insert(out.end(), in[1].shape.begin(), in[1].shape.end());
  out.insert(out.end(), xs.begin() + axis + 1, xs.end());
  return {in[0].dtype, out};
}

Tensor gather_kernel(std::span<const Tensor> in, const Attrs& attrs) {
  const TensorType ty = gather_rule(types_of(in), attrs);
  const Tensor x = in[0].contiguous();
  const int64_t axis = axis_of(x.shape(), attrs.get_int("dim"));
  const Lines l = lines_around(x.shape(), axis);
  const std::vector<int64_t> idx = wrapped_indices(in[1], l.n, axis);
  const auto m = static_cast<int64_t>(idx.size());
  Tensor out = Tensor::empty(ty.dtype, ty.shape);
  if (out.numel() == 0) return out;
  const size_t row_bytes = static_cast<size_t>(l.inner) * dtype_size(ty.dtype);
  const auto* src = static_cast<const char*>(x.raw_data());
  auto* dst = static_cast<char*>(out.raw_data());
  const int64_t rows = l.outer * m;
#pragma omp parallel for schedule(static) if (worth_parallel(rows * l.inner) && rows > 1)
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t o = r / m, j = r % m;
    std::memcpy(dst + r * row_bytes, src + (o * l.n + idx[j]) * row_bytes, row_bytes);
  }
  return out;
}

// --- gather_elements: out[c] = x[c with c[dim] = index[c]] ---------------------------------------
TensorType gather_elements_rule(std::span<const TensorType> in, const Attrs& attrs) {
  require_index_dtype(in[1].dtype, "index");
  const Shape &xs = in[0].shape, &is = in[1].shape;
  const int64_t axis = axis_of(xs, attrs.get_int("dim"));
  if (is.size() != xs.size()) {
    throw Error(fmt::format("index has rank {} ({}), x has rank {} ({}); they must be equal",
                            is.size(), shape_str(is), xs.size(), shape_str(xs)));
  }
  for (size_t d = 0; d < xs.size(); ++d) {
    if (static_cast<int64_t>(d) != axis && is[d] > xs[d]) {
      throw Error(fmt::format("index {} is larger than x {} in dimension {}", shape_str(is),
                              shape_str(xs), d));
    }
  }
  return {in[0].dtype, is};
}

Tensor gather_elements_kernel(std::span<const Tensor> in, const Attrs& attrs) {
  const TensorType ty = gather_elements_rule(types_of(in), attrs);
  const Tensor x = in[0].contiguous();
  const int64_t axis = axis_of(x.shape(), attrs.get_int("dim"));
  const std::vector<int64_t> idx = wrapped_indices(in[1], x.shape()[axis], axis);
  Tensor out = Tensor::empty(ty.dtype, ty.shape);
  if (out.numel() == 0) return out;
  const Shape& is = ty.shape;
  const auto rank = static_cast<int64_t>(is.size());
  const int64_t last = is.back(), rows = out.numel() / last;
  const Shape& xst = x.strides();
  dispatch_bits(ty.dtype, [&]<typename U>() {
    const U* src = x.data<U>();
    U* dst = out.data<U>();
#pragma omp parallel for schedule(static) if (worth_parallel(out.numel()) && rows > 1)
    for (int64_t r = 0; r < rows; ++r) {
      // x's offset of the row's first element, the indexed dim left out.
      int64_t base = 0;
      for (int64_t d = rank - 2, rest = r; d >= 0; --d) {
        if (d != axis) base += rest % is[d] * xst[d];
        rest /= is[d];
      }
      const int64_t* row = idx.data() + r * last;
      U* o = dst + r * last;
      if (axis == rank - 1) {
        for (int64_t c = 0; c < last; ++c) o[c] = src[base + row[c]];
      } else {
        for (int64_t c = 0; c < last; ++c) o[c] = src[base + c + row[c] * xst[axis]];
      }
    }
  });
  return out;
}

// A gather reads of its data only the elements it returns (and all of its indices).
OpCost gather_cost(std::span<const TensorType> in, const TensorType& out, const Attrs& attrs) {
  OpCost c = movement_cost(in, out, attrs);
  c.reads[0] = std::min(c.reads[0], c.writes);
  return c;
}

}  // namespace
}  // namespace index

void register_gather_ops(OpRegistry& r) {
  using namespace index;
  r.add(
      {{"gather", 2, 2, {{"dim", AttrKind::kInt, true}}}, gather_rule, gather_kernel, gather_cost});
  r.add({{"gather_elements", 2, 2, {{"dim", AttrKind::kInt, true}}},
         gather_elements_rule,
         gather_elements_kernel,
         gather_cost});
}

}  // namespace crucible
