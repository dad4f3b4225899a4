// Finding a graph's ties and deciding one the other way (see comparison_ties.h).
#include "comparison_ties.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <set>

#include "crucible/ir/transforms.h"
#include "crucible/ops/interpreter.h"

namespace crucible {

namespace {

const std::set<std::string> kComparisons = {"ge", "gt", "le", "lt", "eq", "ne"};

// `t`'s values broadcast to `shape` (NumPy's rule: missing leading dimensions are 1).
std::vector<double> broadcast_doubles(const Tensor& t, const Shape& shape) {
  if (t.shape() == shape) return t.to_doubles();
  Shape padded(shape.size() - t.shape().size(), 1);
  padded.insert(padded.end(), t.shape().begin(), t.shape().end());
  return t.reshape(padded).expand(shape).to_doubles();
}

// Runs a graph keeping each float comparison's operands as they were (f32 runs) or handing them,
// with the result's shape, to `seen` as they are made (the fp64 run).
class ComparisonWatch : public Interpreter {
 public:
  using Seen = std::function<void(int node, const Tensor& a, const Tensor& b, const Shape& out)>;
  ComparisonWatch(Graph g, Seen seen) : Interpreter(std::move(g)), seen_(std::move(seen)) {}

 protected:
  Tensor run_node(int node, std::span<const Tensor> operands) override {
    Tensor out = Interpreter::run_node(node, operands);
    if (is_float_comparison(graph(), graph().nodes()[static_cast<size_t>(node)]))
      seen_(node, operands[0], operands[1], out.shape());
    return out;
  }

 private:
  Seen seen_;
};

// The fp64 graph with one element of one comparison's result negated.
class TieFlip : public Interpreter {
 public:
  TieFlip(Graph g, Tie tie) : Interpreter(std::move(g)), tie_(tie) {}

 protected:
  Tensor run_node(int node, std::span<const Tensor> operands) override {
    Tensor out = Interpreter::run_node(node, operands);
    if (node != tie_.node) return out;
    Tensor flipped = out.clone();
    bool* at = flipped.data<bool>() + tie_.element;
    *at = !*at;
    return flipped;
  }

 private:
  Tie tie_;
};

double max_abs_diff(const std::vector<double>& x, const std::vector<double>& y) {
  double m = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    if (std::isfinite(x[i]) && std::isfinite(y[i])) m = std::max(m, std::abs(x[i] - y[i]));
  }
  return m;
}

}  // namespace

bool is_float_comparison(const Graph& g, const Node& n) {
  return kComparisons.count(n.op) != 0 && n.operands.size() == 2 &&
         is_floating(g.value(n.operands[0]).type.dtype);
}

bool has_float_comparison(const Graph& g) {
  return std::any_of(g.nodes().begin(), g.nodes().end(),
                     [&](const Node& n) { return is_float_comparison(g, n); });
}

std::vector<Tie> find_ties(const Graph& g, std::span<const Tensor> inputs, size_t cap,
                           size_t& total) {
  // The f32 run keeps its comparisons' operands (copies: the interpreter frees its values); the
  // fp64 run meets the same nodes (widening keeps every node in place) and judges each element.
  std::map<int, std::pair<Tensor, Tensor>> f32;
  ComparisonWatch(g, [&](int node, const Tensor& a, const Tensor& b, const Shape&) {
    f32[node] = {a.clone(), b.clone()};
  }).run(inputs);
  std::vector<Tie> ties;
  ComparisonWatch(widen_to_f64(g), [&](int node, const Tensor& a, const Tensor& b,
                                       const Shape& out) {
    auto it = f32.find(node);
    if (it == f32.end()) return;
    const std::vector<double> a32 = broadcast_doubles(it->second.first, out),
                              b32 = broadcast_doubles(it->second.second, out),
                              a64 = broadcast_doubles(a, out), b64 = broadcast_doubles(b, out);
    f32.erase(it);
    const double noise = kTieNoise * (max_abs_diff(a32, a64) + max_abs_diff(b32, b64));
    for (size_t i = 0; i < a64.size(); ++i) {
      const double m64 = a64[i] - b64[i], m32 = a32[i] - b32[i];
      if (!std::isfinite(m64) || std::abs(m64) > noise || (m64 == 0 && m32 == 0)) continue;
      ties.push_back({node, static_cast<int64_t>(i), m64, noise});
    }
  }).run(widen_inputs_to_f64(std::vector<Tensor>(inputs.begin(), inputs.end())));
  total = ties.size();
  std::sort(ties.begin(), ties.end(), [](const Tie& x, const Tie& y) {
    return std::abs(x.margin) * y.noise < std::abs(y.margin) * x.noise;
  });
  if (ties.size() > cap) ties.resize(cap);
  return ties;
}

std::vector<Tensor> fp64_with_tie_flipped(const Graph& g, std::span<const Tensor> inputs,
                                          const Tie& tie) {
  return TieFlip(widen_to_f64(g), tie)
      .run(widen_inputs_to_f64(std::vector<Tensor>(inputs.begin(), inputs.end())));
}

std::string describe_tie(const Graph& g, const Tie& tie) {
  const Node& n = g.nodes().at(static_cast<size_t>(tie.node));
  return fmt::format("%{}[{}] ({}, margin {:.2g} within {:.2g})", g.value(n.output).name,
                     tie.element, n.op, tie.margin, tie.noise);
}

}  // namespace crucible
