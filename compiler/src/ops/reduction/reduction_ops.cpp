// Reductions (sum, prod, mean, amax, amin, var): type rules and eager kernels that plan each
// reduction as [outer kept dims, one reduced block, a contiguous inner kept block], folded
// vectorized.
#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <memory>
#include <numeric>
#include <optional>
#include <vector>

#include "crucible/core/error.h"
#include "crucible/ir/type_rules.h"
#include "reduction/reduction_internal.h"
#include "register_ops.h"

namespace crucible {
namespace reduction {

void require_floating(DType t, const char* operand) {
  if (!is_floating(t)) {
    throw Error(
        fmt::format("{} must be floating-point (bf16, f32, f64), got {}", operand, dtype_name(t)));
  }
}

namespace {

// A reduction over a dense operand, laid out as
//   out[outer..., j] = fold over r < R of in[outer..., r, j],  j < B contiguous in the input.
// Outer kept dims keep their own input and output strides (the plan may visit them in memory order,
// not logical order); the inner kept block is contiguous in the input and has output stride b_out.
struct ReducePlan {
  Tensor input;  // the operand (or a reordered dense copy of it) that offsets index
  std::vector<int64_t> outer_size, outer_in, outer_out;
  int64_t a = 1;  // number of outer positions
  int64_t r = 1;  // reduced extent (elements per output)
  int64_t b = 1;  // inner kept extent
  int64_t b_out = 1;

