// libFuzzer target: a TensorProto file (read_tensor_file), an ONNX backend test's input_N.pb or
// output_N.pb.
#include "crucible/core/error.h"
#include "crucible/onnx/import.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto path =
      crucible::fuzz::write_scratch("input_0.pb", crucible::fuzz::as_text(data, size));
  try {
    crucible::onnx::read_tensor_file(path);
  } catch (const crucible::Error&) {
  }
  return 0;
}
