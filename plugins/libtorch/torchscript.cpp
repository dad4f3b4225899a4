// -c mode=jit (see torchscript.h): the graph written as TorchScript source, one statement per node
// (aten_ops.cpp gives each node's expression), compiled into a module whose attributes are the
// parameters, then torch::jit::freeze (parameters become constants) and optimize_for_inference.
#include "torchscript.h"

#include <fmt/format.h>
#include <torch/script.h>

#include <fstream>
#include <set>
#include <sstream>

#include "aten_ops.h"
#include "crucible/plugin_api.h"
#include "mkldnn_linear.h"

namespace crucible::libtorch {

namespace {

class Scripted final : public ScriptedGraph {
 public:
  Scripted(torch::jit::Module m, std::string source)
      : module_(std::move(m)), source_(std::move(source)) {}

  std::vector<at::Tensor> run(const std::vector<at::Tensor>& inputs) override {
    std::vector<c10::IValue> args(inputs.begin(), inputs.end());
    const c10::IValue result = module_.forward(args);
    std::vector<at::Tensor> out;
    for (const c10::IValue& v : result.toTupleRef().elements()) out.push_back(v.toTensor());
    return out;
  }
  const std::string& source() const override { return source_; }
  std::string optimized_graph() const override {
    return module_.get_method("forward").graph()->toString();
  }

 private:
  torch::jit::Module module_;
  std::string source_;
};

// The parameters (by index) that the oneDNN linears of `style` take as weight or bias: each is
// also an attribute self.p<k>_mkldnn, reordered into oneDNN's layout once.
std::set<size_t> onednn_params(const Graph& g, const ScriptStyle& style) {
  std::set<size_t> out;
  for (size_t i : style.onednn_linears) {
    const Node& n = g.nodes()[i];
    for (size_t o = 1; o < n.operands.size(); ++o) {
      for (size_t k = 0; k < g.params().size(); ++k) {
        if (g.params()[k] == n.operands[o]) out.insert(k);
      }
    }
  }
  return out;
}

// A oneDNN linear's statement: its weight and bias by their oneDNN attribute, or converted.
std::string onednn_linear_expr(const Graph& g, const Node& n,
                               const std::vector<std::string>& operands) {
  std::vector<std::string> w;
  for (size_t o = 1; o < n.operands.size(); ++o) {
    const bool param = g.value(n.operands[o]).kind == ValueKind::kParam;
    w.push_back(param ? operands[o] + "_mkldnn" : operands[o] + ".contiguous().to_mkldnn()");
  }
  return mkldnn_linear_script(operands[0], w[0], w.size() > 1 ? w[1] : "");
}

// The forward method's source: inputs are arguments in0.., parameters self.p0.., nodes v<id>.
std::string forward_source(const Graph& g, const ScriptStyle& style) {
  std::vector<std::string> name(g.values().size());
  std::string args;
  for (size_t k = 0; k < g.inputs().size(); ++k) {
    name[static_cast<size_t>(g.inputs()[k])] = fmt::format("in{}", k);
    args += fmt::format(", in{}: Tensor", k);
  }
  for (size_t k = 0; k < g.params().size(); ++k)
    name[static_cast<size_t>(g.params()[k])] = fmt::format("self.p{}", k);
  std::string body;
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    const Node& n = g.nodes()[i];
    std::vector<std::string> operands;
    for (ValueId v : n.operands) operands.push_back(name[static_cast<size_t>(v)]);
    name[static_cast<size_t>(n.output)] = fmt::format("v{}", n.output);
    body += fmt::format("    v{} = {}\n", n.output,
                        style.onednn_linears.contains(i) ? onednn_linear_expr(g, n, operands)
                                                         : script_expr(g, n, operands, style));
  }
  std::string types, results;
  for (ValueId v : g.outputs()) {
    types += types.empty() ? "Tensor" : ", Tensor";
    results += name[static_cast<size_t>(v)] + ", ";
  }
  return fmt::format("def forward(self{}) -> Tuple[{}]:\n{}    return ({})\n", args, types, body,
                     results);
}

}  // namespace

std::unique_ptr<ScriptedGraph> script_graph(const Graph& g, const std::vector<at::Tensor>& params,
                                            bool optimize_for_inference, const ScriptStyle& style,
                                            const std::filesystem::path& debug_dir) {
  const std::string source = forward_source(g, style);
  if (!debug_dir.empty()) {
    std::filesystem::create_directories(debug_dir);
    std::ofstream(debug_dir / "torchscript.py") << source;
  }
  try {
    torch::jit::Module m("__torch__.crucible.Graph");
    for (size_t k = 0; k < params.size(); ++k)
      m.register_parameter(fmt::format("p{}", k), params[k], /*is_buffer=*/false);
    for (size_t k : onednn_params(g, style))
      m.register_attribute(fmt::format("p{}_mkldnn", k), c10::TensorType::get(),
                           params[k].contiguous().to_mkldnn());
    m.define(source);
    m.eval();
    torch::jit::Module frozen = torch::jit::freeze(m);
    if (optimize_for_inference) torch::jit::optimize_for_inference(frozen);
    auto scripted = std::make_unique<Scripted>(std::move(frozen), source);
    if (!debug_dir.empty())
      std::ofstream(debug_dir / "torchscript_optimized.txt") << scripted->optimized_graph();
    return scripted;
  } catch (const std::exception& e) {
    // TorchScript's messages span lines (the error, then the source excerpt): keep the first
    // three that say something (what, where, the line), on one line.
    std::string what, line;
    std::istringstream lines(e.what());
    for (int kept = 0; kept < 3 && std::getline(lines, line);) {
      if (line.find_first_not_of(" \t~^") == std::string::npos) continue;
      what += (kept++ ? " | " : "") + line.substr(line.find_first_not_of(' '));
    }
    throw plugin::CompileError("libtorch: TorchScript rejected the graph: " + what);
  }
}

}  // namespace crucible::libtorch
