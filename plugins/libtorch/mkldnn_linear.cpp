// oneDNN's linear for the peer (see mkldnn_linear.h). aten::mkldnn_linear takes a oneDNN input of
// rank >= 2 (it flattens the leading dims) and gives a oneDNN result, converted back to dense.
#include "mkldnn_linear.h"

#include <fmt/format.h>

#include <cstdlib>
#include <stdexcept>

namespace crucible::libtorch {

namespace {

// CRUCIBLE_TEST_LINEAR_FAULT=wrong|throw, for tests only: a broken oneDNN path (the first element
// of each result off by 1, or an exception), so they can show that -c linear=auto discards it.
// The jit module's oneDNN calls are TorchScript's, not this function: only the eager mode and the
// auto probe (which both modes share) see the fault.
const std::string kTestFault = [] {
  const char* v = std::getenv("CRUCIBLE_TEST_LINEAR_FAULT");
  return std::string(v != nullptr ? v : "");
}();

}  // namespace

bool takes_mkldnn_linear(const Graph& g, const Node& n) {
  if (n.op != "linear") return false;
  for (ValueId v : n.operands) {
    if (g.value(v).type.dtype != DType::kF32) return false;
  }
  return g.value(n.output).type.dtype == DType::kF32 &&
         g.value(n.operands[0]).type.shape.size() >= 2 &&
         g.value(n.operands[1]).type.shape.size() == 2;
}

std::vector<at::Tensor> to_mkldnn_operands(const std::vector<at::Tensor>& operands) {
  std::vector<at::Tensor> out;
  for (size_t k = 1; k < operands.size(); ++k) out.push_back(operands[k].contiguous().to_mkldnn());
  return out;
}

at::Tensor run_mkldnn_linear(const std::vector<at::Tensor>& operands,
                             const std::vector<at::Tensor>& weights) {
  const std::vector<at::Tensor> w = weights.empty() ? to_mkldnn_operands(operands) : weights;
  const c10::optional<at::Tensor> bias =
      w.size() > 1 ? c10::optional<at::Tensor>(w[1]) : c10::nullopt;
  if (kTestFault == "throw") throw std::runtime_error("planted oneDNN failure");
  at::Tensor out = at::mkldnn_linear(operands[0].contiguous().to_mkldnn(), w[0], bias).to_dense();
  if (kTestFault == "wrong" && out.numel() > 0) out.view(-1)[0].add_(1.0);
  return out;
}

std::string mkldnn_linear_script(const std::string& x, const std::string& weight,
                                 const std::string& bias) {
  return fmt::format("torch.mkldnn_linear({}.contiguous().to_mkldnn(), {}, {}).to_dense()", x,
                     weight, bias.empty() ? "None" : bias);
}

}  // namespace crucible::libtorch
