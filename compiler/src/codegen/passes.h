// The codegen pipeline's passes, in order (see pipeline.cpp): each takes the previous one's result
// and can print its own, so the debug directory shows the program after every step.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "crucible/codegen/program.h"
#include "crucible/core/error.h"
#include "crucible/ir/graph.h"
#include "crucible/ir/uses.h"

namespace crucible::codegen {

// 1. Rewrites ops whose pieces fuse better than the whole (softmax, log_softmax, layer_norm over
// the last dims; silu, hardswish, hardsigmoid, batch_norm unless it folds into a packed conv2d)
// into primitive ops. Other nodes are copied as they are; names are kept for the final node. A node
// whose decomposition does not apply to its shapes (softmax over a size-0 dim, whose amax has no
// identity) stays whole and runs as its eager kernel.
// `value_map`, when given, receives per value of `g` the value standing for it in the result (a
// decomposed node's final value); `origin`, per node of the result, the node of `g` it comes from.
// Nodes whose op is in `whole_ops` (-c no_decompose=OP,...) or whose value is named in
// `whole_names` (-c eager_nodes=..., which then run as one eager kernel) stay whole. With
// `packed_conv`, so does an activation a packed convolution will absorb (a silu after a conv2d).
Graph decompose(const Graph& g, std::vector<ValueId>* value_map = nullptr,
                const std::set<ValueId>& keep = {}, std::vector<int>* origin = nullptr,
                const std::set<std::string>& whole_ops = {},
                const std::set<std::string>& whole_names = {}, bool packed_conv = false);

// A failure the passes after decompose() pin on one node of the decomposed graph (by index).
// build_program() reports it at the source graph's node that node comes from, so the user reads
// about a node they wrote, never about a decomposition's helper (a softmax's amax, say); `reason`
// should therefore not name values of the decomposed graph.
class NodeError : public Error {
 public:
  NodeError(int node, const std::string& reason) : Error(reason), node_(node) {}
  int node() const { return node_; }

