// Ops that walk each line of a tensor along one dim: argmax/argmin (ONNX ArgMax/ArgMin), cumsum
// (ONNX CumSum) and topk/topk_indices (ONNX TopK's two outputs, one op each).
#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <numeric>
#include <type_traits>

#include "crucible/core/error.h"
#include "elementwise/elementwise_internal.h"
#include "elementwise/elementwise_loop.h"
#include "index/index_internal.h"
#include "reduction/reduction_internal.h"
#include "register_ops.h"

namespace crucible {
namespace index {
namespace {

using ew::types_of;
using reduction::is_nan;

// The line of x (contiguous) at (o, i): element j is at p[j * stride].
template <typename T>
struct Line {
  const T* p;
  int64_t stride;
  compute_t<T> operator[](int64_t j) const { return ew::load(p[j * stride]); }
};

template <typename T>
Line<T> line_of(const Tensor& x, const Lines& l, int64_t o, int64_t i) {
  return {x.data<T>() + o * l.n * l.inner + i, l.inner};
}

// --- argmax / argmin
// ------------------------------------------------------------------------------ The index of the
// largest (smallest) element of each line, as i64. NaN counts as the extreme, as in numpy and
// torch: the first NaN wins. select_last_index picks the last of equal extremes.
TensorType arg_rule(std::span<const TensorType> in, const Attrs& attrs) {
  ew::reject_bool(in[0].dtype);
  const Shape& xs = in[0].shape;
  const int64_t axis = axis_of(xs, attrs.get_int("dim"));
  if (xs[axis] == 0) {
    throw Error(
        fmt::format("cannot pick from zero-size dimension {} of shape {}", axis, shape_str(xs)));
  }
  Shape out = xs;
  if (attrs.get_bool_or("keepdim", true)) {
    out[axis] = 1;
  } else {
    out.erase(out.begin() + axis);
  }
  return {DType::kI64, out};
}

template <bool kMax>
Tensor arg_kernel(std::span<const Tensor> in, const Attrs& attrs) {
  const TensorType ty = arg_rule(types_of(in), attrs);
  const Tensor x = in[0].contiguous();
  const Lines l = lines_around(x.shape(), axis_of(x.shape(), attrs.get_int("dim")));
  const bool last = attrs.get_bool_or("select_last_index", false);
  Tensor out = Tensor::empty(DType::kI64, ty.shape);
  int64_t* o = out.data<int64_t>();
  dispatch_all(x.dtype(), kMax ? "argmax" : "argmin", [&]<typename T>() {
    for_each_line(l, 1, [&](int64_t oi, int64_t ii) {
      const Line<T> v = line_of<T>(x, l, oi, ii);
      compute_t<T> best = v[0];
      int64_t at = 0;
      for (int64_t j = 1; j < l.n; ++j) {
        const compute_t<T> c = v[j];
        bool take;
        if (is_nan(c)) {
          take = !is_nan(best) || last;
        } else if (is_nan(best)) {
          take = false;
        } else {
          take = (kMax ? c > best : c < best) || (last && c == best);
        }
        if (take) {
          best = c;
          at = j;
        }
      }
      o[oi * l.inner + ii] = at;
    });
  });
  return out;
}

// --- cumsum
// --------------------------------------------------------------------------------------- Running
// sums along dim, in x's dtype (ONNX keeps it): floats accumulate in double (as ATen does on CPU),
// integers wrap. exclusive leaves each element out of its own sum; reverse sums from the end.
TensorType cumsum_rule(std::span<const TensorType> in, const Attrs& attrs) {
  ew::reject_bool(in[0].dtype);
  axis_of(in[0].shape, attrs.get_int("dim"));
  return in[0];
}

Tensor cumsum_kernel(std::span<const Tensor> in, const Attrs& attrs) {
  const TensorType ty = cumsum_rule(types_of(in), attrs);
  const Tensor x = in[0].contiguous();
  const Lines l = lines_around(x.shape(), axis_of(x.shape(), attrs.get_int("dim")));
  const bool exclusive = attrs.get_bool_or("exclusive", false),
             reverse = attrs.get_bool_or("reverse", false);
  Tensor out = Tensor::empty(ty.dtype, ty.shape);
  if (out.numel() == 0) return out;
  dispatch_all(x.dtype(), "cumsum", [&]<typename T>() {
    using Acc = std::conditional_t<reduction::kIsFloat<T>, double, uint64_t>;
    for_each_line(l, 1, [&](int64_t oi, int64_t ii) {
      const Line<T> v = line_of<T>(x, l, oi, ii);
      T* dst = out.data<T>() + oi * l.n * l.inner + ii;
      Acc acc = 0;
      for (int64_t k = 0; k < l.n; ++k) {
        const int64_t j = reverse ? l.n - 1 - k : k;
        Acc add;
        if constexpr (reduction::kIsFloat<T>) {
          add = static_cast<double>(v[j]);
        } else {
          add = static_cast<uint64_t>(static_cast<int64_t>(v[j]));
        }
        if (!exclusive) acc += add;
        if constexpr (reduction::kIsFloat<T>) {
          reduction::store_as(&dst[j * l.inner], acc);
        } else {
          dst[j * l.inner] = static_cast<T>(static_cast<int64_t>(acc));
        }
        if (exclusive) acc += add;
      }
    });
  });
  return out;
}

// --- topk / topk_indices
// -------------------------------------------------------------------------- The k largest
// (smallest) elements of each line and their indices, sorted: the order is total, NaN above every
// number (torch's rule) and equal values by lower index first (ONNX's rule), so both ops agree and
// `sorted=false` gives the same order too.
struct TopkArgs {
  int64_t axis, k;
  bool largest;
};

TopkArgs topk_args(const TensorType& x, const Attrs& attrs) {
  ew::reject_bool(x.dtype);
  TopkArgs a;
  a.axis = axis_of(x.shape, attrs.get_int_or("dim", -1));
  a.k = attrs.get_int("k");
  a.largest = attrs.get_bool_or("largest", true);
  const int64_t n = x.shape[a.axis];
  if (a.k < 0 || a.k > n) {
    throw Error(fmt::format("k={} is out of range for dimension {} of size {} (expected 0 to {})",
                            a.k, a.axis, n, n));
  }
  return a;
}

TensorType topk_rule(std::span<const TensorType> in, const Attrs& attrs) {
  const TopkArgs a = topk_args(in[0], attrs);
  Shape out = in[0].shape;
  out[a.axis] = a.k;
  return {in[0].dtype, out};
}

TensorType topk_indices_rule(std::span<const TensorType> in, const Attrs& attrs) {
  return {DType::kI64, topk_rule(in, attrs).shape};
}

template <bool kIndices>
Tensor topk_kernel(std::span<const Tensor> in, const Attrs& attrs) {
  const TensorType ty = (kIndices ? topk_indices_rule : topk_rule)(types_of(in), attrs);
  const TopkArgs a = topk_args(ew::type_of(in[0]), attrs);
  const Tensor x = in[0].contiguous();
  const Lines l = lines_around(x.shape(), a.axis);
  Tensor out = Tensor::empty(ty.dtype, ty.shape);
  if (out.numel() == 0) return out;
  dispatch_all(x.dtype(), "topk", [&]<typename T>() {
    using C = compute_t<T>;
    // a before b in the result.
    auto first = [largest = a.largest](C va, int64_t ia, C vb, int64_t ib) {
      if (is_nan(va) || is_nan(vb)) {
        if (is_nan(va) != is_nan(vb)) return is_nan(va) == largest;
      } else if (va != vb) {
        return largest ? va > vb : va < vb;
      }
      return ia < ib;
    };
    const int64_t cost = std::max<int64_t>(1, std::bit_width(static_cast<uint64_t>(a.k)));
    for_each_line(l, cost, [&](int64_t oi, int64_t ii) {
      const Line<T> v = line_of<T>(x, l, oi, ii);
      std::vector<int64_t> order(static_cast<size_t>(l.n));
      std::iota(order.begin(), order.end(), 0);
      std::partial_sort(order.begin(), order.begin() + a.k, order.end(),
                        [&](int64_t p, int64_t q) { return first(v[p], p, v[q], q); });
      const int64_t at = oi * a.k * l.inner + ii;
      for (int64_t j = 0; j < a.k; ++j) {
        if constexpr (kIndices) {
          out.data<int64_t>()[at + j * l.inner] = order[j];
        } else {
          out.data<T>()[at + j * l.inner] = x.data<T>()[(oi * l.n + order[j]) * l.inner + ii];
        }
      }
    });
  });
  return out;
}

std::vector<AttrSpec> topk_attrs() {
  return {{"k", AttrKind::kInt, true},
          {"dim", AttrKind::kInt, false},
          {"largest", AttrKind::kBool, false},
          {"sorted", AttrKind::kBool, false}};
}

// One comparison or addition per input element (topk's selection counted as one pass).
OpCost along_dim_cost(std::span<const TensorType> in, const TensorType& out, const Attrs&) {
  return streaming_cost(in, out, static_cast<double>(in[0].numel()));
}
}  // namespace
}  // namespace index

void register_along_dim_ops(OpRegistry& r) {
  using namespace index;
  const std::vector<AttrSpec> arg_attrs = {{"dim", AttrKind::kInt, true},
                                           {"keepdim", AttrKind::kBool, false},
                                           {"select_last_index", AttrKind::kBool, false}};
  r.add({{"argmax", 1, 1, arg_attrs}, arg_rule, arg_kernel<true>, along_dim_cost});
  r.add({{"argmin", 1, 1, arg_attrs}, arg_rule, arg_kernel<false>, along_dim_cost});
  r.add({{"cumsum",
          1,
          1,
          {{"dim", AttrKind::kInt, true},
           {"exclusive", AttrKind::kBool, false},
           {"reverse", AttrKind::kBool, false}}},
         cumsum_rule,
         cumsum_kernel,
         along_dim_cost});
  r.add({{"topk", 1, 1, topk_attrs()}, topk_rule, topk_kernel<false>, along_dim_cost});
  r.add(
      {{"topk_indices", 1, 1, topk_attrs()}, topk_indices_rule, topk_kernel<true>, along_dim_cost});
}

}  // namespace crucible
