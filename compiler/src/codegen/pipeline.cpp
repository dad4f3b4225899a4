// The codegen pipeline as a straight list of passes, each timed and each leaving a dump:
// decompose -> lower (loop IR) -> fuse -> plan memory -> schedule (the runtime's steps) -> conv
// layouts (which of those steps' values stay channels-last) -> emit C++ (kernels in those layouts).
#include <fmt/format.h>

#include <chrono>
#include <set>

#include "crucible/codegen/program.h"
#include "crucible/ir/text_format.h"
#include "passes.h"

namespace crucible::codegen {

namespace {

class PassTimer {
 public:
  explicit PassTimer(Program& p) : p_(p) {}
  template <typename F>
  auto run(const std::string& name, F&& f) {
    auto t0 = std::chrono::steady_clock::now();
    auto result = f();
    p_.pass_seconds.emplace_back(
        name, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    return result;
  }

 private:
  Program& p_;
};

std::string print_memory_plan(const Graph& g, const LoopProgram& lp, const MemoryPlan& mp) {
  std::string out;
  for (size_t gi = 0; gi < lp.groups.size(); ++gi) {
    if (lp.groups[gi].kind != Group::Kind::kKernel) continue;
    out += fmt::format("{}: reads", lp.groups[gi].name);
    for (ValueId v : mp.inputs[gi]) out += " %" + g.value(v).name;
    out += "; writes";
    for (size_t k = 0; k < mp.outputs[gi].size(); ++k) {
      out += " %" + g.value(mp.outputs[gi][k]).name;
      if (mp.in_place[gi][k] >= 0)
        out += fmt::format(" (in place of %{})", g.value(mp.inputs[gi][mp.in_place[gi][k]]).name);
    }
    out += "\n";
  }
  return out;
}

// The passes after decompose(), over `p.graph`: lower, fuse, plan memory, schedule, conv layouts,
// emit C++.
void compile_decomposed(Program& p, const CodegenOptions& options) {
  PassTimer timer(p);
  std::set<ValueId> keep;
  for (ValueId v : options.keep) keep.insert(p.value_of.at(static_cast<size_t>(v)));
  LoopProgram lp = timer.run("lower", [&] { return lower(p.graph, options.config, keep); });
  p.dumps["ir_pre_fusion.txt"] = "# graph after decompositions\n" + print_graph(p.graph) +
                                 "\n# nodes as lowered\n" + print_loop_program(p.graph, lp);
  timer.run("fuse", [&] {
    fuse(p.graph, lp, options.config, keep);
    return 0;
  });
  MemoryPlan mp = timer.run("plan_memory", [&] { return plan_memory(p.graph, lp, keep); });
  p.dumps["ir_post_fusion.txt"] = "# kernels and extern calls, in order\n" +
                                  print_loop_program(p.graph, lp) + "\n# buffers\n" +
                                  print_memory_plan(p.graph, lp, mp);
  p.steps = timer.run("schedule", [&] { return schedule(p.graph, lp, mp, keep); });
  if (options.config.channels_last) {
    timer.run("conv_layouts", [&] {
      const std::string& chain = options.config.chain_layout;
      assign_conv_layouts(p.graph, lp, p.steps, keep,
                          chain == "nhwc"     ? ActivationLayout::kNhwc
                          : chain == "nchw8c" ? ActivationLayout::kNchw8c
                                              : preferred_chain_layout(),
                          options.config.chain_kernels);
      return 0;
    });
  }
  if (options.config.batch_slices) {
    p.batch_slices = timer.run("batch_slices", [&] {
      return plan_batch_slices(p.graph, p.steps,
                               static_cast<double>(options.config.slice_budget_mb) * (1 << 20));
    });
  }
  EmitResult code =
      timer.run("emit_cpp", [&] { return emit_cpp(p.graph, lp, mp, options.config, p.steps); });
  p.sources = std::move(code.sources);
  p.dumps["output_code.cpp"] = std::move(code.output_code);
  p.dumps["schedule.txt"] = "# the runtime's steps, in order\n" + print_schedule(p.graph, p.steps) +
                            "\n# batch slices\n" +
                            print_batch_slices(p.graph, p.steps, p.batch_slices);
}

}  // namespace

std::string at_source_node(const Graph& source, const Graph& decomposed,
                           const std::vector<int>& origin, int node, const std::string& reason) {
  const Node& src = source.nodes().at(static_cast<size_t>(origin.at(static_cast<size_t>(node))));
  const Node& step = decomposed.nodes().at(static_cast<size_t>(node));
  std::string where;
  if (src.loc.line > 0) where = fmt::format("line {}", src.loc.line);
  // A helper of a decomposition (a softmax's amax) is not named: the user never wrote it.
  if (decomposed.value(step.output).name != source.value(src.output).name)
    where += fmt::format("{}in its decomposition", where.empty() ? "" : ", ");
  return fmt::format("codegen: cannot compile `{}`{}: {}", print_node(source, src),
                     where.empty() ? "" : " (" + where + ")", reason);
}

Program build_program(const Graph& graph, const CodegenOptions& options) {
  Program p;
  PassTimer timer(p);
  p.dumps["graph_readable.txt"] = print_graph(graph);
  p.source = graph;
  const std::set<ValueId> keep_source(options.keep.begin(), options.keep.end());
  std::vector<int> origin;
  p.graph = timer.run("decompose", [&] {
    return decompose(graph, &p.value_of, keep_source, &origin, options.config.no_decompose,
                     options.config.eager_nodes, options.config.packed_conv);
  });
  try {
    compile_decomposed(p, options);
  } catch (const NodeError& e) {
    throw Error(at_source_node(graph, p.graph, origin, e.node(), e.what()));
  }
  return p;
}

}  // namespace crucible::codegen
