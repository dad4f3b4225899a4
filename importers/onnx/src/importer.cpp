// The import pipeline: read and check the model file, bind inputs and initializers, convert the
// nodes in order (each error names its node and op), bind the outputs, verify. Also the
// TensorProto file reader and the writer of an imported graph with its side files.
#include <fmt/format.h>
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl.h>

#include <climits>
#include <cstring>
#include <fstream>
#include <limits>
#include <set>

#include "converters.h"
#include "crucible/ir/text_format.h"
#include "tensor_proto.h"

namespace crucible::onnx {

namespace fs = std::filesystem;

namespace {

template <typename Message>
void parse_file(const fs::path& path, Message& m, const char* what) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw ImportError(fmt::format("{}: cannot read: {}", path.string(), std::strerror(errno)),
                      false);
  google::protobuf::io::IstreamInputStream zin(&in);
  google::protobuf::io::CodedInputStream coded(&zin);
  coded.SetTotalBytesLimit(INT_MAX);
  if (!m.ParseFromCodedStream(&coded) || !coded.ConsumedEntireMessage())
    throw ImportError(fmt::format("{}: not {}: the protobuf does not parse (truncated, or another "
                                  "kind of file)",
                                  path.string(), what),
                      false);
}

int64_t default_opset(const ::onnx::ModelProto& m) {
  int64_t v = -1;
  std::string others;
  for (const auto& o : m.opset_import()) {
    if (o.domain().empty() || o.domain() == "ai.onnx") {
      // Two entries would leave which rules apply to the model's nodes to the reader's choice.
      if (v >= 1 && v != o.version())
        malformed(fmt::format("the default domain's opset is imported twice (versions {} and {})",
                              v, o.version()));
      v = o.version();
    } else
      others += (others.empty() ? "" : ", ") + o.domain();
  }
  if (v < 1 && !others.empty())
    unsupported(
        fmt::format("the model uses only domains crucible does not implement ({})", others));
  if (v < 1) malformed("the model imports no opset");
  if (v > kMaxOpset)
    unsupported(
        fmt::format("opset {} of the default domain is newer than {}, the newest the importer "
                    "knows",
                    v, kMaxOpset));
  return v;
}

// `dims` (from --shape or a data file) must keep the model's rank and every dim it fixes: a
// binding fills symbolic dims, it does not change the model.
void check_dims_fit(const ::onnx::ValueInfoProto& vi, const std::vector<int64_t>& dims,
                    const std::string& what) {
  const auto& tt = vi.type().tensor_type();
  if (!tt.has_shape()) return;
  if (tt.shape().dim_size() != static_cast<int>(dims.size()))
    malformed(fmt::format("{} gives {} dims, the model has {}", what, dims.size(),
                          tt.shape().dim_size()));
  for (int k = 0; k < tt.shape().dim_size(); ++k) {
    const auto& d = tt.shape().dim(k);
    if (d.has_dim_value() && d.dim_value() != dims[k])
      malformed(fmt::format("{} gives dim {} as {}, the model fixes it at {}", what, k, dims[k],
                            d.dim_value()));
  }
}

// The graph's inputs are named once each (a second 'x' would silently become the first), and
// every --shape name is one of them (an initializer's name binds nothing).
void check_input_names(const ::onnx::GraphProto& gp, const ImportOptions& opts) {
  std::set<std::string> initializers, seen;
  for (const auto& t : gp.initializer()) initializers.insert(t.name());
  std::vector<std::string> inputs;
  for (const auto& vi : gp.input()) {
    if (initializers.count(vi.name())) continue;
    if (!seen.insert(vi.name()).second)
      malformed(fmt::format("input '{}' is declared twice", vi.name()));
    inputs.push_back(vi.name());
  }
  for (const auto& [name, dims] : opts.shapes)
    if (!seen.count(name))
      malformed(fmt::format("--shape {}: the model has no input of that name (its inputs: {})",
                            name,
                            inputs.empty() ? "none" : fmt::format("{}", fmt::join(inputs, ", "))));
}

// The input's dtype; what crucible cannot hold (a sequence, float16) is unsupported.
DType input_dtype(const ::onnx::ValueInfoProto& vi) {
  const std::string what = fmt::format("input '{}'", vi.name());
  if (!vi.type().has_tensor_type()) unsupported(what + ": not a tensor");
  const int32_t elem = vi.type().tensor_type().elem_type();
  auto dtype = dtype_of(elem);
  if (!dtype) unsupported(fmt::format("{}: dtype {} not supported", what, onnx_type_name(elem)));
  return *dtype;
}

TensorType input_type(const ::onnx::ValueInfoProto& vi, const ImportOptions& opts) {
  const std::string what = fmt::format("input '{}'", vi.name());
  const auto& tt = vi.type().tensor_type();
  auto dtype = std::optional<DType>(input_dtype(vi));
  TensorType t{*dtype, {}};
  if (auto it = opts.shapes.find(vi.name()); it != opts.shapes.end()) {
    t.shape.assign(it->second.begin(), it->second.end());
    check_dims_fit(vi, t.shape, what + ": --shape");
  } else {
    if (!tt.has_shape())
      malformed(what + ": no shape; give one with --shape " + vi.name() + "=DIMS");
    for (const auto& d : tt.shape().dim()) {
      if (!d.has_dim_value())
        malformed(fmt::format("{}: dim '{}' is symbolic; bind it with --shape {}=DIMS", what,
                              d.dim_param(), vi.name()));
      t.shape.push_back(d.dim_value());
    }
  }
  checked_numel(t.shape, what);
  return t;
}

std::string node_label(const NodeProto& n) {
  if (!n.name().empty()) return n.name();
  for (const auto& o : n.output())
    if (!o.empty()) return o;
  return "?";
}

// An integer input that only indexes (gather's index operand, also through reshapes, squeezes and
// casts) is drawn from [0, the smallest dim it indexes): a run's random integers (-100..100) are
// out of range for token ids, and a negative id gathers from the end.
void bound_index_inputs(Graph& g) {
  static const std::set<std::string> kPassThrough = {"reshape", "unsqueeze", "squeeze",
                                                     "flatten", "expand",    "cast"};
  for (ValueId in : g.inputs()) {
    const TensorType& type = g.value(in).type;
    if (!g.value(in).init.empty() || !(type.dtype == DType::kI32 || type.dtype == DType::kI64))
      continue;
    int64_t bound = std::numeric_limits<int64_t>::max();
    bool only_indexes = true;
    std::vector<ValueId> frontier = {in};
    while (!frontier.empty() && only_indexes) {
      const ValueId v = frontier.back();
      frontier.pop_back();
      for (const Node& n : g.nodes()) {
        for (size_t k = 0; k < n.operands.size(); ++k) {
          if (n.operands[k] != v) continue;
          if (n.op == "gather" && k == 1) {
            const Shape& data = g.value(n.operands[0]).type.shape;
            const int64_t dim = n.attrs.get_int_or("dim", 0);
            if (dim < 0 || dim >= static_cast<int64_t>(data.size()))
              only_indexes = false;
            else
              bound = std::min(bound, data[static_cast<size_t>(dim)]);
          } else if (kPassThrough.contains(n.op) && k == 0 &&
                     is_integral(g.value(n.output).type.dtype)) {
            frontier.push_back(n.output);
          } else {
            only_indexes = false;
          }
        }
      }
    }
    if (only_indexes && bound > 0 && bound != std::numeric_limits<int64_t>::max())
      g.mutable_value(in).init = Initializer{"randint", {{"low", int64_t{0}}, {"high", bound}}};
  }
}

Graph import_graph(::onnx::ModelProto& m, const fs::path& path, const ImportOptions& opts) {
  auto& gp = *m.mutable_graph();
  Graph g(graph_name(Graph(), model_name(path)));
  g.set_base_dir(path.parent_path());
  Ctx c(g, opts, default_opset(m));
  if (gp.sparse_initializer_size() > 0) unsupported("sparse initializers");
  check_input_names(gp, opts);
  for (auto& t : *gp.mutable_initializer()) {
    c.define(t.name(), c.constant(tensor_from_proto(t, path.parent_path(),
                                                    fmt::format("initializer '{}'", t.name()))));
    release_data(t);  // one copy of the weights at a time
  }
  size_t k = 0;
  for (const auto& vi : gp.input()) {
    if (c.has(vi.name())) continue;  // an input with an initializer is a constant
    Val v;
    if (k < opts.input_files.size()) {
      const DType declared = input_dtype(vi);
      v.known = read_tensor_file(opts.input_files[k]);
      v.type = TensorType{v.known.dtype(), v.known.shape()};
      if (declared != v.type.dtype)
        malformed(fmt::format("input '{}' is {}, its data file holds {}", vi.name(),
                              dtype_name(declared), dtype_name(v.type.dtype)));
      check_dims_fit(vi, v.type.shape,
                     fmt::format("input '{}': its data file {}", vi.name(),
                                 opts.input_files[k].filename().string()));
    } else {
      v.type = input_type(vi, opts);
    }
    ++k;
    v.id = g.add_input(graph_name(g, vi.name()), v.type);
    c.begin_node();
    c.define(vi.name(), v);
  }
  for (const auto& n : gp.node()) {
    c.begin_node();
    try {
      convert_node(c, n);
    } catch (const ImportError& e) {
      throw ImportError(fmt::format("node '{}' (op {}): {}", node_label(n), n.op_type(), e.what()),
                        e.unsupported());
    } catch (const Error& e) {
      // The registry's type rules refuse what crucible's ops cannot compute (a dtype, a shape).
      throw ImportError(fmt::format("node '{}' (op {}): {}", node_label(n), n.op_type(), e.what()),
                        true);
    }
  }
  std::vector<ValueId> outputs;
  for (const auto& vi : gp.output()) outputs.push_back(c.id_of(c.get(vi.name())));
  if (outputs.empty()) malformed("the graph has no outputs");
  g.set_outputs(outputs);
  bound_index_inputs(g);
  verify(g);
  return g;
}

}  // namespace

