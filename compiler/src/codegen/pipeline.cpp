// The codegen pipeline as a straight list of passes, each timed and each leaving a dump:
// decompose -> lower (loop IR) -> fuse -> plan memory -> emit C++ -> schedule.
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

// The passes after decompose(), over `p.graph`: lower, fuse, plan memory, emit C++, schedule.
void schedule(Program& p, const CodegenOptions& options) {
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
  EmitResult code =
      timer.run("emit_cpp", [&] { return emit_cpp(p.graph, lp, mp, options.config); });
  p.sources = std::move(code.sources);
  p.dumps["output_code.cpp"] = std::move(code.output_code);
  timer.run("schedule", [&] {
    for (size_t gi = 0; gi < lp.groups.size(); ++gi) {
      const Group& grp = lp.groups[gi];
      Step s;
      s.name = grp.name;
      if (grp.kind == Group::Kind::kKernel) {
        s.kind = Step::Kind::kKernel;
        s.inputs = mp.inputs[gi];
        s.outputs = mp.outputs[gi];
        s.in_place = mp.in_place[gi];
      } else if (grp.kind == Group::Kind::kPackedLinear) {
        s.kind = Step::Kind::kPackedLinear;
        s.node = grp.nodes[0];
        const Node& n = p.graph.nodes()[s.node];
        s.inputs = {n.operands[0]};
        s.outputs = {p.graph.nodes()[grp.nodes.back()].output};
        s.weight = n.operands[1];
        s.bias = n.operands.size() > 2 ? n.operands[2] : -1;
        s.weight_nk = n.op == "linear";
        if (grp.nodes.size() > 1 && keep.contains(n.output)) s.raw = n.output;
        if (grp.nodes.size() > 1) {
          const Node& act = p.graph.nodes()[grp.nodes[1]];
          s.epilogue = act.op;
          if (act.op == "gelu" && act.attrs.get_string_or("approximate", "none") == "tanh") {
            s.epilogue = "gelu_tanh";
          }
        }
      } else if (grp.kind == Group::Kind::kPackedConv) {
        s.kind = Step::Kind::kPackedConv;
        s.node = grp.nodes[0];
        const Node& n = p.graph.nodes()[s.node];
        s.inputs = {n.operands[0]};
        s.weight = n.operands[1];
        s.bias = n.operands.size() > 2 ? n.operands[2] : -1;
        ValueId chain = n.output;  // the value the next absorbed node reads
        for (size_t k = 1; k < grp.nodes.size(); ++k) {
          const Node& m = p.graph.nodes()[grp.nodes[k]];
          if (m.op == "batch_norm") {
            s.bn_node = grp.nodes[k];
          } else if (m.op == "add") {
            s.residual = m.operands[0] == chain ? m.operands[1] : m.operands[0];
            s.inputs.push_back(s.residual);
          } else {
            s.act_node = grp.nodes[k];
          }
          chain = m.output;
        }
        s.outputs = {chain};
      } else {
        s.kind = grp.kind == Group::Kind::kExtern ? Step::Kind::kExtern : Step::Kind::kView;
        s.node = grp.nodes[0];
        const Node& n = p.graph.nodes()[s.node];
        s.outputs = {n.output};
        if (s.kind == Step::Kind::kView) {
          ValueId base;
          view_layout(p.graph, s.node, lp.classes, base, s.view_shape, s.view_strides,
                      s.view_offset);
          s.inputs = {base};
        } else {
          s.inputs = n.operands;
        }
      }
      p.steps.push_back(std::move(s));
    }
    return 0;
  });
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
  p.graph =
      timer.run("decompose", [&] { return decompose(graph, &p.value_of, keep_source, &origin); });
  try {
    schedule(p, options);
  } catch (const NodeError& e) {
    throw Error(at_source_node(graph, p.graph, origin, e.node(), e.what()));
  }
  return p;
}

}  // namespace crucible::codegen
