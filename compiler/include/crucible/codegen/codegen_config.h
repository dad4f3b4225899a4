// The codegen backend's -c options, parsed once into types: every pass reads fields, and an
// unknown key or a malformed value is one error here, never a silent default somewhere else.
#pragma once

#include <cstddef>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace crucible::codegen {

// The ops decompose() may rewrite into simpler ones (-c no_decompose=OP keeps one whole).
const std::vector<std::string>& decomposed_ops();

// A planted bug (-c inject=OP:KIND, or OP:KIND@NAME for the one node whose value is %NAME) for
// testing the harness and the minifier end to end.
struct Injection {
  std::string op;
  std::string kind;  // times2, no_cast, offbyone, bad_init, crash; empty: none
  std::string node;  // a value name: only that node; empty: every node of `op`
  bool active() const { return !kind.empty(); }
  // Whether the bug is planted in a node of op `node_op` whose value is named `value`.
  bool hits(const std::string& node_op, const std::string& value) const {
    return active() && op == node_op && (node.empty() || node == value);
  }
};

struct CodegenConfig {
  bool fusion = true;           // fusion=on|off
  size_t max_fusion_size = 64;  // max_fusion_size=N (N >= 1): nodes per fused kernel
  // max_fusion_distance=N (N >= 1): a node whose result is 64 KiB or more joins a kernel only if
  // at most N graph nodes lie between where that kernel runs and the node. Joining a kernel far
  // back computes the node there, and its result lives from there to its last reader: a training
  // step's recomputed values, fused into the forward's kernels, were all alive when the backward
  // began (near_enough in fusion.cpp).
  size_t max_fusion_distance = 64;
  size_t kernels_per_unit = 16;  // kernels_per_unit=N (N >= 1): kernels per translation unit
  bool fast_math = false;        // fast_math=on|off: -ffast-math for the generated code
  std::string debug_dir;         // debug_dir=D: where the pass dumps go
  Injection inject;              // inject=OP:KIND[@NAME]
  // For bisecting a bug to a pass or a kernel (the minifier's kernel bisection):
  bool packed_linear = true;  // packed_linear=on|off: linear/matmul via oneDNN, packed
  bool packed_conv = true;    // packed_conv=on|off: conv2d packed, absorbing bn/add/act
  // batch_slices=on|off: runs of packed convs whose activations outgrow the cache run a slice of
  // the batch at a time, through buffers that stay in it (batch_slices.cpp); slice_budget_mb=N
  // is the bytes a slice's step may read and write together.
  bool batch_slices = true;
  size_t slice_budget_mb = 16;
  // channels_last=on|off: chains of packed convs keep a channels-inner layout, the one
  // chain_layout=auto|nhwc|nchw8c names (auto: preferred_chain_layout() in packed_conv.h).
  bool channels_last = true;
  std::string chain_layout = "auto";
  // chain_kernels=on|off: generated pointwise kernels and spatial means join those chains
  // (chain_kernels.cpp); off, a chain ends before them.
  bool chain_kernels = true;
  // conv_algorithm=direct|winograd|fastest: a 3x3 stride-1 packed conv's algorithm (fastest:
  // Winograd when timed clearly faster at compile time; see ConvAlgorithm in ops/packed_conv.h).
  std::string conv_algorithm = "fastest";
  std::set<std::string> no_decompose;  // no_decompose=OP,OP: these ops are not decomposed
  std::set<std::string> eager_nodes;   // eager_nodes=NAME,NAME: these nodes run as extern calls
                                       // of the registry's (eager's) kernel, outside any fusion

  // Parses `-c key=value` pairs. Booleans take on|off|true|false; counts are positive decimal
  // integers. Throws Error naming the key, the value and what is accepted.
  static CodegenConfig parse(const std::map<std::string, std::string>& pairs);
};

}  // namespace crucible::codegen
