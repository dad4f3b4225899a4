// libFuzzer target: a tensor file (read_tensor_file), which the parent reads after a worker ran a
// third party's plugin: the backend's outputs, as whatever that process left in the file.
#include "crucible/core/error.h"
#include "fuzz_support.h"
#include "verdict/tensor_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto path =
      crucible::fuzz::write_scratch("outputs.tensors", crucible::fuzz::as_text(data, size));
  try {
    crucible::read_tensor_file(path);
  } catch (const crucible::Error&) {
  }
  return 0;
}
