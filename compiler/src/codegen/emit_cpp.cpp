// C++ emission: each kernel group becomes one extern "C" function over its buffers. Pointwise
// groups are one OpenMP-parallel SIMD loop nest; row groups run one SIMD pass per reduction and a
// final pass for the stores, recomputing fused pointwise values instead of storing them. Every
// statement is preceded by a comment naming the graph node it comes from.
#include <fmt/format.h>

#include <cmath>
#include <set>

#include "codegen/cpp_prelude.h"
#include "codegen/passes.h"
#include "crucible/core/error.h"
#include "ops/type_rules.h"

namespace crucible::codegen {

namespace {

std::string storage_type(DType t) {
  switch (t) {
    case DType::kBool:
      return "bool";
    case DType::kU8:
      return "uint8_t";
    case DType::kI32:
      return "int32_t";
    case DType::kI64:
      return "int64_t";
    case DType::kBF16:
      return "cr_bf16";
    case DType::kF32:
      return "float";
    case DType::kF64:
      return "double";
  }
  return "?";
}

std::string compute_type(DType t) { return t == DType::kBF16 ? "float" : storage_type(t); }

std::string literal(double v, DType t) {
  if (t == DType::kBool) return v != 0 ? "true" : "false";
  if (!is_floating(t))
    return fmt::format("static_cast<{}>({}LL)", storage_type(t), static_cast<int64_t>(v));
  if (t == DType::kBF16) v = static_cast<float>(BFloat16(static_cast<float>(v)));
  const std::string ct = compute_type(t);
  if (std::isnan(v)) return fmt::format("std::numeric_limits<{}>::quiet_NaN()", ct);
  if (std::isinf(v))
    return fmt::format("{}std::numeric_limits<{}>::infinity()", v < 0 ? "-" : "", ct);
  return fmt::format("static_cast<{}>({:.17g})", ct, v);
}

// Converts an expression of dtype `from` (in its compute type) to dtype `to` as eager's casts do.
std::string convert(const std::string& e, DType from, DType to) {
  if (from == to) return e;
  if (to == DType::kBool) return fmt::format("({} != 0)", e);
  if (!is_floating(to) && is_floating(from))
    return fmt::format("cr_float_to_int<{}>({})", storage_type(to), e);
  if (to == DType::kBF16) return fmt::format("cr_bf16_round(static_cast<float>({}))", e);
  return fmt::format("static_cast<{}>({})", compute_type(to), e);
}

struct Injection {
  std::string op;
  std::string kind;  // times2, no_cast, offbyone, bad_init, crash
};

// One access pattern of a buffer over the kernel's iteration dims.
struct Access {
  int arg = 0;
  Shape strides;  // per iteration dim (before coalescing)
  int64_t offset = 0;
  // after coalescing
  Shape outer_strides;
  int64_t inner_stride = 0;
};

class KernelEmitter {
 public:
  KernelEmitter(const Graph& g, const LoopProgram& lp, const MemoryPlan& mp, size_t gi,
                const Injection& inj)
      : g_(g), lp_(lp), mp_(mp), gi_(gi), grp_(lp.groups[gi]), inj_(inj) {
    full_ = grp_.outer;
    full_.insert(full_.end(), grp_.inner.begin(), grp_.inner.end());
    outer_rank_ = grp_.has_reduction ? grp_.outer.size() : full_.size();
    for (int ni : grp_.nodes) in_group_.insert(g_.nodes()[ni].output);
    const auto &ins = mp_.inputs[gi], &outs = mp_.outputs[gi];
    for (size_t k = 0; k < ins.size(); ++k) arg_of_[ins[k]] = static_cast<int>(k);
    for (size_t k = 0; k < outs.size(); ++k) out_arg_[outs[k]] = static_cast<int>(ins.size() + k);
  }

  std::string emit() {
    collect_accesses();
    coalesce();
    std::string body;
    const std::string name = grp_.name;
    std::string out =
        fmt::format("// {}: {} node(s) over {}{}\n", name, grp_.nodes.size(), shape_str(grp_.outer),
                    grp_.has_reduction ? " x reduce " + shape_str(grp_.inner) : "");
    out += fmt::format("extern \"C\" void {}(void** args) {{\n", name);
    if (crashes())
      out +=
          "  { volatile int* crash = nullptr; *crash = 1; }  // injected: " + inj_.op + ":crash\n";
    out += declare_args();
    if (flat_) {
      out += emit_flat();
    } else {
      out += emit_rows();
    }
    out += "}\n";
    return out;
  }

