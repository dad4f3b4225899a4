// Importing a run's ONNX models (see onnx_models.h).
#include "onnx_models.h"

#include <fmt/format.h>

#include "crucible/core/error.h"
#include "crucible/onnx/import.h"

namespace crucible {

namespace fs = std::filesystem;

std::map<std::string, std::vector<int64_t>> parse_shape_bindings(
    const std::vector<std::string>& items) {
  std::map<std::string, std::vector<int64_t>> out;
  for (const auto& item : items) {
    const size_t eq = item.find('=');
    if (eq == 0 || eq == std::string::npos)
      throw Error(fmt::format("--shape '{}': expected NAME=D1,D2,...", item));
    std::vector<int64_t> dims;
    const std::string list = item.substr(eq + 1);
    size_t pos = 0;
    while (pos <= list.size() && !list.empty()) {
      const size_t comma = std::min(list.find(',', pos), list.size());
      const std::string d = list.substr(pos, comma - pos);
      char* end = nullptr;
      const long long v = std::strtoll(d.c_str(), &end, 10);
      if (d.empty() || *end || v < 0)
        throw Error(fmt::format("--shape '{}': '{}' is not a dim", item, d));
      dims.push_back(v);
      pos = comma + 1;
    }
    if (!out.emplace(item.substr(0, eq), dims).second)
      throw Error(fmt::format("--shape '{}': input bound twice", item));
  }
  return out;
}

bool is_onnx_file(const fs::path& path) { return path.extension() == ".onnx"; }

std::vector<fs::path> case_files(const fs::path& dir, const std::string& prefix) {
  std::vector<fs::path> files;
  for (int k = 0;; ++k) {
    fs::path f = dir / fmt::format("{}_{}.pb", prefix, k);
    if (!fs::exists(f)) break;
    files.push_back(f);
  }
  return files;
}

namespace {
// The files of the model's inputs: the manifest's, else its test case's input_N.pb.
std::vector<fs::path> input_files_of(const ModelEntry& m) {
  if (!m.input_files.empty()) return m.input_files;
  return m.onnx_data.empty() ? std::vector<fs::path>{} : case_files(m.onnx_data, "input");
}
}  // namespace

Graph onnx_model_graph(const ModelEntry& m,
                       const std::map<std::string, std::vector<int64_t>>& shapes) {
  onnx::ImportOptions opts;
  opts.shapes = shapes;
  opts.input_files = input_files_of(m);
  Graph g = onnx::import_model(m.onnx, opts);
  // Expected outputs crucible cannot hold (float16 stored as uint16) make the case unsupported
  // now, not a worker's load failure later.
  if (!m.onnx_data.empty())
    for (const auto& f : case_files(m.onnx_data, "output")) onnx::read_tensor_file(f);
  g.set_name(m.name);
  return g;
}

void import_onnx_model(ModelEntry& m, const fs::path& dir,
                       const std::map<std::string, std::vector<int64_t>>& shapes) {
  const Graph g = onnx_model_graph(m, shapes);
  m.graph = fs::absolute(onnx::save_imported(g, dir / m.name, input_files_of(m)));
}

}  // namespace crucible
