// Kernel and pass bisection as the backend declares it (see pass_bisect.h).
#include "pass_bisect.h"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
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

bool declares_bisection(const plugin::Bisection& b) {
  return !b.passes.empty() || !b.node_fallback_key.empty();
}

Culprit bisect_passes(const Candidate& c, const Signature& locked, const OracleConfig& base,
                      const plugin::Bisection& declared) {
  Culprit out;
  auto fails_with = [&](const std::string& key, const std::string& value) {
    OracleConfig cfg = base;
    cfg.config[key] = value;
    cfg.work_dir = base.work_dir / "bisect";
    Oracle o(cfg);
    ++out.oracle_calls;
    return same_failure(locked, o.run(c).signature);
  };
  const auto& nodes = c.graph.nodes();
  for (const plugin::PassSwitch& pass : declared.passes) {
    const auto set = base.config.find(pass.key);
    if (pass.only_when_set && (set == base.config.end() || set->second == pass.value)) continue;
    const bool uses_op =
        pass.ops.empty() || std::any_of(nodes.begin(), nodes.end(), [&](auto& n) {
          return std::find(pass.ops.begin(), pass.ops.end(), n.op) != pass.ops.end();
        });
    if (uses_op && !fails_with(pass.key, pass.value)) out.passes.push_back(pass.name);
  }
  if (!declared.node_fallback_key.empty()) {
    for (const Node& n : nodes) {
      if (element_cost(n.op) == 0) continue;  // views and data moves run no kernel of their own
      const std::string name = c.graph.value(n.output).name;
      if (!fails_with(declared.node_fallback_key, name)) out.nodes.push_back(name);
    }
  }
  if (declared.code_file.empty()) return out;
  // The plugin API's Options::debug_dir, as -c names it.
  const fs::path dump = fs::absolute(base.work_dir / "bisect" / "dump");
  fs::remove_all(dump);
  fails_with("debug_dir", dump.string());
  std::ifstream in(dump / fs::path(declared.code_file).filename());
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