 private:
  bool crashes() const {
    if (inj_.kind != "crash") return false;
    for (int ni : grp_.nodes) {
      if (g_.nodes()[ni].op == inj_.op) return true;
    }
    return false;
  }

  std::string declare_args() {
    std::string s;
    const auto &ins = mp_.inputs[gi_], &outs = mp_.outputs[gi_];
    std::set<int> aliased;
    for (size_t k = 0; k < outs.size(); ++k) {
      if (mp_.in_place[gi_][k] >= 0) {
        aliased.insert(mp_.in_place[gi_][k]);
        aliased.insert(static_cast<int>(ins.size() + k));
      }
    }
    for (size_t k = 0; k < ins.size() + outs.size(); ++k) {
      const bool is_in = k < ins.size();
      const Value& v = g_.value(is_in ? ins[k] : outs[k - ins.size()]);
      const std::string t = storage_type(v.type.dtype);
      // restrict only where no other argument shares the buffer (in-place pairs do).
      s += fmt::format(
          "  {}{}* {}a{} = static_cast<{}{}*>(args[{}]);  // %{}{}\n", is_in ? "const " : "", t,
          aliased.contains(static_cast<int>(k)) ? "" : "__restrict ", k, is_in ? "const " : "", t,
          k, v.name, aliased.contains(static_cast<int>(k)) ? " (in place)" : "");
    }
    return s;
  }

  // The layout of a buffer-backed value: contiguous, or a view's static strides over its base.
  void layout_of(ValueId v, ValueId& base, Shape& shape, Shape& strides, int64_t& offset) const {
    const Value& val = g_.value(v);
    if (val.kind == ValueKind::kNode && lp_.classes[val.node] == NodeClass::kView) {
      if (!view_layout(g_, val.node, lp_.classes, base, shape, strides, offset)) {
        throw Error(fmt::format("codegen: view %{} has no static layout", val.name));
      }
      return;
    }
    base = v;
    shape = val.type.shape;
    strides = contiguous_strides(shape);
    offset = 0;
  }

  // Strides over the full iteration dims for reading `v` where `at` (a node output shape) is
  // computed.
  Access make_access(ValueId v, const Shape& at, bool store) {
    ValueId base;
    Shape shape, strides;
    int64_t offset;
    if (store) {
      base = v;
      shape = g_.value(v).type.shape;
      strides = contiguous_strides(shape);
      offset = 0;
    } else {
      layout_of(v, base, shape, strides, offset);
    }
    // Broadcast to `at` (right-aligned; size-1 dims read with stride 0).
    Shape b(at.size(), 0);
    for (size_t i = 0; i < shape.size(); ++i) {
      const size_t d = at.size() - shape.size() + i;
      b[d] = shape[i] == 1 ? 0 : strides[i];
    }
    // Map `at` onto the iteration dims: full-row values cover them all; per-row values cover the
    // outer dims (keepdim form: the first |outer| dims of `at`) and read stride 0 along the inner
    // ones.
    Access a;
    a.arg = store ? out_arg_.at(v) : arg_of_.at(base);
    a.offset = offset;
    a.strides.assign(full_.size(), 0);
    if (at == full_) {
      a.strides = b;
    } else if (!grp_.has_reduction) {
      // A narrower value recomputed across a widened pointwise group: broadcast `at` onto the
      // group.
      for (size_t i = 0; i < at.size(); ++i) {
        const size_t d = full_.size() - at.size() + i;
        a.strides[d] = at[i] == 1 && full_[d] != 1 ? 0 : b[i];
      }
    } else {
      for (size_t d = 0; d < grp_.outer.size(); ++d) a.strides[d] = b[d];
    }
    return a;
  }

