// Decompositions: softmax, log_softmax and layer_norm over trailing dims become amax/sum/mean and
// pointwise ops, so fusion can put each of them, with its neighbours, into one row kernel; the
// activations silu, hardswish, hardsigmoid and inference batch_norm become pointwise chains
// (except a batch_norm or an activation the packed conv2d before it absorbs).
#include <fmt/format.h>

#include "crucible/codegen/codegen_config.h"
#include "crucible/core/error.h"
#include "crucible/ir/op_registry.h"
#include "passes.h"

namespace crucible::codegen {

// Every op Rewriter::rewrite below has a decomposition for (a test runs each through it).
const std::vector<std::string>& decomposed_ops() {
  static const std::vector<std::string> kOps = {"softmax",   "log_softmax", "layer_norm", "silu",
                                                "hardswish", "hardsigmoid", "batch_norm"};
  return kOps;
}

namespace {

// A node whose decomposition could not be built (a primitive's type rule rejected its operands).
struct NotDecomposable {
  int node;
};

class Rewriter {
 public:
  // Nodes in `whole` are copied as they are.
  Rewriter(const Graph& g, const std::set<ValueId>& keep, const std::set<int>& whole)
      : in_(g),
        out_(g.name()),
        map_(g.values().size(), -1),
        consumers_(consumers_of(g, keep)),
        whole_(whole) {
    out_.set_base_dir(g.base_dir());
  }

  Graph run() {
    for (ValueId id : in_.inputs()) {
      const Value& v = in_.value(id);
      map_[id] = out_.add_input(v.name, v.type, v.init);
    }
    for (ValueId id : in_.params()) {
      const Value& v = in_.value(id);
      map_[id] = v.data.defined() ? out_.add_param_data(v.name, v.data)
                                  : out_.add_param(v.name, v.type, v.init);
    }
    for (size_t i = 0; i < in_.nodes().size(); ++i) {
      const Node& n = in_.nodes()[i];
      name_ = in_.value(n.output).name;
      std::vector<ValueId> ops;
      for (ValueId o : n.operands) ops.push_back(map_[o]);
      ValueId result = -1;
      try {
        if (!whole_.contains(static_cast<int>(i))) result = rewrite(n, ops);
      } catch (const Error&) {
        throw NotDecomposable{static_cast<int>(i)};
      }
      if (result < 0) result = out_.add_node(n.op, ops, n.attrs, name_, n.loc);
      map_[n.output] = result;
      origin_.resize(out_.nodes().size(), static_cast<int>(i));
    }
    std::vector<ValueId> outs;
    for (ValueId o : in_.outputs()) outs.push_back(map_[o]);
    out_.set_outputs(outs);
    return std::move(out_);
  }

  // Per value of the input graph, the value that stands for it in the output graph.
  const std::vector<ValueId>& value_map() const { return map_; }
  // Per node of the output graph, the node of the input graph it comes from.
  const std::vector<int>& origin() const { return origin_; }

 private:
  // The decomposed form of `n` over the operands `ops`, or -1 to keep the node whole.
  ValueId rewrite(const Node& n, const std::vector<ValueId>& ops) {
    const TensorType& x = in_.value(n.operands.empty() ? n.output : n.operands[0]).type;
    if ((n.op == "softmax" || n.op == "log_softmax") && is_floating(x.dtype) && !x.shape.empty()) {
      return softmax(ops[0], x, n.attrs.get_int("dim"), n.op == "log_softmax");
    }
    if (n.op == "layer_norm" && is_floating(x.dtype)) return layer_norm(ops, x, n.attrs);
    if ((n.op == "silu" || n.op == "hardswish" || n.op == "hardsigmoid") && is_floating(x.dtype)) {
      return activation(n.op, ops[0], x.dtype);
    }
    if (n.op == "batch_norm" && !folds_into_conv(in_, n, consumers_)) {
      // (One after a packed conv2d stays whole: lower() folds it into the convolution.)
      return batch_norm(ops, x, n.attrs);
    }
    return -1;
  }

  ValueId node(const std::string& op, std::vector<ValueId> ops, Attrs attrs,
               const std::string& suffix) {
    return out_.add_node(op, std::move(ops), std::move(attrs),
                         suffix.empty() ? name_ : name_ + "." + suffix);
  }
  ValueId scalar(DType dt, double v, const std::string& suffix) {
    return node("full", {}, {{"shape", std::vector<int64_t>{}}, {"value", v}, {"dtype", dt}},
                suffix);
  }

