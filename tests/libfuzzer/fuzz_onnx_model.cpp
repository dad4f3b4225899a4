// libFuzzer target: the ONNX importer (import_model) on a model file with a folder for external
// data beside it. Constant folding is held to 64K elements, as a hostile Expand must not matter.
#include "crucible/core/error.h"
#include "crucible/onnx/import.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto path =
      crucible::fuzz::write_scratch("model/model.onnx", crucible::fuzz::as_text(data, size));
  crucible::onnx::ImportOptions options;
  options.fold_limit = int64_t{1} << 16;
  try {
    crucible::onnx::import_model(path, options);
  } catch (const crucible::Error&) {
  }
  return 0;
}