  // Every load and store of the kernel, registered so that coalescing sees all of them.
  void collect_accesses() {
    for (int ni : grp_.nodes) {
      const Node& n = g_.nodes()[ni];
      // A reduction reads its operand element by element; everything else at its own result's
      // shape.
      const Shape& at =
          lp_.classes[ni] == NodeClass::kReduction ? full_ : g_.value(n.output).type.shape;
      for (ValueId o : n.operands) {
        if (in_group_.contains(o) || is_constant(o)) continue;
        access_key(o, at, false);
      }
      if (mp_.materialized[n.output]) access_key(n.output, g_.value(n.output).type.shape, true);
    }
  }

  int access_key(ValueId v, const Shape& at, bool store) {
    const std::string key = fmt::format("{}|{}|{}", v, shape_str(at), store);
    auto it = access_index_.find(key);
    if (it != access_index_.end()) return it->second;
    if (coalesced_) {
      throw Error(
          fmt::format("codegen internal error: {} reads %{} at {} after its accesses were laid out",
                      grp_.name, g_.value(v).name, shape_str(at)));
    }
    accesses_.push_back(make_access(v, at, store));
    access_index_[key] = static_cast<int>(accesses_.size()) - 1;
    return static_cast<int>(accesses_.size()) - 1;
  }

  // Merges adjacent iteration dims that are contiguous for every access (never across the boundary
  // between outer and reduced dims), so that contiguous tensors become one long SIMD loop.
  void coalesce() {
    coalesced_ = true;
    auto merge_range = [&](size_t begin, size_t end, Shape& dims, std::vector<Shape>& per_access) {
      per_access.assign(accesses_.size(), {});
      for (size_t d = begin; d < end; ++d) {
        if (full_[d] == 1) continue;
        bool merge = !dims.empty();
        for (size_t a = 0; a < accesses_.size() && merge; ++a) {
          merge = per_access[a].back() == accesses_[a].strides[d] * full_[d];
        }
        if (merge) {
          dims.back() *= full_[d];
          for (size_t a = 0; a < accesses_.size(); ++a)
            per_access[a].back() = accesses_[a].strides[d];
        } else {
          dims.push_back(full_[d]);
          for (size_t a = 0; a < accesses_.size(); ++a)
            per_access[a].push_back(accesses_[a].strides[d]);
        }
      }
    };
    std::vector<Shape> outer_strides, inner_strides;
    if (!grp_.has_reduction) {
      merge_range(0, full_.size(), outer_dims_, outer_strides);
      if (outer_dims_.size() <= 1) {
        flat_ = true;
        n_ = outer_dims_.empty() ? 1 : outer_dims_[0];
        for (size_t a = 0; a < accesses_.size(); ++a) {
          accesses_[a].inner_stride = outer_strides[a].empty() ? 0 : outer_strides[a][0];
        }
        outer_dims_.clear();
        return;
      }
      // Rows = every dim but the last; the last is the SIMD loop.
      n_ = outer_dims_.back();
      outer_dims_.pop_back();
      for (size_t a = 0; a < accesses_.size(); ++a) {
        accesses_[a].inner_stride = outer_strides[a].back();
        outer_strides[a].pop_back();
        accesses_[a].outer_strides = outer_strides[a];
      }
      return;
    }
    merge_range(0, outer_rank_, outer_dims_, outer_strides);
    Shape inner_dims;
    merge_range(outer_rank_, full_.size(), inner_dims, inner_strides);
    if (inner_dims.size() > 1) {
      throw Error(fmt::format(
          "codegen: {} reads its reduced dims {} in a layout that is not one strided run",
          grp_.name, shape_str(grp_.inner)));
    }
    n_ = inner_dims.empty() ? 1 : inner_dims[0];
    for (size_t a = 0; a < accesses_.size(); ++a) {
      accesses_[a].outer_strides = outer_strides[a];
      accesses_[a].inner_stride = inner_strides[a].empty() ? 0 : inner_strides[a][0];
    }
  }

  bool is_constant(ValueId v) const {
    const Value& val = g_.value(v);
    return val.kind == ValueKind::kNode && lp_.classes[val.node] == NodeClass::kConstant;
  }

  int64_t rows() const {
    int64_t r = 1;
    for (int64_t d : outer_dims_) r *= d;
    return r;
  }

