// Ops whose every element is decided by its position: pad (ONNX Pad: constant, reflect, edge;
// negative pads crop) and trilu (ONNX Trilu: the upper or lower triangle of the last two dims).
#include <fmt/format.h>

#include <algorithm>

#include "crucible/core/error.h"
#include "elementwise/elementwise_loop.h"
#include "index/index_internal.h"
#include "register_ops.h"

namespace crucible {
namespace index {
namespace {

using ew::types_of;

// --- pad
// ------------------------------------------------------------------------------------------ pads =
// [begin_0 .. begin_{r-1}, end_0 .. end_{r-1}]. A negative pad crops that side first; the positive
// pads then extend what is left: with `value` (constant), the nearest element (edge) or the mirror
// image without the edge (reflect, at most size - 1 wide, as numpy and torch allow).
enum class PadMode { kConstant, kReflect, kEdge };

struct PadArgs {
  std::vector<int64_t> pads;
  PadMode mode = PadMode::kConstant;
  Shape out;
};

PadArgs pad_args(const TensorType& x, const Attrs& attrs) {
  PadArgs a;
  a.pads = attrs.get_ints("pads");
  const auto rank = static_cast<int64_t>(x.shape.size());
  if (static_cast<int64_t>(a.pads.size()) != 2 * rank) {
    throw Error(fmt::format("pads {} has {} entries; a tensor of rank {} needs {}",
                            shape_str(a.pads), a.pads.size(), rank, 2 * rank));
  }
  const std::string mode = attrs.get_string_or("mode", "constant");
  if (mode == "reflect") {
    a.mode = PadMode::kReflect;
  } else if (mode == "edge") {
    a.mode = PadMode::kEdge;
  } else if (mode != "constant") {
    throw Error(fmt::format("mode must be 'constant', 'reflect' or 'edge', got '{}'", mode));
  }
  for (int64_t d = 0; d < rank; ++d) {
    const int64_t b = a.pads[d], e = a.pads[d + rank], n = x.shape[d];
    const int64_t kept = n - std::max<int64_t>(0, -b) - std::max<int64_t>(0, -e);
    if (kept < 0) {
      throw Error(fmt::format("pads {} crop more than dimension {} of size {} holds",
                              shape_str(a.pads), d, n));
    }
    const int64_t widest = std::max({b, e, int64_t{0}});
    if (widest > 0 && a.mode == PadMode::kEdge && kept == 0) {
      throw Error(fmt::format("edge padding of dimension {} needs an element to repeat", d));
    }
    if (widest > 0 && a.mode == PadMode::kReflect && widest >= kept) {
      throw Error(fmt::format(
          "reflect padding of {} in dimension {} must be smaller than its size {} (after crops)",
          widest, d, kept));
    }
    a.out.push_back(kept + std::max<int64_t>(0, b) + std::max<int64_t>(0, e));
  }
  return a;
}

TensorType pad_rule(std::span<const TensorType> in, const Attrs& attrs) {
  return {in[0].dtype, pad_args(in[0], attrs).out};
}

// For each output position of dim d: the input index it reads, or -1 for the constant.
std::vector<int64_t> pad_sources(const PadArgs& a, int64_t d, int64_t n, int64_t rank) {
  const int64_t b = a.pads[d], e = a.pads[d + rank];
  const int64_t lo = std::max<int64_t>(0, -b), front = std::max<int64_t>(0, b);
  const int64_t kept = n - lo - std::max<int64_t>(0, -e);
  std::vector<int64_t> src(static_cast<size_t>(a.out[d]));
  for (int64_t o = 0; o < a.out[d]; ++o) {
    int64_t s = o - front;
    if (s < 0 || s >= kept) {
      if (a.mode == PadMode::kConstant) {
        src[o] = -1;
        continue;
      }
      s = a.mode == PadMode::kEdge ? std::clamp<int64_t>(s, 0, kept - 1)
          : s < 0                  ? -s
                                   : 2 * (kept - 1) - s;
    }
    src[o] = lo + s;
  }
  return src;
}

Tensor pad_kernel(std::span<const Tensor> in, const Attrs& attrs) {
  const Tensor& x = in[0];
  const PadArgs a = pad_args(ew::type_of(x), attrs);
  Tensor out = Tensor::empty(x.dtype(), a.out);
  if (out.numel() == 0) return out;
  const int64_t rank = x.dim();
  if (rank == 0) {
    out.copy_from(x);
    return out;
  }
  std::vector<std::vector<int64_t>> src;
  for (int64_t d = 0; d < rank; ++d) src.push_back(pad_sources(a, d, x.shape()[d], rank));
  // The fill value converted to x's dtype as cast converts it.
  const Tensor fill = Tensor::full(x.dtype(), {}, attrs.get_float_or("value", 0.0));
  const int64_t last = a.out.back(), rows = out.numel() / last;
  dispatch_bits(x.dtype(), [&]<typename U>() {
    const U* xp = x.data<U>();
    const U value = *fill.data<U>();
    U* op = out.data<U>();
#pragma omp parallel for schedule(static) if (worth_parallel(out.numel()) && rows > 1)
    for (int64_t r = 0; r < rows; ++r) {
      int64_t base = 0;
      bool constant = false;
      for (int64_t d = rank - 2, rest = r; d >= 0; --d) {
        const int64_t s = src[d][rest % a.out[d]];
        rest /= a.out[d];
        constant = constant || s < 0;
        base += s * x.strides()[d];
      }
      U* row = op + r * last;
      const std::vector<int64_t>& cols = src[rank - 1];
      const int64_t step = x.strides()[rank - 1];
      for (int64_t c = 0; c < last; ++c) {
        row[c] = constant || cols[c] < 0 ? value : xp[base + cols[c] * step];
      }
    }
  });
  return out;
}

// --- trilu
// ---------------------------------------------------------------------------------------- Keeps
// x[..., i, j] where j - i >= k (upper) or j - i <= k (lower); zero elsewhere.
TensorType trilu_rule(std::span<const TensorType> in, const Attrs&) {
  if (in[0].shape.size() < 2) {
    throw Error(fmt::format("needs a tensor of rank >= 2, got {}", shape_str(in[0].shape)));
  }
  return in[0];
}

Tensor trilu_kernel(std::span<const Tensor> in, const Attrs& attrs) {
  const Tensor x = in[0].contiguous();
  trilu_rule(types_of(in), attrs);
  const int64_t k = attrs.get_int_or("k", 0);
  const bool upper = attrs.get_bool_or("upper", true);
  Tensor out = Tensor::empty(x.dtype(), x.shape());
  if (out.numel() == 0) return out;
  const int64_t cols = x.shape().back(), rows = out.numel() / cols, h = x.shape()[x.dim() - 2];
  dispatch_bits(x.dtype(), [&]<typename U>() {
    const U* xp = x.data<U>();
    U* op = out.data<U>();
#pragma omp parallel for schedule(static) if (worth_parallel(out.numel()) && rows > 1)
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t i = r % h;
      for (int64_t j = 0; j < cols; ++j) {
        const bool keep = upper ? j - i >= k : j - i <= k;
        op[r * cols + j] = keep ? xp[r * cols + j] : U(0);  // zero bits are 0 in every dtype
      }
    }
  });
  return out;
}

}  // namespace
}  // namespace index

void register_position_ops(OpRegistry& r) {
  using namespace index;
  r.add({{"pad",
          1,
          1,
          {{"pads", AttrKind::kInts, true},
           {"mode", AttrKind::kString, false},
           {"value", AttrKind::kFloat, false}}},
         pad_rule,
         pad_kernel,
         movement_cost});
  r.add({{"trilu", 1, 1, {{"k", AttrKind::kInt, false}, {"upper", AttrKind::kBool, false}}},
         trilu_rule,
         trilu_kernel,
         movement_cost});
}

}  // namespace crucible
