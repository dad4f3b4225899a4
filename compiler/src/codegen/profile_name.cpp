// The name a step's time is recorded under when profiling: its kernel's name, and for a packed
// convolution or linear the problem's geometry, so a profile says which layers the time went to.
#include <fmt/format.h>

#include "crucible/codegen/program.h"

namespace crucible::codegen {

namespace {

// "dw3x3", "1x1", "3x3/s2", "g32 3x3", "7x7/s2 d2": depthwise or grouped, the kernel, then stride
// and dilation when not 1.
std::string conv_geometry(const Graph& g, const Node& conv) {
  const Shape& w = g.value(conv.operands[1]).type.shape;  // [O, C/groups, kH, kW]
  const int64_t groups = conv.attrs.get_int_or("groups", 1);
  const int64_t channels = g.value(conv.operands[0]).type.shape[1];
  auto hw = [&](const char* name) {
    if (!conv.attrs.has(name)) return std::string();
    const std::vector<int64_t>& v = conv.attrs.get_ints(name);
    if (v.empty() || (v[0] == 1 && (v.size() == 1 || v[1] == 1))) return std::string();
    return v.size() == 1 || v[0] == v[1] ? fmt::format("{}", v[0])
                                         : fmt::format("{}x{}", v[0], v[1]);
  };
  std::string out = groups > 1 && groups == channels ? "dw"
                    : groups > 1                     ? fmt::format("g{} ", groups)
                                                     : "";
  out += fmt::format("{}x{}", w[2], w[3]);
  if (const std::string s = hw("stride"); !s.empty()) out += "/s" + s;
  if (const std::string d = hw("dilation"); !d.empty()) out += " d" + d;
  return out;
}

}  // namespace

std::string profile_name(const Graph& graph, const Step& step) {
  if (step.kind == Step::Kind::kPackedConv) {
    return fmt::format("{}[{}]", step.name,
                       conv_geometry(graph, graph.nodes()[static_cast<size_t>(step.node)]));
  }
  if (step.kind == Step::Kind::kPackedLinear && !step.outputs.empty()) {
    const Shape& w = graph.value(step.weight).type.shape;
    const int64_t k = step.weight_nk ? w[1] : w[0], n = step.weight_nk ? w[0] : w[1];
    const int64_t m = n != 0 ? graph.value(step.outputs[0]).type.numel() / n : 0;
    return fmt::format("{}[{}x{}x{}]", step.name, m, k, n);
  }
  return step.name;
}

}  // namespace crucible::codegen