std::string model_name(const fs::path& model) {
  const fs::path whole = fs::absolute(model).lexically_normal();
  if (whole.filename() == "model.onnx" && whole.has_parent_path() &&
      !whole.parent_path().filename().empty())
    return whole.parent_path().filename().string();
  return model.stem().string();
}

Graph import_model(const fs::path& path, const ImportOptions& opts) {
  ::onnx::ModelProto m;
  parse_file(path, m, "an ONNX model");
  if (!m.has_graph() || m.ir_version() <= 0)
    throw ImportError(
        fmt::format("{}: not an ONNX model: no graph or no ir_version", path.string()), false);
  if (m.ir_version() > kMaxIrVersion)
    throw ImportError(fmt::format("{}: ir_version {} is newer than {}, the newest the importer "
                                  "knows",
                                  path.string(), m.ir_version(), kMaxIrVersion),
                      true);
  try {
    return import_graph(m, path, opts);
  } catch (const ImportError& e) {
    throw ImportError(fmt::format("{}: {}", path.string(), e.what()), e.unsupported());
  } catch (const Error& e) {
    throw ImportError(fmt::format("{}: {}", path.string(), e.what()), false);
  }
}

Tensor read_tensor_file(const fs::path& file) {
  ::onnx::TensorProto t;
  parse_file(file, t, "a TensorProto");
  return tensor_from_proto(t, file.parent_path(), file.string());
}

