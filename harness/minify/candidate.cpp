// Candidates: cutting node subsets out of the original graph, writing them for a worker, keying
// them for the verdict cache (see candidate.h).
#include "candidate.h"

#include <fmt/format.h>

#include <fstream>
#include <set>

#include "crucible/core/parallel_grain.h"
#include "crucible/ir/text_format.h"
#include "crucible/ops/interpreter.h"
#include "output_digest.h"

namespace crucible::minify {

namespace fs = std::filesystem;

namespace {

void write_bytes(const fs::path& path, const Tensor& t) {
  const Tensor c = t.contiguous();
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(static_cast<const char*>(c.raw_data()), static_cast<std::streamsize>(c.nbytes()));
  if (!out.flush()) throw Error(fmt::format("{}: cannot write", path.string()));
}

// Parameter `v` of the original, in `out`: with `init` when given, else its data or recipe.
ValueId copy_param(Graph& out, const Value& v, const Initializer* init = nullptr) {
  if (init != nullptr) return out.add_param(v.name, v.type, *init);
  return v.data.defined() ? out.add_param_data(v.name, v.data)
                          : out.add_param(v.name, v.type, v.init);
}

// Node `n` of `g`, in `out`, its operands mapped through `to_new` and its type inferred again.
ValueId copy_node(Graph& out, const Graph& g, const Node& n,
                  const std::map<ValueId, ValueId>& to_new) {
  std::vector<ValueId> ops;
  for (ValueId o : n.operands) ops.push_back(to_new.at(o));
  return out.add_node(n.op, ops, n.attrs, g.value(n.output).name);
}

}  // namespace

int Candidate::compute_nodes() const {
  int n = 0;
  for (const Node& node : graph.nodes()) n += element_cost(node.op) > 0 ? 1 : 0;
  return n;
}

std::string input_file_name(const std::string& name) { return fmt::format("input.{}.bin", name); }

void Candidate::write(const fs::path& dir) const {
  fs::create_directories(dir);
  Graph g = graph;
  for (ValueId id : g.params()) {  // side files stay where they are, by absolute path
    Value& v = g.mutable_value(id);
    if (v.init.kind != "file") continue;
    const fs::path path = v.init.args.get_string("path");
    if (path.is_relative()) v.init.args.set("path", fs::absolute(g.base_dir() / path).string());
  }
  for (size_t k = 0; k < g.inputs().size(); ++k) {
    Value& v = g.mutable_value(g.inputs()[k]);
    const std::string file = input_file_name(v.name);
    write_bytes(dir / file, inputs.at(k));
    v.init = Initializer{"file", {{"path", file}}};
  }
  save_graph_file(g, dir / "graph.graph");
}

std::string Candidate::key() const {
  const std::string text = print_graph(graph);
  const std::vector<uint64_t> data = digest_all(inputs);
  return fmt::format("{:016x}", digest_bytes(data.data(), data.size() * sizeof(uint64_t),
                                             digest_bytes(text.data(), text.size())));
}

Recording record_values(const Graph& g, const std::vector<Tensor>& inputs) {
  std::vector<ValueId> ids(g.values().size());
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<ValueId>(i);
  Interpreter interp(g);
  return interp.values(inputs, ids);
}

Candidate whole(const Graph& g, const std::vector<Tensor>& inputs) { return {g, inputs}; }

Candidate cut(const Graph& g, const Recording& rec, const std::vector<int>& keep,
              const ParamOverrides& overrides) {
  const std::set<int> kept(keep.begin(), keep.end());
  // Which values the kept nodes read, and which of those must become inputs.
  std::set<ValueId> read;
  for (int ni : keep) {
    for (ValueId op : g.nodes()[ni].operands) read.insert(op);
  }
  Candidate c{Graph(g.name()), {}};
  c.graph.set_base_dir(g.base_dir());
  std::map<ValueId, ValueId> to_new;
  for (ValueId id = 0; id < static_cast<ValueId>(g.values().size()); ++id) {
    const Value& v = g.value(id);
    const bool cut_input =
        v.kind == ValueKind::kNode && read.contains(id) && !kept.contains(v.node);
    if ((v.kind == ValueKind::kInput && read.contains(id)) || cut_input) {
      to_new[id] = c.graph.add_input(v.name, v.type);
      c.inputs.push_back(rec.at(static_cast<size_t>(id)));
    }
  }
  for (ValueId id : g.params()) {
    if (!read.contains(id)) continue;
    const auto o = overrides.find(id);
    to_new[id] = copy_param(c.graph, g.value(id), o == overrides.end() ? nullptr : &o->second);
  }
  for (int ni : keep) {
    const Node& n = g.nodes()[ni];
    to_new[n.output] = copy_node(c.graph, g, n, to_new);
  }
  std::vector<ValueId> outs;
  const std::set<ValueId> returned(g.outputs().begin(), g.outputs().end());
  for (int ni : keep) {
    const ValueId v = g.nodes()[ni].output;
    if (returned.contains(v) || !read.contains(v)) outs.push_back(to_new.at(v));
  }
  c.graph.set_outputs(outs);
  verify(c.graph);
  return c;
}

std::optional<Candidate> with_inputs(const Candidate& c, std::vector<Tensor> inputs) {
  const Graph& g = c.graph;
  Candidate out{Graph(g.name()), std::move(inputs)};
  out.graph.set_base_dir(g.base_dir());
  std::map<ValueId, ValueId> to_new;
  try {
    for (size_t k = 0; k < g.inputs().size(); ++k) {
      const Tensor& t = out.inputs.at(k);
      to_new[g.inputs()[k]] =
          out.graph.add_input(g.value(g.inputs()[k]).name, {t.dtype(), t.shape()});
    }
    for (ValueId p : g.params()) to_new[p] = copy_param(out.graph, g.value(p));
    for (const Node& n : g.nodes()) to_new[n.output] = copy_node(out.graph, g, n, to_new);
    std::vector<ValueId> outs;
    for (ValueId o : g.outputs()) outs.push_back(to_new.at(o));
    out.graph.set_outputs(outs);
    verify(out.graph);
  } catch (const Error&) {
    return std::nullopt;
  }
  return out;
}

std::vector<int> live_nodes(const Graph& g, const std::vector<int>& keep) {
  const std::set<int> kept(keep.begin(), keep.end());
  std::vector<bool> live(g.values().size(), false);
  for (ValueId o : g.outputs()) live[static_cast<size_t>(o)] = true;
  std::vector<int> out;
  for (auto it = keep.rbegin(); it != keep.rend(); ++it) {
    const Node& n = g.nodes()[*it];
    if (!live[static_cast<size_t>(n.output)]) continue;
    out.push_back(*it);
    for (ValueId op : n.operands) live[static_cast<size_t>(op)] = true;
  }
  return {out.rbegin(), out.rend()};
}

}  // namespace crucible::minify