  ValueId softmax(ValueId x, const TensorType& t, int64_t dim, bool log) {
    const int64_t rank = static_cast<int64_t>(t.shape.size());
    if (dim < 0) dim += rank;
    if (dim != rank - 1) return -1;  // only the last dim fuses as a row reduction
    // Over a size-0 dim the result is empty, and amax, which has no identity, would reject it.
    if (t.shape[static_cast<size_t>(dim)] == 0) return -1;
    Attrs red{{"dims", std::vector<int64_t>{dim}}, {"keepdim", true}};
    ValueId m = node("amax", {x}, red, "max");
    ValueId shifted = node("sub", {x, m}, {}, "shifted");
    ValueId e = node("exp", {shifted}, {}, "exp");
    ValueId s = node("sum", {e}, red, "sum");
    if (log) return node("sub", {shifted, node("log", {s}, {}, "logsum")}, {}, "");
    return node("div", {e, s}, {}, "");
  }

  // layer_norm as its eager kernel computes it, in f32 for bf16, over the row shifted so that a
  // constant row centers to exact zeros whatever its magnitude (see layer_norm_kernel). Eager
  // shifts by the row's first element; here the shift is the row's max, a reduction the row
  // kernel computes in place, where a slice of the first element would be a view forcing the
  // row's producer (a residual add, say) out of the kernel. Both are exact for constant rows and
  // differ otherwise only in rounding. Over an empty row (no max) the node stays whole.
  ValueId layer_norm(const std::vector<ValueId>& ops, const TensorType& t, const Attrs& attrs) {
    const auto& ns = attrs.get_ints("normalized_shape");
    const int64_t rank = static_cast<int64_t>(t.shape.size());
    std::vector<int64_t> dims;
    for (int64_t d = rank - static_cast<int64_t>(ns.size()); d < rank; ++d) {
      if (t.shape[static_cast<size_t>(d)] == 0) return -1;
      dims.push_back(d);
    }
    Attrs red{{"dims", dims}, {"keepdim", true}};
    const DType ct = compute_dtype(t.dtype);
    const ValueId xc = widen(ops[0], t.dtype, "f32");
    const ValueId row_max = node("amax", {xc}, red, "max");
    const ValueId x = node("sub", {xc, row_max}, {}, "shifted");
    const ValueId mean = node("mean", {x}, red, "mean");
    const ValueId centered = node("sub", {x, mean}, {}, "centered");
    ValueId var = node("mean", {node("mul", {centered, centered}, {}, "sq")}, red, "var");
    ValueId eps = scalar(ct, attrs.get_float_or("eps", 1e-5), "eps");
    ValueId inv = node("rsqrt", {node("add", {var, eps}, {}, "var_eps")}, {}, "rstd");
    const bool affine_w = ops.size() > 1, affine_b = ops.size() > 2;
    ValueId y = node("mul", {centered, inv}, {}, affine_w ? "normed" : last(t.dtype, "normed"));
    if (affine_w) y = node("mul", {y, ops[1]}, {}, affine_b ? "scaled" : last(t.dtype, "scaled"));
    if (affine_b) y = node("add", {y, ops[2]}, {}, last(t.dtype, "biased"));
    return narrow(y, t.dtype);
  }

  // bf16 activations and batch_norm compute in f32 and round once at the end, as their eager
  // kernels do: a bf16 chain would round after every primitive.
  static DType compute_dtype(DType t) { return t == DType::kBF16 ? DType::kF32 : t; }
  ValueId widen(ValueId v, DType from, const std::string& suffix) {
    const DType to = compute_dtype(from);
    return to == from ? v : node("cast", {v}, {{"dtype", to}}, suffix);
  }
  // The final value `y` (computed in compute_dtype(t)) named after the node, narrowed back to t.
  ValueId narrow(ValueId y, DType t) {
    return compute_dtype(t) == t ? y : node("cast", {y}, {{"dtype", t}}, "");
  }
  std::string last(DType t, const std::string& suffix) const {
    return compute_dtype(t) == t ? "" : suffix;
  }

