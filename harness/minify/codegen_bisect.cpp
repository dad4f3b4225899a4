// Codegen kernel and pass bisection (see codegen_bisect.h).
#include "codegen_bisect.h"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>

#include "crucible/core/parallel_grain.h"
#include "output_digest.h"

namespace crucible::minify {

namespace fs = std::filesystem;

namespace {

// The function of `code` whose body computes %node (generated code comments each node it
// computes "// %name = op(...)"), as {name, text}.
std::pair<std::string, std::string> kernel_of(const std::string& code, const std::string& node) {
  std::istringstream in(code);
  std::string line, name, text;
  bool found = false;
  while (std::getline(in, line)) {
    if (line.rfind("extern \"C\" void ", 0) == 0) {
      if (found) break;
      const size_t b = std::string("extern \"C\" void ").size();
      name = line.substr(b, line.find('(') - b);
      text.clear();
    }
    if (!name.empty()) text += line + "\n";
    if (line.find("// %" + node + " = ") != std::string::npos) found = true;
    if (found && line == "}") break;
  }
  return found ? std::pair{name, text} : std::pair{std::string(), std::string()};
}

}  // namespace

std::string Culprit::str() const {
  std::string s;
  if (!kernel.empty()) s = fmt::format("kernel {}", kernel);
  if (!nodes.empty()) {
    std::string list;
    for (const auto& n : nodes) list += (list.empty() ? "%" : ", %") + n;
    s += fmt::format("{}node{} {}{}", s.empty() ? "" : " (", nodes.size() > 1 ? "s" : "", list,
                     s.empty() ? "" : ")");
  }
  if (!passes.empty()) {
    std::string list;
    for (const auto& p : passes) list += (list.empty() ? "" : ", ") + p;
    s += fmt::format("{}passes: {}", s.empty() ? "" : "; ", list);
  }
  return s.empty() ? "none found" : s;
}

Culprit bisect_codegen(const Candidate& c, const Signature& locked, const OracleConfig& base) {
  Culprit out;
  auto fails_with = [&](const std::string& key, const std::string& value) {
    OracleConfig cfg = base;
    cfg.config[key] = value;
    cfg.work_dir = base.work_dir / "bisect";
    Oracle o(cfg);
    ++out.oracle_calls;
    return same_failure(locked, o.run(c).signature);
  };
  std::vector<std::pair<std::string, std::string>> toggles = {
      {"fusion", "off"}, {"packed_linear", "off"}, {"packed_conv", "off"}};
  // Channels-last chains exist only between packed convolutions.
  const auto& nodes = c.graph.nodes();
  if (std::any_of(nodes.begin(), nodes.end(), [](const Node& n) { return n.op == "conv2d"; })) {
    toggles.emplace_back("channels_last", "off");
    toggles.emplace_back("chain_kernels", "off");
    toggles.emplace_back("conv_algorithm", "direct");
  }
  if (auto it = base.config.find("fast_math"); it != base.config.end() && it->second != "off") {
    toggles.emplace_back("fast_math", "off");
  }
  for (const auto& [key, value] : toggles) {
    if (!fails_with(key, value)) out.passes.push_back(key);
  }
  // Each decomposition the graph uses, kept whole alone.
  std::set<std::string> decomposable;
  for (const Node& n : c.graph.nodes()) {
    for (const char* op : {"softmax", "log_softmax", "layer_norm", "silu", "hardswish",
                           "hardsigmoid", "batch_norm"}) {
      if (n.op == op) decomposable.insert(op);
    }
  }
  for (const std::string& op : decomposable) {
    if (!fails_with("no_decompose", op)) out.passes.push_back("decompose(" + op + ")");
  }
  for (const Node& n : c.graph.nodes()) {
    if (element_cost(n.op) == 0) continue;  // views and data moves run no kernel of their own
    const std::string name = c.graph.value(n.output).name;
    if (!fails_with("eager_nodes", name)) out.nodes.push_back(name);
  }
  const fs::path dump = fs::absolute(base.work_dir / "bisect" / "dump");
  fs::remove_all(dump);
  fails_with("debug_dir", dump.string());
  std::ifstream in(dump / "output_code.cpp");
  std::stringstream code;
  code << in.rdbuf();
  const std::string text = code.str();
  if (!text.empty()) {
    out.code_hash = fmt::format("{:016x}", digest_bytes(text.data(), text.size()));
  }
  if (!out.nodes.empty()) {
    std::tie(out.kernel, out.kernel_code) = kernel_of(text, out.nodes.front());
  }
  return out;
}

}  // namespace crucible::minify
