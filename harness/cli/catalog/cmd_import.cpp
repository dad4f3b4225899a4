// `crucible import MODEL.onnx -o DIR`: imports an ONNX model into a .graph with its weights as side
// files; every refusal is one line naming the node and op, exit 2.
#include <fmt/format.h>

#include <chrono>
#include <iostream>

#include "cli.h"
#include "crucible/core/error.h"
#include "crucible/onnx/import.h"
#include "onnx_models.h"

namespace crucible::cli {

namespace fs = std::filesystem;

int import_command(const std::vector<std::string>& args) {
  std::string model, output;
  std::vector<std::string> shapes, inputs;
  po::options_description opts("import options");
  opts.add_options()("model", po::value(&model)->required(), "the .onnx file")(
      "output,o", po::value(&output)->required(),
      "folder for NAME.graph and its side files (made if missing)")(
      "shape", po::value(&shapes)->composing(),
      "NAME=D1,D2,...: dims of an input whose shape is symbolic (repeatable)")(
      "input-data", po::value(&inputs)->composing(),
      "a TensorProto file (input_0.pb) bound to the next input as its data (repeatable)");
  po::positional_options_description pos;
  pos.add("model", 1);
  po::variables_map vm;
  if (!parse("import", "MODEL.onnx -o DIR [--shape NAME=DIMS]... [--input-data FILE]...", opts, pos,
             args, vm)) {
    return kExitOk;
  }
  // -o first: a file, '' or a folder that cannot be made is the request's error, before any work.
  const fs::path out(output);
  std::error_code ec;
  if (output.empty())
    throw Error("-o '': give the folder for the .graph and its side files (made if missing)");
  if (fs::exists(out, ec) && !fs::is_directory(out, ec))
    throw Error(fmt::format("-o {}: a file, not a folder", output));
  onnx::ImportOptions io;
  io.shapes = parse_shape_bindings(shapes);
  io.input_files.assign(inputs.begin(), inputs.end());
  const auto t0 = std::chrono::steady_clock::now();
  Graph g = onnx::import_model(model, io);
  const double import_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  fs::path graph;
  try {
    graph = onnx::save_imported(g, out, io.input_files);
  } catch (const fs::filesystem_error& e) {
    throw Error(fmt::format("-o {}: cannot write there: {}", output, e.code().message()));
  }
  double weight_mb = 0;
  for (ValueId p : g.params()) weight_mb += static_cast<double>(g.value(p).data.nbytes()) / 1e6;
  std::cout << fmt::format(
      "wrote {}: {} inputs, {} nodes, {} parameters ({:.1f} MB), imported in "
      "{:.2f} s\n",
      graph.string(), g.inputs().size(), g.nodes().size(), g.params().size(), weight_mb, import_s);
  return kExitOk;
}

}  // namespace crucible::cli
