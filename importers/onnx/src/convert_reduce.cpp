// ONNX reductions: ReduceSum/Mean/Max/Min/Prod and the composed L1, L2, SumSquare, LogSum and
// LogSumExp, with axes as an attribute or (ReduceSum from 13) an input; ArgMax/ArgMin and TopK.
#include <fmt/format.h>

#include "converters.h"

namespace crucible::onnx {

namespace {

// The dims a reduction covers, or nullopt for the identity (empty axes with noop_with_empty_axes).
std::optional<std::vector<int64_t>> reduce_dims(Ctx& c, const NodeProto& n, bool axes_input) {
  const Val x = c.in(n, 0);
  std::vector<int64_t> axes;
  if (axes_input) {
    if (c.present(n, 1)) axes = c.const_ints(n, 1);
  } else {
    axes = attr_ints(n, "axes").value_or(axes);
  }
  if (axes.empty()) {
    if (attr_int(n, "noop_with_empty_axes", 0) != 0) return std::nullopt;
    for (int64_t d = 0; d < x.rank(); ++d) axes.push_back(d);
  }
  for (int64_t& a : axes) a = norm_axis(a, x.rank());
  return axes;
}

enum class Pre { kNone, kAbs, kSquare, kExp };
enum class Post { kNone, kSqrt, kLog };

// A reduction `op` applied after `pre` and followed by `post`: ReduceL2 is sqrt(sum(x * x)).
Converter reduce(std::string op, int axes_input_from, Pre pre = Pre::kNone,
                 Post post = Post::kNone) {
  return [=](Ctx& c, const NodeProto& n) {
    Val x = c.in(n, 0);
    const auto dims = reduce_dims(c, n, c.opset() >= axes_input_from);
    if (!dims) return c.out(n, 0, x);
    if (pre == Pre::kAbs) x = c.op("abs", {x});
    if (pre == Pre::kSquare) x = c.op("mul", {x, x});
    if (pre == Pre::kExp) x = c.op("exp", {x});
    const bool keep = attr_int(n, "keepdims", 1) != 0;
    const DType dtype = x.type.dtype;
    Val y = c.op(op, {x}, {{"dims", *dims}, {"keepdim", keep}});
    // The registry sums and multiplies integers into i64; ONNX keeps the input's dtype.
    if (y.type.dtype != dtype) y = c.op("cast", {y}, {{"dtype", dtype}});
    if (post == Post::kSqrt) y = c.op("sqrt", {y});
    if (post == Post::kLog) y = c.op("log", {y});
    c.out(n, 0, y);
  };
}

Converter arg(std::string op) {
  return [op](Ctx& c, const NodeProto& n) {
    Val x = c.in(n, 0);
    c.out(n, 0,
          c.op(op, {x},
               {{"dim", norm_axis(attr_int(n, "axis", 0), x.rank())},
                {"keepdim", attr_int(n, "keepdims", 1) != 0},
                {"select_last_index", attr_int(n, "select_last_index", 0) != 0}}));
  };
}

void topk(Ctx& c, const NodeProto& n) {
  Val x = c.in(n, 0);
  const int64_t k = c.opset() < 10 ? attr_int(n, "k", 0) : c.const_ints(n, 1).at(0);
  Attrs a{{"k", k},
          {"dim", norm_axis(attr_int(n, "axis", -1), x.rank())},
          {"largest", attr_int(n, "largest", 1) != 0},
          {"sorted", attr_int(n, "sorted", 1) != 0}};
  c.out(n, 0, c.op("topk", {x}, a));
  if (n.output_size() > 1) c.out(n, 1, c.op("topk_indices", {x}, a));
}

}  // namespace

void add_reduce_converters(ConverterTable& t) {
  constexpr int kNever = 1000;  // axes stay an attribute through opset 17
  t["ReduceSum"] = reduce("sum", 13);
  t["ReduceMean"] = reduce("mean", kNever);
  t["ReduceMax"] = reduce("amax", kNever);
  t["ReduceMin"] = reduce("amin", kNever);
  t["ReduceProd"] = reduce("prod", kNever);
  t["ReduceL1"] = reduce("sum", kNever, Pre::kAbs);
  t["ReduceL2"] = reduce("sum", kNever, Pre::kSquare, Post::kSqrt);
  t["ReduceSumSquare"] = reduce("sum", kNever, Pre::kSquare);
  t["ReduceLogSum"] = reduce("sum", kNever, Pre::kNone, Post::kLog);
  t["ReduceLogSumExp"] = reduce("sum", kNever, Pre::kExp, Post::kLog);
  t["ArgMax"] = arg("argmax");
  t["ArgMin"] = arg("argmin");
  t["TopK"] = topk;
}

}  // namespace crucible::onnx
