// crucible's ops as ATen computes them: one entry per registry op, each giving the eager ATen call
// and the TorchScript expression of the same computation, so the two modes cannot drift apart.
#pragma once

#include <ATen/ATen.h>

#include <set>
#include <string>
#include <vector>

#include "crucible/ir/graph.h"

namespace crucible::libtorch {

// Throws plugin::CompileError "libtorch: OP ...: why" for a node ATen cannot compute with
// exactly crucible's semantics (an op or an attribute value without an equivalent).
void check_mappable(const Graph& g, const Node& n);

// The node's result computed by ATen from its operands (in the node's operand order).
at::Tensor run_aten(const Graph& g, const Node& n, const std::vector<at::Tensor>& operands);

// How the TorchScript source is written. `native_clamp`: a float clamp as torch.clamp /
// torch.hardtanh, which PyTorch 1.13's optimize_for_inference turns into MKLDNN ops that give
// wrong values after a convolution (see aten_ops.cpp); only to show that bug (-c clamp=native).
// `onednn_linears`: the node indices of the f32 linears that go through oneDNN (mkldnn_linear.h,
// chosen by -c linear=..., linear_choice.h).
struct ScriptStyle {
  bool native_clamp = false;
  std::set<size_t> onednn_linears;
};

// The node as a TorchScript expression over `operands` (names of TorchScript locals).
std::string script_expr(const Graph& g, const Node& n, const std::vector<std::string>& operands,
                        const ScriptStyle& style = {});

}  // namespace crucible::libtorch
