// Prints a graph as canonical .graph text, and saves it with side files for bound parameter data.
#include <fmt/format.h>
#include <unistd.h>

#include <fstream>

#include "crucible/ir/text_format.h"
#include "text_syntax.h"

namespace crucible {

namespace {

std::string format_initializer(const Value& v) {
  if (v.init.empty()) return fmt::format("file(path={})", quote_string(v.name + ".bin"));
  std::string args;
  for (const auto& [k, val] : v.init.args.items()) {
    args += fmt::format("{}{}={}", args.empty() ? "" : ", ", k, format_attr_value(val));
  }
  return fmt::format("{}({})", v.init.kind, args);
}

}  // namespace

std::string print_node(const Graph& g, const Node& n) {
  std::string args;
  for (ValueId op : n.operands)
    args += fmt::format("{}%{}", args.empty() ? "" : ", ", g.value(op).name);
  for (const auto& [k, val] : n.attrs.items()) {
    args += fmt::format("{}{}={}", args.empty() ? "" : ", ", k, format_attr_value(val));
  }
  const Value& v = g.value(n.output);
  return fmt::format("%{}: {} = {}({})", v.name, v.type.str(), n.op, args);
}

std::string print_graph(const Graph& g) {
  std::string out = fmt::format("graph {}(", g.name());
  for (size_t i = 0; i < g.inputs().size(); ++i) {
    const Value& v = g.value(g.inputs()[i]);
    out += fmt::format("{}%{}: {}", i ? ", " : "", v.name, v.type.str());
    if (!v.init.empty()) out += " = " + format_initializer(v);
  }
  out += ") {\n";
  for (ValueId id : g.params()) {
    const Value& v = g.value(id);
    out += fmt::format("  param %{}: {} = {}\n", v.name, v.type.str(), format_initializer(v));
  }
  for (const Node& n : g.nodes()) out += "  " + print_node(g, n) + "\n";
  const auto names = [&](const std::vector<ValueId>& ids) {
    std::string s;
    for (ValueId id : ids) s += fmt::format("{}%{}", s.empty() ? "" : ", ", g.value(id).name);
    return s;
  };
  for (const GradientSet& set : g.gradients()) {
    out += fmt::format("  gradients(%{} wrt {}) = {}\n", g.value(set.loss).name, names(set.wrt),
                       names(set.grads));
  }
  out += "  return ";
  for (size_t i = 0; i < g.outputs().size(); ++i) {
    out += fmt::format("{}%{}", i ? ", " : "", g.value(g.outputs()[i]).name);
  }
  out += "\n}\n";
  return out;
}

void write_atomically(const std::filesystem::path& path, const void* data, size_t bytes) {
  std::filesystem::path tmp = path;
  tmp += fmt::format(".tmp{}", ::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(static_cast<const char*>(data), static_cast<std::streamsize>(bytes));
    if (!out || !out.flush()) {
      std::error_code ignored;
      std::filesystem::remove(tmp, ignored);
      throw Error(fmt::format("{}: cannot write", path.string()));
    }
  }
  std::filesystem::rename(tmp, path);
}

void save_graph_file(const Graph& g, const std::filesystem::path& path) {
  Graph copy = g;
  for (ValueId id : g.params()) {
    const Value& v = g.value(id);
    if (!v.init.empty()) continue;
    std::string side = fmt::format("{}.{}.bin", path.stem().string(), v.name);
    Tensor data = v.data.contiguous();
    write_atomically(path.parent_path() / side, data.raw_data(), data.nbytes());
    copy.mutable_value(id).init = Initializer{"file", {{"path", side}}};
  }
  std::string text = print_graph(copy);
  write_atomically(path, text.data(), text.size());
}

}  // namespace crucible