  void offsets(int64_t ai, int64_t& in, int64_t& out) const {
    in = 0;
    out = 0;
    for (size_t d = outer_size.size(); d-- > 0;) {
      const int64_t i = ai % outer_size[d];
      ai /= outer_size[d];
      in += i * outer_in[d];
      out += i * outer_out[d];
    }
  }
};

struct PlanDim {
  int64_t size, in, out;
  bool reduced;
};

// Builds the plan. A transposed or permuted operand is walked in memory order without a copy; an
// operand with gaps or broadcast strides, or whose reduced dims do not form one block in memory
// order, is first copied into [kept..., reduced...] order, which always fits the plan.
ReducePlan plan_reduction(const Tensor& x, const std::vector<int64_t>& rdims) {
  const int64_t n = x.dim();
  std::vector<bool> reduced(n, false);
  for (int64_t d : rdims) reduced[d] = true;
  // Output offsets: contiguous over the kept dims in logical order (keepdim's 1s change nothing).
  std::vector<int64_t> out_stride(n, 0);
  for (int64_t d = n - 1, s = 1; d >= 0; --d) {
    if (!reduced[d]) {
      out_stride[d] = s;
      s *= x.shape()[d];
    }
  }

  auto build = [&](const Tensor& src, const std::vector<int64_t>& order,
                   const std::vector<int64_t>& in_stride) -> std::optional<ReducePlan> {
    std::vector<PlanDim> groups;
    for (int64_t d : order) {
      PlanDim cur{x.shape()[d], in_stride[d], out_stride[d], static_cast<bool>(reduced[d])};
      if (!groups.empty()) {
        PlanDim& g = groups.back();
        // Inputs are dense in `order`, so the input side always merges; kept dims also need
        // their output strides to line up.
        if (g.reduced == cur.reduced && (cur.reduced || g.out == cur.out * cur.size)) {
          g.size *= cur.size;
          g.in = cur.in;
          g.out = cur.out;
          continue;
        }
      }
      groups.push_back(cur);
    }
    ReducePlan p;
    p.input = src;
    int64_t red_at = -1;
    for (size_t i = 0; i < groups.size(); ++i) {
      if (groups[i].reduced) {
        if (red_at >= 0) return std::nullopt;
        red_at = static_cast<int64_t>(i);
      }
    }
    size_t outer_end = groups.size();
    if (red_at >= 0) {
      p.r = groups[red_at].size;
      const size_t after = groups.size() - red_at - 1;
      if (after > 1) return std::nullopt;
      if (after == 1) {
        p.b = groups.back().size;
        p.b_out = groups.back().out;
      }
      outer_end = static_cast<size_t>(red_at);
    } else if (!groups.empty()) {
      // Nothing to reduce (only size-1 dims): still let the innermost block vectorize.
      p.b = groups.back().size;
      p.b_out = groups.back().out;
      outer_end = groups.size() - 1;
    }
    for (size_t i = 0; i < outer_end; ++i) {
      p.outer_size.push_back(groups[i].size);
      p.outer_in.push_back(groups[i].in);
      p.outer_out.push_back(groups[i].out);
      p.a *= groups[i].size;
    }
    return p;
  };

  // Memory order: dims by decreasing stride; dense if that order is exactly contiguous.
  std::vector<int64_t> order;
  for (int64_t d = 0; d < n; ++d) {
    if (x.shape()[d] != 1) order.push_back(d);
  }
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t p, int64_t q) { return x.strides()[p] > x.strides()[q]; });
  bool dense = true;
  for (size_t i = order.size(), expected = 1; i-- > 0;) {
    if (x.strides()[order[i]] != static_cast<int64_t>(expected)) {
      dense = false;
      break;
    }
    expected *= x.shape()[order[i]];
  }
  if (dense) {
    if (auto p = build(x, order, x.strides())) return std::move(*p);
  }
  std::vector<int64_t> perm;
  for (int64_t d = 0; d < n; ++d) {
    if (!reduced[d]) perm.push_back(d);
  }
  for (int64_t d = 0; d < n; ++d) {
    if (reduced[d]) perm.push_back(d);
  }
  Tensor copy = x.permute(perm).contiguous();
  std::vector<int64_t> in_stride(n, 0);
  order.clear();
  for (int64_t i = 0; i < n; ++i) {
    in_stride[perm[i]] = copy.strides()[i];
    if (x.shape()[perm[i]] != 1) order.push_back(perm[i]);
  }
  return std::move(*build(copy, order, in_stride));
}

// Fold ops: map an input element to a lane value, combine lanes, widen lanes into the block total.
template <typename T>
struct SumOp {
  using Lane = std::conditional_t<kIsFloat<T>, compute_t<T>, uint64_t>;  // wrapping integer sums
  using Wide = std::conditional_t<kIsFloat<T>, double, uint64_t>;
  Lane identity() const { return 0; }
  Wide wide_identity() const { return 0; }
  Lane map(T x, int64_t) const {
    if constexpr (kIsFloat<T>) {
      return static_cast<Lane>(x);
    } else {
      return static_cast<uint64_t>(static_cast<int64_t>(x));
    }
  }
  static Lane combine(Lane acc, Lane v) { return acc + v; }
  static Wide widen(Wide acc, Lane v) { return acc + static_cast<Wide>(v); }
  static Wide merge(Wide acc, Wide v) { return acc + v; }
};

// Products: floats multiply in double (a float lane would overflow on partial products whose
// whole is finite), integers wrap.
template <typename T>
struct ProdOp {
  using Lane = std::conditional_t<kIsFloat<T>, double, uint64_t>;
  using Wide = Lane;
  Lane identity() const { return 1; }
  Wide wide_identity() const { return 1; }
  Lane map(T x, int64_t) const {
    if constexpr (kIsFloat<T>) {
      return static_cast<double>(static_cast<compute_t<T>>(x));
    } else {
      return static_cast<uint64_t>(static_cast<int64_t>(x));
    }
  }
  static Lane combine(Lane acc, Lane v) { return acc * v; }
  static Wide widen(Wide acc, Lane v) { return acc * static_cast<Wide>(v); }
  static Wide merge(Wide acc, Wide v) { return acc * v; }
};

template <typename T, bool kMax>
struct ExtremumOp {
  using Lane = compute_t<T>;
  using Wide = Lane;
  Lane identity() const {
    if constexpr (std::is_floating_point_v<Lane>) {
      return kMax ? -std::numeric_limits<Lane>::infinity() : std::numeric_limits<Lane>::infinity();
    } else {
      return kMax ? std::numeric_limits<Lane>::lowest() : std::numeric_limits<Lane>::max();
    }
  }
  Wide wide_identity() const { return identity(); }
  Lane map(T x, int64_t) const { return static_cast<Lane>(x); }
  static Lane combine(Lane acc, Lane v) { return kMax ? nan_max(acc, v) : nan_min(acc, v); }
  static Wide widen(Wide acc, Lane v) { return combine(acc, v); }
  static Wide merge(Wide acc, Wide v) { return combine(acc, v); }
};

// Squared deviation from a per-output centre given in plan order (index ai * B + j).
template <typename T>
struct SquaredDeviationOp {
  using Lane = compute_t<T>;
  using Wide = double;
  const Lane* center;
  Lane identity() const { return 0; }
  Wide wide_identity() const { return 0; }
  Lane map(T x, int64_t idx) const {
    const Lane d = static_cast<Lane>(x) - center[idx];
    return d * d;
  }
  static Lane combine(Lane acc, Lane v) { return acc + v; }
  static Wide widen(Wide acc, Lane v) { return acc + static_cast<Wide>(v); }
  static Wide merge(Wide acc, Wide v) { return acc + v; }
};

// One contiguous row of n elements, all mapping to output index idx.
template <typename T, typename Op>
typename Op::Wide fold_row(const Op& op, const T* x, int64_t n, int64_t idx) {
  using Lane = typename Op::Lane;
  constexpr int L = kLanes<Lane>;
  typename Op::Wide total = op.wide_identity();
  const Lane id = op.identity();
  for (int64_t b0 = 0; b0 < n; b0 += kBlock) {
    const int64_t end = std::min(n, b0 + kBlock);
    Lane lanes[L];
    for (int l = 0; l < L; ++l) lanes[l] = id;
    int64_t i = b0;
    for (; i + L <= end; i += L) {
#pragma omp simd
      for (int l = 0; l < L; ++l) lanes[l] = Op::combine(lanes[l], op.map(x[i + l], idx));
    }
    Lane acc = id;
    for (; i < end; ++i) acc = Op::combine(acc, op.map(x[i], idx));
    for (int w = L / 2; w > 0; w /= 2) {
      for (int l = 0; l < w; ++l) lanes[l] = Op::combine(lanes[l], lanes[l + w]);
    }
    total = Op::widen(total, Op::combine(lanes[0], acc));
  }
  return total;
}

// rn rows of jn contiguous columns (row stride `stride`), column j mapping to output idx0 + j:
// rows are accumulated into a vector of column partials, so the inner loop is contiguous.
template <typename T, typename Op>
void fold_columns(const Op& op, const T* x, int64_t rn, int64_t stride, int64_t jn, int64_t idx0,
                  typename Op::Wide* result) {
  using Lane = typename Op::Lane;
  Lane acc[kTile];
  const Lane id = op.identity();
  for (int64_t j = 0; j < jn; ++j) {
    acc[j] = id;
    result[j] = op.wide_identity();
  }
  for (int64_t r0 = 0; r0 < rn; r0 += kRowBlock) {
    const int64_t r1 = std::min(rn, r0 + kRowBlock);
    for (int64_t r = r0; r < r1; ++r) {
      const T* row = x + r * stride;
#pragma omp simd
      for (int64_t j = 0; j < jn; ++j) acc[j] = Op::combine(acc[j], op.map(row[j], idx0 + j));
    }
    for (int64_t j = 0; j < jn; ++j) {
      result[j] = Op::widen(result[j], acc[j]);
      acc[j] = id;
    }
  }
}

// Runs a plan: store(ai, j0, values, jn) receives the folded values of outputs (ai, j0 .. j0+jn).
// Work splits over (outer position, column tile) tasks; when those are too few for the threads,
// the reduced extent is split into chunks whose partials merge in a fixed order. Every split
// depends on shapes only, never on the thread count, so results are reproducible.
template <typename T, typename Op, typename Store>
void run_plan(const ReducePlan& p, const Op& op, Store&& store) {
  using Wide = typename Op::Wide;
  const T* x = p.input.template data<T>();
  const int64_t tile = p.b == 1 ? 1 : kTile;
  const int64_t ntiles = (p.b + tile - 1) / tile;
  const int64_t tasks = p.a * ntiles;
  const int64_t work = p.a * p.r * p.b;
  constexpr int64_t kMinTasks = 16;
  int64_t chunk = p.r;
  if (tasks < kMinTasks && work >= 2 * kParallelGrain) {
    const int64_t unit = p.b == 1 ? kBlock : kRowBlock;
    chunk = std::max<int64_t>(kParallelGrain / std::min(p.b, tile), 1);
    chunk = (chunk + unit - 1) / unit * unit;
    chunk = std::min(chunk, p.r);
  }
  const int64_t nchunks = (p.r + chunk - 1) / chunk;

  auto fold = [&](int64_t task, int64_t r0, int64_t rn, Wide* out) {
    const int64_t ai = task / ntiles, j0 = task % ntiles * tile, jn = std::min(tile, p.b - j0);
    int64_t in_off, out_off;
    p.offsets(ai, in_off, out_off);
    if (p.b == 1) {
      out[0] = fold_row(op, x + in_off + r0, rn, ai);
    } else {
      fold_columns(op, x + in_off + r0 * p.b + j0, rn, p.b, jn, ai * p.b + j0, out);
    }
  };
  auto task_range = [&](int64_t task) {
    const int64_t j0 = task % ntiles * tile;
    return std::pair{task / ntiles, j0};
  };

  if (nchunks == 1) {
#pragma omp parallel for schedule(static) if (work >= kParallelGrain && tasks > 1)
    for (int64_t task = 0; task < tasks; ++task) {
      Wide out[kTile];
      fold(task, 0, p.r, out);
      auto [ai, j0] = task_range(task);
      store(ai, j0, out, std::min(tile, p.b - j0));
    }
    return;
  }
  // (Not std::vector: Wide may be bool.)
  std::unique_ptr<Wide[]> partial(new Wide[tasks * nchunks * tile]);
#pragma omp parallel for schedule(static)
  for (int64_t t = 0; t < tasks * nchunks; ++t) {
    const int64_t c = t % nchunks;
    fold(t / nchunks, c * chunk, std::min(chunk, p.r - c * chunk), &partial[t * tile]);
  }
  for (int64_t task = 0; task < tasks; ++task) {
    auto [ai, j0] = task_range(task);
    const int64_t jn = std::min(tile, p.b - j0);
    Wide* first = &partial[task * nchunks * tile];
    for (int64_t c = 1; c < nchunks; ++c) {
      const Wide* next = first + c * tile;
      for (int64_t j = 0; j < jn; ++j) first[j] = Op::merge(first[j], next[j]);
    }
    store(ai, j0, first, jn);
  }
}

// Writes folded values (already finalised by `finish`) into the output tensor.
template <typename O, typename Wide, typename Finish>
auto output_store(const ReducePlan& p, const Tensor& out, Finish finish) {
  O* o = out.data<O>();
  return [&p, o, finish](int64_t ai, int64_t j0, const Wide* v, int64_t jn) {
    int64_t in_off, out_off;
    p.offsets(ai, in_off, out_off);
    O* dst = o + out_off + j0 * p.b_out;
    for (int64_t j = 0; j < jn; ++j) dst[j * p.b_out] = static_cast<O>(finish(v[j]));
  };
}

// Value conversion for stores: bf16 rounds from float; integer sums wrap back into int64.
template <typename O, typename V>
O convert(V v) {
  if constexpr (std::is_same_v<O, BFloat16>) {
    return BFloat16(static_cast<float>(v));
  } else {
    return static_cast<O>(v);
  }
}

struct ReduceArgs {
  std::vector<int64_t> dims;  // normalised, sorted; empty input means all
  bool keepdim = false;
  Shape out_shape;
};

ReduceArgs reduce_args(const Shape& shape, const Attrs& attrs) {
  std::vector<int64_t> dims;
  if (const AttrValue* v = attrs.find("dims")) dims = std::get<std::vector<int64_t>>(*v);
  ReduceArgs args;
  args.keepdim = attrs.get_bool_or("keepdim", false);
  args.out_shape = reduced_shape(shape, dims, args.keepdim);
  args.dims = reduction_dims(shape, dims);
  return args;
}

// Sum-like kernels (sum, prod, mean): out = finish(fold) in the output dtype.
template <typename T, typename O, template <typename> class Op = SumOp, typename Finish>
void sum_into(const Tensor& x, const ReduceArgs& args, const Tensor& out, Finish finish) {
  ReducePlan p = plan_reduction(x, args.dims);
  Op<T> op;
  run_plan<T>(p, op, output_store<O, typename Op<T>::Wide>(p, out, finish));
}

// sum and prod: floats keep their dtype, integers and bool give i64 (torch.sum, torch.prod).
template <template <typename> class Op>
Tensor sum_kernel(std::span<const Tensor> in, const Attrs& attrs) {
  const Tensor& x = in[0];
  ReduceArgs args = reduce_args(x.shape(), attrs);
  const DType out_dtype = is_floating(x.dtype()) ? x.dtype() : DType::kI64;
  if (x.numel() == 0) {
    return Tensor::full(out_dtype, args.out_shape, Op<float>{}.wide_identity());
  }
  Tensor out = Tensor::empty(out_dtype, args.out_shape);
  dispatch_all(x.dtype(), "sum", [&]<typename T>() {
    if constexpr (kIsFloat<T>) {
      sum_into<T, T, Op>(x, args, out, [](double v) { return convert<T>(v); });
    } else {
      sum_into<T, int64_t, Op>(x, args, out, [](uint64_t v) { return static_cast<int64_t>(v); });
    }
  });
  return out;
}

Tensor mean_kernel(std::span<const Tensor> in, const Attrs& attrs) {
  const Tensor& x = in[0];
  ReduceArgs args = reduce_args(x.shape(), attrs);
  if (x.numel() == 0) {
    return Tensor::full(x.dtype(), args.out_shape, std::numeric_limits<double>::quiet_NaN());
  }
  Tensor out = Tensor::empty(x.dtype(), args.out_shape);
  const double count = static_cast<double>(x.numel() / std::max<int64_t>(out.numel(), 1));
  dispatch_float(x.dtype(), "mean", [&]<typename T>() {
    sum_into<T, T>(x, args, out, [count](double v) { return convert<T>(v / count); });
  });
  return out;
}

template <bool kMax>
Tensor extremum_kernel(std::span<const Tensor> in, const Attrs& attrs) {
  const Tensor& x = in[0];
  ReduceArgs args = reduce_args(x.shape(), attrs);
  Tensor out = Tensor::empty(x.dtype(), args.out_shape);
  if (out.numel() == 0) return out;  // (a zero-size reduced dim was rejected by the type rule)
  dispatch_all(x.dtype(), kMax ? "amax" : "amin", [&]<typename T>() {
    using Op = ExtremumOp<T, kMax>;
    ReducePlan p = plan_reduction(x, args.dims);
    run_plan<T>(p, Op{},
                output_store<T, typename Op::Wide>(p, out, [](auto v) { return convert<T>(v); }));
  });
  return out;
}

// Two passes (mean, then the sum of squared deviations from it) rather than one-pass moments,
// which cancel catastrophically when the mean is large against the spread.
Tensor var_kernel(std::span<const Tensor> in, const Attrs& attrs) {
  const Tensor& x = in[0];
  ReduceArgs args = reduce_args(x.shape(), attrs);
  const int64_t correction = attrs.get_int_or("correction", 1);
  if (x.numel() == 0) {
    return Tensor::full(x.dtype(), args.out_shape, std::numeric_limits<double>::quiet_NaN());
  }
  Tensor out = Tensor::empty(x.dtype(), args.out_shape);
  const int64_t count = x.numel() / std::max<int64_t>(out.numel(), 1);
  // torch.var divides by max(0, N - correction): a zero divisor gives inf or NaN, not an error.
  const double divisor = static_cast<double>(std::max<int64_t>(count - correction, 0));
  dispatch_float(x.dtype(), "var", [&]<typename T>() {
    using Lane = compute_t<T>;
    ReducePlan p = plan_reduction(x, args.dims);
    std::vector<Lane> mean(static_cast<size_t>(p.a * p.b));
    const double n = static_cast<double>(count);
    run_plan<T>(p, SumOp<T>{}, [&](int64_t ai, int64_t j0, const double* v, int64_t jn) {
      for (int64_t j = 0; j < jn; ++j) mean[ai * p.b + j0 + j] = static_cast<Lane>(v[j] / n);
    });
    SquaredDeviationOp<T> dev{mean.data()};
    run_plan<T>(p, dev, output_store<T, double>(p, out, [divisor](double v) {
                  return convert<T>(v / divisor);
                }));
  });
  return out;
}

// Type rules.

TensorType sum_rule(std::span<const TensorType> in, const Attrs& attrs) {
  ReduceArgs args = reduce_args(in[0].shape, attrs);
  return {is_floating(in[0].dtype) ? in[0].dtype : DType::kI64, args.out_shape};
}

TensorType float_reduce_rule(std::span<const TensorType> in, const Attrs& attrs) {
  require_floating(in[0].dtype, "input");
  return {in[0].dtype, reduce_args(in[0].shape, attrs).out_shape};
}

TensorType extremum_rule(std::span<const TensorType> in, const Attrs& attrs) {
  ReduceArgs args = reduce_args(in[0].shape, attrs);
  for (int64_t d : args.dims) {
    if (in[0].shape[d] == 0) {
      throw Error(fmt::format("cannot reduce over zero-size dimension {} of shape {} (no identity)",
                              d, shape_str(in[0].shape)));
    }
  }
  return {in[0].dtype, args.out_shape};
}

std::vector<AttrSpec> reduce_attrs() {
  return {{"dims", AttrKind::kInts, false}, {"keepdim", AttrKind::kBool, false}};
}

// One step per input element; the variance three (subtract the mean, square, add).
OpCost reduce_cost(std::span<const TensorType> in, const TensorType& out, const Attrs&) {
  return streaming_cost(in, out, static_cast<double>(in[0].numel()));
}
OpCost var_cost(std::span<const TensorType> in, const TensorType& out, const Attrs&) {
  return streaming_cost(in, out, 3 * static_cast<double>(in[0].numel()));
}

}  // namespace
}  // namespace reduction

void register_reduction_ops(OpRegistry& r) {
  using namespace reduction;
  r.add({{"sum", 1, 1, reduce_attrs()}, sum_rule, sum_kernel<SumOp>, reduce_cost});
  r.add({{"prod", 1, 1, reduce_attrs()}, sum_rule, sum_kernel<ProdOp>, reduce_cost});
  r.add({{"mean", 1, 1, reduce_attrs()}, float_reduce_rule, mean_kernel, reduce_cost});
  r.add({{"amax", 1, 1, reduce_attrs()}, extremum_rule, extremum_kernel<true>, reduce_cost});
  r.add({{"amin", 1, 1, reduce_attrs()}, extremum_rule, extremum_kernel<false>, reduce_cost});
  std::vector<AttrSpec> var_attrs = reduce_attrs();
  var_attrs.push_back({"correction", AttrKind::kInt, false});
  r.add({{"var", 1, 1, var_attrs}, float_reduce_rule, var_kernel, var_cost});
  register_normalization_ops(r);
}

}  // namespace crucible