  // Per-row offset variables of every access.
  std::string row_offsets() {
    std::string s;
    if (outer_dims_.size() > 1) {
      s += "    int64_t rem = r;\n";
      for (size_t d = outer_dims_.size(); d-- > 1;) {
        s += fmt::format("    const int64_t i{} = rem % {}; rem /= {};\n", d, outer_dims_[d],
                         outer_dims_[d]);
      }
      s += "    const int64_t i0 = rem;\n";
    }
    for (size_t a = 0; a < accesses_.size(); ++a) {
      std::string e = fmt::format("{}", accesses_[a].offset);
      for (size_t d = 0; d < outer_dims_.size(); ++d) {
        const int64_t st = accesses_[a].outer_strides[d];
        if (st == 0) continue;
        e += fmt::format(" + {} * {}", outer_dims_.size() > 1 ? fmt::format("i{}", d) : "r", st);
      }
      s += fmt::format("    const int64_t o{} = {};\n", a, e);
    }
    return s;
  }

  std::string index(int a, bool element, bool off_by_one) const {
    const std::string base = flat_ ? fmt::format("{}", accesses_[a].offset) : fmt::format("o{}", a);
    const int64_t st = accesses_[a].inner_stride;
    if (!element || st == 0) return base;
    const std::string j = off_by_one ? "(j + 1)" : "j";
    return st == 1 ? fmt::format("{} + {}", base, j) : fmt::format("{} + {} * {}", base, j, st);
  }

  // ---- expression emission
  struct Scope {
    std::string* stmts;
    std::map<ValueId, std::string>* vars;
    bool element;
  };

  std::string load(ValueId v, const Shape& at, const Scope& sc, bool off_by_one) {
    const int a = access_key(v, at, false);
    const std::string key = fmt::format("load{}{}", a, off_by_one ? "+1" : "");
    auto& cache = sc.element ? elem_loads_ : row_loads_;
    auto it = cache.find(key);
    if (it != cache.end()) return it->second;
    const std::string var = fresh();
    std::string e = fmt::format("a{}[{}]", accesses_[a].arg, index(a, sc.element, off_by_one));
    if (g_.value(v).type.dtype == DType::kBF16) e = fmt::format("cr_bf16_load({})", e);
    *sc.stmts +=
        fmt::format("{}auto {} = {};  // load %{}\n", indent(sc), var, e, g_.value(v).name);
    cache[key] = var;
    return var;
  }

  std::string indent(const Scope& sc) const { return sc.element ? "      " : "    "; }
  std::string fresh() { return fmt::format("t{}", counter_++); }

  bool is_row_scalar(ValueId v) const {
    return grp_.has_reduction && g_.value(v).type.shape != full_;
  }

  // The variable holding `v` in scope `sc` (emitting its computation first if needed).
  std::string value(ValueId v, Scope sc, const Shape& at, bool off_by_one = false) {
    const Value& val = g_.value(v);
    if (is_constant(v)) {
      const Node& n = g_.nodes()[val.node];
      return literal(n.attrs.get_float("value"), val.type.dtype);
    }
    if (!in_group_.contains(v)) return load(v, at, sc, off_by_one);
    if (is_row_scalar(v) && sc.element) sc = row_scope_;  // computed once per row
    auto it = sc.vars->find(v);
    if (it != sc.vars->end()) return it->second;
    const Node& n = g_.nodes()[val.node];
    if (lp_.classes[val.node] == NodeClass::kReduction) {
      throw Error(fmt::format("codegen: %{} is read before its reduction pass", val.name));
    }
    const bool shift = inj_.kind == "offbyone" && n.op == inj_.op;
    std::vector<std::string> ops;
    for (ValueId o : n.operands) ops.push_back(value(o, sc, val.type.shape, shift && sc.element));
    const std::string var = fresh();
    *sc.stmts += fmt::format("{}// %{} = {}\n", indent(sc), val.name, describe(n));
    *sc.stmts += fmt::format("{}auto {} = {};\n", indent(sc), var, expression(n, ops));
    (*sc.vars)[v] = var;
    return var;
  }

  std::string describe(const Node& n) const {
    std::string args;
    for (ValueId o : n.operands)
      args += fmt::format("{}%{}", args.empty() ? "" : ", ", g_.value(o).name);
    return fmt::format("{}({})", n.op, args);
  }