  // silu = x * sigmoid(x); hardsigmoid = clamp(x + 3, 0, 6) / 6; hardswish = x * that (with the
  // eager kernels' operation order, so the two backends round alike).
  ValueId activation(const std::string& op, ValueId x, DType t) {
    const DType ct = compute_dtype(t);
    const ValueId v = widen(x, t, "f32");
    ValueId y;
    if (op == "silu") {
      y = node("mul", {v, node("sigmoid", {v}, {}, "sigmoid")}, {}, last(t, "silu"));
    } else {
      const ValueId shifted = node("add", {v, scalar(ct, 3.0, "three")}, {}, "plus3");
      ValueId r = node("clamp", {shifted}, {{"min", 0.0}, {"max", 6.0}}, "relu6");
      if (op == "hardswish") r = node("mul", {v, r}, {}, "times_x");
      y = node("div", {r, scalar(ct, 6.0, "six")}, {}, last(t, op));
    }
    return narrow(y, t);
  }

  // Inference batch_norm: scale = weight * rsqrt(var + eps) and shift = bias - mean * scale are
  // [C] values (one small kernel), viewed as [C, 1, ...] so that they broadcast along dim 1; the
  // pass over x is then mul + add, which fuses with its neighbours (a relu after, say). Each
  // row of the fused kernel's inner loop is one (n, c) plane, with scale and shift as scalars.
  ValueId batch_norm(const std::vector<ValueId>& ops, const TensorType& t, const Attrs& attrs) {
    const DType ct = compute_dtype(t.dtype);
    const ValueId w = widen(ops[1], t.dtype, "weight_f32"), b = widen(ops[2], t.dtype, "bias_f32"),
                  mean = widen(ops[3], t.dtype, "mean_f32"),
                  var = widen(ops[4], t.dtype, "var_f32");
    const ValueId eps = scalar(ct, attrs.get_float_or("eps", 1e-5), "eps");
    const ValueId rstd = node("rsqrt", {node("add", {var, eps}, {}, "var_eps")}, {}, "rstd");
    ValueId scale = node("mul", {w, rstd}, {}, "scale");
    ValueId shift = node("sub", {b, node("mul", {mean, scale}, {}, "mean_scale")}, {}, "shift");
    if (t.shape.size() > 2) {
      std::vector<int64_t> per_channel(t.shape.size() - 1, 1);
      per_channel[0] = t.shape[1];
      scale = node("reshape", {scale}, {{"shape", per_channel}}, "scale_c");
      shift = node("reshape", {shift}, {{"shape", per_channel}}, "shift_c");
    }
    const ValueId y = node("add", {node("mul", {ops[0], scale}, {}, "scaled"), shift}, {},
                           last(t.dtype, "shifted"));
    return narrow(y, t.dtype);
  }

  const Graph& in_;
  Graph out_;
  std::vector<ValueId> map_;
  std::vector<int> origin_;
  Consumers consumers_;
  std::set<int> whole_;
  std::string name_;
};

}  // namespace

Graph decompose(const Graph& g, std::vector<ValueId>* value_map, const std::set<ValueId>& keep,
                std::vector<int>* origin, const std::set<std::string>& whole_ops,
                const std::set<std::string>& whole_names, bool packed_conv) {
  // A decomposition whose primitives do not type-check on this node's shapes (the node itself is
  // valid, as the source graph was built) is not an error: the node stays whole and runs as its
  // eager kernel, and the rewrite starts over without the half-built form.
  std::set<int> whole;
  const Consumers consumers = consumers_of(g, keep);
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    const Node& n = g.nodes()[i];
    if (whole_ops.contains(n.op) || whole_names.contains(g.value(n.output).name)) {
      whole.insert(static_cast<int>(i));
    }
    // lower() matches the chain again on the result, where the activation is still one op.
    if (packed_conv && packs_conv2d(g, n) && !whole_names.contains(g.value(n.output).name)) {
      const int act = match_conv_chain(g, static_cast<int>(i), consumers).act;
      if (act >= 0 && g.nodes()[act].op != "mul") whole.insert(act);
    }
  }
  for (;;) {
    try {
      Rewriter r(g, keep, whole);
      Graph out = r.run();
      if (value_map != nullptr) *value_map = r.value_map();
      if (origin != nullptr) *origin = r.origin();
      return out;
    } catch (const NotDecomposable& e) {
      whole.insert(e.node);
    }
  }
}

}  // namespace crucible::codegen
