// Lowering to the loop IR: which nodes codegen claims, and as what (pointwise, trailing
// reduction, view, inline constant, packed GEMM/conv and their epilogues, or an extern call).
#include <algorithm>
#include <set>

#include "passes.h"

namespace crucible::codegen {

namespace {

const std::set<std::string> kFloatUnary = {
    "exp",  "log", "sqrt", "rsqrt", "sin",  "cos",  "tanh", "sigmoid", "reciprocal", "erf",
    "gelu", "tan", "asin", "acos",  "atan", "sinh", "cosh", "asinh",   "acosh",      "atanh"};
const std::set<std::string> kArith = {"add", "sub",   "mul",  "maximum", "minimum",
                                      "mod", "floor", "ceil", "round",   "sign"};
// Bool-valued, any operand dtype.
const std::set<std::string> kCompare = {"eq",          "ne",          "lt",         "le",
                                        "gt",          "ge",          "isnan",      "isinf",
                                        "logical_not", "logical_and", "logical_or", "logical_xor"};
const std::set<std::string> kViews = {"reshape", "permute", "transpose", "expand",
                                      "slice",   "squeeze", "unsqueeze"};
const std::set<std::string> kReductions = {"sum", "mean", "amax", "amin"};

// Pointwise ops whose generated code reproduces eager's semantics for these dtypes exactly.
bool claims_pointwise(const Graph& g, const Node& n) {
  const DType out = g.value(n.output).type.dtype;
  auto in = [&](size_t i) { return g.value(n.operands[i]).type.dtype; };
  if (n.op == "neg" || n.op == "abs" || n.op == "relu") return out != DType::kBool;
  if (kFloatUnary.contains(n.op)) return is_floating(in(0));
  if (kArith.contains(n.op)) return out != DType::kBool;
  if (n.op == "div" || n.op == "pow" || n.op == "clamp") return is_floating(out);
  if (kCompare.contains(n.op) || n.op == "where" || n.op == "cast") return true;
  if (n.op == "cat") return n.operands.size() == 1;  // a copy; several operands run as extern
  return false;
}

// A reduction codegen fuses: floating, over the trailing dims, leaving enough rows to parallelize.
bool claims_reduction(const Graph& g, const Node& n) {
  if (!kReductions.contains(n.op)) return false;
  const TensorType& x = g.value(n.operands[0]).type;
  if (!is_floating(x.dtype) || x.shape.empty()) return false;
  std::vector<int64_t> dims =
      n.attrs.has("dims") ? n.attrs.get_ints("dims") : std::vector<int64_t>{};
  const auto rank = static_cast<int64_t>(x.shape.size());
  if (dims.empty())
    return false;  // a full reduction has one row: eager's parallel kernel is better
  std::vector<int64_t> norm;
  for (int64_t d : dims) norm.push_back(d < 0 ? d + rank : d);
  std::sort(norm.begin(), norm.end());
  for (size_t i = 0; i < norm.size(); ++i) {
    if (norm[i] != rank - static_cast<int64_t>(norm.size()) + static_cast<int64_t>(i)) return false;
  }
  int64_t rows = 1, cols = 1;
  for (int64_t d = 0; d < rank; ++d)
    (d < rank - static_cast<int64_t>(norm.size()) ? rows : cols) *= x.shape[d];
  // Few rows leave threads idle on one long row: eager's parallel reduction is better, unless the
  // whole reduction is small enough to run serially anyway.
  return rows >= 16 || rows * cols <= 65536;
}

}  // namespace

LoopProgram lower(const Graph& g, const CodegenConfig& config, const std::set<ValueId>& keep) {
  LoopProgram lp;
  std::set<ValueId> outputs(g.outputs().begin(), g.outputs().end());
  // Nodes the user sends to eager's kernels (-c eager_nodes=...) stay extern calls: no fusion, no
  // packing, no absorption into a neighbour.
  auto eager = [&](int i) {
    return config.eager_nodes.contains(g.value(g.nodes()[i].output).name);
  };
  for (const Node& n : g.nodes()) {
    NodeClass c = NodeClass::kExtern;
    if (eager(static_cast<int>(lp.classes.size()))) {
      // stays kExtern
    } else if (n.op == "full" && !outputs.contains(n.output)) {
      c = NodeClass::kConstant;
    } else if (kViews.contains(n.op)) {
      c = NodeClass::kView;
    } else if (claims_pointwise(g, n)) {
      c = NodeClass::kPointwise;
    } else if (claims_reduction(g, n)) {
      c = NodeClass::kReduction;
    }
    lp.classes.push_back(c);
  }
  // Linear (and matmul) with a parameter weight: packed once into the GEMM library's layout, with a
  // lone activation consumer fused in as the GEMM's post-op.
  lp.absorbed_by.assign(g.nodes().size(), -1);
  const Consumers consumers = consumers_of(g);
  const std::set<std::string> kEpilogues = {"relu", "gelu", "sigmoid", "tanh"};
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    const Node& n = g.nodes()[i];
    if (!config.packed_linear || eager(static_cast<int>(i))) continue;
    if (n.op != "linear" && n.op != "matmul") continue;
    const Value& x = g.value(n.operands[0]);
    const Value& w = g.value(n.operands[1]);
    const bool bias_ok = n.operands.size() < 3 || g.value(n.operands[2]).kind == ValueKind::kParam;
    if (x.type.dtype != DType::kF32 || w.kind != ValueKind::kParam || w.type.shape.size() != 2 ||
        !bias_ok || x.type.shape.size() < 2) {
      continue;
    }
    lp.classes[i] = NodeClass::kPackedLinear;
    const auto& cs = consumers[n.output];
    if (cs.size() == 1 && !outputs.contains(n.output) && !eager(cs[0]) &&
        kEpilogues.contains(g.nodes()[cs[0]].op) &&
        g.value(g.nodes()[cs[0]].output).type.dtype == DType::kF32) {
      lp.classes[cs[0]] = NodeClass::kAbsorbed;
      lp.absorbed_by[cs[0]] = static_cast<int>(i);
    }
  }
  // conv2d with a parameter weight: packed once, absorbing the batch norm, residual add and
  // activation after it (the rules are in conv_chain.cpp).
  const Consumers conv_consumers = consumers_of(g, keep);
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    if (!config.packed_conv || eager(static_cast<int>(i)) || !packs_conv2d(g, g.nodes()[i])) {
      continue;
    }
    lp.classes[i] = NodeClass::kPackedConv;
    ConvChain chain = match_conv_chain(g, static_cast<int>(i), conv_consumers);
    if (chain.sigmoid >= 0 && (eager(chain.sigmoid) || eager(chain.act)))
      chain.sigmoid = chain.act = -1;  // a silu's two nodes are absorbed together or not at all
    for (int a : {chain.bn, chain.add, chain.sigmoid, chain.act}) {
      if (a >= 0 && eager(a)) break;  // what follows an eager node reads its result: not absorbed
      if (a < 0) continue;
      lp.classes[a] = NodeClass::kAbsorbed;
      lp.absorbed_by[a] = static_cast<int>(i);
    }
  }
  // A view whose layout needs a copy (reshape of a non-viewable view) runs as an extern copy.
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    if (lp.classes[i] != NodeClass::kView) continue;
    ValueId base;
    Shape shape, strides;
    int64_t offset;
    if (!view_layout(g, static_cast<int>(i), lp.classes, base, shape, strides, offset)) {
      lp.classes[i] = NodeClass::kExtern;
    }
  }
  // A constant is inlined into the kernels that read it; one that a view, an extern call or a GEMM
  // reads must exist as a tensor, so it is made by the eager kernel instead.
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    if (lp.classes[i] != NodeClass::kConstant) continue;
    for (int c : consumers[g.nodes()[i].output]) {
      if (lp.classes[c] != NodeClass::kPointwise && lp.classes[c] != NodeClass::kReduction)
        lp.classes[i] = NodeClass::kExtern;
    }
  }
  return lp;
}

}  // namespace crucible::codegen