  std::string expression(const Node& n, const std::vector<std::string>& a) {
    const DType out = g_.value(n.output).type.dtype;
    std::vector<TensorType> types;
    for (ValueId o : n.operands) types.push_back(g_.value(o).type);
    auto in = [&](size_t i) { return types[i].dtype; };
    const std::string& op = n.op;
    std::string e;
    DType ct = out;
    auto c = [&](size_t i, DType to) { return convert(a[i], in(i), to); };
    if (op == "neg") {
      if (inj_.op == "neg" && inj_.kind == "no_cast")
        return "-" + a[0];  // the tutorial's compile error
      e = inj_.op == "neg" && inj_.kind == "times2" ? fmt::format("2 * {}", a[0])
                                                    : fmt::format("cr_neg({})", a[0]);
    } else if (op == "abs" || op == "relu") {
      e = fmt::format("cr_{}({})", op, a[0]);
    } else if (op == "exp" || op == "log" || op == "sqrt" || op == "sin" || op == "cos" ||
               op == "tanh" || op == "erf") {
      e = fmt::format("std::{}({})", op, a[0]);
    } else if (op == "rsqrt") {
      e = fmt::format("{0}(1) / std::sqrt({1})", compute_type(out), a[0]);
    } else if (op == "reciprocal") {
      e = fmt::format("{0}(1) / {1}", compute_type(out), a[0]);
    } else if (op == "sigmoid") {
      e = fmt::format("{0}(1) / ({0}(1) + std::exp(-{1}))", compute_type(out), a[0]);
    } else if (op == "gelu") {
      const std::string t = compute_type(out);
      if (n.attrs.get_string_or("approximate", "none") == "tanh") {
        e = fmt::format(
            "{0}(0.5) * {1} * ({0}(1) + std::tanh({0}(0.79788456080286535588) * ({1} + "
            "{0}(0.044715) * {1} "
            "* {1} * {1})))",
            t, a[0]);
      } else {
        e = fmt::format("{0}(0.5) * {1} * ({0}(1) + std::erf({1} * {0}(0.70710678118654752440)))",
                        t, a[0]);
      }
    } else if (op == "add" || op == "sub" || op == "mul" || op == "maximum" || op == "minimum") {
      ct = result_type(types);
      e = fmt::format("cr_{}({}, {})", op, c(0, ct), c(1, ct));
    } else if (op == "div") {
      ct = to_floating(result_type(types));
      e = fmt::format("{} / {}", c(0, ct), c(1, ct));
    } else if (op == "pow") {
      ct = result_type(types);
      e = fmt::format("std::pow({}, {})", c(0, ct), c(1, ct));
    } else if (op == "eq" || op == "ne" || op == "lt" || op == "le" || op == "gt" || op == "ge") {
      static const std::map<std::string, std::string> kSym = {
          {"eq", "=="}, {"ne", "!="}, {"lt", "<"}, {"le", "<="}, {"gt", ">"}, {"ge", ">="}};
      const DType pt = result_type(types);
      e = fmt::format("({} {} {})", c(0, pt), kSym.at(op), c(1, pt));
      ct = DType::kBool;
    } else if (op == "where") {
      std::vector<TensorType> ab{types[1], types[2]};
      ct = result_type(ab);
      e = fmt::format("({} ? {} : {})", a[0], c(1, ct), c(2, ct));
    } else if (op == "cast") {
      return convert(a[0], in(0), out);
    } else if (op == "clamp") {
      e = a[0];
      const std::string t = compute_type(out);
      auto lo = n.attrs.get_optional_float("min"), hi = n.attrs.get_optional_float("max");
      if ((lo && std::isnan(*lo)) || (hi && std::isnan(*hi))) {
        e = literal(NAN, out);
      } else {
        if (lo) e = fmt::format("({0} < {1} ? {1} : {0})", e, literal(*lo, out));
        if (hi) e = fmt::format("({0} > {1} ? {1} : {0})", e, literal(*hi, out));
      }
    } else if (op == "cat") {
      e = a[0];
    } else {
      throw Error(fmt::format("codegen: no lowering for {}", op));
    }
    // Round (bf16) or narrow to the node's own dtype, as eager stores each op's result.
    if (ct != out) e = convert(e, ct, out);
    if (out == DType::kBF16) return fmt::format("cr_bf16_round({})", e);
    return fmt::format("static_cast<{}>({})", compute_type(out), e);
  }

