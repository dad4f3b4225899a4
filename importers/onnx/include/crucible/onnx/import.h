// The ONNX importer: reads an ONNX model (opsets 1 to 17 of the default domain) into a crucible
// Graph, folding what is constant, and reads ONNX TensorProto files (the backend tests' data).
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "crucible/core/error.h"
#include "crucible/core/quote.h"
#include "crucible/core/tensor.h"
#include "crucible/ir/graph.h"

namespace crucible::onnx {

// The newest default-domain opset the importer knows; a model asking for a newer one is refused.
inline constexpr int64_t kMaxOpset = 17;
// The newest IR version the importer knows (ONNX 1.16's); a newer file format is refused.
inline constexpr int64_t kMaxIrVersion = 10;

// A model the importer refuses. `unsupported()` is true when the file is a valid model that uses
// something crucible does not implement (an op, a dtype, an attribute value): a suite records
// those as skipped with the message; anything else (a malformed or hostile file) is an error.
class ImportError : public Error {
 public:
  // The message quotes the file (names, attribute values): it is kept one line of at most 2000
  // bytes, a NUL in a name escaped rather than ending it (message_text).
  ImportError(const std::string& message, bool unsupported)
      : Error(message_text(message)), unsupported_(unsupported) {}
  bool unsupported() const { return unsupported_; }

 private:
  bool unsupported_;
};

struct ImportOptions {
  // Dims for inputs whose shapes are symbolic (or to override the model's), by input name.
  std::map<std::string, std::vector<int64_t>> shapes;
  // Inputs given as TensorProto files (a backend test's input_N.pb), bound to the graph's inputs
  // in order as file(path=...) recipes written beside the graph by save_imported.
  std::vector<std::filesystem::path> input_files;
  // Folding a node whose operands are all constant stops above this many result elements, so a
  // hostile Expand of a constant cannot allocate the world.
  int64_t fold_limit = int64_t{1} << 24;
};

// The name a model file stands for, as a run names its model and the importer its graph: the
// file's stem, or its folder's for ONNX's standard file name ("zoo/alexnet/model.onnx": alexnet).
std::string model_name(const std::filesystem::path& model);

// Imports `model` (a .onnx file; external data is read from its folder and must stay inside it).
// The graph is named model_name(model), not by the exporter's graph name ("torch_jit").
// Graph inputs are the model's non-initializer inputs; initializers and folded constants become
// parameters with bound data. Throws ImportError: "model.onnx: node 'x' (op LSTM): not supported".
Graph import_model(const std::filesystem::path& model, const ImportOptions& options = {});

// Writes `g` as `dir/<name>.graph` with its parameters as side files (one copy at a time), and
// each of `input_files` converted to a raw side file bound to the matching input. Returns the
// .graph path.
std::filesystem::path save_imported(const Graph& g, const std::filesystem::path& dir,
                                    const std::vector<std::filesystem::path>& input_files = {});

// Reads one TensorProto file (input_0.pb, output_0.pb). Throws ImportError naming the file.
Tensor read_tensor_file(const std::filesystem::path& file);

// The ONNX backend tests' tolerances (onnx.backend.test's runner): |res - exp| <= atol +
// rtol*|exp|.
inline constexpr double kOnnxRtol = 1e-3;
inline constexpr double kOnnxAtol = 1e-7;

}  // namespace crucible::onnx
