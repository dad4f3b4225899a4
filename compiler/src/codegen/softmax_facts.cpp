// Facts about softmax's decomposed form (amax, sub, exp, sum, div) that let the emitter drop work
// no result can observe: the exp's upper clamp and the row max's NaN tracking.
#include <algorithm>

#include "passes.h"

namespace crucible::codegen {

namespace {

const Node* producer(const Graph& g, ValueId v) {
  const Value& val = g.value(v);
  return val.kind == ValueKind::kNode ? &g.nodes()[static_cast<size_t>(val.node)] : nullptr;
}

// Every reader of `v` satisfies `ok`, and `v` is neither materialized (a graph output, a value
// kept for intermediates(), or one read by another kernel) nor missing readers.
template <typename Pred>
bool only_read_by(const Graph& g, ValueId v, const Consumers& consumers,
                  const std::vector<bool>& materialized, Pred ok) {
  const std::vector<int>& cs = consumers[v];
  return !materialized[v] && !cs.empty() &&
         std::all_of(cs.begin(), cs.end(), [&](int ni) { return ni >= 0 && ok(g.nodes()[ni]); });
}

// The same dims and keepdim, so both reduce the same rows.
bool same_reduction(const Node& a, const Node& b) { return a.attrs == b.attrs; }

}  // namespace

bool is_max_shifted(const Graph& g, ValueId v) {
  const Node* sub = producer(g, v);
  if (!sub || sub->op != "sub" || sub->operands.size() != 2) return false;
  const Node* amax = producer(g, sub->operands[1]);
  if (!amax || amax->op != "amax" || amax->operands.size() != 1 ||
      amax->operands[0] != sub->operands[0])
    return false;
  // The max must broadcast back onto the elements it was taken over: keepdim form or a scalar.
  const size_t rank = g.value(sub->operands[0]).type.shape.size();
  const size_t m_rank = g.value(sub->operands[1]).type.shape.size();
  return m_rank == rank || m_rank == 0;
}

// m = amax(x); s = sub(x, m); e = exp(s); S = sum(e) over the same dims; and every result is
// div(e, S) (softmax) or sub(s, log(S)) (log_softmax). A NaN in x's row makes its e NaN, hence S,
// hence every result of the row, whatever m is: the max need not find the NaN itself.
bool nan_reaches_results_through_sum(const Graph& g, int amax_node, const Consumers& consumers,
                                     const std::vector<bool>& materialized) {
  const Node& amax = g.nodes()[static_cast<size_t>(amax_node)];
  if (amax.op != "amax" || amax.operands.size() != 1) return false;
  const ValueId m = amax.output;
  if (consumers[m].size() != 1 || consumers[m][0] < 0) return false;
  const Node& sub = g.nodes()[static_cast<size_t>(consumers[m][0])];
  if (!is_max_shifted(g, sub.output) || sub.operands[1] != m) return false;
  const ValueId s = sub.output;
  const Node* exp = nullptr;
  for (int ni : consumers[s]) {
    if (ni >= 0 && g.nodes()[ni].op == "exp") exp = &g.nodes()[ni];
  }
  if (!exp) return false;
  const ValueId e = exp->output;
  const Node* sum = nullptr;
  for (int ni : consumers[e]) {
    if (ni >= 0 && g.nodes()[ni].op == "sum" && same_reduction(g.nodes()[ni], amax))
      sum = &g.nodes()[ni];
  }
  if (!sum) return false;
  const ValueId total = sum->output;
  auto is_log_of_sum = [&](ValueId v) {
    const Node* log = producer(g, v);
    return log && log->op == "log" && log->operands[0] == total;
  };
  const bool e_ok = only_read_by(g, e, consumers, materialized, [&](const Node& n) {
    return &n == sum || (n.op == "div" && n.operands[0] == e && n.operands[1] == total);
  });
  const bool s_ok = only_read_by(g, s, consumers, materialized, [&](const Node& n) {
    return &n == exp || (n.op == "sub" && n.operands[0] == s && is_log_of_sum(n.operands[1]));
  });
  return e_ok && s_ok && !materialized[m];
}

}  // namespace crucible::codegen