  std::string stores(const Scope& sc, bool element) {
    std::string s;
    for (int ni : grp_.nodes) {
      const ValueId v = g_.nodes()[ni].output;
      if (!mp_.materialized[v] || is_row_scalar(v) == element) continue;
      const std::string var = value(v, sc, g_.value(v).type.shape);
      const int a = access_key(v, g_.value(v).type.shape, true);
      std::string e = var;
      if (g_.value(v).type.dtype == DType::kBF16) e = fmt::format("cr_bf16_store({})", var);
      s += fmt::format("{}a{}[{}] = {};  // store %{}\n", indent(sc), accesses_[a].arg,
                       index(a, element, false), e, g_.value(v).name);
    }
    return s;
  }

  std::string emit_flat() {
    std::string stmts;
    std::map<ValueId, std::string> vars;
    Scope sc{&stmts, &vars, true};
    row_scope_ = sc;
    const std::string st = stores(sc, true);
    return fmt::format(
        "#pragma omp parallel for simd schedule(static) if ({} >= {})\n  for (int64_t j = 0; j < "
        "{}; ++j) "
        "{{\n{}{}  }}\n",
        n_, kParallelMin, n_, stmts, st);
  }

  std::string emit_rows() {
    std::string row;  // per-row statements, in order
    std::map<ValueId, std::string> row_vars;
    row_scope_ = Scope{&row, &row_vars, false};
    std::string passes;
    for (int ni : grp_.nodes) {
      if (lp_.classes[ni] != NodeClass::kReduction) continue;
      passes += reduction_pass(ni, row, row_vars);
    }
    // The final pass: every stored full-row value.
    std::string elem;
    std::map<ValueId, std::string> elem_vars;
    elem_loads_.clear();
    Scope sc{&elem, &elem_vars, true};
    const std::string st = stores(sc, true);
    std::string final_pass;
    if (!st.empty()) {
      final_pass = fmt::format(
          "{}    #pragma omp simd\n    for (int64_t j = 0; j < {}; ++j) {{\n{}{}    }}\n", row, n_,
          elem, st);
      row.clear();
    }
    const std::string row_stores = stores(row_scope_, false);
    const std::string offsets = row_offsets();  // after every access is known
    return fmt::format(
        "  #pragma omp parallel for schedule(static) if ({} >= {})\n  for (int64_t r = 0; r < {}; "
        "++r) {{\n{}{}{}{}{}  }}\n",
        rows() * n_, kParallelMin, rows(), offsets, passes, final_pass, row, row_stores);
  }

  // One SIMD pass computing reduction node `ni` for the current row. Per-row statements it needs
  // are emitted before the loop (flushed from `row`).
  std::string reduction_pass(int ni, std::string& row, std::map<ValueId, std::string>& row_vars) {
    const Node& n = g_.nodes()[ni];
    const DType dt = g_.value(n.output).type.dtype;
    const std::string acc_t = dt == DType::kF64 ? "double" : "float";
    std::string elem;
    std::map<ValueId, std::string> elem_vars;
    elem_loads_.clear();
    Scope sc{&elem, &elem_vars, true};
    const bool shift = inj_.kind == "offbyone" && n.op == inj_.op;
    const std::string x = value(n.operands[0], sc, full_, shift);
    const std::string acc = fresh(), nan = acc + "_nan";
    const bool bad_init = inj_.kind == "bad_init" && inj_.op == n.op;
    std::string init, update, pragma, finish;
    if (n.op == "sum" || n.op == "mean") {
      init = fmt::format("{} {} = {};", acc_t, acc, bad_init ? "1" : "0");
      update = fmt::format("{} += static_cast<{}>({});", acc, acc_t, x);
      pragma = fmt::format("reduction(+ : {})", acc);
      finish = n.op == "mean" ? fmt::format("{} / static_cast<{}>({})", acc, acc_t, n_) : acc;
    } else {
      const bool mx = n.op == "amax";
      init = fmt::format(
          "{} {} = {}; int {} = 0;", acc_t, acc,
          bad_init ? "0"
                   : fmt::format("{}std::numeric_limits<{}>::infinity()", mx ? "-" : "", acc_t),
          nan);
      update =
          fmt::format("{0} = ({1} {2} {0}) ? static_cast<{3}>({1}) : {0}; {4} |= ({1} != {1});",
                      acc, x, mx ? ">" : "<", acc_t, nan);
      pragma = fmt::format("reduction({} : {}) reduction(| : {})", mx ? "max" : "min", acc, nan);
      finish = fmt::format("({} ? std::numeric_limits<{}>::quiet_NaN() : {})", nan, acc_t, acc);
    }
    const std::string var = fresh();
    std::string s = row;
    row.clear();
    s += fmt::format(
        "    // %{} = {}\n    {}\n    #pragma omp simd {}\n    for (int64_t j = 0; j < {}; ++j) "
        "{{\n{}      "
        "{}\n    }}\n",
        g_.value(n.output).name, describe(n), init, pragma, n_, elem, update);
    std::string result = finish;
    if (dt == DType::kBF16) result = fmt::format("cr_bf16_round({})", finish);
    s += fmt::format("    const auto {} = static_cast<{}>({});\n", var, compute_type(dt), result);
    row_vars[n.output] = var;
    return s;
  }