 private:
  int node_;
};

// The message for `reason` at node `node` of `decomposed`: "codegen: cannot compile `<the source
// node's canonical line>` (line L[, in its decomposition]): <reason>".
std::string at_source_node(const Graph& source, const Graph& decomposed,
                           const std::vector<int>& origin, int node, const std::string& reason);

// 2-3. Loop IR: every node classified, then grouped into kernels.
enum class NodeClass {
  kPointwise,
  kReduction,
  kView,
  kConstant,
  kExtern,
  kPackedLinear,
  kAbsorbed,
  kPackedConv
};

struct Group {
  enum class Kind { kKernel, kExtern, kView, kPackedLinear, kPackedConv };
  Kind kind = Kind::kKernel;
  std::vector<int> nodes;  // graph node indices, in order
  // Kernel groups iterate outer x inner; a pointwise-only group has inner = {} until a reduction
  // joins.
  Shape outer;
  Shape inner;
  bool has_reduction = false;
  std::string name;
};

struct LoopProgram {
  std::vector<NodeClass> classes;  // per graph node
  std::vector<int> absorbed_by;    // per graph node: the packed node whose epilogue it became
  std::vector<Group> groups;       // in execution order
  std::vector<int> group_of;       // per graph node
};

// Classifies each node: pointwise ops codegen implements for that dtype, trailing-dim reductions,
// views, inline constants; everything else runs as an extern call into the eager kernel.
// `keep`: values intermediates() asks for, which no packed conv may absorb.
LoopProgram lower(const Graph& g, const CodegenConfig& config, const std::set<ValueId>& keep = {});
// Greedy fusion in topological order: vertical pointwise chains, pointwise into and after trailing
// reductions over the same rows, horizontal fusion over equal iteration spaces; capped in size.
// `keep` (values intermediates() asks for) only stops a group from widening over a kept value,
// which a broadcast iteration could not store.
void fuse(const Graph& g, LoopProgram& lp, const CodegenConfig& config,
          const std::set<ValueId>& keep = {});
std::string print_loop_program(const Graph& g, const LoopProgram& lp);

// Packed convolutions (conv_chain.cpp), as Inductor's freezing passes make them: a conv2d with a
// parameter weight (and a parameter bias or none) on an f32 input runs as one PackedConv2d call,
// which absorbs what follows it in this order, each step only through a value that has one reader
// and is not a graph output: a batch_norm whose weight, bias and statistics are parameters (folded
// into the packed weights at compile time), an add of a residual computed before the conv, and a
// relu, clamp(min, max), sigmoid, silu (one op, or mul(v, sigmoid(v)) as exporters write it),
// hardsigmoid or hardswish. decompose() leaves such batch_norms and activations whole; lower()
// absorbs them.
using Consumers = std::vector<std::vector<int>>;  // per value: the nodes reading it
// A value in `keep` counts one reader more (someone outside wants it), so no chain runs through it.
Consumers consumers_of(const Graph& g, const std::set<ValueId>& keep = {});
bool packs_conv2d(const Graph& g, const Node& n);
bool folds_into_conv(const Graph& g, const Node& bn, const Consumers& consumers);
struct ConvChain {
  int bn = -1, add = -1, act = -1;  // absorbed nodes, -1 when absent
  int sigmoid = -1;                 // silu written as mul(v, sigmoid(v)): the sigmoid; act the mul
  ValueId residual = -1;            // the add's other operand
};
ConvChain match_conv_chain(const Graph& g, int conv, const Consumers& consumers);
// The one-op activations a packed convolution applies (clamp too, with finite bounds).
bool is_fused_activation_op(const std::string& op);
// extern::packed_conv2d[_bn][_add][_relu|_clamp|_silu|...]
std::string packed_conv_name(const Graph& g, const Group& grp);

// Softmax's decomposed form (softmax_facts.cpp). is_max_shifted: `v` is sub(x, amax(x)) with the
// max broadcast back over its rows, so never above 0 (or NaN). nan_reaches_results_through_sum:
// amax node `amax_node` heads a softmax or log_softmax whose every result reads the row's sum of
// exp, so a NaN in the row reaches them all without the max tracking it.
bool is_max_shifted(const Graph& g, ValueId v);
bool nan_reaches_results_through_sum(const Graph& g, int amax_node, const Consumers& consumers,
                                     const std::vector<bool>& materialized);

// 4. Memory plan: which values get buffers, and which kernel outputs reuse an input buffer in
// place.
struct MemoryPlan {
  std::vector<bool> materialized;          // per value: has a buffer (or is a view over one)
  std::set<ValueId> extra;                 // kernel outputs stored only because they are kept
  std::vector<std::vector<int>> in_place;  // per group: per output, input index reused or -1
  std::vector<std::vector<ValueId>> inputs,
      outputs;  // per kernel group: base buffers read / written
};
// `keep`: values stored as extra outputs of the kernels computing them (for intermediates()),
// never overwritten in place.
MemoryPlan plan_memory(const Graph& g, const LoopProgram& lp, const std::set<ValueId>& keep = {});

// 5. Schedule: the runtime's steps, one per group in order, with the buffers each reads and
// writes (Step in program.h); print_schedule() is the pass's dump, schedule.txt.
std::vector<Step> schedule(const Graph& g, const LoopProgram& lp, const MemoryPlan& mp,
                           const std::set<ValueId>& keep);
std::string print_schedule(const Graph& g, const std::vector<Step>& steps);

// 6. Activation layouts of packed convolutions (conv_layouts.cpp): a value a packed convolution
// (dense, or under NHWC depthwise with one output channel per input channel) or an f32 max pool
// produces lies in `chain` (kNhwc or kNchw8c) when only those read it (a residual in its reader's
// output layout, a pool's or depthwise convolution's input in its output's, a 1x1's output NCHW
// when its input is), it is neither a graph output nor kept, and, under kNchw8c, its channels
// fill whole blocks of 8; the steps' x/y_layout say so.
// With `kernels`, generated kernels take part too (chain_kernels.cpp): a pointwise kernel keeps its
// [N,C,H,W] values in one layout, and a spatial sum or mean reads its input in any.
void assign_conv_layouts(const Graph& g, const LoopProgram& lp, std::vector<Step>& steps,
                         const std::set<ValueId>& keep, ActivationLayout chain, bool kernels);

// Generated kernels that also run on a chain layout (chain_kernels.cpp). A pointwise kernel over
// an [N,C,H,W] space whose values over the whole space are f32 buffers (no views) and whose other
// values are alike at every pixel ([N,C,1,1], one element): a squeeze-excite gate, a per-channel
// scale, an activation; emit_cpp walks it in the chain's order. A lone sum or mean over H and W of
// an f32 [N,C,H,W] buffer (a global average pool), whose [N,C(,1,1)] result lies alike in every
// layout; emit_chain_spatial_reduction() writes its loops.
bool is_chain_pointwise(const Graph& g, const LoopProgram& lp, const Group& grp);
bool is_chain_spatial_reduction(const Graph& g, const LoopProgram& lp, const Group& grp);
// Whether buffer `v` of such a pointwise kernel spans its whole space, so lies in the chain's
// layout (the layout pass ties these together; the emitter reads them in that layout); the others
// (a gate) stay NCHW.
bool spans_chain_pointwise(const Graph& g, const Group& grp, ValueId v);
// The body of such a reduction's kernel on `layout` (a0: its input, a1: its output), channels as
// the SIMD lanes; `parallel`: whether it forks. Plants `inj`'s offbyone and bad_init as the NCHW
// kernel does.
std::string emit_chain_spatial_reduction(const Graph& g, const Group& grp, ActivationLayout layout,
                                         const Injection& inj, bool parallel);

// 6b. Batch slices (batch_slices.cpp): runs of packed convolutions, each reading the one before,
// whose activations per image take so many bytes that the whole batch's leave the cache.
// A step's slice is the images whose input, output and residual fit `budget_bytes`; a run of
// steps that would each take at most half the batch is sliced at the smallest of their slices,
// headed by the step whose output its first reads (an expand) and ended by the step that reads
// its last (a projection), so the values between never leave the cache. A run is kept only when
// a step in it waits on memory (under 8 FLOPs per activation byte: a depthwise, MobileNet's 1x1s):
// ResNet's compute-bound runs only get smaller problems. Steps whose batch fits whole (small
// layers) are not sliced: that would only add calls.
std::vector<BatchSlice> plan_batch_slices(const Graph& g, const std::vector<Step>& steps,
                                          double budget_bytes);
std::string print_batch_slices(const Graph& g, const std::vector<Step>& steps,
                               const std::vector<BatchSlice>& slices);

// 7. C++ emission: one function per kernel group, each statement preceded by the graph node it
// comes from; split into translation units of at most `kernels_per_tu` kernels.
struct EmitResult {
  std::vector<std::string> sources;
  std::string output_code;  // all units, for output_code.cpp
};
// `steps` (schedule(), after assign_conv_layouts()): a kernel whose step has a chain layout walks
// its values in it (chain_kernels.cpp says which kernels can).
EmitResult emit_cpp(const Graph& g, const LoopProgram& lp, const MemoryPlan& mp,
                    const CodegenConfig& config, const std::vector<Step>& steps);

// Static layout of a view node's result over its base buffer (a contiguous graph input, parameter,
// kernel or extern output). Returns false when the view cannot be expressed without a copy.
bool view_layout(const Graph& g, int node, const std::vector<NodeClass>& classes, ValueId& base,
                 Shape& shape, Shape& strides, int64_t& offset);

}  // namespace crucible::codegen
