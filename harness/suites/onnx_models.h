// ONNX models in a run: `--graph MODEL.onnx`, manifest lines `model NAME onnx=FILE` and
// `onnx_cases DIR` (a folder of ONNX backend-test cases) are imported into the run's output
// before their workers start; --shape NAME=DIMS binds symbolic input dims.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "crucible/ir/graph.h"
#include "suite.h"

namespace crucible {

// Parses repeated NAME=D1,D2,... options; throws Error on a malformed one.
std::map<std::string, std::vector<int64_t>> parse_shape_bindings(
    const std::vector<std::string>& items);

bool is_onnx_file(const std::filesystem::path& path);

// `m.onnx` as a graph, with the test case's input_N.pb as its inputs when `m.onnx_data` is set,
// checked for expected outputs crucible can hold. Throws onnx::ImportError.
Graph onnx_model_graph(const ModelEntry& m,
                       const std::map<std::string, std::vector<int64_t>>& shapes);

// Imports `m.onnx` into `dir`, with the test case's input_N.pb as its inputs when `m.onnx_data`
// is set; points `m.graph` at the written .graph. Throws onnx::ImportError.
void import_onnx_model(ModelEntry& m, const std::filesystem::path& dir,
                       const std::map<std::string, std::vector<int64_t>>& shapes);

// The ONNX test-case files of a folder (input_0.pb, ...; output_0.pb, ...), in index order.
std::vector<std::filesystem::path> case_files(const std::filesystem::path& dir,
                                              const std::string& prefix);

}  // namespace crucible