fs::path save_imported(const Graph& g, const fs::path& dir,
                       const std::vector<fs::path>& input_files) {
  if (input_files.size() > g.inputs().size())
    throw ImportError(
        fmt::format("{} input files for {} graph inputs", input_files.size(), g.inputs().size()),
        false);
  // Every input file is read and checked before anything is written: a refused import leaves
  // no folder behind.
  std::vector<Tensor> inputs;
  for (size_t k = 0; k < input_files.size(); ++k) {
    const ValueId id = g.inputs()[k];
    inputs.push_back(read_tensor_file(input_files[k]).contiguous());
    const Tensor& t = inputs.back();
    const TensorType want = g.value(id).type;
    if (t.dtype() != want.dtype || t.shape() != want.shape)
      throw ImportError(fmt::format("{}: holds {}[{}], input '{}' is {}", input_files[k].string(),
                                    dtype_name(t.dtype()), fmt::join(t.shape(), ","),
                                    g.value(id).name, want.str()),
                        false);
  }
  fs::create_directories(dir);
  Graph copy = g;
  for (size_t k = 0; k < inputs.size(); ++k) {
    const ValueId id = g.inputs()[k];
    const std::string side = fmt::format("{}.input_{}.bin", g.name(), k);
    write_atomically(dir / side, inputs[k].raw_data(), inputs[k].nbytes());
    copy.mutable_value(id).init = Initializer{"file", {{"path", side}}};
  }
  const fs::path graph = dir / (g.name() + ".graph");
  save_graph_file(copy, graph);
  return graph;
}

}  // namespace crucible::onnx