  static constexpr int64_t kParallelMin = 32768;  // elements below which a kernel stays serial

  const Graph& g_;
  const LoopProgram& lp_;
  const MemoryPlan& mp_;
  size_t gi_;
  const Group& grp_;
  Injection inj_;
  Shape full_;
  size_t outer_rank_ = 0;
  std::set<ValueId> in_group_;
  std::map<ValueId, int> arg_of_, out_arg_;
  std::vector<Access> accesses_;
  std::map<std::string, int> access_index_;
  Shape outer_dims_;
  int64_t n_ = 1;
  bool flat_ = false;
  bool coalesced_ = false;
  int counter_ = 0;
  Scope row_scope_{nullptr, nullptr, false};
  std::map<std::string, std::string> elem_loads_, row_loads_;
};

Injection parse_injection(const std::map<std::string, std::string>& config) {
  Injection inj;
  auto it = config.find("inject");
  if (it == config.end()) return inj;
  const std::string& spec = it->second;
  const size_t colon = spec.find(':');
  static const std::set<std::string> kKinds = {"times2", "no_cast", "offbyone", "bad_init",
                                               "crash"};
  if (colon == std::string::npos || !kKinds.contains(spec.substr(colon + 1))) {
    throw Error(fmt::format(
        "codegen: -c inject={} is not OP:KIND with KIND one of times2, no_cast, offbyone, "
        "bad_init, crash",
        spec));
  }
  inj.op = spec.substr(0, colon);
  inj.kind = spec.substr(colon + 1);
  if ((inj.kind == "times2" || inj.kind == "no_cast") && inj.op != "neg") {
    throw Error(fmt::format("codegen: -c inject={}: {} applies to neg only", spec, inj.kind));
  }
  return inj;
}

}  // namespace

EmitResult emit_cpp(const Graph& g, const LoopProgram& lp, const MemoryPlan& mp,
                    const std::map<std::string, std::string>& config) {
  const Injection inj = parse_injection(config);
  size_t per_tu = 16;
  if (config.contains("kernels_per_unit"))
    per_tu = std::max<size_t>(1, std::stoul(config.at("kernels_per_unit")));
  EmitResult r;
  std::vector<std::string> kernels;
  for (size_t gi = 0; gi < lp.groups.size(); ++gi) {
    if (lp.groups[gi].kind != Group::Kind::kKernel) continue;
    kernels.push_back(KernelEmitter(g, lp, mp, gi, inj).emit());
  }
  for (size_t k = 0; k < kernels.size(); k += per_tu) {
    std::string tu = kCppPrelude;
    for (size_t i = k; i < std::min(kernels.size(), k + per_tu); ++i) tu += "\n" + kernels[i];
    r.output_code += fmt::format("// ===== translation unit {} =====\n{}\n", r.sources.size(), tu);
    r.sources.push_back(std::move(tu));
  }
  return r;
}

}  // namespace crucible::codegen
