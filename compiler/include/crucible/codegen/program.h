// The codegen pipeline's result: a schedule of steps (generated kernels, extern calls, views) over
// the decomposed graph, plus the C++ translation units that hold the kernels and every pass's dump.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "crucible/codegen/codegen_config.h"
#include "crucible/ir/graph.h"
#include "crucible/ops/packed_conv.h"

namespace crucible::codegen {

struct CodegenOptions {
  CodegenConfig config;  // the parsed -c options
  int threads = 0;
  // Values of the source graph to keep for Executable::intermediates: each is stored as an extra
  // output of the kernel computing it (and a packed GEMM's value before its epilogue by a second
  // call without it), with the fusion otherwise unchanged, so what is compared is the fused code.
  std::vector<ValueId> keep;
};

struct Step {
  enum class Kind { kKernel, kExtern, kView, kPackedLinear, kPackedConv };
  Kind kind = Kind::kKernel;
  std::string name;        // cpp_fused_<ops>_<n>, extern::<op>, extern::packed_... or view::<op>
  std::vector<int> nodes;  // every graph node the step computes (a packed step: what it absorbed)
  // kKernel: the generated function's arguments, inputs then outputs (base buffers, by value id).
  std::vector<ValueId> inputs;
  std::vector<ValueId> outputs;
  // For each output, the index into `inputs` whose buffer it reuses in place, or -1.
  std::vector<int> in_place;
  // kExtern / kView: the graph node it runs.
  int node = -1;
  // kPackedLinear: y = epilogue(x @ W^T + b) with W (and b) parameters packed once at compile time;
  // inputs = {x}, outputs = {y}. bias is -1 when absent; weight_nk is false for matmul's [K,N]
  // weight.
  ValueId weight = -1, bias = -1;
  bool weight_nk = true;
  std::string epilogue = "none";
  // kPackedLinear with an epilogue: the value before it, when kept (else -1).
  ValueId raw = -1;
  // kPackedConv: the conv2d `node` with its weight (and bias) packed once at compile time, folding
  // in the batch_norm node `bn_node` and fusing an add of `residual` and the relu/clamp node
  // `act_node` (each -1 when absent); inputs = {x} or {x, residual}, outputs = {y}.
  int bn_node = -1, act_node = -1;
  ValueId residual = -1;
  // kPackedConv, and kExtern of a max_pool2d: how x (inputs[0]) and y (with the residual) lie in
  // their buffers; only such steps ever read a value that is not NCHW (conv_layouts.cpp).
  ActivationLayout x_layout = ActivationLayout::kNchw, y_layout = ActivationLayout::kNchw;
  // kView: the static layout of outputs[0] over the base buffer inputs[0].
  Shape view_shape, view_strides;
  int64_t view_offset = 0;
};

// Steps [first, last] of the schedule run `images` images of the batch at a time: each step on
// the first slice, then each on the next, so the values made and used only inside them live in
// slice-sized buffers the cache keeps (batch_slices.cpp chooses them).
struct BatchSlice {
  size_t first = 0, last = 0;
  int64_t images = 0;
};

struct Program {
  Graph source;  // as compiled, before decompositions (intermediates() builds variants from it)
  Graph graph;   // after decompositions; value ids below refer to it
  std::vector<ValueId> value_of;  // per value of `source`: the value of `graph` standing for it
  std::vector<Step> steps;
  std::vector<BatchSlice> batch_slices;      // disjoint, in schedule order
  std::vector<std::string> sources;          // translation units, kernels split across them
  std::map<std::string, std::string> dumps;  // file name -> text (ir_pre_fusion.txt, ...)
  std::vector<std::pair<std::string, double>> pass_seconds;  // per pass, in order
};

// What one step computes and moves per call, for its roofline: the FLOPs of the (decomposed)
// nodes it runs, and the bytes of the buffers it reads and writes (a packed step's weights too;
// a view's none). A fused kernel's intermediates stay in registers and count nothing.
struct StepCost {
  double flops = 0;
  double bytes = 0;
};
StepCost step_cost(const Graph& graph, const Step& step);

// The name a step's time is profiled under: its kernel's name, with a packed convolution's geometry
// ("extern::packed_conv2d_bn_relu[dw3x3/s2]") or a packed linear's MxKxN appended, so a profile
// says which layers the time went to.
std::string profile_name(const Graph& graph, const Step& step);

// Runs the pipeline: decompose -> lower to loop IR -> fuse -> plan memory -> emit C++.
// Throws crucible::Error for an unsupported request (bad -c option).
Program build_program(const Graph& graph, const CodegenOptions& options);

}  // namespace crucible::codegen
