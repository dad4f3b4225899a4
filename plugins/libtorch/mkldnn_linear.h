// -c linear=mkldnn: an f32 linear through PyTorch 1.13's oneDNN inner product (aten::mkldnn_linear)
// instead of its BLAS GEMM, weights reordered into oneDNN's layout once, so the peer's best GEMM
// path is in the table too.
#pragma once

#include <ATen/ATen.h>

#include <string>
#include <vector>

#include "crucible/ir/graph.h"

namespace crucible::libtorch {

// An f32 linear whose input has a batch dimension: what aten::mkldnn_linear takes.
bool takes_mkldnn_linear(const Graph& g, const Node& n);

// The node's result through oneDNN; `weights` are the node's weight and bias operands already in
// oneDNN's layout (to_mkldnn_operands), or empty to convert them per call.
at::Tensor run_mkldnn_linear(const std::vector<at::Tensor>& operands,
                             const std::vector<at::Tensor>& weights);

// The weight and bias operands (operands 1, 2) in oneDNN's layout.
std::vector<at::Tensor> to_mkldnn_operands(const std::vector<at::Tensor>& operands);

// The TorchScript expression; `weight` and `bias` name oneDNN tensors ("" for a bias-less node).
std::string mkldnn_linear_script(const std::string& x, const std::string& weight,
                                 const std::string& bias);

}  // namespace crucible::libtorch
